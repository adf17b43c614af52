"""The Mahimahi backend without running it: what it refuses, the nesting it builds, its traces and ids."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccsweep.cell import Cell, CellParams, canonical_json, cell_id
from ccsweep.expand import expand
from ccsweep.runner import mahimahi_run
from ccsweep.runner.link import LinkError
from ccsweep.runner.mahimahi import constant_rate_trace, log_counters, mahimahi_command, mahimahi_summary
from ccsweep.runner.measure import link_log_totals
from ccsweep.runner.runqueue import RunQueueSummary
from ccsweep.spec import SpecError
from ccsweep.specload import parse_spec

BIN = Path("/mm/bin")
TRACES = {"uplink": Path("/w/up.trace"), "downlink": Path("/w/down.trace")}
LOGS = {"uplink": Path("/w/up.log"), "downlink": Path("/w/down.log")}
SENDER = ["python3", "-m", "ccsweep.runner.flow", "sender", "--flow=0:bbr:0"]


def cells(**fields: object) -> list[Cell]:
    experiment = {"name": "x", "cc": ["bbr"], "loss_percent": [1], "rtt_ms": [100], "bandwidth_mbps": [100],
                  "duration_s": 10, "link": "mahimahi", **fields}
    return expand(parse_spec({"name": "s", "experiments": [experiment]}))


def test_nesting_is_rebbrs_with_loss_after_the_link_on_the_data_direction():
    argv = mahimahi_command(cells()[0].params, BIN, TRACES, LOGS, SENDER)
    assert argv == ["/mm/bin/mm-delay", "50", "/mm/bin/mm-loss", "uplink", "0.01", "/mm/bin/mm-link",
                    "--uplink-log=/w/up.log", "--downlink-log=/w/down.log", "/w/up.trace", "/w/down.trace", "--",
                    *SENDER]


def test_loss_before_the_link_and_on_the_ack_direction_nest_the_other_way():
    before = mahimahi_command(cells(loss_position="before")[0].params, BIN, TRACES, LOGS, SENDER)
    assert before[2:3] == ["/mm/bin/mm-link"] and before[before.index("--") + 1:][:3] == ["/mm/bin/mm-loss", "uplink",
                                                                                        "0.01"]
    both = mahimahi_command(cells(loss_direction="both")[0].params, BIN, TRACES, LOGS, SENDER)
    inner = both[both.index("--") + 1:]
    assert both[2:5] == ["/mm/bin/mm-loss", "uplink", "0.01"] and inner[:3] == ["/mm/bin/mm-loss", "downlink", "0.01"]


def test_a_limited_queue_becomes_mm_links_options():
    params = cells(queue=[{"kind": "codel", "packets": 100, "target_ms": 5, "interval_ms": 100}])[0].params
    argv = mahimahi_command(params, BIN, TRACES, LOGS, SENDER)
    assert "--uplink-queue=codel" in argv
    assert "--uplink-queue-args=packets=100,target=5,interval=100" in argv
    assert not any(a.startswith("--downlink-queue") for a in argv)  # the ACK direction's queue is infinite


@pytest.mark.parametrize(("fields", "message"), [
    ({"reverse": [{"label": "slow-acks", "delay_ms": 10}]}, "mahimahi cannot delay the ACK direction (10 ms) unlike"),
    ({"rtt_ms": [25]}, "mahimahi cannot delay by 12.5 ms: mm-delay takes whole milliseconds"),
    ({"rate_schedule": [{"at_s": 5, "factor": 2}]}, "mahimahi cannot play a rate_schedule"),
    ({"delay_schedule": {"steps": [{"at_s": 5, "delay_ms": 30}], "direction": "downlink"}},
     "mahimahi cannot step the downlink delay (delay_schedule): mm-delay's one delay is fixed"),
    ({"queue": [{"kind": "codel", "packets": 10, "target_ms": 2.5}]},
     "mahimahi cannot take uplink queue.target_ms 2.5: mm-link takes whole numbers"),
])
def test_what_mahimahi_cannot_express_is_refused_in_one_line_naming_the_field(fields, message):
    with pytest.raises(SpecError) as refused:
        cells(**fields)
    assert str(refused.value).startswith(f"experiments[x].link: {message}")
    assert "\n" not in str(refused.value)


def test_a_constant_rate_is_reBBRs_trace_and_its_mean_is_exact():
    lines = constant_rate_trace(100).split()
    assert lines == ["1"] * 8 + ["2"] * 8 + ["3"] * 9  # 25 opportunities per 3 ms, repeated by mm-link
    ten = constant_rate_trace(10).split()
    assert len(ten) * 12_000 / int(ten[-1]) / 1000 == 10  # opportunities x 12000 bit over the period


def test_the_default_link_keeps_every_id_and_mahimahi_makes_another_cell():
    (mahimahi,) = cells()
    default = CellParams.model_validate({**mahimahi.params.model_dump(), "link": "ccsweep-link"})
    assert mahimahi.id != cell_id(default)
    # Before the field existed the params had no `link` key: the same bytes are hashed.
    assert '"link"' not in canonical_json(default)


def test_the_summary_says_what_mahimahi_cannot_measure():
    log = ["# init timestamp: 1000", "1 + 1500", "1 # 1504", "2 - 1500 1", "3 d 2 3000"]
    totals = link_log_totals(log, 0, 10)
    assert (totals.arrival_packets, totals.departure_packets, totals.drop_packets) == (1, 1, 2)
    counters = log_counters(totals)
    assert counters.out_bytes == 1500 and counters.drops_queue == 2 and counters.capacity_bytes == 1504
    unmeasured = mahimahi_summary(cells()[0].params, "mahimahi-abc", totals, totals, 0.3, None, 1000)
    assert unmeasured.backend == "mahimahi" and unmeasured.selfcheck.lateness_p99_us is None
    assert unmeasured.selfcheck.late is None and "lateness" in unmeasured.not_measured


@pytest.mark.parametrize(("p99_us", "late"), [(999.0, False), (1001.0, True)])
def test_the_shells_run_queue_delay_is_the_lateness_against_the_cells_threshold(p99_us, late):
    totals = link_log_totals(["# init timestamp: 1000"], 0, 10)
    timing = RunQueueSummary(p50_us=20.0, p99_us=p99_us, max_us=5000.0, windows=900)
    summary = mahimahi_summary(cells()[0].params, "mahimahi-abc", totals, totals, 0.3, timing, 1000)
    check = summary.selfcheck
    assert (check.late, check.lateness_p99_us, check.threshold_us, check.lateness_from) == (
        late, p99_us, 1000, "run-queue")
    assert "lateness" not in summary.not_measured


def test_an_algorithm_the_host_does_not_allow_unprivileged_users_fails_in_one_line(tmp_path, monkeypatch):
    allowed = tmp_path / "tcp_allowed_congestion_control"
    allowed.write_text("reno bbr\n")
    monkeypatch.setattr(mahimahi_run, "ALLOWED_CC_PATH", allowed)
    mahimahi_run._check_allowed(["bbr"])
    with pytest.raises(LinkError, match=r"not cubic; add them on the host: sysctl -w "
                                        r"net.ipv4.tcp_allowed_congestion_control='reno bbr cubic'$"):
        mahimahi_run._check_allowed(["bbr", "cubic"])


def test_files_nobody_cannot_reach_are_told_apart(tmp_path):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    (private / "flow.py").write_text("")
    (private / "flow.py").chmod(0o644)
    assert not mahimahi_run._world_readable(private / "flow.py")  # a mode-700 folder on the way
    assert mahimahi_run._world_readable(Path("/etc/passwd"))
    assert mahimahi_run._world_readable(Path("/bin/sh"), execute=True)
    assert not mahimahi_run._world_readable(Path("/etc/passwd"), execute=True)
