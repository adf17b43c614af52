"""Where BBR's cliff moves under bursty loss: the figure8-bursty preset's runs against Figure 8's
independent loss, from committed cell tables alone.

    python -m benchmarks.bursty.report           # rewrite the committed result's quoted numbers
    python -m benchmarks.bursty.report --check   # change nothing; exit 1 if they differ

Each committed result (a folder of FOLDERS) holds `ccsweep export --sweep figure8-bursty`'s cell
table (one row per stored run); `report(read_cells(CELLS.csv), preset_losses())` gives the same
tables for a run so far. The independent-loss curves it is read against were committed before it,
on the same grid (Figure 8's path, queue, socket buffers and 60 s flows): the kernel's `bbr` and
`bbr_unpaced` from the rebbr-pacing result (5-10 runs a cell), CUBIC from the full study's Figure 8
and figure8-seeds (one run a cell, ten at eight of the loss rates), joined by the preset's own
`independent` experiment (CUBIC, 3-8 runs a cell) where a folder has it. Each curve's cliff (`ccsweep.results.cliff`, on
steady-state goodput) is read below half the payload-rate ideal and below a tenth of it, with its
bootstrap interval; bursts move a cliff when its interval and the independent curve's share no loss
rate. The measured loss rate of each run (the link's loss drops over the packets it took in) is set
beside the mean asked for: a Gilbert-Elliott chain that lost the wrong share would show there first.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from benchmarks.cluster.argo_vs_local import read_cells
from benchmarks.pacing.report import COLLAPSE, busy_min, cliff_or_gap, moved_verdict, runs_span
from benchmarks.quoted import block, regenerate_all
from ccsweep.expand import expand
from ccsweep.results.cliff import HALF, Cliff
from ccsweep.specload import load_spec

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks/results"
#: The committed runs of the preset, oldest first, each folder with the cell table of its store
#: (`figure8-bursty-cells.csv`) and a README of its own: the bursts alone, then with CUBIC's
#: independent-loss experiment settled beside them.
FOLDERS = [RESULTS / "2026-11-30-figure8-bursty", RESULTS / "2026-12-01-figure8-bursty"]
CELLS_FILE = "figure8-bursty-cells.csv"
#: The independent-loss curves: (table, experiment, algorithms taken from it).
INDEPENDENT = [
    (RESULTS / "2026-11-29-rebbr-pacing/rebbr-pacing-cells.csv", "pacing", ("bbr", "bbr_unpaced")),
    (RESULTS / "2026-11-25-rebbr-full/full-sweep/cells.csv", "figure8", ("cubic",)),
    (RESULTS / "2026-11-25-rebbr-full/figure8-seeds/cells.csv", "figure8", ("cubic",)),
]
ALGORITHMS = ("bbr", "bbr_unpaced", "cubic")
#: The series name of independent loss, beside the mean burst lengths.
INDEPENDENT_NAME = "independent"

Row = dict[str, str]
#: (algorithm, loss series: INDEPENDENT_NAME or a mean burst length) -> loss -> the runs' goodputs.
Curves = dict[tuple[str, str], dict[float, list[float]]]


def burst_of(row: Row) -> str:
    """The run's loss series: its Gilbert-Elliott chain's mean burst (1 / r packets), or independent."""
    chain = row.get("uplink_gilbert_elliott") or ""
    return f"{1 / json.loads(chain)['r']:g}" if chain else INDEPENDENT_NAME


def curves(rows: Iterable[Row]) -> Curves:
    """Each curve's runs by algorithm and loss series, then mean loss; one run per stored cell id
    (figure8-seeds' run 0 is Figure 8's own cell)."""
    out: Curves = defaultdict(lambda: defaultdict(list))
    seen: set[str] = set()
    for row in rows:
        if row["cell_id"] in seen:
            continue
        seen.add(row["cell_id"])
        out[row["cc"], burst_of(row)][float(row["loss"])].append(float(row["goodput_steady_mbps"]))
    return out


def independent_rows() -> list[Row]:
    """The runs of the committed independent-loss curves of Figure 8's grid, each algorithm from its table."""
    return [row for path, experiment, algorithms in INDEPENDENT for row in read_cells(path)
            if experiment in row["experiments"].split(";") and row["cc"] in algorithms]


def with_references(rows: list[Row]) -> Curves:
    """The preset's runs `rows` beside the committed independent-loss references: the preset's own
    independent runs (CUBIC's) join their reference's, a cell id counted once (the reference's first)."""
    return curves([*independent_rows(), *rows])


