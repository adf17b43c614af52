"""What the runner tells ccsweep-link, and how it reads the emulator's answers back."""

import os
from pathlib import Path

import pytest

from ccsweep.cell import Cell, CellParams, DirectionParams, FlowParams, QueueParams, RateStep
from ccsweep.runner.link import (
    LinkError,
    deadline_runtime_us,
    find_link_binary,
    link_command,
    link_summary,
    rate_schedule_trace,
)
from ccsweep.runner.netns import namespace_names, sysctl_settings


def cell(**changes) -> Cell:
    base = dict(flows=(FlowParams(cc="bbr"),),
                uplink=DirectionParams(rate_mbps=100, delay_ms=50, loss=0.01,
                                       queue=QueueParams(kind="droptail", bytes=1_250_000)),
                downlink=DirectionParams(rate_mbps=100, delay_ms=50, loss=0),
                duration_s=20, warmup_s=5, seed=7)
    return Cell.build("s", "e", CellParams(**{**base, **changes}))


def option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_the_command_line_carries_every_link_parameter(tmp_path: Path):
    argv = link_command(cell(loss_position="before"), Path("/x/ccsweep-link"), "ns-s", "ns-r", tmp_path, {}, 60)
    assert argv[0] == "/x/ccsweep-link"
    assert (option(argv, "--sender-netns"), option(argv, "--receiver-netns")) == ("ns-s", "ns-r")
    assert option(argv, "--uplink-rate") == "100mbit"
    assert option(argv, "--uplink-delay") == "50ms"
    assert option(argv, "--downlink-delay") == "50ms"
    assert option(argv, "--uplink-loss") == "0.01"
    assert option(argv, "--downlink-loss") == "0"
    assert option(argv, "--uplink-queue") == "droptail bytes=1250000"
    assert option(argv, "--downlink-queue") == "infinite"
    assert option(argv, "--loss-position") == "before"
    assert option(argv, "--seed") == "7"
    assert option(argv, "--stats") == "-"
    assert option(argv, "--stats-interval") == "100ms"
    assert option(argv, "--uplink-log") == str(tmp_path / "uplink.log")
    assert option(argv, "--duration") == "60s"


def test_a_trace_replaces_the_rate(tmp_path: Path):
    argv = link_command(cell(), Path("l"), "a", "b", tmp_path, {"uplink": tmp_path / "up.trace"}, 30)
    assert option(argv, "--uplink-trace") == str(tmp_path / "up.trace")
    assert "--uplink-rate" not in argv
    assert option(argv, "--downlink-rate") == "100mbit"


def test_a_generated_schedule_trace_has_the_rate_and_the_step():
    # 12 Mbit/s = one 1500-byte opportunity per ms; twice that from 1 s after a 0.5 s lead.
    text = "".join(rate_schedule_trace(12, (RateStep(at_s=1, factor=2),), lead_s=0.5, length_s=3))
    trace = [int(x) for x in text.split()]
    assert trace[-1] == 3000
    per_ms = {ms: trace.count(ms) for ms in (1, 500, 1500, 1501, 3000)}
    assert per_ms == {1: 1, 500: 1, 1500: 1, 1501: 2, 3000: 2}
    # An error accumulator spreads a fractional rate evenly: 100 Mbit/s is 8.33 opportunities per ms.
    steady = [int(x) for x in "".join(rate_schedule_trace(100, (), lead_s=0, length_s=1)).split()]
    assert len(steady) == 8333
    assert {steady.count(ms) for ms in range(1, 1001)} == {8, 9}


def test_binary_lookup_names_what_it_tried(tmp_path: Path, monkeypatch):
    with pytest.raises(LinkError, match="nowhere/ccsweep-link"):
        find_link_binary(tmp_path / "nowhere" / "ccsweep-link")
    fake = tmp_path / "ccsweep-link"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CCSWEEP_LINK", str(fake))
    assert find_link_binary() == fake
    assert find_link_binary(str(fake)) == fake
    os.chmod(fake, 0o644)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    if not (Path(__file__).resolve().parents[2] / "bin" / "ccsweep-link").exists():
        with pytest.raises(LinkError, match="make emulator"):
            find_link_binary()


SUMMARY = {"event": "summary", "version": "0.1.0", "order": "queue>bottleneck>loss>delay", "cpu_share": 0.05,
           "lateness_us": {"p50": 3.0, "p99": 250.0, "max": 900.0, "count": 10},
           "uplink": {"in_packets": 10, "bottleneck_bytes": 15000, "drops_loss": 1, "delay_line_packets": 0},
           "downlink": {"in_packets": 5}}


