"""The offline parts of the three-emulator bench (benchmarks/emulator/peers.py, probe.py, rattan.py,
peers_report.py): the schedule, the probes' lateness, the goodput window, Rattan's command line,
and the table and verdicts made from a run's files. The probe program runs for real on loopback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.emulator import peers, peers_report, probe, rattan
from benchmarks.quoted import fill, names

META = {"threshold_us": 400.0, "carries_share": 0.9}


def test_each_emulator_runs_first_second_and_third_alike_at_every_rate():
    runs = peers.schedule(3, [100.0, 400.0, 1000.0])
    assert len(runs) == 27 and len(set(runs)) == 27  # every (repetition, rate, emulator) once
    firsts = [runs[at][2] for at in range(0, len(runs), 3)]
    assert sorted(firsts.count(name) for name in peers.PEERS) == [3, 3, 3]
    assert [rate for _, rate, _ in runs[:3]] == [100.0] * 3  # the three emulators back to back at a rate


def test_the_path_is_a_20_ms_cell_with_one_bdp_of_queue():
    assert peers.threshold_us() == 400.0  # linkrules: 1 % of 20 ms is under the 400 us floor
    assert peers.queue_bytes(100) == 250_000 and peers.queue_bytes(1000) == 2_500_000


def test_lateness_is_the_delay_beyond_the_configured_one_and_the_probe_transmission():
    start = 10_000_000_000
    delay_ns = int(peers.DELAY_MS * 1e6)
    probes = [[seq, start + seq * 2_000_000, start + seq * 2_000_000 + delay_ns + extra_us * 1000]
              for seq, extra_us in enumerate([10, 20, 30, 40, 1000])]
    probes.pop(2)  # sequence 2 lost
    probes.append([9, start - 1, start + 5 * delay_ns])  # sent before the window: left out
    found = peers.probe_lateness(probes, start, start + 10**9, rate_mbps=100)
    transmission = probe.PROBE_IP_BYTES * 8 / 100  # 4.8 us
    assert found.probes == 4 and found.lost == 1
    assert abs(found.max_us - (1000 - transmission)) < 1e-6
    assert abs(found.p50_us - (30 - transmission)) < 1e-6  # median of 10, 20, 40, 1000
    assert peers.probe_lateness([], start, start + 1, 100).p99_us is None


def test_goodput_counts_only_the_servers_intervals_inside_the_steady_window():
    intervals = [{"sum": {"start": float(s), "end": s + 1.0, "seconds": 1.0, "bytes": (1 if s < 2 else 100) * 125_000}}
                 for s in range(peers.FLOW_S)]
    assert peers.steady_goodput_mbps({"intervals": intervals}) == 100.0  # 0-2 s (start-up) and the last left out
    assert peers.steady_goodput_mbps({"intervals": []}) is None


def test_rattan_link_gets_the_same_path_both_ways_and_runs_the_inside_after_a_double_dash():
    argv = rattan.link_argv(Path("/cache/rattan"), 400.0, 10.0, 1_000_000, ["python3", "probe.py", "inside"])
    assert argv[:2] == ["/cache/rattan", "link"]
    assert argv[argv.index("--uplink-bandwidth") + 1] == argv[argv.index("--downlink-bandwidth") + 1] == "400Mbps"
    assert argv[argv.index("--downlink-delay") + 1] == "10ms"
    assert json.loads(argv[argv.index("--uplink-queue-args") + 1]) == {"byte_limit": 1_000_000}
    assert argv[argv.index("--") + 1:] == ["python3", "probe.py", "inside"]


def test_probes_cross_loopback_with_kernel_receive_stamps(tmp_path):
    """Both roles for real on 127.0.0.1, the flow a stand-in that exits at once: the inside says hello,
    the outside answers with probes, and every probe comes back stamped after it was sent."""
    script, out = str(Path(probe.__file__)), tmp_path / "probes.json"
    outside = subprocess.Popen([sys.executable, script, "outside", "--port", "53171", "--interval-us", "1000",
                                "--max-s", "20"])
    try:
        subprocess.run([sys.executable, script, "inside", "--base", "127.0.0.1", "--port", "53171", "--out", str(out),
                        "--flow-s", "1", "--idle-s", "0.3", "--", sys.executable, "-c", "pass"], check=True, timeout=30)
    finally:
        outside.terminate()
        outside.wait(10)
    found = json.loads(out.read_text())
    assert found["iperf3_rc"] == 0 and found["flow_start_ns"] <= found["flow_end_ns"]
    assert len(found["probes"]) > 200  # 0.3 s idle and 0.5 s tail at one a millisecond
    assert all(received > sent for _, sent, received in found["probes"])
    assert [seq for seq, _, _ in found["probes"]][:3] == [0, 1, 2]


def rows_of(emulator: str, rate: float, goodput: float, p99: float, runs: int = 3, status: str = "ok") -> list[dict]:
    return [{"emulator": emulator, "rate_mbps": f"{rate:g}", "status": status, "goodput_mbps": f"{goodput + k}",
             "cpu_per_100mbit": f"{0.1 + k / 100}", "lateness_p99_us": f"{p99 + k}", "lateness_p50_us": "50",
             "idle_p99_us": "60", "self_p99_us": "" if emulator != "ccsweep-link" else "150"} for k in range(runs)]


def test_an_emulator_holds_a_rate_by_the_medians_and_the_highest_needs_every_lower_one():
    rows = (rows_of("ccsweep-link", 100, 95, 200) + rows_of("ccsweep-link", 1000, 940, 300)
            + rows_of("mahimahi", 100, 95, 1500) + rows_of("mahimahi", 1000, 500, 2000)
            + rows_of("rattan", 100, 95, 100) + rows_of("rattan", 400, 300, 150) + rows_of("rattan", 1000, 950, 100))
    found = peers_report.held(rows, META)
    assert found["ccsweep-link"] == (1000.0, "")
    assert found["mahimahi"] == (None, "100 Mbit/s (p99 over)")
    assert found["rattan"] == (100.0, "400 Mbit/s (goodput short)")  # 1000 held, but 400 was not
    assert peers_report.verdict(rows_of("rattan", 100, 0, 0, status="failed: x"), 100, META) == "no: no run finished"


def test_the_table_gives_median_and_range_per_emulator_and_rate_in_a_fixed_order():
    rows = rows_of("rattan", 100, 95, 100) + rows_of("ccsweep-link", 100, 95, 200, runs=2) \
        + rows_of("ccsweep-link", 100, 0, 0, runs=1, status="failed: timeout")
    lines = peers_report.table(rows, META)
    assert lines[2] == ("| ccsweep-link | 100 | 2 of 3 | 96 (95-96) | 10.5 (10.0-11.0) | 200 (200-201) | 50 (50-50) "
                        "| 60 (60-60) | 150 (150-150) | yes |")
    assert lines[3].startswith("| rattan | 100 | 3 of 3 | 96 (95-97) |") and lines[3].endswith("| – | yes |")


def test_the_results_readme_quotes_what_its_files_give_byte_for_byte():
    text = peers_report.README.read_text()
    assert {"peers.table", "peers.held", "peers.machine", "peers.command", "peers.rattan.p99.400"} <= set(names(text))
    assert fill(text, peers_report.compute()) == text


def test_a_table_cell_changed_by_hand_no_longer_matches_its_data():
    text = peers_report.README.read_text()
    edited = text.replace("| rattan | 200 | 5 of 5 |", "| rattan | 200 | 4 of 5 |", 1)
    assert edited != text and fill(edited, peers_report.compute()) == text
