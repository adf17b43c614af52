"""ccsweep-link benchmark: maximum rate on one core, CPU per 100 Mbit/s, lateness p99, and what
the packet loop's real-time priority buys when every core is busy.

Run as root (`make bench-emulator`). Each row runs the real emulator between two fresh network
namespaces with iperf3 through it. The emulator is pinned to one core and the traffic programs
to another, so "one core" is measured, not extrapolated: the emulator's core also does the
kernel work our reads and writes trigger (the receiving TCP or UDP stack runs inside our
write()), which any TUN emulator, Mahimahi included, pays too. Rates and CPU shares come from the
emulator's 100 ms stats lines over the steady part of each run (start-up and tail left out);
lateness from its self-check (each packet's write time minus its scheduled release).

Last, both link backends on one real cell each, back to back (`run_cell`, the cross-check's cell:
one CUBIC flow, 100 Mbit/s, 100 ms RTT, infinite queue, no loss): ccsweep-link's process and
Mahimahi's three shells are sampled from /proc by the same sampler over the same flow window, and
their CPU per 100 Mbit/s and its ratio are printed. The host settings Mahimahi needs are set for
those two cells and restored after (tests/integration/mahimahi_host.py).

First of all, the machine's floor (`floor_rows`): a loop that does nothing but sleep as the packet
loop sleeps between passes (emulator/examples/wake_floor.rs), woken on a fixed grid at the rates
a 100 Mbit/s cell wakes the emulator. Its CPU is what this machine charges for the wake-ups
alone, below which no emulator that wakes that often can go.

Last of all, ccsweep-link, Mahimahi and Rattan side by side (peers.py, `--only-peers` alone): the same
path, traffic, pinning and CPU sampling for all three, lateness measured from outside alike, at
stepped rates up to 1 Gbit/s, in repetitions that take turns; the pinned Rattan release is built
into the tools cache the first time.

`--only-priority --seconds 3` runs the priority comparison alone, briefly (a check that it works);
`--without-mahimahi` leaves the backend comparison and the side by side out where Mahimahi is not built.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from benchmarks.density.bench import cells_per_core, cells_per_core_rows
from benchmarks.emulator import kernel_share, peers, peers_report
from benchmarks.emulator.host import EMULATOR_CPU, REPO, TRAFFIC_CPU, LinkCpu, link_binary, stop
from benchmarks.options import number_list
from ccsweep.result import CellResult
from support.crosscheck import grid, run_grid
from support.mahimahi_host import mahimahi_host, mahimahi_missing

SECONDS = 10
# Left out of the steady window: TCP start-up at the beginning, the flows' end at the close.
WARMUP_S, TAIL_S = 1.0, 0.5
# Below this share of its core the emulator was waiting for packets: the traffic source, not
# the emulator, set the rate, which is then only a lower bound of the emulator's maximum.
SATURATED_SHARE = 0.9
# The emulator's default release window, and mm-link's timer resolution for the comparison row.
DEFAULT_RELEASE_WINDOW, MAHIMAHI_WINDOW = "100us", "1ms"
# The SCHED_FIFO priority of the priority rows (any 1-99: nothing else here runs real-time).
REALTIME_PRIORITY = "10"


@dataclass
class Steady:
    """The emulator's uplink over the steady part of a run."""

    seconds: float
    ip_bytes: int
    cpu_s: float

    @property
    def rate_bps(self) -> float:
        return self.ip_bytes * 8 / self.seconds

    @property
    def cpu_share(self) -> float:
        return self.cpu_s / self.seconds


@dataclass
class Run:
    summary: dict
    steady: Steady
    client: dict


def steady_window(stats: list[dict], start_s: float, end_s: float) -> Steady:
    """Delivered IP bytes and CPU time between the first and last stats lines in [start, end]."""
    inside = [line for line in stats if start_s <= line["t"] <= end_s]
    first, last = inside[0], inside[-1]
    return Steady(seconds=last["t"] - first["t"],
                  ip_bytes=last["uplink"]["out_bytes"] - first["uplink"]["out_bytes"],
                  cpu_s=last["cpu_s"] - first["cpu_s"])