def test_summary_flags_a_late_link_above_the_threshold():
    summary = link_summary(SUMMARY, threshold_us=200)
    assert summary.selfcheck.late and summary.selfcheck.lateness_p99_us == 250
    assert summary.uplink.bottleneck_bytes == 15000 and summary.uplink.drops_loss == 1
    assert summary.order == "queue>bottleneck>loss>delay"
    assert not link_summary(SUMMARY, threshold_us=300).selfcheck.late


def test_namespace_names_are_unique_per_cell_and_process():
    names = namespace_names("0123456789abcdef", pid=4242)
    assert (names.sender, names.receiver) == ("ccs-01234567-4242-s", "ccs-01234567-4242-r")


def test_buffers_become_per_namespace_sysctls():
    assert sysctl_settings(cell().params) == {"net.ipv4.tcp_rmem": "4096 87380 6553600",
                                              "net.ipv4.tcp_wmem": "4096 65536 6553600"}


@pytest.mark.parametrize("tcp_ecn, value", [("on", "1"), ("off", "0")])
def test_the_endpoints_ecn_is_a_namespace_sysctl_where_it_is_not_the_default(tcp_ecn, value):
    params = cell().params.model_copy(update={"tcp_ecn": tcp_ecn})
    assert sysctl_settings(params)["net.ipv4.tcp_ecn"] == value
    assert "net.ipv4.tcp_ecn" not in sysctl_settings(cell().params), "the kernel's default is left alone"


@pytest.mark.parametrize("rtt_ms, expected_us", [(2, 400), (10, 400), (40, 400), (50, 500), (100, 1000), (500, 1000)])
def test_lateness_threshold_is_one_percent_of_the_rtt_within_400_us_and_1_ms(rtt_ms, expected_us):
    from ccsweep.linkrules import lateness_threshold_us

    base = cell()
    half = rtt_ms / 2
    params = base.params.model_copy(update={"uplink": base.params.uplink.model_copy(update={"delay_ms": half}),
                                            "downlink": base.params.downlink.model_copy(update={"delay_ms": half})})
    assert lateness_threshold_us(Cell.build("s", "e", params)) == pytest.approx(expected_us)


def with_rtt(rtt_ms: float) -> Cell:
    base = cell()
    half = rtt_ms / 2
    params = base.params.model_copy(update={"uplink": base.params.uplink.model_copy(update={"delay_ms": half}),
                                            "downlink": base.params.downlink.model_copy(update={"delay_ms": half})})
    return Cell.build("s", "e", params)


@pytest.mark.parametrize("rtt_ms, expected_us", [(2, 100), (10, 100), (40, 100), (50, 125), (60, 150), (80, 200),
                                                 (100, 250), (200, 250), (500, 250)])
def test_the_release_window_is_a_quarter_percent_of_the_rtt_leaving_room_under_the_threshold(rtt_ms, expected_us):
    from ccsweep.linkrules import MACHINE_LATENESS_ROOM_US, lateness_threshold_us, release_window_us

    window = release_window_us(with_rtt(rtt_ms))
    assert window == expected_us
    threshold = lateness_threshold_us(with_rtt(rtt_ms))
    # The window counts in the lateness: what it may add leaves the machine its room, or is the old 100 us.
    assert window == 100 or window <= min(threshold / 2, threshold - MACHINE_LATENESS_ROOM_US)


def test_a_tighter_threshold_given_to_the_runner_shrinks_the_window_to_the_floor():
    from ccsweep.linkrules import release_window_us

    assert release_window_us(with_rtt(100), threshold_us=450) == 150
    assert release_window_us(with_rtt(100), threshold_us=200) == 100


def test_the_window_goes_to_the_emulator_and_an_override_replaces_it(tmp_path: Path, monkeypatch):
    from ccsweep.linkrules import RELEASE_WINDOW_ENV, release_window_for

    argv = link_command(cell(), Path("l"), "a", "b", tmp_path, {}, 30, release_window=release_window_for(cell()))
    assert option(argv, "--release-window") == "250us"
    assert "--release-window" not in link_command(cell(), Path("l"), "a", "b", tmp_path, {}, 30)
    monkeypatch.setenv(RELEASE_WINDOW_ENV, "100")
    assert release_window_for(cell()) == 100
    monkeypatch.setenv(RELEASE_WINDOW_ENV, "0")
    with pytest.raises(LinkError, match=RELEASE_WINDOW_ENV):
        release_window_for(cell())


