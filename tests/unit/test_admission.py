"""Admission: cells start one at a time, as many at once as their lateness and measured cost allow."""

from __future__ import annotations

import pytest

from ccsweep.admission import Admission, prior_cost
from ccsweep.expand import expand
from ccsweep.specload import parse_spec

CELLS = expand(parse_spec({"name": "a", "experiments": [
    {"name": "a", "cc": ["bbr", "cubic"], "loss_percent": [0, 1, 2, 5], "rtt_ms": [100], "bandwidth_mbps": [100],
     "duration_s": 20}]}))
SHORT_RTT = expand(parse_spec({"name": "b", "experiments": [
    {"name": "b", "cc": ["bbr"], "loss_percent": [0], "rtt_ms": [20], "bandwidth_mbps": [100], "duration_s": 20}]}))[0]
ONE = CELLS[0]


def test_starts_are_staggered_and_the_first_cell_runs_alone():
    admission = Admission(budget=1.5)
    assert admission.may_start(ONE, [], now=0.0)
    admission.started(0.0, ONE)
    assert not admission.may_start(CELLS[1], [], now=0.5), "a second start within the stagger"
    assert not admission.may_start(CELLS[1], [(ONE, False, 1)], now=5.0), "limit 1 until a cell finished on time"


def test_on_time_cells_grow_the_limit_and_the_budget_holds_what_they_cost():
    admission = Admission(budget=1.5)
    for _ in range(10):
        admission.observe(ONE, cpu_seconds=None, wall_seconds=20, late=False)
    assert admission.limit == 11
    # A 100 Mbit/s cell measured 0.170 cores alone (2026-11-26-offloads.md): 8 fit in 1.5 cores.
    assert int(1.5 / prior_cost(ONE)) == 8
    running = [(ONE, False, 1)] * 7
    assert admission.may_start(ONE, running, now=10.0)
    assert not admission.may_start(ONE, [*running, (ONE, False, 1)], now=10.0)


def test_a_cell_is_priced_at_what_it_is_expected_to_carry():
    """CUBIC at 1 % loss carries a small part of 100 Mbit/s (1.5 Mbit/s in the study through Argo);
    BBR keeps its rate. Beside 7 cells at the line rate and 3 that carry little, the budget holds a
    fourth that carries little, not an eighth at the line rate."""
    cubic_lossy = next(c for c in CELLS if c.params.flows[0].cc == "cubic" and c.params.loss == 0.01)
    bbr_lossy = next(c for c in CELLS if c.params.flows[0].cc == "bbr" and c.params.loss == 0.01)
    assert prior_cost(bbr_lossy) == pytest.approx(prior_cost(ONE))
    assert prior_cost(cubic_lossy) < prior_cost(ONE) / 2
    admission = Admission(budget=1.5, limit=20)
    running = [(ONE, False, 1)] * 7 + [(cubic_lossy, False, 1)] * 3
    assert admission.may_start(cubic_lossy, running, now=10.0)
    assert not admission.may_start(ONE, [*running, (cubic_lossy, False, 1)], now=10.0)


def test_the_limit_grows_at_most_to_the_cells_the_budget_holds_at_their_floor():
    from ccsweep.admission import BASE_CORES

    admission = Admission(budget=1.5)
    for _ in range(100):
        admission.observe(ONE, cpu_seconds=None, wall_seconds=20, late=False)
    assert admission.limit == admission.ceiling() == int(1.5 / BASE_CORES) == 30


def test_late_cells_lower_the_limit_in_steps_by_their_cause():
    admission = Admission(budget=1.5, limit=8)
    # Crowding (the link waited on a run queue, or a starved attempt with no cause): a quarter fewer.
    admission.observe(ONE, cpu_seconds=None, wall_seconds=20, late=True, cause="run-queue")
    assert admission.limit == 6
    admission.observe(ONE, cpu_seconds=None, wall_seconds=20, late=True)
    assert admission.limit == 5
    # Late with the run queue idle (timer, writes, unexplained): one fewer.
    for cause in ("timer", "writes", "unexplained"):
        admission.observe(ONE, cpu_seconds=None, wall_seconds=20, late=True, cause=cause)
    assert admission.limit == 2
    # The hypervisor took the CPU: no number of cells at once would have helped.
    admission.observe(ONE, cpu_seconds=None, wall_seconds=20, late=True, cause="steal")
    assert admission.limit == 2
    for _ in range(5):
        admission.observe(ONE, cpu_seconds=None, wall_seconds=20, late=True, cause="run-queue")
    assert admission.limit == 1


