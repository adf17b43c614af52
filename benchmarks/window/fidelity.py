"""Does the per-cell release window move a result? The Figure 8 grid with 100 us and with each cell's own.

Run as root (`make bench-window`). The figure8 preset's cells with loss from 0.001 to 5% (BBR and
CUBIC, 100 Mbit/s, 100 ms RTT, infinite queue), 3 repetitions each (seeds 1-3, as the preset's
repetitions would have them), time-scaled so the grid fits about 17 minutes (`--time-scale`,
default 0.2: 12 s flows). Each repetition of each cell runs twice, one after the other: with the
emulator's old fixed window (`CCSWEEP_LINK_RELEASE_WINDOW_US=100`) and with the cell's own
(`release_window_us`, 500 us at 100 ms); which arm goes first alternates, so a drift of the
machine falls on both. Cells run one at a time through the library's `run_cell` (no executor,
no re-run of a late one: a late run is reported as such).

The question is whether the window moves goodput (the figure's number: all application bytes
over the flow time) or the flow's mean RTT (tcp_info samples) by more than runs of the same cell
differ among themselves. Per cell and metric: Student's two-sample t-test with pooled variance,
two-sided at 5%: the arms' means differ ("moved") when |mean(new) - mean(old)| > t(0.975, 4) *
s_p * sqrt(2/3), with t = 2.776 for 3 + 3 runs. Twice the standard error (a z-test) would be a
12% test at 4 degrees of freedom; the t quantile is the 5% one. With 24 tests (12 cells x 2
metrics) and no effect at all, chance alone gives 3 or fewer "moved" with 97% probability
(Binomial(24, 0.05)); the check passes with at most that many (computed for the number of
tests made). The signs of the mean RTT changes are counted too, with a sign test: a window that
adds delay raises mean RTT in every saturated cell, by less than one window, which a cell's own
3 runs may not resolve but the grid as a whole can.

Writes the raw runs as JSON (`--from-json` re-analyses them) and a Markdown results file.
`--quick` runs two short cells once per arm to check the bench works (not a measurement).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from support.procstat import machine
from support.stored_runs import measured_or_stored

REPO = Path(__file__).resolve().parents[2]

TODAY = datetime.now(UTC).strftime("%Y-%m-%d")
RESULTS = REPO / "benchmarks" / "results"
WINDOW_ENV = "CCSWEEP_LINK_RELEASE_WINDOW_US"
OLD_WINDOW_US = 100
#: Two-sided 95% quantiles of Student's t by degrees of freedom.
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306}
#: (metric, field of Run) judged by the check.
METRICS = (("goodput", "goodput_mbps"), ("mean RTT", "rtt_mean_ms"))


def chance_allowance(tests: int, alpha: float = 0.05, confidence: float = 0.95) -> int:
    """Most "moved" results `tests` independent tests at `alpha` give by chance, with `confidence`
    probability (Binomial(tests, alpha)); 3 for 24 tests (97%)."""
    total = 0.0
    for k in range(tests + 1):
        total += math.comb(tests, k) * alpha**k * (1 - alpha) ** (tests - k)
        if total >= confidence:
            return k
    return tests


def sign_test_p(up: int, n: int) -> float:
    """Two-sided sign test: the chance of a split at least this uneven when up and down are equally likely."""
    extreme = max(up, n - up)
    return min(1.0, 2 * sum(math.comb(n, k) for k in range(extreme, n + 1)) / 2**n) if n else 1.0


@dataclass
class Run:
    cc: str
    loss_percent: float
    repetition: int
    arm: str  # "old" (fixed 100 us) or "new" (the cell's own window)
    window_us: float | None
    status: str
    goodput_mbps: float | None
    rtt_mean_ms: float | None
    min_rtt_ms: float | None
    retransmits: int | None
    lateness_p99_us: float | None
    threshold_us: float | None
    emulator_cpu_share: float | None
    load_1min: float
    wall_s: float
    error: str | None = None

    @property
    def key(self) -> tuple[str, float]:
        return (self.cc, self.loss_percent)


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-scale", type=float, default=0.2, help="flow time scale (figure8's 60 s x this)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions per cell and arm (2 to 5)")
    parser.add_argument("--max-loss", type=float, default=5.0, help="largest loss rate of the grid, percent")
    parser.add_argument("--quick", action="store_true", help="two short cells, once per arm: checks the bench works")
    parser.add_argument("--from-json", type=Path, help="analyse these stored runs instead of running cells")
    parser.add_argument("--out", type=Path, help="results file (default benchmarks/results/DATE-window-fidelity.md)")
    options = parser.parse_args()
    if options.quick:
        options.time_scale, options.reps, options.max_loss = 1 / 15, 2, 0.001
        options.out = options.out or Path(tempfile.gettempdir()) / "window-fidelity-quick.md"
    if not 2 <= options.reps <= 5:
        parser.error("--reps: give 2 to 5 (the spread needs at least two runs)")
    options.out = options.out or RESULTS / f"{TODAY}-window-fidelity.md"
    return options


def cells(options: argparse.Namespace) -> list[Any]:
    """The figure8 preset's cells up to --max-loss, with --reps repetitions, time-scaled."""
    import yaml

    from ccsweep.expand import expand
    from ccsweep.specload import parse_spec

    data = yaml.safe_load((REPO / "src" / "ccsweep" / "presets" / "figure8.yaml").read_text())
    (experiment,) = data["experiments"]
    experiment["loss_percent"] = [p for p in experiment["loss_percent"] if p <= options.max_loss]
    experiment["repetitions"] = options.reps
    data["time_scale"] = options.time_scale
    return expand(parse_spec(data))