def test_the_record_keeps_the_window_the_emulator_reports_and_old_records_still_load():
    from ccsweep.result import SelfCheck

    check = link_summary({**SUMMARY, "config": {"release_window_us": 500.0}}, threshold_us=1000).selfcheck
    assert check.release_window_us == 500.0
    # A binary built before the option's rename echoes it as coalesce_us.
    former = link_summary({**SUMMARY, "config": {"coalesce_us": 250.0}}, threshold_us=1000).selfcheck
    assert former.release_window_us == 250.0
    assert SelfCheck.model_validate_json(check.model_dump_json()).release_window_us == 500.0
    assert link_summary(SUMMARY, threshold_us=1000).selfcheck.release_window_us is None
    old = {k: v for k, v in check.model_dump().items() if k != "release_window_us"}
    assert SelfCheck.model_validate(old).release_window_us is None


def test_a_link_kept_waiting_on_the_run_queue_is_late_even_with_few_late_packets():
    """A stalled link holds back only the packets in flight (no ACKs, so the sender stops): their p99
    stays low, the emulator's wait on the run queue does not."""
    from ccsweep.runner.runqueue import RunQueueSummary

    frozen = RunQueueSummary(p50_us=10.0, p99_us=40_000.0, max_us=3_000_000.0, windows=900)
    quiet = RunQueueSummary(p50_us=5.0, p99_us=60.0, max_us=200.0, windows=900)
    check = link_summary(SUMMARY, threshold_us=1000, run_queue=frozen).selfcheck
    assert check.late and check.lateness_p99_us < 1000 and check.runqueue_p99_us == 40_000.0
    assert "p99 run-queue delay 40,000 us (threshold 1,000 us)" in check.measured_text()
    assert link_summary(SUMMARY, threshold_us=1000, run_queue=quiet).selfcheck.late is False


def test_the_specs_schedule_bound_uses_the_runners_link_life_and_opportunity_size():
    """spec.py bounds a schedule's trace from these constants; they must stay the runner's."""
    from ccsweep import spec
    from ccsweep.runner import attempt, link, link_run

    assert spec.SCHEDULE_LINK_OVERHEAD_S == link_run.SCHEDULE_LEAD_S + 2 * attempt.READY_TIMEOUT_S + attempt.END_GRACE_S
    assert spec.TRACE_OPPORTUNITY_BITS == link.TRACE_OPPORTUNITY_BITS


def test_a_schedule_trace_is_written_as_it_is_made():
    """A generator of one millisecond's lines at a time: a 10^7-line trace is never a list in memory."""
    chunks = rate_schedule_trace(1000, (RateStep(at_s=0.5, factor=2),), lead_s=0, length_s=1)
    first = next(chunks)
    assert first == "1\n" * 83  # 1000 Mbit/s: 83.3 opportunities per ms
    # 0.5 s at 1000 and 0.5 s at 2000 Mbit/s: 125,000 opportunities, less the fraction still owed.
    assert sum(chunk.count("\n") for chunk in chunks) + 83 in (124_999, 125_000)


def test_fast_cells_writing_small_messages_get_one_note_naming_the_fix():
    from ccsweep.linkrules import small_writes_note, small_writes_rates

    def at(rate: float, message_bytes: int = 1024) -> Cell:
        fast = DirectionParams(rate_mbps=rate, delay_ms=50, loss=0)
        return cell(uplink=fast, downlink=fast, message_bytes=message_bytes)

    rates = small_writes_rates([at(400), at(400, 65_536), at(1000), at(100), at(400)])
    assert rates == {400: 2, 1000: 1}
    note = small_writes_note(rates)
    assert note is not None and "\n" not in note
    assert note.startswith("note: 3 cell(s) at 400, 1000 Mbit/s") and "message_bytes: 65536" in note
    assert small_writes_note(small_writes_rates([at(100), at(400, 65_536), at(199.9)])) is None
    assert small_writes_note(small_writes_rates([])) is None


def test_a_cell_given_a_share_of_a_core_reserves_no_more_of_each_millisecond(tmp_path: Path):
    """A pod's request bounds its emulator's deadline reservation (us per 1 ms), within the
    emulator's 50-300 us; with no share given, the emulator keeps its default."""
    assert [deadline_runtime_us(m) for m in (None, 20, 150, 224, 300, 1000)] == [None, 50, 150, 224, 300, 300]
    argv = link_command(cell(), Path("/x/ccsweep-link"), "ns-s", "ns-r", tmp_path, {}, 60, priority=10,
                        deadline_runtime=150)
    assert (option(argv, "--realtime-priority"), option(argv, "--deadline-runtime")) == ("10", "150us")
    # Without a real-time request there is no reservation to size.
    assert "--deadline-runtime" not in link_command(cell(), Path("/x/ccsweep-link"), "ns-s", "ns-r", tmp_path, {}, 60,
                                                    deadline_runtime=150)