def test_a_rerun_asks_for_its_cost_once_more_per_attempt():
    admission = Admission(budget=4 * prior_cost(ONE) + 1e-9, limit=8)
    three = [(c, False, 1) for c in CELLS[1:4]]
    assert admission.may_start(ONE, three, now=5.0, attempt=1)
    assert not admission.may_start(ONE, three, now=5.0, attempt=2), "a second attempt counts twice"
    assert not admission.may_start(ONE, [(CELLS[1], False, 2), (CELLS[2], False, 1), (CELLS[3], False, 1)], now=5.0)


def test_measured_cost_replaces_the_prior():
    admission = Admission(budget=1.5)
    # A cell that kept 0.75 of a core busy: over four times the prior at 100 Mbit/s and 100 ms.
    admission.observe(ONE, cpu_seconds=0.75 * 20, wall_seconds=20, late=False)
    assert abs(admission.cost(ONE) - 0.75) < 1e-9
    admission.limit = 4
    running = [(CELLS[1], False, 1)]
    assert admission.may_start(CELLS[2], running, now=10.0)
    assert not admission.may_start(CELLS[2], [*running, (CELLS[3], False, 1)], now=10.0), "1.5 cores, 0.75 each"


def test_a_last_attempt_runs_alone_and_nothing_starts_beside_it():
    admission = Admission(budget=8, limit=4)
    assert not admission.may_start(ONE, [(CELLS[1], False, 1)], now=5.0, alone=True)
    assert admission.may_start(ONE, [], now=5.0, alone=True)
    assert not admission.may_start(CELLS[2], [(ONE, True, 1)], now=10.0)


def test_jobs_caps_the_limit():
    admission = Admission(budget=64, max_cells=2)
    for _ in range(10):
        admission.observe(ONE, cpu_seconds=None, wall_seconds=20, late=False)
    assert admission.limit == 2


def test_jobs_is_where_the_limit_starts_too():
    admission = Admission(budget=64, max_cells=2, limit=2)
    assert admission.may_start(CELLS[1], [(ONE, False, 1)], now=5.0)
    admission.observe(ONE, cpu_seconds=None, wall_seconds=20, late=True)
    assert admission.limit == 1


def test_the_prior_follows_the_release_window_the_cell_will_have():
    from ccsweep.linkrules import release_window_us

    # 100 ms: 250 us windows, one wake-up per window; 20 ms: 100 us windows, 2.5 times as many,
    # at the 21 us of CPU a wake-up and its pass were fitted to.
    assert (release_window_us(ONE), release_window_us(SHORT_RTT)) == (250, 100)
    assert prior_cost(SHORT_RTT) - prior_cost(ONE) == pytest.approx((10_000 - 4_000) * 21e-6)


def test_each_kind_of_cell_is_sized_by_its_own_measurements():
    admission = Admission(budget=1.5)
    # The 100 ms cells measured at twice their prior; the 20 ms kind, not yet measured, follows the average.
    admission.observe(ONE, cpu_seconds=2 * prior_cost(ONE) * 20, wall_seconds=20, late=False)
    assert admission.cost(SHORT_RTT) == pytest.approx(2 * prior_cost(SHORT_RTT))
    # Once measured (at its prior), the 20 ms kind keeps its own, and the 100 ms kind keeps twice its prior.
    admission.observe(SHORT_RTT, cpu_seconds=prior_cost(SHORT_RTT) * 20, wall_seconds=20, late=False)
    assert admission.cost(SHORT_RTT) == pytest.approx(prior_cost(SHORT_RTT))
    assert admission.cost(ONE) == pytest.approx(2 * prior_cost(ONE))


MAHIMAHI = expand(parse_spec({"name": "m", "experiments": [
    {"name": "m", "cc": ["bbr"], "loss_percent": [0], "rtt_ms": [100], "bandwidth_mbps": [100], "duration_s": 20,
     "link": "mahimahi"}]}))[0]


def test_a_mahimahi_cell_is_priced_by_its_shells_measured_cost_not_by_ccsweep_links():
    from ccsweep.admission import BASE_CORES, TCP_CORES_PER_100MBIT
    from ccsweep.linkdesc import MAHIMAHI as SHELLS
    from ccsweep.linkdesc import FixedTickCost

    assert isinstance(SHELLS.cost, FixedTickCost)
    shells = SHELLS.cost.cores_per_100mbit
    assert prior_cost(MAHIMAHI) == pytest.approx(BASE_CORES + TCP_CORES_PER_100MBIT + shells)
    # The shells' 0.297 cores per 100 Mbit/s as measured on Mahimahi, whatever ccsweep-link's offloads save.
    assert shells == 0.297 and prior_cost(MAHIMAHI) == pytest.approx(0.367)
    assert prior_cost(MAHIMAHI) > 2 * prior_cost(ONE)  # same rate and RTT, the dearer link


