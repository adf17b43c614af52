"""Where ccsweep-link's CPU goes at a paced rate, counted per system call and per wake-up, and
emulator builds or settings compared side by side in one run.

Run as root. Each repetition runs every variant once, in turn (A, B, A, B, ...), each the real
emulator between two fresh namespaces (bench.py's `emulator`: pinned to one core, iperf3 on the
other) carrying one saturating TCP flow at `--rate` over `--delay` each way with the release
window `--release-window`. Over the steady part of the flow, `perf stat` on the emulator's PID counts
its read(), write() and epoll_pwait2() calls and context switches (software events and
tracepoints: a KVM guest has no hardware counters, so no instruction counts), and the emulator's
own stats lines give the IP bytes delivered, packets moved both ways and its CPU time (rusage:
user and system, including the receiving and sending TCP work its writes run in its context).
Per variant it prints the median and range over the repetitions of CPU per 100 Mbit/s, and the
per-second and per-packet counts that explain it; `--record` adds one `perf record` call graph
of the first variant (the hottest symbols, kernel and user).

    python -m benchmarks.emulator.profile --variant now=target/release/ccsweep-link \\
        --variant old=/path/to/old/ccsweep-link --reps 5
    python -m benchmarks.emulator.profile --variant w250=BIN:--release-window=250us \\
        --variant w1ms=BIN:--release-window=1ms
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.emulator.bench import emulator, steady_window
from benchmarks.emulator.host import TRAFFIC_CPU, stop

EVENTS = {
    "reads": "syscalls:sys_enter_read",
    "writes": "syscalls:sys_enter_write",
    "waits": "syscalls:sys_enter_epoll_pwait2",
    "switches": "context-switches",
}
#: Seconds of the flow left out before counting (slow start; BBR's startup and drain).
WARMUP_S = 3.0


@dataclass
class Variant:
    """A build and its extra emulator options, under a short label."""

    label: str
    binary: str
    options: tuple[str, ...] = ()
    runs: list[dict[str, float]] = field(default_factory=list)


def parse_variant(text: str) -> Variant:
    """LABEL=BINARY[:OPTION=VALUE,...] (an option's '=' becomes a separate argument)."""
    label, _, rest = text.partition("=")
    binary, _, options = rest.partition(":")
    if not label or not Path(binary).is_file():
        raise argparse.ArgumentTypeError(f"--variant {text!r}: expected LABEL=BINARY[:--opt=value,...] naming a file")
    argv = [part for option in options.split(",") if option for part in option.split("=", 1)]
    return Variant(label, binary, tuple(argv))


def perf_stat(pid: int, seconds: float, out: Path) -> subprocess.Popen:
    return subprocess.Popen(["perf", "stat", "-x", ",", "-o", str(out), "-e", ",".join(EVENTS.values()),
                             "-p", str(pid), "--", "sleep", f"{seconds:g}"], stdout=subprocess.DEVNULL)


def read_perf_stat(out: Path) -> dict[str, float]:
    counts: dict[str, float] = {}
    names = {event: name for name, event in EVENTS.items()}
    for line in out.read_text().splitlines():
        parts = line.split(",")
        if len(parts) > 2 and parts[2] in names and parts[0].replace(".", "").isdigit():
            counts[names[parts[2]]] = float(parts[0])
    return counts


def one_run(variant: Variant, options: argparse.Namespace, record: Path | None) -> dict[str, float]:
    """One flow through one emulator; the counts over its steady window, per second."""
    window_s = options.seconds - WARMUP_S - 1.0
    with tempfile.TemporaryDirectory() as workdir:
        stats_path, perf_out = Path(workdir) / "stats.jsonl", Path(workdir) / "perf.txt"
        extra = ("--release-window", options.release_window, *variant.options)
        with emulator(options.rate, options.delay, extra[1], stats_path, extra[2:],
                      binary=variant.binary) as (sender, receiver, process):
            ready_at = time.monotonic()
            server = subprocess.Popen(["ip", "netns", "exec", receiver, *TRAFFIC_CPU, "iperf3", "-s", "-1",
                                       "-B", "10.0.0.2"], stdout=subprocess.DEVNULL)
            try:
                time.sleep(0.5)
                client = subprocess.Popen(["ip", "netns", "exec", sender, *TRAFFIC_CPU, "iperf3", "-c", "10.0.0.2",
                                           "-t", str(options.seconds), "-C", options.cc], stdout=subprocess.DEVNULL)
                time.sleep(WARMUP_S)
                counted_from = time.monotonic() - ready_at
                stat = perf_stat(process.pid, window_s, perf_out)
                recorder = (subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-g", "-o", str(record),
                                              "-p", str(process.pid), "--", "sleep", f"{window_s:g}"],
                                             stdout=subprocess.DEVNULL) if record else None)
                stat.wait()
                if recorder:
                    recorder.wait()
                counted_to = time.monotonic() - ready_at
                client.wait()
            finally:
                stop(server)
        stats = [json.loads(line) for line in stats_path.read_text().splitlines() if line.strip()]
        counts = read_perf_stat(perf_out)
    assert process.stdout is not None
    summary = next(json.loads(line) for line in process.stdout.read().splitlines() if '"summary"' in line)
    steady = steady_window(stats, counted_from, counted_to)
    inside = [line for line in stats if counted_from <= line["t"] <= counted_to]
    packets = sum(inside[-1][d]["out_packets"] - inside[0][d]["out_packets"] for d in ("uplink", "downlink"))
    run = {name: value / window_s for name, value in counts.items()}
    run.update(rate_mbps=steady.rate_bps / 1e6, cores=steady.cpu_share, packets=packets / steady.seconds,
               per_100=steady.cpu_share * 1e8 / steady.rate_bps, p99_us=summary["lateness_us"]["p99"],
               timed_sleeps=summary["wake"]["timed_sleeps"] / summary["wall_s"])
    return run


