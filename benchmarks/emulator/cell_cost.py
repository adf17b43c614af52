"""What one real cell costs, split by part, with code or emulator variants side by side in one run.

Run as root. Each repetition runs every variant once, in turn (A, B, A, B, ...): one `ccsweep
cell` process on the density bench's cell (BBR, 100 Mbit/s, 100 ms RTT, 0.001% loss, one BDP of
droptail queue; `--seconds` of flow), not pinned, as the executor runs it. A sampler reads
/proc every 0.2 s and sorts the CPU time of the cell's process tree into

- the emulator (ccsweep-link: its packet loop, and the receiving and ACK-clocked sending TCP that
  its reads and writes run in its context),
- the sender (`ccsweep.runner.flow sender`: the application's writes, with the TCP transmit path
  they run, and tcp_info sampling every 100 ms),
- the receiver (`ccsweep.runner.flow receiver`: its reads and byte counts),
- the runner (`ccsweep cell` itself and the `ip`/`sysctl` commands it runs),

and over the same wall time the machine's softirq time (/proc/stat: network work not charged to
any process, such as timers that fire while the core idles; other work on the machine adds to it).
A variant names the Python source tree the cell runs (PYTHONPATH: a checkout's `src`) and the
emulator binary (CCSWEEP_LINK), so a change to either is compared with what came before:

    git archive main src | tar -x -C /tmp/before
    python -m benchmarks.emulator.cell_cost --variant before=/tmp/before/src:BIN --variant after=src:BIN
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

from ccsweep.runner.mahimahi_run import ShellsCpu
from support.density import density_cell

PARTS = ("emulator", "sender", "receiver", "runner")


@dataclass
class Variant:
    label: str
    source: Path
    binary: Path
    runs: list[dict[str, float]] = field(default_factory=list)


def parse_variant(text: str) -> Variant:
    """LABEL=SRC_DIR:EMULATOR_BINARY."""
    label, _, rest = text.partition("=")
    source, _, binary = rest.partition(":")
    if not label or not (Path(source) / "ccsweep").is_dir() or not Path(binary).is_file():
        raise argparse.ArgumentTypeError(f"--variant {text!r}: expected LABEL=SRC_DIR:EMULATOR_BINARY")
    return Variant(label, Path(source).resolve(), Path(binary).resolve())


def part_of(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "runner"
    if b"--sender-netns" in argv:  # the emulator, whatever its file is called
        return "emulator"
    if b"ccsweep.runner.flow" in argv:
        return "sender" if b"sender" in argv else "receiver"
    return "runner"


class TreeCpu(ShellsCpu):
    """CPU seconds of each part of a process tree: the runner's /proc sampler of Mahimahi's shells,
    counting every process under the root, each filed under its part when first seen."""

    INTERVAL_S = 0.2

    def __init__(self, root: int) -> None:
        self.parts: dict[int, str] = {}
        super().__init__(root, names=("",))

    def _sample(self) -> float:
        seconds = super()._sample()
        for pid in self._ticks.keys() - self.parts.keys():
            self.parts[pid] = part_of(pid)
        return seconds

    def by_part(self) -> dict[str, float]:
        self.stop()
        hz = os.sysconf("SC_CLK_TCK")
        return {part: sum(t for pid, t in self._ticks.items() if self.parts.get(pid) == part) / hz for part in PARTS}


def softirq_jiffies() -> int:
    return int(Path("/proc/stat").read_text().splitlines()[0].split()[7])


def one_cell(variant: Variant, seconds: float, scratch: Path) -> dict[str, float]:
    cell = density_cell(seconds)
    path = scratch / "cell.json"
    path.write_text(json.dumps(cell))
    env = {**os.environ, "PYTHONPATH": str(variant.source), "CCSWEEP_LINK": str(variant.binary)}
    softirq0, started = softirq_jiffies(), time.monotonic()
    process = subprocess.Popen([sys.executable, "-m", "ccsweep", "cell", "--cell", f"@{path}", "--store",
                                str(scratch / f"store-{time.monotonic_ns()}")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    sampler = TreeCpu(process.pid)
    out, err = process.communicate()
    parts = sampler.by_part()
    wall = time.monotonic() - started
    softirq = (softirq_jiffies() - softirq0) / os.sysconf("SC_CLK_TCK")
    lines = [line for line in out.splitlines() if line.startswith("{")]
    report = json.loads(lines[-1]) if lines else {}
    if report.get("status") not in ("ok", "late"):
        raise SystemExit(f"{variant.label}: cell {report.get('status', 'failed')}: {report.get('error')} "
                         f"{err.strip().splitlines()[-1:] if err.strip() else ''}")
    run = {part: cpu / wall for part, cpu in parts.items()}
    run.update(total=sum(parts.values()) / wall, softirq=softirq / wall, wall=wall,
               goodput=float(report.get("goodput_mbps") or 0), p99=float(report.get("lateness_p99_us") or 0),
               late=float(report.get("status") == "late"))
    return run


def spread(values: list[float], fmt: str) -> str:
    return f"{format(statistics.median(values), fmt)} ({format(min(values), fmt)}-{format(max(values), fmt)})"


def report(variants: list[Variant]) -> str:
    columns = [("cell in total", "total", ".3f"), *((part, part, ".3f") for part in PARTS),
               ("machine softirq", "softirq", ".3f"), ("goodput (Mbit/s)", "goodput", ".1f"),
               ("lateness p99 (us)", "p99", ".0f")]
    lines = ["| variant | reps | " + " | ".join(name for name, _, _ in columns) + " |",
             "|---|---|" + "---|" * len(columns)]
    for variant in variants:
        cells = [spread([run[key] for run in variant.runs], fmt) for _, key, fmt in columns]
        late = sum(int(run["late"]) for run in variant.runs)
        lines.append(f"| {variant.label} | {len(variant.runs)}{f' ({late} late)' if late else ''} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", type=parse_variant, action="append", required=True,
                        help="LABEL=SRC_DIR:EMULATOR_BINARY; repeat to compare, run in turn")
    parser.add_argument("--seconds", type=float, default=15.0, help="flow time of each cell")
    parser.add_argument("--reps", type=int, default=5)
    options = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root (network namespaces and TUN devices)")
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    with tempfile.TemporaryDirectory(prefix="ccsweep-cell-cost-") as scratch:
        for rep in range(options.reps):
            for variant in options.variant:
                run = one_cell(variant, options.seconds, Path(scratch))
                variant.runs.append(run)
                print(f"rep {rep + 1} {variant.label}: " + ", ".join(f"{k} {v:.3f}" for k, v in run.items()),
                      flush=True)
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("\nCores per cell, median (range) over the repetitions:\n")
    print(report(options.variant))


if __name__ == "__main__":
    main()