@contextlib.contextmanager
def emulator(rate: str, delay: str, release_window: str, stats: Path, extra: tuple[str, ...] = (),
             binary: str | None = None) -> Iterator[tuple[str, str, subprocess.Popen]]:
    """A pinned emulator between two fresh namespaces, with big TCP buffers inside them; `extra`
    are further emulator options, `binary` another build than the one `make emulator` made."""
    tag = f"ccb{os.getpid() % 100000}"
    sender, receiver = f"{tag}s", f"{tag}r"
    process = subprocess.Popen(
        [*EMULATOR_CPU, binary or link_binary(), "--sender-netns", sender, "--receiver-netns", receiver,
         "--uplink-rate", rate, "--downlink-rate", rate, "--uplink-delay", delay, "--downlink-delay", delay,
         "--release-window", release_window, "--uplink-queue", "droptail packets=2000", "--stats", str(stats), *extra],
        stdout=subprocess.PIPE, text=True)
    try:
        assert json.loads(process.stdout.readline())["event"] == "ready"
        for netns in (sender, receiver):
            subprocess.run(["ip", "netns", "exec", netns, "sysctl", "-qw", "net.ipv4.tcp_rmem=4096 87380 33554432",
                            "net.ipv4.tcp_wmem=4096 65536 33554432"], check=True)
        yield sender, receiver, process
    finally:
        stop(process)


def run(rate: str, delay: str, client_args: list[str], release_window: str = DEFAULT_RELEASE_WINDOW,
        extra: tuple[str, ...] = (), seconds: int = SECONDS) -> Run:
    """iperf3 for `seconds` through a fresh emulator; its summary, steady window and iperf3's report."""
    with tempfile.TemporaryDirectory() as workdir:
        stats_path = Path(workdir) / "stats.jsonl"
        with emulator(rate, delay, release_window, stats_path, extra) as (sender, receiver, process):
            ready_at = time.monotonic()
            server = subprocess.Popen(["ip", "netns", "exec", receiver, *TRAFFIC_CPU, "iperf3", "-s", "-1",
                                       "-B", "10.0.0.2"], stdout=subprocess.DEVNULL)
            try:
                time.sleep(0.5)
                started = time.monotonic() - ready_at
                client = subprocess.run(["ip", "netns", "exec", sender, *TRAFFIC_CPU, "iperf3", "-c", "10.0.0.2",
                                         "-t", str(seconds), "-J", *client_args], capture_output=True, text=True)
                ended = time.monotonic() - ready_at
            finally:
                stop(server)
        stats = [json.loads(line) for line in stats_path.read_text().splitlines() if line.strip()]
    summary = next(json.loads(line) for line in process.stdout.read().splitlines() if '"summary"' in line)
    return Run(summary, steady_window(stats, started + WARMUP_S, ended - TAIL_S), json.loads(client.stdout))


def max_rate_row(table: Table, label: str, client_args: list[str], seconds: int) -> None:
    """The rate the pinned emulator sustained with the link itself out of the way (40 Gbit/s)."""
    steady = run("40gbit", "0ms", client_args, seconds=seconds).steady
    busy = steady.cpu_share
    measured = f"{steady.rate_bps / 1e9:.2f} Gbit/s (emulator core {busy:.0%} busy)"
    if steady.rate_bps >= 2e9:
        met = "yes"
    elif busy < SATURATED_SHARE:
        met = "lower bound: the traffic source was the limit"
    else:
        met = "no"
    table.add_row("max rate on one core", label, measured, ">= 2 Gbit/s", met)


def wake_note(label: str, summary: dict) -> str:
    """What the emulator measured of this machine's sleeps (absent from older builds)."""
    wake = summary.get("wake")
    if not wake:
        return f"{label}: the emulator reports no wake-up calibration"
    per_s = wake["timed_sleeps"] / summary["wall_s"]
    return (f"{label}: a sleep costs {wake['sleep_cost_us']:.0f} us of CPU, the timer fires "
            f"{wake['latency_p90_us']:.0f} us late (p90); {per_s:.0f} timed wake-ups/s")


#: The floor loop's wake-up periods: one per 250 us release window (the most a 100 Mbit/s cell's
#: timed passes can be), the emulator's timed wake-ups at 100 Mbit/s (about 2,300 a second), and
#: its wake-ups of every kind there (about 3,500 a second, with the endpoints' packets),
#: benchmarks/results/2026-11-25-cheaper-cells.md and 2026-11-26-offloads.md.
FLOOR_PERIODS_US = ((250, "every 250 us release window"), (435, "the timed wake-ups of a 100 Mbit/s cell"),
                    (285, "its wake-ups of every kind"))
