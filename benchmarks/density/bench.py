"""Do cells run side by side measure what they measure alone? The quick preset both ways.

Run as root (`make bench-density`). `ccsweep run quick` runs the preset's cells once as a user
runs them (admission decides how many at once) and then `--reps` times with `--jobs 1`, each run
in its own fresh store (a store never runs a stored cell again). Per cell it prints the goodput of
the concurrent run and of each run alone, the spread of the alone runs (min-max and the 95%
prediction interval of one more run), and whether the concurrent value lies within it; then
the largest difference, the wall time of each run, the attempts re-run because their emulator
ran late (each kept under cells/<id>/late/ in the store), and how many cells ran at once at most
(from the stored records' start and finish times, late attempts included).

Goodput is the figure's number: all application bytes over the flow time. `--quick` runs a
two-cell spec of short flows instead, to check the bench works (not a measurement).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TODAY = datetime.now(UTC).strftime("%Y-%m-%d")
#: Two-sided 95% quantiles of Student's t by degrees of freedom.
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571}
QUICK_SPEC = """name: density-check
experiments:
  - name: density-check
    cc: [cubic, bbr]
    loss_percent: [0.1]
    rtt_ms: [20]
    bandwidth_mbps: [100]
    duration_s: 4
    warmup_s: 1
"""


@dataclass
class Record:
    """A stored record of one cell attempt, counted or not."""

    cell: str  # short label: algorithm and loss
    status: str
    goodput_mbps: float | None
    started: float  # epoch seconds
    finished: float
    lateness_p99_us: float | None


@dataclass
class Mode:
    """One `ccsweep run` into its own store."""

    name: str
    wall_s: float
    exit_code: int
    counted: dict[str, Record]  # label -> the cell's counted result
    late_attempts: list[Record]

    @property
    def max_at_once(self) -> int:
        """Most records whose run overlapped in time (every attempt, counted or late)."""
        spans = [(r.started, r.finished) for r in [*self.counted.values(), *self.late_attempts]]
        events = sorted([(s, 1) for s, _ in spans] + [(f, -1) for _, f in spans])
        at_once = peak = 0
        for _, step in events:
            at_once += step
            peak = max(peak, at_once)
        return peak


def epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def label_of(params: dict[str, object]) -> str:
    flows = params["flows"]
    assert isinstance(flows, list)
    uplink = params["uplink"]
    assert isinstance(uplink, dict)
    return f"{flows[0]['cc']} loss {float(uplink['loss']) * 100:g}%"


def read_record(path: Path) -> Record:
    data = json.loads(path.read_text())
    check = ((data.get("link") or {}).get("selfcheck") or {})
    return Record(cell=label_of(data["cell"]["params"]), status=data["status"], goodput_mbps=data.get("goodput_mbps"),
                  started=epoch(data["started_at"]), finished=epoch(data["finished_at"]),
                  lateness_p99_us=check.get("lateness_p99_us"))


def run_mode(name: str, spec: str, store: Path, extra: list[str]) -> Mode:
    """`ccsweep run SPEC --store STORE [extra]`, its output passed through, then its store read."""
    ccsweep = str(Path(sys.executable).with_name("ccsweep"))
    argv = [ccsweep, "run", spec, "--store", str(store), "--no-figures", *extra]
    print(f"\n== {name}: {' '.join(argv[1:])}  (load {os.getloadavg()[0]:.2f})", flush=True)
    started = time.monotonic()
    code = subprocess.run(argv, check=False).returncode
    wall = time.monotonic() - started
    counted = {r.cell: r for r in map(read_record, sorted(store.glob("cells/*/result.json")))}
    late = [read_record(p) for p in sorted(store.glob("cells/*/late/*.json"))]
    return Mode(name, wall, code, counted, late)


def spread(values: list[float]) -> tuple[float, float, float, float]:
    """(mean, min, max, half-width of the 95% prediction interval of one more run)."""
    n = len(values)
    sd = statistics.stdev(values) if n > 1 else 0.0
    half = T_975[n - 1] * sd * math.sqrt(1 + 1 / n) if n > 1 else 0.0
    return statistics.fmean(values), min(values), max(values), half


def report(concurrent: Mode, alone: list[Mode], spec_name: str, load: tuple[float, float], note: str) -> str:
    reps = len(alone)
    lines = [f"# Density: the {spec_name} preset at the default concurrency and alone, {TODAY}", "",
             f"**Machine.** {os.cpu_count()}-vCPU KVM guest (Firecracker), Linux {platform.release()}, "
             f"running as {'root' if os.geteuid() == 0 else 'a user'}. Load average (1 min) before "
             f"{load[0]:.2f}, after {load[1]:.2f}. {note}".rstrip(), "",
             f"**How.** `make bench-density` (benchmarks/density/bench.py): `ccsweep run {spec_name}` with the "
             f"default admission, then {reps} times with `--jobs 1`, each into a fresh store. Goodput as in the "
             "figure (application bytes over the flow time), in Mbit/s. 'band' is the 95% prediction interval "
             f"of one more alone run (mean +- t * sd * sqrt(1 + 1/{reps})).", "",
             "| cell | concurrent | " + " | ".join(f"alone {i + 1}" for i in range(reps))
             + " | alone mean | alone min-max | band +- | concurrent - mean | within band | within min-max |",
             "|---" * (8 + reps) + "|"]
    worst: tuple[float, str, bool] = (0.0, "", True)
    outside = compared = 0
    for label in sorted(concurrent.counted):
        values = [m.counted[label].goodput_mbps for m in alone if label in m.counted]
        alone_values = [v for v in values if v is not None]
        value = concurrent.counted[label].goodput_mbps
        if value is None or len(alone_values) < 2:
            lines.append(f"| {label} | {value} | " + " | ".join(map(str, values)) + " | | | | | | |")
            continue
        mean, low, high, half = spread(alone_values)
        diff = value - mean
        within = abs(diff) <= half
        compared, outside = compared + 1, outside + (not within)
        if abs(diff) >= abs(worst[0]):
            worst = (diff, label, within)
        lines.append(f"| {label} | {value:.2f} | " + " | ".join(f"{v:.2f}" for v in alone_values)
                     + f" | {mean:.2f} | {low:.2f}-{high:.2f} | {half:.2f} | {diff:+.2f} ({diff / mean * 100:+.1f}%) "
                     f"| {'yes' if within else 'NO'} | {'yes' if low <= value <= high else 'no'} |")
    lines += ["", f"**Largest difference**: {worst[1]}, concurrent - alone mean = {worst[0]:+.2f} Mbit/s, "
              f"{'within' if worst[2] else 'OUTSIDE'} the run-to-run band; {outside} of {compared} cells outside "
              "their band.", "",
              "| run | wall time | exit | counted on time | counted late | attempts re-run (late/) | "
              "most cells at once | lateness p99 of counted results (us) |", "|---|---|---|---|---|---|---|---|"]
    for mode in [concurrent, *alone]:
        on_time = sum(r.status == "ok" for r in mode.counted.values())
        late = sum(r.status == "late" for r in mode.counted.values())
        p99 = sorted(r.lateness_p99_us for r in mode.counted.values() if r.lateness_p99_us is not None)
        p99_text = f"{p99[0]:.0f}-{p99[-1]:.0f}" if p99 else ""
        lines.append(f"| {mode.name} | {mode.wall_s:.0f} s | {mode.exit_code} | {on_time} | {late} | "
                     f"{len(mode.late_attempts)} | {mode.max_at_once} | {p99_text} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="quick", help="preset or spec file (default: quick)")
    parser.add_argument("--reps", type=int, default=3, help="runs alone (2 to 5)")
    parser.add_argument("--quick", action="store_true", help="a two-cell spec of 4 s flows: checks the bench works")
    parser.add_argument("--out", type=Path, help="also write the table here (Markdown)")
    options = parser.parse_args()
    if not 2 <= options.reps <= 5:
        parser.error("--reps: give 2 to 5 (the spread needs at least two runs)")
    if os.geteuid() != 0:
        sys.exit("run as root (network namespaces and TUN devices)")
    with tempfile.TemporaryDirectory(prefix="ccsweep-density-") as tmp:
        spec = options.spec
        if options.quick:
            spec = str(Path(tmp) / "density-check.yaml")
            Path(spec).write_text(QUICK_SPEC)
        before = os.getloadavg()[0]
        concurrent = run_mode("concurrent", spec, Path(tmp) / "concurrent", [])
        alone = [run_mode(f"alone {i + 1}", spec, Path(tmp) / f"alone-{i + 1}", ["--jobs", "1"])
                 for i in range(options.reps)]
        text = report(concurrent, alone, Path(spec).stem, (before, os.getloadavg()[0]),
                      os.environ.get("BENCH_NOTE", ""))
    print("\n" + text)
    if options.out:
        options.out.parent.mkdir(parents=True, exist_ok=True)
        options.out.write_text(text)
        print(f"written: {options.out}")


if __name__ == "__main__":
    main()