def spread(values: list[float], fmt: str) -> str:
    return f"{format(statistics.median(values), fmt)} ({format(min(values), fmt)}-{format(max(values), fmt)})"


def report(variants: list[Variant]) -> None:
    columns = [("CPU per 100 Mbit/s (cores)", "per_100", ".3f"), ("IP rate (Mbit/s)", "rate_mbps", ".1f"),
               ("packets/s (both ways)", "packets", ".0f"), ("read()/s", "reads", ".0f"),
               ("write()/s", "writes", ".0f"), ("epoll waits/s", "waits", ".0f"),
               ("timed sleeps/s", "timed_sleeps", ".0f"), ("context switches/s", "switches", ".0f"),
               ("CPU us per packet", "us_per_packet", ".2f"), ("lateness p99 (us)", "p99_us", ".0f")]
    for variant in variants:
        for run in variant.runs:
            run["us_per_packet"] = run["cores"] * 1e6 / run["packets"]
    print("| variant | reps | " + " | ".join(name for name, _, _ in columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    for variant in variants:
        cells = [spread([run[key] for run in variant.runs if key in run], fmt) for _, key, fmt in columns]
        print(f"| {variant.label} | {len(variant.runs)} | " + " | ".join(cells) + " |")
    if len(variants) > 1:
        base = statistics.median(run["per_100"] for run in variants[0].runs)
        for variant in variants[1:]:
            ratio = statistics.median(run["per_100"] for run in variant.runs) / base
            print(f"\n{variant.label} / {variants[0].label}, median CPU per 100 Mbit/s: {ratio:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", type=parse_variant, action="append", required=True,
                        help="LABEL=BINARY[:--opt=value,...]; repeat to compare, run in turn")
    parser.add_argument("--rate", default="100mbit")
    parser.add_argument("--delay", default="50ms", help="one-way delay (50ms: the 100 ms RTT of Figure 8)")
    parser.add_argument("--release-window", default="250us", help="release window (the runner's at 100 ms RTT)")
    parser.add_argument("--cc", default="cubic")
    parser.add_argument("--seconds", type=int, default=12, help="flow time of each run")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--record", type=Path, help="perf record the first variant's first run into this file")
    options = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root (network namespaces and TUN devices)")
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", file=sys.stderr)
    for rep in range(options.reps):
        for index, variant in enumerate(options.variant):
            record = options.record if rep == 0 and index == 0 else None
            run = one_run(variant, options, record)
            variant.runs.append(run)
            print(f"rep {rep + 1} {variant.label}: {run['per_100']:.3f} cores per 100 Mbit/s, "
                  f"{run['rate_mbps']:.1f} Mbit/s, p99 {run['p99_us']:.0f} us", file=sys.stderr, flush=True)
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", file=sys.stderr)
    report(options.variant)


if __name__ == "__main__":
    main()