def test_each_backend_learns_its_own_cost():
    admission = Admission(budget=1.5)
    # Mahimahi's cells measured at three times their prior say nothing of ccsweep-link's ...
    admission.observe(MAHIMAHI, cpu_seconds=3 * prior_cost(MAHIMAHI) * 20, wall_seconds=20, late=False)
    assert admission.cost(MAHIMAHI) == pytest.approx(3 * prior_cost(MAHIMAHI))
    # ... until ccsweep-link has measurements of its own, its unmeasured kinds follow the average over all
    assert admission.cost(SHORT_RTT) == pytest.approx(3 * prior_cost(SHORT_RTT))
    admission.observe(ONE, cpu_seconds=prior_cost(ONE) * 20, wall_seconds=20, late=False)
    # ... and from then on those of its own backend, whatever Mahimahi's cost.
    assert admission.cost(SHORT_RTT) == pytest.approx(prior_cost(SHORT_RTT))
    assert admission.cost(MAHIMAHI) == pytest.approx(3 * prior_cost(MAHIMAHI))


GIGABIT = expand(parse_spec({"name": "g", "experiments": [
    {"name": "g", "cc": ["bbr"], "loss_percent": [0], "rtt_ms": [50], "bandwidth_mbps": [1000], "duration_s": 20}]}))[0]


def test_the_prior_lies_within_what_the_cells_measured():
    # benchmarks/results/2026-11-26-offloads.md, each cell's process tree over its wall time, offloads on:
    # 100 Mbit/s at 100 ms 0.170 (0.160-0.192) cores, 5 runs; 1 Gbit/s at 50 ms 0.56 (0.53-0.59), 6 runs.
    assert 0.160 <= prior_cost(ONE) <= 0.192
    assert 0.53 <= prior_cost(GIGABIT) <= 0.59


def test_cells_without_offloads_are_priced_and_learned_apart():
    from ccsweep.admission import cost_class

    def packet_by_packet(cell):
        return expand(parse_spec({"name": "n", "experiments": [
            {"name": "n", "cc": ["bbr"], "loss_percent": [0], "rtt_ms": [cell.params.rtt_ms],
             "bandwidth_mbps": [cell.params.bandwidth_mbps], "duration_s": 20, "link_offload": "none"}]}))[0]

    slow, fast = packet_by_packet(ONE), packet_by_packet(GIGABIT)
    # The same result file, offloads off: the cell in total 0.186 (0.181-0.193) cores at 100 Mbit/s, and
    # 0.74 (0.70-0.78) at 1 Gbit/s.
    assert 0.181 <= prior_cost(slow) <= 0.193
    assert 0.70 <= prior_cost(fast) <= 0.78
    assert cost_class(slow) != cost_class(ONE)
    admission = Admission(budget=1.5)
    admission.observe(ONE, cpu_seconds=2 * prior_cost(ONE) * 20, wall_seconds=20, late=False)
    admission.observe(slow, cpu_seconds=prior_cost(slow) * 20, wall_seconds=20, late=False)
    assert admission.cost(slow) == pytest.approx(prior_cost(slow))


def test_a_cell_needing_more_than_the_machine_gives_is_refused_before_it_runs():
    from ccsweep.admission import refusal

    assert prior_cost(GIGABIT) > 0.5 > prior_cost(ONE)
    assert refusal(ONE, budget=0.5) is None
    reason = refusal(GIGABIT, budget=0.5)
    assert reason is not None and "1000 Mbit/s" in reason and "0.5" in reason and "2 cores or more" in reason
    # The same cell fits a 2-core machine's budget, whose measured lateness kept it on time.
    assert refusal(GIGABIT, budget=1.5) is None


def test_the_first_cells_fill_half_the_budget_by_their_prior():
    admission = Admission(budget=1.5)
    admission.open_with(ONE)
    # 0.75 cores by a prior of 0.168 a cell: 4 at once before any has finished, not 1.
    assert admission.limit == int(0.75 / prior_cost(ONE)) == 4
    running = [(c, False, 1) for c in CELLS[:3]]
    assert admission.may_start(CELLS[3], running, now=10.0)
    assert not admission.may_start(CELLS[4], [*running, (CELLS[3], False, 1)], now=10.0)