#: The period standing for a 100 Mbit/s cell's wake-ups, for the note on what the goal leaves.
FLOOR_AT_CELL_US = 285


def wake_floor(period_us: int, seconds: int) -> dict:
    """One run of the floor loop at SCHED_FIFO, as the emulator's loop runs: its JSON line."""
    command = ["cargo", "run", "--quiet", "--release", "--locked",
               "--manifest-path", str(REPO / "emulator" / "Cargo.toml"),
               "--example", "wake_floor", "--", str(period_us), str(seconds), REALTIME_PRIORITY]
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=seconds + 600)
    return json.loads(done.stdout.splitlines()[-1])


def floor_rows(table: Table, console: Console, seconds: int, reps: int) -> list[str]:
    """The machine's floor under the emulator's CPU: the wake-ups alone, `reps` runs per period,
    the periods taking turns. Returns a note of what the goal leaves for packets."""
    runs: dict[int, list[dict]] = {period: [] for period, _ in FLOOR_PERIODS_US}
    for rep in range(reps):
        for period, _ in FLOOR_PERIODS_US:
            console.print(f"floor: only timed sleeps every {period} us, {seconds} s (run {rep + 1} of {reps})")
            runs[period].append(wake_floor(period, seconds))
    for period, meaning in FLOOR_PERIODS_US:
        cores = [r["cores"] for r in runs[period]]
        per_wake = float(np.median([r["cpu_us_per_wakeup"] for r in runs[period]]))
        rate = float(np.median([r["wakeups_per_s"] for r in runs[period]]))
        table.add_row("floor: wake-ups alone", f"{rate:,.0f} a second ({meaning}), {runs[period][0]['priority']}",
                      f"{median_range(cores)} of a core, {per_wake:.1f} us each", "", "")
    at_cell = float(np.median([r["cores"] for r in runs[FLOOR_AT_CELL_US]]))
    return [f"floor: at a 100 Mbit/s cell's wake-ups the machine charges {at_cell:.1%} of a core before any packet "
            f"is moved; a goal of 5% per 100 Mbit/s leaves {max(0.05 - at_cell, 0):.1%} for all packet work"]


def cpu_row(table: Table, measure: str, setting: str, per_100: float) -> None:
    table.add_row(measure, setting, f"{per_100:.1%} of a core", "<= 5%", "yes" if per_100 <= 0.05 else "no")


def lateness_row(table: Table, label: str, result: Run) -> None:
    lateness = result.summary["lateness_us"]
    p99 = lateness["p99"]
    table.add_row("lateness p99", f"{label}, {lateness['count']} packets",
                  f"{p99:.0f} us (p50 {lateness['p50']:.0f}, max {lateness['max']:.0f})", "< 200 us",
                  "yes" if p99 < 200 else "no")


