"""Each link effect of ccsweep-link, end to end, against its analytic expectation (issue 41).

The unit tests inside the emulator check each model's draws against theory (cargo test); this
bench checks what a packet meets on the real path: the real ccsweep-link binary between two
network namespaces it creates, numbered UDP probes at a known rate from the sender namespace,
and the sequence numbers, send and kernel receive time stamps and ECN field read at the
receiver (benchmarks/effects/traffic.py). Rattan's `link` mode offers only CoDel of these
effects, so theory is the reference (benchmarks/effects/measures.py states each expectation):

- Gilbert-Elliott (2 % in bursts of mean 3) and Bernoulli at the same mean: loss share, mean
  burst, and the shares of bursts of 1, 2, 3 and more packets;
- jitter 5 ms uniform and normal, reorder mode: the added delay's p10/p50/p90 and the share of
  neighbours overtaken; uniform in keep mode: nothing overtaken; and the path without jitter,
  the measurement's own floor;
- slots 2-6 ms: spacing quantiles, and release sizes with no limit and with a 4-packet limit;
- a 10 Mbit/s, 15 kB policer offered 20 Mbit/s: what passed against burst + rate x time;
- the step marker (10 ms) over a standing queue and over a sawtooth one: the share of ECT(1)
  probes marked against the share that waited the step, and ECT(0) never marked;
- a delay trace stepping the probes' way from 20 to 60 ms for 2 s: each stretch's added delay
  against the step, the probes held behind the last slow one when it falls, and nothing overtaken;
- one TCP row: CUBIC's goodput under Gilbert-Elliott loss and Bernoulli loss at the same mean
  (1 %), beside Mathis' formula with the loss-event rate each implies.

Each row runs --reps times with different seeds. Run as root from the repository root:

    python -m benchmarks.effects.theory --reps 3 --out benchmarks/results/DATE-effects-theory
    python -m benchmarks.effects.theory_report benchmarks/results/DATE-effects-theory

It writes into --out: `stats.csv` (one row per run and statistic: measured, expected, sigma),
`runs.csv` (one row per run: the emulator's own counters) and `command.txt` (the command and the
machine). ccsweep-link is $CCSWEEP_LINK, ./bin/ccsweep-link or on PATH (`make emulator`).
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
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.effects import measures
from benchmarks.emulator.host import link_binary, stop
from benchmarks.lateness.demo_runs import cpu_model, write_csv

REPO = Path(__file__).resolve().parents[2]
SENDER_ADDR, RECEIVER_ADDR, PORT = "10.0.0.1", "10.0.0.2", 9000
#: A probe's IP bytes (32-byte payload) and what the link charges for it (IP length + 4).
PROBE_IP_BYTES = 60
#: The emulator's real-time priority, as the cell runner asks for it.
REALTIME_PRIORITY = "10"
#: Gilbert-Elliott: 2 % lost in bursts of mean 3 (netem's simple Gilbert model: 1-H = 1, 1-K = 0).
GE_MEAN, GE_BURST = 0.02, 3.0
#: The TCP row: 1 % lost, in bursts of mean 3 or one by one, over 50 Mbit/s and 40 ms.
TCP_LOSS, TCP_RTT_S, TCP_SECONDS, TCP_MSS = 0.01, 0.040, 15, 1448

#: The probe rows' path: 100 Mbit/s each way, 20 ms on the probes' way.
FAST_BPS, PATH_DELAY_NS = 100e6, 20_000_000

#: (probes, probes sent, seed, the floor: this repetition's added delays without an effect) -> stats
Analyse = Callable[[list[list[int]], int, int, list[int]], list[measures.Stat]]


@dataclass(frozen=True)
class Row:
    """One effect setting: the link's options, the probes' pacing, and what to compare."""

    name: str
    link: list[str]
    analyse: Analyse
    rate_pps: float = 1000.0
    seconds: float = 6.0
    traffic: list[str] = field(default_factory=list)
    #: This row measures the path without an effect: its added delays are the floor the later rows
    #: of the repetition compare with.
    floor: bool = False
    #: How long the receiver listens after the sender stops, for what is still in flight or queued.
    drain_s: float = 2.5
    #: A delay trace for the probes' way, as (ms on the emulator's clock, one-way delay in ms)
    #: steps: written to a file beside the probes and given as --uplink-delay-trace.
    delay_trace: tuple[tuple[int, int], ...] = ()


def service_ns(ip_bytes: int, rate_bps: float) -> int:
    """A packet's time on the bottleneck: (IP length + 4) bytes at the rate (docs/emulator.md)."""
    return round((ip_bytes + 4) * 12000 / (1504 * rate_bps) * 1e9)


