"""One event loop for several links against one ccsweep-link process per link: CPU per link, lateness.

A timed wake-up costs this kind of guest about 22 us of CPU whatever the loop then does
(benchmarks/results/2026-11-29-idle-wake/, emulator/examples/wake_floor.rs), and that floor is
paid per process: N cells' emulators wake apart. emulator/examples/shared_loop.rs serves N links
(each its own TUN pair, namespaces and link model, ccsweep-link's per-link code) from one thread,
so one wake-up serves every link with a release in the window. This bench runs the same N links
both ways with the same traffic, interleaved and repeated, and measures each way's CPU and each
link's lateness.

Run as root from the repository root: `.venv/bin/python -m benchmarks.sharedloop.bench --links 8,16
--reps 3 --out benchmarks/results/DATE-shared-loop`, then `python -m benchmarks.sharedloop.report DIR`.
It builds ccsweep-link and the example with cargo (the same build, so both arms run the same code).

The links are the study's 100 ms cells at 100 Mbit/s, each with its own release window (250 us)
and threshold (1,000 us) and at the runner's real-time priority, in two kinds (`mix`):
- heavy: no loss, a 1-BDP drop-tail queue, one saturating CUBIC flow: the cells near line rate,
  ~0.22 cores of emulator each in the full study (56 of its 325 cells carried over half their rate);
- light: the same path with 1 % loss on the data direction: CUBIC carries ~1-2 Mbit/s, as the
  study's many lossy cells do (~0.01 cores each; 103 of its 100 Mbit/s attempts carried under 1 %).
One in four links is heavy, somewhat more than the study's share, so that the single thread of the
shared loop carries its heaviest plausible load.

Each run starts the links (N ccsweep-link processes, or one shared_loop process with N lines), one
iperf3 flow per link for `--seconds`, and measures over the steady window (WARMUP_S after the flows
start to TAIL_S before they end): the emulator processes' CPU time and the iperf3 endpoints'
(/proc/PID/task/*/schedstat, in ns: `ip netns exec` execs iperf3 in its own PID), and the
machine's busy cores (/proc/stat, which counts whatever else the machine runs too). Each link's
lateness is its own self-check over the whole run (its summary line). The order of the arms alternates run by run.

It writes, into `--out`: `links.csv` (one row per link per run), `runs.csv` (one row per run),
`machine.csv` (load, steal and softirq each second, labelled with the arm running) and `command.txt`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.emulator.host import stop
from benchmarks.lateness.demo_runs import MachineLog, cpu_model, write_csv
from support.procstat import busy_jiffies

REPO = Path(__file__).resolve().parents[2]
ARMS = ("processes", "shared")
#: The study's 100 ms cells: its release window (ccsweep.linkrules.release_window_us: 0.25 % of the
#: RTT, at most 250 us) and the runner's real-time priority (ccsweep.runner.link).
RTT_MS = 100
RELEASE_WINDOW_US = 250
REALTIME_PRIORITY = 10
#: A 1-BDP drop-tail queue at 100 Mbit/s and 100 ms: 1.25 MB in 1500-byte packets.
BDP_PACKETS = 834
LIGHT_LOSS = 0.01
#: One link in HEAVY_EVERY is heavy.
HEAVY_EVERY = 4
#: Left out of the steady window: CUBIC's start-up over 100 ms at the beginning, the flows' end.
WARMUP_S, TAIL_S = 5.0, 1.0
#: Time the iperf3 servers get to listen before the clients connect (16 start at once).
SERVERS_UP_S = 1.5
SYSCTLS = ("net.ipv4.tcp_rmem=4096 87380 33554432", "net.ipv4.tcp_wmem=4096 65536 33554432")


def mix(links: int) -> list[str]:
    """The kind of each of `links` links: every HEAVY_EVERY-th heavy, the rest light."""
    return ["heavy" if index % HEAVY_EVERY == 0 else "light" for index in range(links)]


def namespaces(tag: str, index: int) -> tuple[str, str]:
    """The sender's and the receiver's namespace of link `index` in the run tagged `tag`."""
    return f"{tag}-{index}s", f"{tag}-{index}r"


def link_options(tag: str, index: int, kind: str) -> list[str]:
    """ccsweep-link's options for one link (without the program): the same in both arms."""
    sender, receiver = namespaces(tag, index)
    loss = LIGHT_LOSS if kind == "light" else 0.0
    half = f"{RTT_MS / 2:g}ms"
    return ["--sender-netns", sender, "--receiver-netns", receiver,
            "--uplink-rate", "100mbit", "--downlink-rate", "100mbit", "--uplink-delay", half, "--downlink-delay", half,
            "--uplink-loss", f"{loss:g}", "--uplink-queue", f"droptail packets={BDP_PACKETS}",
            "--release-window", f"{RELEASE_WINDOW_US}us", "--realtime-priority", str(REALTIME_PRIORITY)]