def run_one(cell: Any, arm: str, scratch: Path) -> Run:
    from ccsweep.runner import run_cell

    if arm == "old":
        os.environ[WINDOW_ENV] = str(OLD_WINDOW_US)
    else:
        os.environ.pop(WINDOW_ENV, None)
    os.environ.pop("CCSWEEP_DEBUG_INJECT_LATENESS", None)
    load = os.getloadavg()[0]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=scratch) as workdir:
        result = run_cell(cell, Path(workdir)).result
    os.environ.pop(WINDOW_ENV, None)
    p = cell.params
    check = result.link.selfcheck if result.link else None
    flow = result.flows[0] if result.flows else None
    return Run(cc=p.flows[0].cc, loss_percent=round(p.uplink.loss * 100, 6), repetition=p.repetition, arm=arm,
               window_us=check.release_window_us if check else None, status=result.status,
               goodput_mbps=result.goodput_mbps, rtt_mean_ms=flow.rtt_mean_ms if flow else None,
               min_rtt_ms=flow.min_rtt_ms if flow else None, retransmits=flow.retransmits if flow else None,
               lateness_p99_us=check.lateness_p99_us if check else None,
               threshold_us=check.threshold_us if check else None,
               emulator_cpu_share=check.cpu_share if check else None, load_1min=round(load, 2),
               wall_s=round(time.monotonic() - started, 1), error=result.error)


def measure(options: argparse.Namespace) -> list[Run]:
    grid = cells(options)
    runs: list[Run] = []
    total = 2 * len(grid)
    scratch = Path(tempfile.mkdtemp(prefix="ccsweep-window-"))
    started = time.monotonic()
    for i, cell in enumerate(sorted(grid, key=lambda c: (c.params.repetition, c.params.flows[0].cc,
                                                         c.params.uplink.loss))):
        for arm in (("old", "new") if i % 2 == 0 else ("new", "old")):
            run = run_one(cell, arm, scratch)
            runs.append(run)
            print(f"[{len(runs)}/{total} {time.monotonic() - started:5.0f}s] {run.cc} {run.loss_percent:g}% "
                  f"rep {run.repetition} {arm} (window {run.window_us} us): {run.status}, goodput "
                  f"{run.goodput_mbps} Mbit/s, rtt {run.rtt_mean_ms} ms, p99 {run.lateness_p99_us} us, emulator "
                  f"cpu {run.emulator_cpu_share}, load {run.load_1min}", flush=True)
    scratch.rmdir()
    return runs


@dataclass
class Comparison:
    """One metric of one cell: both arms' runs and the two-sample t-test between them."""

    old: list[float]
    new: list[float]

    @property
    def diff(self) -> float:
        return statistics.fmean(self.new) - statistics.fmean(self.old)

    @property
    def bound(self) -> float:
        """t(0.975, n1 + n2 - 2) * pooled sd * sqrt(1/n1 + 1/n2): the largest |diff| chance explains."""
        n1, n2 = len(self.old), len(self.new)
        pooled = ((n1 - 1) * statistics.variance(self.old) + (n2 - 1) * statistics.variance(self.new)) / (n1 + n2 - 2)
        return T_975[n1 + n2 - 2] * math.sqrt(pooled) * math.sqrt(1 / n1 + 1 / n2)

    @property
    def moved(self) -> bool:
        return abs(self.diff) > self.bound