def gilbert(mean: float, burst: float) -> tuple[float, float]:
    """P and R of the simple Gilbert model losing `mean` in bursts of mean `burst` packets."""
    r = 1 / burst
    return mean * r / (1 - mean), r


def rows() -> list[Row]:
    """The bench's rows, in the order they run within a repetition."""
    fast, delay = FAST_BPS, PATH_DELAY_NS
    path = ["--uplink-rate", "100mbit", "--downlink-rate", "100mbit", "--uplink-delay", "20ms"]
    probe = service_ns(PROBE_IP_BYTES, fast)
    p, r = gilbert(GE_MEAN, GE_BURST)
    jitter = 5_000_000

    def jittered(distribution: str, order: str) -> Row:
        return Row(f"jitter 5 ms {distribution}, {order}", [*path, "--uplink-jitter", "5ms", distribution, order],
                   lambda probes, sent, seed, floor: measures.jitter_stats(probes, delay, probe, jitter, distribution,
                                                                           order, seed, floor))

    def slotted(packets: int, seconds: float, drain_s: float) -> Row:
        # 2,000 probes a second: even the shortest gap (2 ms) gathers 4, so every slot releases
        # something, and a 4-packet slot is always full (a backlog of 1,000 a second builds, which
        # the receiver waits out).
        room = f"at most {packets} packets" if packets else "no limit"
        return Row(f"slots 2-6 ms, {room}", [*path, "--uplink-slot", "2ms", "6ms", str(packets), "0"],
                   lambda probes, sent, seed, floor: measures.slot_stats(probes, delay, probe, 2_000_000, 6_000_000,
                                                                         packets),
                   rate_pps=2000.0, seconds=seconds, drain_s=drain_s)

    slow = 10e6
    queue_path = ["--uplink-rate", "10mbit", "--downlink-rate", "10mbit", "--uplink-delay", "5ms",
                  "--uplink-queue", "droptail bytes=45000,l4s_step_us=10000"]

    def stepped(name: str, on_ms: int, off_ms: int) -> Row:
        own = service_ns(PROBE_IP_BYTES, slow)
        return Row(f"step marker 10 ms, {name} queue", queue_path,
                   lambda probes, sent, seed, floor: measures.step_stats(probes, 5_000_000, own, 10_000_000, 2),
                   rate_pps=1000.0, traffic=["--ect1-every", "2", "--tos", "2", "--filler-mbps", "12",
                                             "--filler-on-ms", str(on_ms), "--filler-off-ms", str(off_ms)])

    policed_ip = 1028
    # The trace's rise comes well after the first probe (the emulator starts about 0.6 s before it)
    # and its fall leaves 3 s of probes after it.
    trace_step_ms, trace_hold_ms = 40, 2000
    traced = Row(f"delay trace 20 -> {20 + trace_step_ms} -> 20 ms, {trace_hold_ms} ms up", path,
                 lambda probes, sent, seed, floor: measures.delay_trace_stats(
                     probes, delay, probe, trace_step_ms * 1_000_000, trace_hold_ms * 1_000_000, floor),
                 seconds=8.0, delay_trace=((2500, 20 + trace_step_ms), (2500 + trace_hold_ms, 20)))
    return [
        Row("Gilbert-Elliott 2 %, bursts of mean 3",
            [*path, "--uplink-gilbert-elliott", f"{p:.6g}", f"{r:.6g}", "1", "0"],
            lambda probes, sent, seed, floor: measures.loss_stats(probes, sent, p, r, 1.0, 0.0, r),
            rate_pps=6000.0, seconds=10.0),
        Row("Bernoulli 2 %", [*path, "--uplink-loss", str(GE_MEAN)],
            # Bernoulli is the chain whose two states lose alike (any P and R).
            lambda probes, sent, seed, floor: measures.loss_stats(probes, sent, 0.5, 0.5, GE_MEAN, GE_MEAN,
                                                                  1 - GE_MEAN),
            rate_pps=6000.0, seconds=10.0),
        Row("no effect (the measurement's floor)", path,
            lambda probes, sent, seed, floor: measures.floor_stats(probes, delay, probe), floor=True),
        jittered("uniform", "reorder"),
        jittered("normal", "reorder"),
        jittered("uniform", "keep"),
        slotted(0, 6.0, 2.5),
        slotted(4, 3.0, 4.5),
        Row("policer 10 Mbit/s, 15 kB, offered 20", [*path, "--uplink-policer", "10mbit", "15000"],
            lambda probes, sent, seed, floor: measures.policer_stats(probes, sent, 10e6, 15000, policed_ip, delay,
                                                              service_ns(policed_ip, fast), floor),
            rate_pps=20e6 / 8 / policed_ip, seconds=5.0, traffic=["--payload", str(policed_ip - 28)]),
        stepped("standing", 1000, 0),
        stepped("sawtooth", 200, 200),
        traced,
    ]