def links_file(option_lists: list[list[str]]) -> str:
    """shared_loop's FILE: one link's options a line, as a JSON array (values keep their spaces)."""
    return "".join(json.dumps(options) + "\n" for options in option_lists)


def schedstat_ns(texts: list[str]) -> int:
    """CPU time (ns) of the tasks whose /proc/.../schedstat texts these are: the first field each."""
    return sum(int(text.split()[0]) for text in texts if text.strip())


def process_cpu_ns(pid: int) -> int:
    """CPU time every thread of `pid` has had, in ns (0 once it is gone)."""
    texts = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                texts.append((task / "schedstat").read_text())
    return schedstat_ns(texts)


def build() -> dict[str, str]:
    """Builds ccsweep-link and the shared_loop example in one cargo build; their paths by name."""
    done = subprocess.run(
        ["cargo", "build", "--release", "--locked", "--manifest-path", str(REPO / "emulator" / "Cargo.toml"),
         "--bin", "ccsweep-link", "--example", "shared_loop", "--message-format", "json"],
        capture_output=True, text=True, check=True, timeout=1800)
    paths = {}
    for line in done.stdout.splitlines():
        message = json.loads(line)
        if message.get("reason") == "compiler-artifact" and message.get("executable"):
            paths[message["target"]["name"]] = message["executable"]
    return paths


def read_ready(process: subprocess.Popen) -> None:
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line or json.loads(line).get("event") != "ready":
        raise RuntimeError(f"no ready line from PID {process.pid}: {line!r}")


@contextlib.contextmanager
def emulators(arm: str, option_lists: list[list[str]], binaries: dict[str, str],
              workdir: Path) -> Iterator[list[subprocess.Popen]]:
    """The links of one run, ready: one ccsweep-link per link, or one shared_loop for all."""
    if arm == "processes":
        commands = [[binaries["ccsweep-link"], *options] for options in option_lists]
    else:
        path = workdir / "links.txt"
        path.write_text(links_file(option_lists))
        commands = [[binaries["shared_loop"], str(path)]]
    processes: list[subprocess.Popen] = []
    try:
        for command in commands:
            processes.append(subprocess.Popen(command, stdout=subprocess.PIPE, text=True))
        for process in processes:
            read_ready(process)
        yield processes
    finally:
        for process in processes:
            stop(process)


def summaries(processes: list[subprocess.Popen]) -> list[dict[str, Any]]:
    """Every summary line the stopped emulators printed, in their order."""
    lines = []
    for process in processes:
        assert process.stdout is not None
        lines += [json.loads(line) for line in process.stdout.read().splitlines() if '"summary' in line]
    return lines


def goodput_mbps(report: str) -> float | None:
    """The receiver's rate in iperf3's JSON report, or None when the flow failed."""
    try:
        return float(json.loads(report)["end"]["sum_received"]["bits_per_second"]) / 1e6
    except (ValueError, KeyError, TypeError):
        return None


def link_rows(context: dict[str, Any], kinds: list[str], lines: list[dict[str, Any]], goodputs: list[float | None],
              cpu_s: list[float] | None, steady_s: float) -> list[dict[str, Any]]:
    """One row per link: its lateness, packets and goodput, and, in the processes arm, its own CPU."""
    per_link = [line for line in lines if line["event"] == "summary"]
    if len(per_link) != len(kinds):
        raise RuntimeError(f"{len(per_link)} link summaries for {len(kinds)} links")
    rows = []
    for index, (kind, summary, goodput) in enumerate(zip(kinds, per_link, goodputs, strict=True)):
        lateness = summary["lateness_us"]
        rows.append({**context, "link": index, "kind": kind, "lateness_p50_us": lateness["p50"],
                     "lateness_p99_us": lateness["p99"], "lateness_max_us": lateness["max"],
                     "packets": lateness["count"], "goodput_mbps": None if goodput is None else round(goodput, 2),
                     "cpu_cores": None if cpu_s is None else round(cpu_s[index] / steady_s, 4)})
    return rows


def wake_rate(lines: list[dict[str, Any]]) -> float:
    """Timed wake-ups a second, of every emulator process of the run together."""
    loops = [line for line in lines if "wake" in line]
    return sum(line["wake"]["timed_sleeps"] / line["wall_s"] for line in loops if line["wall_s"] > 0)