def test_the_opening_leaves_jobs_and_a_measured_machine_alone():
    chosen = Admission(budget=1.5, max_cells=2, limit=2)
    chosen.open_with(ONE)
    assert chosen.limit == 2
    measured = Admission(budget=1.5)
    measured.observe(ONE, cpu_seconds=0.17 * 20, wall_seconds=20, late=True)
    measured.open_with(ONE)
    assert measured.limit == 1


def test_the_opening_is_at_most_four_cells_however_cheap():
    small = expand(parse_spec({"name": "s", "experiments": [
        {"name": "s", "cc": ["bbr"], "loss_percent": [0], "rtt_ms": [20], "bandwidth_mbps": [10],
         "duration_s": 3}]}))[0]
    admission = Admission(budget=1.5)
    admission.open_with(small)
    assert int(0.75 / prior_cost(small)) > 4 and admission.limit == 4


def test_a_cell_late_only_from_steal_gets_more_attempts():
    from ccsweep.executor import DEFAULT_MAX_ATTEMPTS, STEAL_EXTRA_ATTEMPTS, attempts_allowed

    assert attempts_allowed("steal") == DEFAULT_MAX_ATTEMPTS + STEAL_EXTRA_ATTEMPTS
    assert attempts_allowed("run-queue") == attempts_allowed(None) == DEFAULT_MAX_ATTEMPTS
    assert attempts_allowed("steal", max_attempts=1) == 1  # --max-attempts 1 means one


def test_the_measured_machine_stands_for_the_running_cells_once_they_settled():
    from ccsweep.admission import SETTLE_S

    admission = Admission(budget=1.5, limit=30)
    line_rate = [c for c in CELLS if c.params.flows[0].cc == "bbr"] * 2
    running = [(c, False, 1) for c in line_rate]
    for cell in line_rate:
        admission.started(0.0, cell)
    assert sum(admission.cost(c) for c, _, _ in running) + admission.cost(SHORT_RTT) > 1.5
    # Eight 100 Mbit/s BBR cells priced at the line rate that carry little (their flows stalled):
    # the machine says 0.4 cores busy, room for another.
    assert not admission.may_start(SHORT_RTT, running, now=SETTLE_S + 1, busy=None), "the model alone: full"
    assert admission.may_start(SHORT_RTT, running, now=SETTLE_S + 1, busy=0.4)
    # While they settle, the measurement has not seen them yet: they count at their cost on top of it.
    assert not admission.may_start(SHORT_RTT, running, now=1.0, busy=0.4)
    # Cells near line rate that the model priced low (its correction learned on cheap cells): the
    # machine's busy cores hold them, where the model alone would start another.
    admission.correction = admission.backend_corrections["ccsweep-link"] = 0.2
    assert admission.may_start(SHORT_RTT, running, now=SETTLE_S + 1, busy=None)
    assert not admission.may_start(SHORT_RTT, running, now=SETTLE_S + 1, busy=1.45)


def test_a_cell_with_a_late_flow_settles_after_it_starts():
    from ccsweep.admission import SETTLE_S

    staggered = expand(parse_spec({"name": "l", "experiments": [
        {"name": "l", "loss_percent": [0], "rtt_ms": [100], "bandwidth_mbps": [100],
         "duration_s": 40, "mixes": [[{"cc": "bbr"}, {"cc": "cubic", "start_s": 20}]]}]}))
    admission = Admission(budget=1.5, limit=4)
    admission.started(0.0, staggered[0])
    assert [until for until, _ in admission.settling] == [20 + SETTLE_S]
    running = [(staggered[0], False, 1)]
    assert not admission.may_start(ONE, running, now=15.0, busy=1.4)
    assert admission.may_start(ONE, running, now=15.0, busy=1.0)
    assert admission.may_start(ONE, running, now=26.0, busy=1.4 - prior_cost(staggered[0]))


def test_a_last_attempt_runs_alone_unless_its_cell_was_late_from_its_timer():
    from ccsweep.executor import runs_alone

    assert runs_alone(3, 3) and runs_alone(3, 3, "run-queue") and runs_alone(4, 3, "steal")
    assert not runs_alone(2, 3, "run-queue"), "an earlier re-run runs beside others"
    assert not runs_alone(3, 3, "timer"), "an idle link's late timer is no crowding"
    assert not runs_alone(1, 1), "--max-attempts 1: no re-run to run alone"