def paced_rows(table: Table, console: Console, seconds: int) -> list[str]:
    """CPU per 100 Mbit/s three ways and lateness p99, each under one saturating TCP flow; returns
    the emulator's own measurement of this machine's wake-ups.

    At 100 Mbit/s a release is due every 120 us, so at the default window nearly every packet
    needs its own timer wake-up, whose CPU cost is fixed by the machine (tens of microseconds on
    a KVM guest). The marginal cost, from 100 Mbit/s to 1 Gbit/s, is what each further
    100 Mbit/s adds once that fixed cost is paid; the 1 ms row releases at mm-link's resolution.
    """
    def paced(rate: str, release_window: str, label: str, extra: tuple[str, ...] = ()) -> Run:
        console.print(f"{label}, 10 ms each way, one saturating TCP flow ({seconds} s)")
        return run(rate, "10ms", ["-C", "cubic"], release_window, extra, seconds=seconds)

    at_100m = paced("100mbit", DEFAULT_RELEASE_WINDOW, "100 Mbit/s")
    at_100m_coarse = paced("100mbit", MAHIMAHI_WINDOW, "100 Mbit/s, 1 ms windows")
    at_1g = paced("1gbit", DEFAULT_RELEASE_WINDOW, "1 Gbit/s")
    # The same two rates with TUN offloads off (one packet per read and write), for their effect.
    plain_100m = paced("100mbit", DEFAULT_RELEASE_WINDOW, "100 Mbit/s, offloads off", ("--offload", "none"))
    plain_1g = paced("1gbit", DEFAULT_RELEASE_WINDOW, "1 Gbit/s, offloads off", ("--offload", "none"))
    slow, fast, coarse = at_100m.steady, at_1g.steady, at_100m_coarse.steady
    cpu_row(table, "CPU per 100 Mbit/s", f"at 100 Mbit/s ({slow.rate_bps / 1e6:.1f} of IP delivered), "
            f"{DEFAULT_RELEASE_WINDOW} release windows", slow.cpu_share * 1e8 / slow.rate_bps)
    cpu_row(table, "CPU per 100 Mbit/s", f"at 100 Mbit/s, {MAHIMAHI_WINDOW} release windows "
            "(mm-link's resolution)", coarse.cpu_share * 1e8 / coarse.rate_bps)
    marginal = (fast.cpu_share - slow.cpu_share) * 1e8 / (fast.rate_bps - slow.rate_bps)
    cpu_row(table, "CPU per 100 Mbit/s", "marginal, from 100 Mbit/s to 1 Gbit/s", marginal)
    plain = plain_100m.steady
    cpu_row(table, "CPU per 100 Mbit/s", f"at 100 Mbit/s, {DEFAULT_RELEASE_WINDOW} release windows, offloads off",
            plain.cpu_share * 1e8 / plain.rate_bps)
    lateness_row(table, "100 Mbit/s", at_100m)
    lateness_row(table, "1 Gbit/s", at_1g)
    lateness_row(table, "1 Gbit/s, offloads off", plain_1g)
    return [wake_note("100 Mbit/s", at_100m.summary), wake_note("1 Gbit/s", at_1g.summary)]


@contextlib.contextmanager
def busy_cores() -> Iterator[list[int]]:
    """One busy-looping process pinned to each core this benchmark may use, ended by PID on exit:
    the load of a machine whose every core is taken, the moment a cell's timing suffers."""
    processes = [subprocess.Popen(["taskset", "-c", str(core), "sh", "-c", "while :; do :; done"])
                 for core in sorted(os.sched_getaffinity(0))]
    try:
        yield [process.pid for process in processes]
    finally:
        for process in processes:
            process.kill()
            process.wait()


def priority_rows(table: Table, console: Console, seconds: int) -> list[str]:
    """Lateness at 100 Mbit/s under a busy loop on every core, at normal priority and with
    `--realtime-priority`, in the same run; returns a note comparing the two.

    At normal priority the emulator shares its core with a busy loop, so a release can wait for
    the scheduler's next turn; at SCHED_FIFO it takes the core whenever a release is due.
    """
    def loaded(label: str, extra: tuple[str, ...]) -> Run:
        console.print(f"100 Mbit/s, 10 ms each way, one saturating TCP flow ({seconds} s), every core busy, {label}")
        result = run("100mbit", "10ms", ["-C", "cubic"], extra=extra, seconds=seconds)
        lateness_row(table, f"100 Mbit/s, every core busy, {label} (sched {result.summary['sched']})", result)
        return result

    with busy_cores() as pids:
        console.print(f"busy loops on every core (PIDs {', '.join(map(str, pids))})")
        normal = loaded("normal priority", ())
        realtime = loaded(f"--realtime-priority {REALTIME_PRIORITY}", ("--realtime-priority", REALTIME_PRIORITY))
    p99 = [result.summary["lateness_us"]["p99"] for result in (normal, realtime)]
    return [f"lateness p99 with every core busy: {p99[0]:.0f} us at normal priority, {p99[1]:.0f} us with "
            f"--realtime-priority {REALTIME_PRIORITY} ({realtime.summary['sched']})"]


def backend_share(result: CellResult, cpu: LinkCpu) -> float | None:
    """One cell's link CPU per 100 Mbit/s (cores) over its flow window; None when the cell did not run.

    A late cell's CPU counts too: its link's processes did the work they did, only not on time
    (each row says how many of its runs were late)."""
    p = result.cell.params
    if result.status not in ("ok", "late") or not result.flows_started_at or not result.bottleneck_throughput_mbps:
        return None
    start = datetime.fromisoformat(result.flows_started_at).timestamp()
    return cpu.between(start, start + p.duration_s) / p.duration_s * 100 / result.bottleneck_throughput_mbps


def median_range(values: list[float]) -> str:
    return f"{np.median(values):.1%} ({min(values):.1%}-{max(values):.1%})"