def run_once(arm: str, links: int, rep: int, binaries: dict[str, str], seconds: int) -> tuple[list[dict], dict]:
    """One run of `links` links with one arm; its link rows and its run row."""
    kinds = mix(links)
    tag = f"csl{os.getpid() % 10000}{arm[0]}{links}r{rep}"
    option_lists = [link_options(tag, index, kind) for index, kind in enumerate(kinds)]
    context = {"rep": rep, "links": links, "arm": arm}
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="ccsweep-shared-loop-") as scratch, \
            emulators(arm, option_lists, binaries, Path(scratch)) as processes:
        for index in range(links):
            for netns in namespaces(tag, index):
                subprocess.run(["ip", "netns", "exec", netns, "sysctl", "-qw", *SYSCTLS], check=True, timeout=30)
        servers = [subprocess.Popen(["ip", "netns", "exec", namespaces(tag, index)[1], "iperf3", "-s", "-1",
                                     "-B", "10.0.0.2"], stdout=subprocess.DEVNULL) for index in range(links)]
        clients: list[subprocess.Popen] = []
        try:
            time.sleep(SERVERS_UP_S)
            clients = [subprocess.Popen(["ip", "netns", "exec", namespaces(tag, index)[0], "iperf3", "-c", "10.0.0.2",
                                         "-t", str(seconds), "-C", "cubic", "-J"], stdout=subprocess.PIPE, text=True)
                       for index in range(links)]
            time.sleep(WARMUP_S)
            cpu0 = [process_cpu_ns(process.pid) for process in processes]
            ends0 = sum(process_cpu_ns(process.pid) for process in servers + clients)
            busy0, t0 = busy_jiffies(), time.monotonic()
            time.sleep(seconds - WARMUP_S - TAIL_S)
            cpu1 = [process_cpu_ns(process.pid) for process in processes]
            ends1 = sum(process_cpu_ns(process.pid) for process in servers + clients)
            busy1, t1 = busy_jiffies(), time.monotonic()
            reports = [client.communicate(timeout=seconds + 60)[0] for client in clients]
        finally:
            for process in clients + servers:
                stop(process)
    lines = summaries(processes)
    steady_s = t1 - t0
    cpu_s = [(after - before) / 1e9 for before, after in zip(cpu0, cpu1, strict=True)]
    rows = link_rows(context, kinds, lines, [goodput_mbps(report) for report in reports],
                     cpu_s if arm == "processes" else None, steady_s)
    busy = (busy1[0] - busy0[0]) / max(busy1[1] - busy0[1], 1) * (os.cpu_count() or 1)
    run = {**context, "started": round(started, 1), "steady_s": round(steady_s, 2),
           "emulator_cpu_cores": round(sum(cpu_s) / steady_s, 4),
           "endpoints_cpu_cores": round((ends1 - ends0) / 1e9 / steady_s, 4), "machine_busy_cores": round(busy, 3),
           "load1": float(Path("/proc/loadavg").read_text().split()[0]),
           "timed_wakeups_per_s": round(wake_rate(lines), 1),
           "sched": next((line["sched"] for line in lines if "sched" in line), "")}
    return rows, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--links", default="8,16", help="numbers of links at once, comma-separated (default 8,16)")
    parser.add_argument("--reps", type=int, default=3, help="runs of each arm at each number, 1 to 20 (default 3)")
    parser.add_argument("--seconds", type=int, default=25, help="flow seconds per run, 10 to 120 (default 25)")
    parser.add_argument("--out", type=Path, required=True, help="folder for the CSVs")
    args = parser.parse_args(argv)
    try:
        counts = [int(part) for part in args.links.split(",")]
    except ValueError:
        parser.error(f"--links: {args.links!r}: give whole numbers of links, 1 to 64, e.g. 8,16")
    if not counts or any(not 1 <= count <= 64 for count in counts):
        parser.error(f"--links: {args.links!r}: each number must be 1 to 64")
    if not 1 <= args.reps <= 20:
        parser.error("--reps: give 1 to 20")
    if not 10 <= args.seconds <= 120:
        parser.error("--seconds: give 10 to 120")
    if os.geteuid() != 0:
        sys.exit("run as root (network namespaces and TUN devices)")
    binaries = build()
    args.out.mkdir(parents=True, exist_ok=True)
    machine = MachineLog()
    link_table: list[dict[str, Any]] = []
    run_table: list[dict[str, Any]] = []
    try:
        for rep in range(1, args.reps + 1):
            for position, links in enumerate(counts):
                order = ARMS if (rep + position) % 2 else ARMS[::-1]
                for arm in order:
                    machine.run = len(run_table) + 1
                    machine.label = f"{arm} {links}"
                    rows, run = run_once(arm, links, rep, binaries, args.seconds)
                    link_table += rows
                    run_table.append(run)
                    worst = max(row["lateness_p99_us"] for row in rows)
                    print(f"rep {rep}, {links} links, {arm}: emulators {run['emulator_cpu_cores']:.3f} cores, "
                          f"machine {run['machine_busy_cores']:.2f}, worst p99 {worst:.0f} us, "
                          f"load {run['load1']:.2f}", flush=True)
    finally:
        machine.stop()
    for name, table in (("links", link_table), ("runs", run_table), ("machine", machine.rows)):
        write_csv(args.out / f"{name}.csv", table)
    command = f"python -m benchmarks.sharedloop.bench --links {args.links} --reps {args.reps} --seconds {args.seconds}"
    machine_line = f"{os.cpu_count()} CPUs ({cpu_model()}), Linux {platform.release()}"
    (args.out / "command.txt").write_text(f"{command} --out {args.out}\nmachine: {machine_line}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