def compare(runs: list[Run]) -> dict[tuple[str, float], dict[str, Comparison]]:
    out: dict[tuple[str, float], dict[str, Comparison]] = {}
    for key in sorted({r.key for r in runs}):
        mine = [r for r in runs if r.key == key]
        row = {}
        for metric, field in METRICS:
            arms = {arm: [getattr(r, field) for r in mine if r.arm == arm and getattr(r, field) is not None]
                    for arm in ("old", "new")}
            if min(len(v) for v in arms.values()) >= 2:
                row[metric] = Comparison(arms["old"], arms["new"])
        out[key] = row
    return out


def _values(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def report(runs: list[Run], meta: dict[str, Any]) -> str:
    table = compare(runs)
    lines = [f"# Release window fidelity on the Figure 8 grid, {meta['date']}", "",
             f"**Machine.** {meta['machine']}. Load average (1 min) before {meta['load_before']}, after "
             f"{meta['load_after']}; per run in the JSON. {meta.get('note', '')}".rstrip(), "",
             f"**How.** `{meta['command']}`: {meta['grid']}. Wall time {meta['wall_s']:.0f} s. Raw runs: "
             f"[{Path(meta['json']).name}]({Path(meta['json']).name}). 'moved' is Student's two-sample t-test "
             "at 5% (|new mean - old mean| > t * pooled sd * sqrt(2/n)); see benchmarks/window/fidelity.py.", "",
             "| cc | loss % | metric | old: 100 us | new: cell's window | new - old | chance bound +- | moved |",
             "|---|---|---|---|---|---|---|---|"]
    moved = tested = rtt_up = rtt_tested = 0
    for (cc, loss), row in table.items():
        for metric, comparison in row.items():
            tested += 1
            moved += comparison.moved
            if metric == "mean RTT":
                rtt_tested += 1
                rtt_up += comparison.diff > 0
            mean_old = statistics.fmean(comparison.old)
            lines.append(f"| {cc} | {loss:g} | {metric} | {_values(comparison.old)} | {_values(comparison.new)} | "
                         f"{comparison.diff:+.3f} ({comparison.diff / mean_old * 100:+.2f}%) | "
                         f"{comparison.bound:.3f} | {'**yes**' if comparison.moved else 'no'} |")
    allowance = chance_allowance(tested)
    passed = moved <= allowance
    lines += ["", f"**Verdict: {'PASS' if passed else 'FAIL'}**: {moved} of {tested} cell-metrics moved beyond the "
              f"run-to-run variance (chance alone gives up to {allowance} with 95% probability or more). Mean RTT "
              f"was higher with the cell's window in {rtt_up} of {rtt_tested} cells (sign test, two-sided: "
              f"p = {sign_test_p(rtt_up, rtt_tested):.3f}).", ""]
    lines += ["| arm | window (us) | runs | late | lateness p99 (us) | emulator CPU share, mean (min-max) |",
              "|---|---|---|---|---|---|"]
    for arm in ("old", "new"):
        mine = [r for r in runs if r.arm == arm]
        windows = sorted({r.window_us for r in mine if r.window_us is not None})
        p99 = sorted(r.lateness_p99_us for r in mine if r.lateness_p99_us is not None)
        cpu = [r.emulator_cpu_share for r in mine if r.emulator_cpu_share is not None]
        cpu_text = f"{statistics.fmean(cpu):.3f} ({min(cpu):.3f}-{max(cpu):.3f})" if cpu else ""
        lines.append(f"| {arm} | {', '.join(f'{w:g}' for w in windows)} | {len(mine)} | "
                     f"{sum(r.status == 'late' for r in mine)} | {p99[0]:.0f}-{p99[-1]:.0f} | {cpu_text} |"
                     if p99 else f"| {arm} | | {len(mine)} | | | |")
    failed = [r for r in runs if r.goodput_mbps is None]
    if failed:
        lines += ["", f"{len(failed)} run(s) failed and are left out: "
                  + "; ".join(f"{r.cc} {r.loss_percent:g}% rep {r.repetition} {r.arm}: {r.error}" for r in failed)]
    return "\n".join(lines) + "\n"


def main() -> None:
    options = arguments()
    grid = (f"figure8 preset (100 Mbit/s, 100 ms RTT, infinite queue) at loss <= {options.max_loss:g}%, bbr and "
            f"cubic, {options.reps} repetitions, time scale {options.time_scale:g}; each run once with the fixed "
            f"{OLD_WINDOW_US} us window and once with the cell's own, one cell at a time, emulator at its default "
            "real-time priority")
    runs, meta = measured_or_stored(options.from_json, options.out, Run, lambda: measure(options),
                                    "benchmarks/window/fidelity.py", grid, machine())
    options.out.write_text(report(runs, meta))
    print(options.out.read_text())
    print(f"results: {options.out}")


if __name__ == "__main__":
    main()