#: Process-name prefixes of each link backend's processes (perf's and /proc's `comm`).
LINK_PROCESSES: dict[str, tuple[str, ...]] = {"ccsweep-link": ("ccsweep-link",), "mahimahi": ("mm-",)}


def backend_rows(table: Table, console: Console, seconds: int, reps: int, rate_mbps: float = 100.0,
                 split: bool = False) -> list[str]:
    """ccsweep-link and Mahimahi on the cross-check's CUBIC cell without loss at `rate_mbps`, `reps`
    times each, alternating in this run and sampled alike; the median and range of each one's
    CPU per 100 Mbit/s, and the ratio of the medians (with the range of the per-repetition ratios).

    Neither is pinned: the cells run as the runner runs them. A ccsweep-link cell whose emulator
    ran late is run again, as the executor would (crosscheck.run_grid). With `split`, a
    system-wide perf profile over the runs sorts each backend's CPU into the cells' own TCP (run in
    the link's context by its TUN writes) and the link's own work (kernel_share.py), and the ratio
    is given for the link's own work too.
    """
    cells = [c for c in grid(seconds, reps, loss_percent=[0], bandwidth_mbps=rate_mbps)
             if c.params.uplink.rate_mbps is not None and c.params.cc_label == "cubic"]
    setting = f"{rate_mbps:g} Mbit/s"
    console.print(f"both links on one cell, alternating, {reps} times each: one CUBIC flow, {setting}, 100 ms RTT, "
                  f"infinite queue, {seconds} s")
    with tempfile.TemporaryDirectory(prefix="ccsweep-bench-links-") as scratch, mahimahi_host():
        profile = Path(scratch) / "perf.data"
        cpu = LinkCpu(os.getpid(), tuple(name for names in LINK_PROCESSES.values() for name in names))
        try:
            with kernel_share.recording(profile) if split else contextlib.nullcontext():
                results = run_grid(cells, Path(scratch), progress=lambda r: console.print(
                    f"  {r.cell.params.link} repetition {r.cell.params.repetition + 1}: {r.status}"))
        finally:
            cpu.stop()
        tcp = kernel_share.tcp_shares(profile, LINK_PROCESSES, cpu.pids) if split else None
    shares: dict[str, list[float]] = {"ccsweep-link": [], "mahimahi": []}
    late = {link: sum(r.status == "late" for r in results if r.cell.params.link == link) for link in shares}
    pairs: dict[int, dict[str, float]] = {}
    measured: list[tuple[CellResult, float]] = []
    for result in results:
        share = backend_share(result, cpu)
        if share is None:
            table.add_row(f"CPU per 100 Mbit/s at {setting}", result.cell.params.link,
                          f"repetition not measured: {result.status} {result.error or ''}", "", "no")
            continue
        shares[result.cell.params.link].append(share)
        measured.append((result, share))
        pairs.setdefault(result.cell.params.repetition, {})[result.cell.params.link] = share
    ours, theirs = shares["ccsweep-link"], shares["mahimahi"]
    if ours:
        table.add_row(f"CPU per 100 Mbit/s at {setting}", f"ccsweep-link, the same cell, {len(ours)} runs "
                      f"({late['ccsweep-link']} late): median (range)",
                      median_range(ours), "<= 5%", "yes" if np.median(ours) <= 0.05 else "no")
    if theirs:
        table.add_row(f"CPU per 100 Mbit/s at {setting}", f"mahimahi (mm-delay + mm-loss + mm-link), {len(theirs)} "
                      f"runs ({late['mahimahi']} late): median (range)", median_range(theirs), "reference", "")
    if not ours or not theirs:
        return [f"Mahimahi / ccsweep-link CPU per 100 Mbit/s at {setting}: not measured (every run of one backend "
                "failed)"]
    ratio = float(np.median(theirs) / np.median(ours))
    per_rep = [p["mahimahi"] / p["ccsweep-link"] for p in pairs.values() if len(p) == 2]
    table.add_row(f"CPU ratio at {setting}", "Mahimahi / ccsweep-link, medians (range of the per-repetition ratios)",
                  f"{ratio:.2f} ({min(per_rep):.2f}-{max(per_rep):.2f})", ">= 4", "yes" if ratio >= 4 else "no")
    notes = [f"CPU per 100 Mbit/s on the same cell at {setting}, {len(ours)} and {len(theirs)} runs alternating: "
             f"ccsweep-link {median_range(ours)}, Mahimahi {median_range(theirs)} of a core; Mahimahi / "
             f"ccsweep-link = {ratio:.2f}"]
    notes += [f"  {link} at {setting}, run by run: " + ", ".join(
        f"{share:.1%} at {result.bottleneck_throughput_mbps:.0f} Mbit/s"
        for result, share in measured if result.cell.params.link == link) for link in shares]
    if tcp is not None:
        own = {link: [v * (1 - tcp[link][1]) for v in values] for link, values in shares.items()}
        for link in shares:
            samples, fraction = tcp[link]
            table.add_row(f"CPU per 100 Mbit/s at {setting}, the link's own", f"{link}: without the cells' TCP "
                          f"({fraction:.0%} of {samples} samples)", median_range(own[link]), "", "")
        own_ratio = float(np.median(own["mahimahi"]) / np.median(own["ccsweep-link"]))
        table.add_row(f"CPU ratio at {setting}, the link's own", "Mahimahi / ccsweep-link, medians",
                      f"{own_ratio:.2f}", ">= 4", "yes" if own_ratio >= 4 else "no")
        notes.append(f"the link's own CPU per 100 Mbit/s at {setting} (the cells' TCP, run in the link's context, "
                     f"left out): ccsweep-link {median_range(own['ccsweep-link'])}, Mahimahi "
                     f"{median_range(own['mahimahi'])}; ratio {own_ratio:.2f}")
    return notes