def series_order(found: Curves) -> list[str]:
    """Independent loss first, then the mean bursts, shortest first."""
    bursts = sorted({series for _, series in found if series != INDEPENDENT_NAME}, key=float)
    return [INDEPENDENT_NAME, *bursts]


@dataclass(frozen=True)
class SeriesCliffs:
    """One curve's cliffs (by share of the ideal: a Cliff, or why there is none yet) and, for a
    burst series, its verdict against independent loss (None for independent loss itself)."""

    cc: str
    series: str
    runs: str
    cliffs: dict[float, Cliff | str]
    verdict: str | None


def series_cliffs(found: Curves, losses: list[float]) -> list[SeriesCliffs]:
    """Per algorithm, each loss series' cliffs (half, tenth), and whether bursts moved them from
    where independent loss puts them."""
    out = []
    for cc in ALGORITHMS:
        reference = {share: cliff_or_gap(found.get((cc, INDEPENDENT_NAME), {}), losses, share)
                     for share in (HALF, COLLAPSE)}
        for series in series_order(found):
            by_loss = found.get((cc, series), {})
            if not by_loss:
                continue
            cliffs = {share: cliff_or_gap(by_loss, losses, share) for share in (HALF, COLLAPSE)}
            out.append(SeriesCliffs(cc, series, runs_span(by_loss, losses), cliffs,
                                    None if series == INDEPENDENT_NAME else verdict(reference, cliffs)))
    return out


def cliff_lines(curves: list[SeriesCliffs]) -> list[str]:
    """The cliffs of every curve (`series_cliffs`) as a table."""
    lines = ["| algorithm | loss | runs a cell | below half the ideal at [95 % CI] | below a tenth at [95 % CI] "
             "| against independent loss |", "|---|---|---|---|---|---|"]
    for curve in curves:
        half, tenth = (c.with_interval() if isinstance(c, Cliff) else c for c in curve.cliffs.values())
        label = "independent" if curve.series == INDEPENDENT_NAME else f"bursts of {curve.series}"
        lines.append(f"| {curve.cc} | {label} | {curve.runs} | {half} | {tenth} | {curve.verdict or '–'} |")
    return lines


def cliff_values(curves: list[SeriesCliffs]) -> dict[str, str]:
    """Each curve's cliffs as short quotable values (`bursty.half.bbr.8`: '20 %'), and each burst
    series' verdict against independent loss (`bursty.verdict.bbr.8`)."""
    out = {}
    for curve in curves:
        for name, share in (("half", HALF), ("tenth", COLLAPSE)):
            cliff = curve.cliffs[share]
            out[f"bursty.{name}.{curve.cc}.{curve.series}"] = cliff.where() if isinstance(cliff, Cliff) else "not yet"
        if curve.verdict is not None:
            out[f"bursty.verdict.{curve.cc}.{curve.series}"] = curve.verdict
    return out


def verdict(reference: dict[float, Cliff | str], cliffs: dict[float, Cliff | str]) -> str:
    """'moves the cliff (half)', 'does not move the cliff', or 'not yet' while a curve lacks runs."""
    pairs = [(reference[share], cliffs[share]) for share in (HALF, COLLAPSE)]
    ready = [(a, b) for a, b in pairs if isinstance(a, Cliff) and isinstance(b, Cliff)]
    return moved_verdict(ready) if len(ready) == len(pairs) else "not yet: runs missing"


def median_lines(found: Curves, losses: list[float], cc: str) -> list[str]:
    """One algorithm's median steady-state goodput (runs) per mean loss and loss series."""
    order = [series for series in series_order(found) if found.get((cc, series))]
    header = ["independent" if s == INDEPENDENT_NAME else f"bursts of {s}" for s in order]
    lines = ["| mean loss % | " + " | ".join(header) + " |", "|---" * (len(order) + 1) + "|"]
    for loss in losses:
        cells = []
        for series in order:
            runs = found[cc, series].get(loss, [])
            cells.append(f"{statistics.median(runs):.3g} ({len(runs)})" if runs else "–")
        lines.append(f"| {loss * 100:g} | " + " | ".join(cells) + " |")
    return lines


