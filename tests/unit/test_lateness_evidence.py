"""What a late attempt's lateness is put down to, from what its record measured (result.LatenessEvidence).

The host's numbers come from /proc/stat (runner.hostcpu); the samples below are shaped as the
kernel writes them (proc(5): user nice system idle iowait irq softirq steal guest guest_nice).
"""

from __future__ import annotations

import time

import pytest

from ccsweep.result import LatenessEvidence, SelfCheck
from ccsweep.runner.hostcpu import HostCpu, cpu_ticks, summarise


def stat(*cpus: tuple[int, int, int]) -> str:
    """/proc/stat text with one `cpuN` line per (idle, softirq, steal), the other columns fixed."""
    lines = ["cpu  1 1 1 1 1 1 1 1 0 0"]
    lines += [f"cpu{i} 100 0 50 {idle} 0 0 {softirq} {steal} 0 0" for i, (idle, softirq, steal) in enumerate(cpus)]
    return "\n".join([*lines, "intr 1 2 3", "ctxt 4"]) + "\n"


def check(**fields: float | None) -> SelfCheck:
    base = {"lateness_p50_us": 100.0, "lateness_p99_us": 1600.0, "lateness_max_us": 17000.0, "cpu_share": 0.1,
            "late": True, "threshold_us": 400.0, "runqueue_p99_us": 40.0}
    return SelfCheck(**{**base, **fields})


def test_proc_stat_is_read_per_cpu_without_the_sum_line():
    ticks = cpu_ticks(stat((1000, 5, 7), (900, 0, 0)))
    assert set(ticks) == {"cpu0", "cpu1"}
    assert (ticks["cpu0"].softirq, ticks["cpu0"].steal, ticks["cpu0"].total) == (5, 7, 100 + 50 + 1000 + 5 + 7)


def test_the_worst_cpu_and_the_worst_second_stand_for_the_span():
    # The fixed columns do not move, so a window's ticks are what idle, softirq and steal added:
    # cpu1 loses 10 of its 50 ticks to steal in the second window only, 10 of 100 over the span;
    # cpu0 spends 2 of 52 ticks in softirqs in each window.
    samples = [(0, cpu_ticks(stat((0, 0, 0), (0, 0, 0)))),
               (1_000, cpu_ticks(stat((50, 2, 0), (50, 0, 0)))),
               (2_000, cpu_ticks(stat((100, 4, 0), (90, 0, 10))))]
    found = summarise(samples, 0, 2_000)
    assert found is not None
    assert (found.steal_max_window_pct, found.steal_pct) == (20.0, 10.0)
    assert (found.softirq_max_window_pct, found.softirq_pct) == (3.8, 3.8)
    assert summarise(samples[:1], 0, 2_000) is None


def test_the_sampler_reads_this_machines_proc_stat():
    sampler = HostCpu(window_s=0.05)
    time.sleep(0.2)
    sampler.stop()
    assert len(sampler.samples) >= 3
    assert sampler.summary(sampler.samples[0][0], sampler.samples[-1][0]) is not None


@pytest.mark.parametrize(("evidence", "fields", "cause"), [
    (LatenessEvidence(steal_max_window_pct=1.0), {"runqueue_p99_us": 900.0}, "run-queue"),
    (LatenessEvidence(steal_max_window_pct=12.0, overshoot_max_us=16000.0), {}, "steal"),
    (LatenessEvidence(steal_pct=1.2, steal_max_window_pct=3.0, overshoot_max_us=16000.0), {}, "steal"),
    (LatenessEvidence(steal_pct=0.5, steal_max_window_pct=2.0, overshoot_p99_us=30.0, overshoot_max_us=16500.0), {},
     "timer"),
    (LatenessEvidence(overshoot_p99_us=30.0, overshoot_max_us=80.0, write_p99_us=20.0, write_max_us=15000.0), {},
     "writes"),
    # Every sleep and write on time, the loop itself busy: the link log's catch-up after an idle
    # stretch held a burst this way (benchmarks/results/2026-11-30-idle-catch-up).
    (LatenessEvidence(overshoot_p99_us=300.0, overshoot_max_us=800.0, write_max_us=50.0, work_p99_us=60.0,
                      work_max_us=9000.0), {}, "loop"),
    (LatenessEvidence(overshoot_p99_us=30.0, overshoot_max_us=80.0, write_max_us=50.0, major_faults=3), {},
     "page-faults"),
    (LatenessEvidence(overshoot_p99_us=30.0, overshoot_max_us=80.0, write_max_us=50.0, major_faults=0), {},
     "unexplained"),
])
def test_a_late_attempt_is_put_down_to_what_was_measured(evidence, fields, cause):
    late = check(**fields).with_evidence(evidence)
    assert late.late_cause == cause
    assert f"cause: {cause}" in late.measured_text()


def test_injected_lateness_is_named_whatever_else_was_measured():
    injected = check(injected_lateness="fixed:5ms,p=0.05").with_evidence(LatenessEvidence(steal_pct=9.0))
    assert injected.late_cause == "injected"


def test_an_on_time_attempt_has_no_cause_but_keeps_its_evidence():
    on_time = check(late=False, lateness_p99_us=100.0).with_evidence(LatenessEvidence(steal_pct=0.4))
    assert on_time.late_cause is None and on_time.evidence is not None and on_time.evidence.steal_pct == 0.4
    assert "cause" not in on_time.measured_text()