def density_rows(table: Table, console: Console, max_cells: int) -> list[str]:
    """The density that matters, in the same run: cells per core at 100 Mbit/s (all stored on time,
    with goodput as alone) and the CPU of a cell in total, with the old fixed 100 us window and each
    cell's own (benchmarks/density/bench.py --cells-per-core)."""
    # Flows long enough that the last cell of the largest step starts before the first one's flow ends.
    steps, _ = cells_per_core(max_cells, seconds=max(15.0, max_cells + 5.0), log=console.print)
    for measure, setting, result in cells_per_core_rows(steps):
        table.add_row(measure, setting, result, "", "")
    return [f"density, {s.arm}: {s.cells} at once, {s.late} late, p99 "
            f"{', '.join(f'{v:.0f}' for v in s.lateness_p99_us)} us, {s.cpu_per_cell:.2f} cores per cell"
            for s in steps]


def peer_notes(console: Console, options: argparse.Namespace) -> list[str]:
    """ccsweep-link, Mahimahi and Rattan side by side (peers.py): runs.csv and run.json into the output
    folder, and the three-emulator table made from them (peers_report.py) as notes."""
    out = options.peers_out or REPO / "benchmarks" / "results" / f"{datetime.now(UTC):%Y-%m-%d}-emulator-peers"
    command = " ".join(["python -m benchmarks.emulator.bench", *sys.argv[1:]])
    peers.run_all(options.peer_reps, options.peer_rates, out, command, log=console.print)
    return [f"three emulators side by side, written to {out}:", *peers_report.summary(out)]


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="ccsweep-link benchmark (run as root; see the module's docstring).")
    parser.add_argument("--seconds", type=int, default=SECONDS, choices=range(2, 61), metavar="2-60",
                        help=f"length of each iperf3 run (default {SECONDS})")
    parser.add_argument("--only-priority", action="store_true",
                        help="run only the real-time priority comparison under load")
    parser.add_argument("--no-density", action="store_true",
                        help="leave out cells per core at 100 Mbit/s (benchmarks/density/bench.py, ~8 min)")
    parser.add_argument("--density-max-cells", type=int, default=16, help="most cells at once in the density rows")
    parser.add_argument("--backend-reps", type=int, default=5, choices=range(1, 21), metavar="1-20",
                        help="runs of each link backend on the same cell, alternating, and of each floor "
                             "period (default 5)")
    parser.add_argument("--backend-rates", type=number_list("rate", "Mbit/s", 10, 1000, "100,400"), default=[100.0],
                        metavar="MBPS[,MBPS...]",
                        help="bottleneck rates of the backend comparison, each 10-1000 Mbit/s (default 100)")
    parser.add_argument("--backend-split", action="store_true",
                        help="also profile the backend comparison (perf, every CPU) and give each link's CPU "
                             "without the cells' TCP run in its context")
    parser.add_argument("--only-floor", action="store_true",
                        help="run only the machine's floor: the CPU of timed wake-ups alone")
    parser.add_argument("--only-backends", action="store_true",
                        help="run only the side-by-side comparison with Mahimahi")
    parser.add_argument("--only-peers", action="store_true",
                        help="run only ccsweep-link, Mahimahi and Rattan side by side (peers.py)")
    parser.add_argument("--without-peers", action="store_true",
                        help="leave out the three emulators side by side (peers.py; ~8 min at 3 repetitions, and "
                             "Rattan's build the first time)")
    parser.add_argument("--peer-reps", type=int, default=3, choices=range(1, 21), metavar="1-20",
                        help="runs of each emulator at each rate of the side by side (default 3)")
    parser.add_argument("--peer-rates", type=number_list("rate", "Mbit/s", 10, 1000, "100,400,1000"),
                        default=list(peers.RATES_MBPS), metavar="MBPS[,MBPS...]",
                        help="the rates of the side by side, each 10-1000 Mbit/s (default "
                             f"{','.join(f'{r:g}' for r in peers.RATES_MBPS)})")
    parser.add_argument("--peers-out", type=Path, default=None, metavar="DIR",
                        help="where the side by side writes runs.csv and run.json (default "
                             "benchmarks/results/<date>-emulator-peers)")
    parser.add_argument("--without-mahimahi", action="store_true",
                        help="leave out the CPU comparison with upstream Mahimahi and the side by side (for a machine "
                             "without it)")
    return parser.parse_args()


