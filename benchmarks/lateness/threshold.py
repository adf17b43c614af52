"""How much emulator lateness moves a cell's result: the measurement behind lateness_threshold_us.

Run as root (`make bench-threshold`). Real cells (kernel TCP, two network namespaces, ccsweep-link),
one at a time, through the library's `run_cell`, so no executor re-runs a late one. For each
algorithm x RTT x loss, the same cell runs `--reps` times as it is (the run-to-run spread) and
once per injected lateness (ccsweep-link's `--inject-lateness`). Lateness is what the emulator's
self-check measured (p99 of each packet's write time minus its due time), not the injected
parameter: a held packet holds those behind it, so the measured tail is wider than the draw.

A run's goodput (steady, after the warm-up) "moved" when it falls outside the 95% prediction
interval of one more run drawn like the undisturbed ones (mean +- t * sd * sqrt(1 + 1/n)): the
question is whether a late run could pass for an on-time one, and a single run is what a cell
has. Mean RTT is reported too, as its change in percent of the base RTT.

Writes the raw runs as JSON (re-analysed without re-running: `--from-json`), a results file in
Markdown and a figure. `--quick` runs a tiny grid to check that it works (not a measurement).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from support.stored_runs import measured_or_stored

REPO = Path(__file__).resolve().parents[2]

TODAY = datetime.now(UTC).strftime("%Y-%m-%d")
RESULTS = REPO / "benchmarks" / "results"
FIGURE = REPO / "docs" / "img" / "lateness-threshold.png"
#: Injected lateness, mildest first. The share p is small so that, as on a busy machine, most
#: packets are on time and a few stalls (with the packets queued behind them) make the tail.
LEVELS = ("exp:100us,p=0.02", "exp:300us,p=0.02", "exp:1ms,p=0.02", "exp:3ms,p=0.02")
#: Two-sided 95% quantiles of Student's t by degrees of freedom (no SciPy for five numbers).
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
INJECT_ENV = "CCSWEEP_DEBUG_INJECT_LATENESS"


@dataclass
class Run:
    """One cell run: its configuration, the lateness the emulator measured, and what TCP got."""

    cc: str
    rtt_ms: float
    loss_percent: float
    inject: str | None  # None: an undisturbed run
    status: str
    goodput_mbps: float | None
    rtt_mean_ms: float | None
    retransmits: int | None
    lateness_p50_us: float | None
    lateness_p99_us: float | None
    lateness_max_us: float | None
    sched: str | None
    load_1min: float
    error: str | None = None

    @property
    def key(self) -> tuple[str, float, float]:
        return (self.cc, self.rtt_ms, self.loss_percent)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ccs", default="bbr,cubic")
    parser.add_argument("--rtts", default="10,50,100", help="base RTTs, ms")
    parser.add_argument("--losses", default="0,1", help="loss rates, percent")
    parser.add_argument("--rate", type=float, default=100.0, help="bottleneck, Mbit/s")
    parser.add_argument("--levels", default=";".join(LEVELS), help="--inject-lateness values, ';'-separated")
    parser.add_argument("--reps", type=int, default=3, help="undisturbed runs of each cell (2 to 10)")
    parser.add_argument("--duration", type=float, default=15.0, help="flow seconds")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds left out of the goodput")
    parser.add_argument("--quick", action="store_true", help="a tiny grid of short flows: checks the bench works")
    parser.add_argument("--from-json", type=Path, help="analyse these stored runs instead of running cells")
    parser.add_argument("--out", type=Path, help="results file (default benchmarks/results/DATE-lateness-threshold.md)")
    parser.add_argument("--figure", type=Path, default=FIGURE)
    options = parser.parse_args()
    if options.quick:
        options.ccs, options.rtts, options.losses = "bbr", "10", "0"
        options.levels, options.reps, options.duration, options.warmup = "exp:1ms,p=0.02", 2, 4.0, 1.0
        options.out = options.out or Path(tempfile.gettempdir()) / "lateness-threshold-quick.md"
        options.figure = Path(tempfile.gettempdir()) / "lateness-threshold-quick.png"
    if not 2 <= options.reps <= 10:
        parser.error("--reps: give 2 to 10 (the spread needs at least two runs)")
    options.out = options.out or RESULTS / f"{TODAY}-lateness-threshold.md"
    return options


def cells(options: argparse.Namespace) -> list[Any]:
    """The cells of the grid, from a generated spec (the same path a user's spec takes)."""
    from ccsweep.expand import expand
    from ccsweep.specload import parse_spec

    spec = parse_spec({"name": "lateness-threshold", "experiments": [{
        "name": "threshold", "cc": options.ccs.split(","),
        "rtt_ms": [float(r) for r in options.rtts.split(",")],
        "loss_percent": [float(p) for p in options.losses.split(",")],
        "bandwidth_mbps": [options.rate],
        "queue": [{"kind": "droptail", "bdp": 1, "min_bytes": 30000}],
        "duration_s": options.duration, "warmup_s": options.warmup}]})
    return expand(spec)


def run_one(cell: Any, inject: str | None, scratch: Path) -> Run:
    from ccsweep.runner import run_cell

    os.environ.pop("CCSWEEP_DEBUG_INJECT_ATTEMPTS", None)
    if inject:
        os.environ[INJECT_ENV] = inject
    else:
        os.environ.pop(INJECT_ENV, None)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(dir=scratch) as workdir:
        result = run_cell(cell, Path(workdir)).result
    p = cell.params
    check = result.link.selfcheck if result.link else None
    flow = result.flows[0] if result.flows else None
    return Run(cc=p.flows[0].cc, rtt_ms=p.rtt_ms, loss_percent=round(p.uplink.loss * 100, 6), inject=inject,
               status=result.status, goodput_mbps=result.goodput_steady_mbps,
               rtt_mean_ms=flow.rtt_mean_ms if flow else None, retransmits=flow.retransmits if flow else None,
               lateness_p50_us=check.lateness_p50_us if check else None,
               lateness_p99_us=check.lateness_p99_us if check else None,
               lateness_max_us=check.lateness_max_us if check else None,
               sched=check.sched if check else None, load_1min=round(load, 2), error=result.error)


def schedule(reps: int, levels: list[str]) -> list[str | None]:
    """Undisturbed runs spread between the injected ones, so a drift of the machine shows in the spread."""
    order: list[str | None] = [None]
    gaps = max(1, reps - 1)
    for i, level in enumerate(levels):
        order.append(level)
        if order.count(None) < reps and (i + 1) % math.ceil(len(levels) / gaps) == 0:
            order.append(None)
    order += [None] * (reps - order.count(None))
    return order


def measure(options: argparse.Namespace) -> list[Run]:
    levels = [lvl for lvl in options.levels.split(";") if lvl]
    grid = cells(options)
    order = schedule(options.reps, levels)
    runs: list[Run] = []
    total = len(grid) * len(order)
    scratch = Path(tempfile.mkdtemp(prefix="ccsweep-threshold-"))
    started = time.monotonic()
    for cell in grid:
        for inject in order:
            run = run_one(cell, inject, scratch)
            runs.append(run)
            print(f"[{len(runs)}/{total} {time.monotonic() - started:5.0f}s] {run.cc} {run.rtt_ms:g} ms "
                  f"{run.loss_percent:g}% {run.inject or 'none':>18}: {run.status:6} "
                  f"goodput {run.goodput_mbps} Mbit/s, rtt {run.rtt_mean_ms} ms, "
                  f"p99 {run.lateness_p99_us} us, load {run.load_1min}", flush=True)
    scratch.rmdir()
    return runs


@dataclass
class Band:
    """The undisturbed runs of one cell: mean and the half-width of a 95% prediction interval."""

    n: int
    mean: float
    half: float
    low: float
    high: float

    @classmethod
    def of(cls, values: list[float]) -> Band:
        n = len(values)
        sd = statistics.stdev(values) if n > 1 else 0.0
        return cls(n, statistics.fmean(values), T_975[n - 1] * sd * math.sqrt(1 + 1 / n), min(values), max(values))

    def change(self, value: float) -> Change:
        return Change((value - self.mean) / self.mean * 100, self.half / self.mean * 100,
                      abs(value - self.mean) > self.half)


@dataclass
class Change:
    """One metric of an injected run against its cell's band, in percent of the undisturbed mean."""

    pct: float
    band_pct: float
    moved: bool


#: What a run is judged on: steady goodput, and the flow's mean RTT (tcp_info samples).
METRICS = {"goodput": "goodput_mbps", "mean RTT": "rtt_mean_ms"}
Key = tuple[str, float, float]


@dataclass
class Point:
    """An injected run: the change of each metric against its band."""

    run: Run
    changes: dict[str, Change]

    @property
    def moved(self) -> bool:
        return any(c.moved for c in self.changes.values())


def analyse(runs: list[Run]) -> tuple[dict[Key, dict[str, Band]], list[Point]]:
    by_key: dict[Key, list[Run]] = defaultdict(list)
    for run in runs:
        if run.goodput_mbps is not None and run.rtt_mean_ms is not None:
            by_key[run.key].append(run)
    bands: dict[Key, dict[str, Band]] = {}
    points: list[Point] = []
    for key, group in by_key.items():
        base = [r for r in group if r.inject is None]
        if len(base) < 2:
            continue
        bands[key] = {m: Band.of([getattr(r, field) for r in base]) for m, field in METRICS.items()}
        points += [Point(run, {m: bands[key][m].change(getattr(run, field)) for m, field in METRICS.items()})
                   for run in group if run.inject is not None]
    return bands, points


@dataclass
class Verdict:
    """One RTT: the largest p99 lateness (undisturbed runs included) below which no run had moved,
    and per metric the smallest p99 at which a run had (None: none did)."""

    held_us: float
    first_moved_us: dict[str, float | None]


def verdicts(runs: list[Run], points: list[Point]) -> dict[float, Verdict]:
    out: dict[float, Verdict] = {}
    for rtt in sorted({r.rtt_ms for r in runs}):
        mine = [p for p in points if p.run.rtt_ms == rtt]
        first = {m: min((p99(p.run) for p in mine if p.changes[m].moved), default=None) for m in METRICS}
        any_first = min((v for v in first.values() if v is not None), default=math.inf)
        held = [p99(r) for r in runs if r.rtt_ms == rtt and r.inject is None]
        held += [p99(p.run) for p in mine if not p.moved and p99(p.run) < any_first]
        out[rtt] = Verdict(max(held), first)
    return out


def threshold_us(rtt_ms: float) -> float:
    """The cell runner's rule in force (linkrules.lateness_threshold_us), drawn for comparison."""
    from ccsweep.linkrules import LATENESS_CEILING_US, LATENESS_FLOOR_US, LATENESS_RTT_SHARE

    return min(LATENESS_CEILING_US, max(LATENESS_FLOOR_US, LATENESS_RTT_SHARE * rtt_ms * 1000))


def p99(run: Run) -> float:
    return run.lateness_p99_us or 0.0


def figure(bands: dict[Key, dict[str, Band]], points: list[Point], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    rtts = sorted({k[1] for k in bands})
    losses = sorted({k[2] for k in bands})
    rows = [(metric, loss) for metric in METRICS for loss in losses]
    colours = {"bbr": "tab:blue", "cubic": "tab:orange"}
    fig, axes = plt.subplots(len(rows), len(rtts), figsize=(4.2 * len(rtts), 3.0 * len(rows)),
                             sharex=True, squeeze=False)
    for row, (metric, loss) in enumerate(rows):
        for col, rtt in enumerate(rtts):
            ax = axes[row][col]
            for key, band in sorted(bands.items()):
                if key[1:] != (rtt, loss):
                    continue
                colour = colours.get(key[0], "tab:grey")
                half = band[metric].half / band[metric].mean * 100
                ax.axhspan(-half, half, color=colour, alpha=0.15, lw=0)
                mine = sorted((p for p in points if p.run.key == key), key=lambda p: p99(p.run))
                ax.plot([p99(p.run) for p in mine], [p.changes[metric].pct for p in mine], "o-", color=colour,
                        label=f"{key[0]} (band: 95% of undisturbed runs)")
                moved = [p for p in mine if p.changes[metric].moved]
                ax.plot([p99(p.run) for p in moved], [p.changes[metric].pct for p in moved], "x", color="black",
                        ms=9)
            ax.axhline(0, color="black", lw=0.5)
            ax.axvline(threshold_us(rtt), color="grey", ls="--", lw=1)
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_title(f"{metric}: RTT {rtt:g} ms, loss {loss:g}%", fontsize=10)
            if row == len(rows) - 1:
                ax.set_xlabel("measured lateness p99 (us)")
            if col == 0:
                ax.set_ylabel(f"{metric} change (%)")
            ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=8, loc="lower left")
    fig.suptitle("Goodput and mean RTT against emulator lateness (x: outside the band; dashed: the threshold)",
                 fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def machine() -> str:
    cpus = os.cpu_count()
    return (f"{cpus}-vCPU KVM guest (Firecracker), Linux {platform.release()}, Python {platform.python_version()}, "
            f"running as {'root' if os.geteuid() == 0 else 'a user'}")


def report(options: argparse.Namespace, runs: list[Run], meta: dict[str, Any]) -> str:
    bands, points = analyse(runs)
    lines = [f"# Lateness threshold: how much emulator lateness moves goodput, {meta['date']}", "",
             f"**Machine.** {meta['machine']}. Load average (1 min) before the runs {meta['load_before']}, "
             f"after {meta['load_after']}; per run in the JSON. {meta.get('note', '')}".rstrip(), "",
             f"**How.** `{meta['command']}`: {meta['grid']}. Wall time {meta['wall_s']:.0f} s. Raw runs: "
             f"[{Path(meta['json']).name}]({Path(meta['json']).name}). 'band' is the 95% prediction interval of "
             "one more undisturbed run (mean +- t * sd * sqrt(1 + 1/n)); a run 'moved' when it lies outside.", "",
             "## Undisturbed runs (the spread)", "",
             "| cc | RTT ms | loss % | n | goodput mean | min-max | band +- | mean RTT ms | min-max | band +- | "
             "lateness p99 (us) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for key, band in sorted(bands.items()):
        g, t = band["goodput"], band["mean RTT"]
        p99s = ", ".join(f"{p99(r):.0f}" for r in runs if r.key == key and r.inject is None)
        lines.append(f"| {key[0]} | {key[1]:g} | {key[2]:g} | {g.n} | {g.mean:.2f} | {g.low:.2f}-{g.high:.2f} | "
                     f"{g.half:.2f} ({g.half / g.mean * 100:.1f}%) | {t.mean:.2f} | {t.low:.2f}-{t.high:.2f} | "
                     f"{t.half:.2f} ({t.half / t.mean * 100:.1f}%) | {p99s} |")
    lines += ["", "## Injected runs (bold: outside the band)", "",
              "| cc | RTT ms | loss % | injected | lateness p99 (us) | max (us) | goodput | change (band) | "
              "mean RTT ms | change (band) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for p in sorted(points, key=lambda p: (p.run.key, p99(p.run))):
        r = p.run
        lines.append(f"| {r.cc} | {r.rtt_ms:g} | {r.loss_percent:g} | `{r.inject}` | {p99(r):.0f} | "
                     f"{r.lateness_max_us or 0:.0f} | {r.goodput_mbps:.2f} | {mark(p.changes['goodput'])} | "
                     f"{r.rtt_mean_ms:.2f} | {mark(p.changes['mean RTT'])} |")
    failed = [r for r in runs if r.goodput_mbps is None or r.rtt_mean_ms is None]
    if failed:
        lines += ["", f"{len(failed)} run(s) failed and are left out: "
                  + "; ".join(f"{r.cc} {r.rtt_ms:g} ms {r.inject}: {r.error}" for r in failed)]
    lines += ["", "## Per RTT", "",
              "| RTT ms | largest p99 below which no run moved (us) | smallest p99 that moved goodput (us) | "
              "smallest p99 that moved mean RTT (us) |", "|---|---|---|---|"]
    for rtt, verdict in verdicts(runs, points).items():
        firsts = ["none" if v is None else f"{v:.0f}" for v in verdict.first_moved_us.values()]
        lines.append(f"| {rtt:g} | {verdict.held_us:.0f} | " + " | ".join(firsts) + " |")
    lines += ["", f"![goodput and mean RTT change against lateness]"
              f"({os.path.relpath(options.figure, options.out.parent)})", ""]
    return "\n".join(lines)


def mark(change: Change) -> str:
    text = f"{change.pct:+.1f}% (+-{change.band_pct:.1f}%)"
    return f"**{text}**" if change.moved else text


def main() -> None:
    options = arguments()
    grid = (f"{options.ccs} x RTT {options.rtts} ms x loss {options.losses}% at {options.rate:g} Mbit/s, "
            f"droptail 1 BDP; {options.duration:g} s flows, goodput after {options.warmup:g} s; "
            f"{options.reps} undisturbed runs per cell and one per injected lateness "
            f"({options.levels.replace(';', '; ')}); one cell at a time, emulator at its default real-time priority")
    runs, meta = measured_or_stored(options.from_json, options.out, Run, lambda: measure(options),
                                    "benchmarks/lateness/threshold.py", grid, machine())
    bands, points = analyse(runs)
    figure(bands, points, options.figure)
    options.out.write_text(report(options, runs, meta))
    print(options.out.read_text())
    print(f"results: {options.out}\nfigure: {options.figure}")


if __name__ == "__main__":
    main()