def measured_loss_lines(rows: Iterable[Row]) -> list[str]:
    """Per mean burst, the measured loss rate over the asked mean (median and range over runs with
    at least 100 loss drops, where one run's count says something)."""
    ratios: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        drops, taken = float(row["uplink_drops_loss"] or 0), float(row["uplink_in_packets"] or 0)
        if drops >= 100 and taken > 0:
            ratios[burst_of(row)].append(drops / taken / float(row["loss"]))
    lines = ["| loss | runs | measured / asked, median [min, max] |", "|---|---|---|"]
    for series in sorted(ratios, key=lambda s: float(s) if s != INDEPENDENT_NAME else 0.0):
        values = ratios[series]
        label = INDEPENDENT_NAME if series == INDEPENDENT_NAME else f"bursts of {series}"
        lines.append(f"| {label} | {len(values)} | {statistics.median(values):.3f} "
                     f"[{min(values):.3f}, {max(values):.3f}] |")
    return lines


def pooled_loss_values(rows: Iterable[Row]) -> dict[str, str]:
    """From 2 to 50 % mean loss, loss drops over the asked share of the packets taken in, pooled over
    runs: per algorithm in bursts of 1 (`bursty.pooled-loss.cubic`), whether a flow's own reaction to
    loss shows in the count; and per seed for CUBIC, independent and in bursts of 1
    (`bursty.pooled-loss.seed.independent.3`): a seed's draws are the same at every loss rate, so
    its runs at different rates are not independent samples of the count."""
    drops: dict[str, float] = defaultdict(float)
    expected: dict[str, float] = defaultdict(float)
    for row in rows:
        if not 0.02 <= float(row["loss"]) <= 0.5:
            continue
        series = burst_of(row)
        keys = [f"{row['cc']}"] if series == "1" else []
        if row["cc"] == "cubic" and series in ("1", INDEPENDENT_NAME):
            keys.append(f"seed.{series}.{row['seed']}")
        for key in keys:
            drops[key] += float(row["uplink_drops_loss"] or 0)
            expected[key] += float(row["uplink_in_packets"] or 0) * float(row["loss"])
    return {f"bursty.pooled-loss.{key}": f"{drops[key] / expected[key]:.3f}" for key in drops if expected[key] > 0}


def preset_losses() -> list[float]:
    """The preset's mean loss rates (fractions): a curve lacking one of them has no cliff yet."""
    return sorted({cell.params.loss for cell in expand(load_spec("figure8-bursty"))})


def report(rows: list[Row], losses: list[float]) -> list[str]:
    """The tables for the bursty runs `rows` over the mean loss rates `losses`, beside the committed
    independent curves."""
    found = with_references(rows)
    out = ["## Where each curve falls", "", *cliff_lines(series_cliffs(found, losses)), ""]
    for cc in ALGORITHMS:
        out += [f"## {cc}: median steady-state goodput (Mbit/s, runs)", "", *median_lines(found, losses, cc), ""]
    return out + ["## The loss the links drew", "", *measured_loss_lines(rows)]


def compute(folder: Path = FOLDERS[-1]) -> dict[str, str]:
    """Every value a committed result's README quotes, from its cell table."""
    rows = read_cells(folder / CELLS_FILE)
    losses = preset_losses()
    found = with_references(rows)
    every_curve = series_cliffs(found, losses)
    return {
        "bursty.runs": f"{len(rows)}",
        "bursty.busy-min": busy_min(rows),
        "bursty.cliffs": block(cliff_lines(every_curve)),
        **{f"bursty.medians.{cc}": block(median_lines(found, losses, cc)) for cc in ALGORITHMS},
        "bursty.loss-drawn": block(measured_loss_lines(rows)),
        **cliff_values(every_curve),
        **median_values(found),
        **pooled_loss_values(rows),
    }


def median_values(found: Curves) -> dict[str, str]:
    """Each curve's median at each mean loss (`bursty.median.cubic.8.1`: CUBIC in bursts of 8 at 1 %),
    how many runs it is over (`bursty.runs.cubic.8.1`), and a burst series' median over independent
    loss's at the same mean (`bursty.ratio.cubic.8.1`), to quote beside the tables."""
    out = {}
    for (cc, series), by_loss in found.items():
        for loss, runs in by_loss.items():
            name = f"{cc}.{series}.{loss * 100:g}"
            out[f"bursty.median.{name}"] = f"{statistics.median(runs):.3g}"
            out[f"bursty.runs.{name}"] = str(len(runs))
            independent = found.get((cc, INDEPENDENT_NAME), {}).get(loss)
            if series != INDEPENDENT_NAME and independent and statistics.median(independent) > 0:
                out[f"bursty.ratio.{name}"] = f"{statistics.median(runs) / statistics.median(independent):.2g}"
    return out


def main() -> None:
    regenerate_all([(folder / "README.md", partial(compute, folder)) for folder in FOLDERS], __doc__)


if __name__ == "__main__":
    main()