@contextlib.contextmanager
def running_link(tag: str, options: list[str], seed: int) -> Iterator[subprocess.Popen]:
    """ccsweep-link between `<tag>s` and `<tag>r` (which it creates and removes), ready."""
    command = [link_binary(), "--sender-netns", f"{tag}s", "--receiver-netns", f"{tag}r",
               "--sender-addr", SENDER_ADDR, "--receiver-addr", RECEIVER_ADDR, "--seed", str(seed),
               "--realtime-priority", REALTIME_PRIORITY, *options]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stderr is not None
        line = process.stdout.readline()
        if not line or json.loads(line).get("event") != "ready":
            raise RuntimeError(f"ccsweep-link did not start: {line!r} {process.stderr.read()}")
        yield process
    finally:
        stop(process)


def summary(process: subprocess.Popen) -> dict[str, Any]:
    """The stopped emulator's summary line."""
    assert process.stdout is not None
    lines = [json.loads(line) for line in process.stdout.read().splitlines() if '"summary"' in line]
    return lines[0] if lines else {}


def in_netns(netns: str, *argv: str) -> list[str]:
    return ["ip", "netns", "exec", netns, *argv]


def probe_run(tag: str, row: Row, workdir: Path) -> tuple[list[list[int]], int]:
    """Probes across the running link: what arrived (traffic.py's records) and how many were sent."""
    out = workdir / "probes.json"
    python = [sys.executable, "-m", "benchmarks.effects.traffic"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    receiver = subprocess.Popen(in_netns(f"{tag}r", *python, "receive", "--port", str(PORT),
                                         "--seconds", str(row.seconds + row.drain_s + 0.5), "--out", str(out)),
                                cwd=REPO, env=env)
    try:
        time.sleep(0.5)
        sent = subprocess.run(in_netns(f"{tag}s", *python, "send", "--to", RECEIVER_ADDR, "--port", str(PORT),
                                       "--rate-pps", f"{row.rate_pps:.3f}", "--seconds", str(row.seconds),
                                       *row.traffic),
                              cwd=REPO, env=env, capture_output=True, text=True, check=True, timeout=row.seconds + 30)
        receiver.wait(timeout=row.seconds + row.drain_s + 30)
    finally:
        stop(receiver)
    return json.loads(out.read_text())["probes"], json.loads(sent.stdout)["probes_sent"]


def tcp_goodput_mbps(tag: str) -> float:
    """One CUBIC flow's goodput at the receiver (iperf3's sum_received), TCP_SECONDS long."""
    server = subprocess.Popen(in_netns(f"{tag}r", "iperf3", "-s", "-1", "-B", RECEIVER_ADDR),
                              stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        client = subprocess.run(in_netns(f"{tag}s", "iperf3", "-c", RECEIVER_ADDR, "-t", str(TCP_SECONDS),
                                         "-C", "cubic", "-J"),
                                capture_output=True, text=True, check=True, timeout=TCP_SECONDS + 30)
        server.wait(timeout=10)
    finally:
        stop(server)
    return float(json.loads(client.stdout)["end"]["sum_received"]["bits_per_second"]) / 1e6


def tcp_rows() -> list[tuple[str, list[str], float]]:
    """(name, uplink loss options, loss events per packet Mathis is given) of the TCP row: a burst
    of consecutive losses costs one window reduction, so Gilbert-Elliott's events are its bursts."""
    p, r = gilbert(TCP_LOSS, GE_BURST)
    return [(f"CUBIC, Gilbert-Elliott {TCP_LOSS:.0%}, bursts of mean 3",
             ["--uplink-gilbert-elliott", f"{p:.6g}", f"{r:.6g}", "1", "0"], TCP_LOSS / GE_BURST),
            (f"CUBIC, Bernoulli {TCP_LOSS:.0%}", ["--uplink-loss", str(TCP_LOSS)], TCP_LOSS)]


def described(row: Row) -> str:
    """A row's link options as runs.csv records them, a delay trace by its steps (not its file)."""
    steps = ", ".join(f"{at_ms} ms: {delay_ms} ms" for at_ms, delay_ms in row.delay_trace)
    return " ".join(row.link) + (f" --uplink-delay-trace [{steps}]" if steps else "")


def counters(line: dict[str, Any]) -> dict[str, Any]:
    """The uplink counters a row's statistics can be checked against."""
    uplink = line.get("uplink", {})
    keys = ("in_packets", "out_packets", "drops_loss", "drops_policer", "drops_queue", "marks_step")
    return {key: uplink.get(key) for key in keys} | {"lateness_p99_us": line.get("lateness_us", {}).get("p99")}


def run_rep(rep: int, seed: int, stats: list[dict[str, Any]], runs: list[dict[str, Any]]) -> None:
    """Every row once, with this repetition's seed."""
    floor: list[int] = []
    for index, row in enumerate(rows()):
        tag = f"ccth{os.getpid() % 10000}x{rep}x{index}"
        with tempfile.TemporaryDirectory() as tmp:
            options = list(row.link)
            if row.delay_trace:
                trace = Path(tmp) / "delay.trace"
                trace.write_text("".join(f"{at_ms} {delay_ms}\n" for at_ms, delay_ms in row.delay_trace))
                options += ["--uplink-delay-trace", str(trace)]
            with running_link(tag, options, seed) as link:
                probes, sent = probe_run(tag, row, Path(tmp))
        if row.floor:
            floor = measures.added_delays_ns(probes, PATH_DELAY_NS, service_ns(PROBE_IP_BYTES, FAST_BPS))
        found = row.analyse(probes, sent, seed, floor)
        runs.append({"row": row.name, "rep": rep, "seed": seed, "options": described(row), "probes_sent": sent,
                     "probes_received": len(probes), **counters(summary(link))})
        stats += [{"row": row.name, "rep": rep, "seed": seed, **asdict(stat)} for stat in found]
        print(f"rep {rep} {row.name}: " + ", ".join(f"{s.statistic} {s.measured:.4g} ({s.expected:.4g})"
                                                   for s in found), flush=True)
    path = ["--uplink-rate", "50mbit", "--downlink-rate", "50mbit", "--uplink-delay", f"{TCP_RTT_S / 2 * 1000:g}ms",
            "--downlink-delay", f"{TCP_RTT_S / 2 * 1000:g}ms"]
    for index, (name, loss, events) in enumerate(tcp_rows()):
        tag = f"ccth{os.getpid() % 10000}x{rep}t{index}"
        with running_link(tag, [*path, *loss], seed) as link:
            goodput = tcp_goodput_mbps(tag)
        runs.append({"row": name, "rep": rep, "seed": seed, "options": " ".join([*path, *loss]), "probes_sent": None,
                     "probes_received": None, **counters(summary(link))})
        stats.append({"row": name, "rep": rep, "seed": seed, "statistic": "goodput", "unit": "Mbit/s",
                      "measured": goodput, "expected": measures.mathis_mbps(TCP_MSS, TCP_RTT_S, events), "sigma": None})
        print(f"rep {rep} {name}: goodput {goodput:.3g} Mbit/s", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3, help="repetitions of every row, each with its own seed, 1 to 20")
    parser.add_argument("--out", type=Path, required=True, help="folder for stats.csv, runs.csv and command.txt")
    args = parser.parse_args(argv)
    if not 1 <= args.reps <= 20:
        parser.error(f"--reps: {args.reps} is outside 1 to 20")
    if os.geteuid() != 0:
        sys.exit("run as root (network namespaces and TUN devices)")
    args.out.mkdir(parents=True, exist_ok=True)
    stats: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    for rep in range(1, args.reps + 1):
        run_rep(rep, rep, stats, runs)
    write_csv(args.out / "stats.csv", stats)
    write_csv(args.out / "runs.csv", runs)
    machine = f"{os.cpu_count()} CPUs ({cpu_model()}), Linux {platform.release()}"
    (args.out / "command.txt").write_text(f"python -m benchmarks.effects.theory --reps {args.reps} --out {args.out}\n"
                                          f"machine: {machine}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