def main() -> None:
    options = arguments()
    if os.geteuid() != 0:
        sys.exit("run as root (network namespaces and TUN devices)")
    console = Console(width=max(Console().width, 120))
    pinning = (f"emulator on core {EMULATOR_CPU[-1]}, traffic on {TRAFFIC_CPU[-1]}" if EMULATOR_CPU
               else "one core: nothing pinned")
    table = Table(title=f"ccsweep-link benchmark ({pinning})")
    for column in ("measure", "setting", "result", "goal", "met"):
        table.add_column(column)
    only = [name for name in ("only_priority", "only_backends", "only_floor", "only_peers") if getattr(options, name)]
    if len(only) > 1:
        sys.exit(f"bench-emulator: choose one of {', '.join('--' + n.replace('_', '-') for n in only)}")
    everything = not only
    with_mahimahi = (everything or options.only_backends) and not options.without_mahimahi
    with_peers = (everything and not options.without_peers and not options.without_mahimahi) or options.only_peers
    for alone in ("only_backends", "only_peers"):
        if getattr(options, alone) and options.without_mahimahi:
            sys.exit(f"bench-emulator: --{alone.replace('_', '-')} compares with Mahimahi; it cannot go with "
                     "--without-mahimahi")
    missing = mahimahi_missing() if with_mahimahi or with_peers else None
    if missing:
        sys.exit(f"bench-emulator: {missing}\n(`make mahimahi` builds it; --without-mahimahi leaves the "
                 "comparison out)")
    notes = []
    if everything or options.only_floor:
        notes += floor_rows(table, console, options.seconds, options.backend_reps)
    if everything:
        console.print(f"max rate: 40 Gbit/s link, no delay, {options.seconds} s each of TCP (4 flows) and UDP")
        max_rate_row(table, "TCP, 4 cubic flows, 1500-byte packets", ["-P", "4", "-C", "cubic"], options.seconds)
        max_rate_row(table, "UDP, 1500-byte packets, unpaced", ["-u", "-b", "0", "-l", "1472"], options.seconds)
        notes += paced_rows(table, console, options.seconds)
    if everything or options.only_priority:
        notes += priority_rows(table, console, options.seconds)
    if everything and not options.no_density:
        notes += density_rows(table, console, options.density_max_cells)
    if with_mahimahi:
        for rate in options.backend_rates:
            notes += backend_rows(table, console, options.seconds, options.backend_reps, rate, options.backend_split)
    if with_peers:
        notes += peer_notes(console, options)
    console.print(table)
    console.print(f"Load average at the end: {os.getloadavg()[0]:.2f} (a shared machine disturbs lateness).")
    for note in notes:
        console.print(note)
    if not options.only_floor:
        console.print("Rates are IP bytes out of the emulator over the steady part of each run; in the two rows per "
                      "backend, IP bytes out of the bottleneck over the whole flow.")


if __name__ == "__main__":
    main()
