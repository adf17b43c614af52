"""The quoted numbers of the rebbr-pacing result's README, from its committed cell tables alone.

    python -m benchmarks.pacing.report          # rewrite the numbers between the markers
    python -m benchmarks.pacing.report --check  # exit 1 if the README differs from its data

benchmarks/results/2026-11-29-rebbr-pacing/ holds one `ccsweep export` cell table per link
(`rebbr-pacing-cells.csv`, `rebbr-pacing-mahimahi-cells.csv`): one row per stored run. From them:
where each curve drops (`ccsweep.results.cliff`, on steady-state goodput, the quantity of ReBBR's
"BBR holds" claim), and the main experiment's medians beside ReBBR's published Figure 8 BBR. A
curve with a loss rate not yet run has no cliff: it is listed with what it lacks.
`benchmarks.quoted` puts each value between its `<!-- value: NAME -->` markers.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

from benchmarks.cluster.argo_vs_local import read_cells, spans
from benchmarks.quoted import regenerate_main
from ccsweep.checks.source_claims import REBBR_RATE_MBPS
from ccsweep.expand import expand
from ccsweep.results.cliff import find_cliff
from ccsweep.results.published_sets import SETS, load
from ccsweep.specload import load_spec

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "benchmarks/results/2026-11-29-rebbr-pacing"
README = FOLDER / "README.md"
#: The cell table of each link, and the link's name in the tables.
TABLES = {"ccsweep-link": "rebbr-pacing-cells.csv", "mahimahi": "rebbr-pacing-mahimahi-cells.csv"}
ALGORITHMS = ("bbr", "bbr_bpf", "bbr_unpaced")
MAIN = "pacing"

Row = dict[str, str]
#: (experiment, algorithm) -> loss -> the runs' steady-state goodputs.
Curves = dict[tuple[str, str], dict[float, list[float]]]


def read_rows(link: str) -> list[Row]:
    """The link's stored runs (status ok); none while its table is not committed yet."""
    path = FOLDER / TABLES[link]
    return read_cells(path) if path.exists() else []


def grids() -> dict[str, list[float]]:
    """Each experiment's loss rates (fractions), from the preset itself."""
    out: dict[str, set[float]] = defaultdict(set)
    for cell in expand(load_spec("rebbr-pacing")):
        out[cell.experiment].add(cell.params.loss)
    return {name: sorted(losses) for name, losses in out.items()}


def curves(rows: list[Row]) -> Curves:
    """Each curve's runs, by experiment and algorithm, then loss."""
    out: Curves = defaultdict(lambda: defaultdict(list))
    for row in rows:
        for experiment in row["experiments"].split(";"):
            out[experiment, row["cc"]][float(row["loss"])].append(float(row["goodput_steady_mbps"]))
    return out


def cliff_lines(by_link: dict[str, Curves], grid: dict[str, list[float]]) -> list[str]:
    lines = ["| experiment | algorithm | link | runs a cell | cliff at loss [95 % CI] |", "|---|---|---|---|---|"]
    for link, found in by_link.items():
        for (experiment, cc), by_loss in sorted(found.items(), key=lambda item: (list(grid).index(item[0][0]),
                                                                               ALGORITHMS.index(item[0][1]))):
            missing = [loss for loss in grid[experiment] if not by_loss.get(loss)]
            runs = [len(by_loss[loss]) for loss in grid[experiment] if by_loss.get(loss)]
            span = f"{min(runs)}-{max(runs)}" if min(runs) != max(runs) else str(min(runs))
            if missing:
                text = f"not yet: no run at {', '.join(f'{m * 100:g}' for m in missing)} %"
            else:
                text = find_cliff({loss: by_loss[loss] for loss in grid[experiment]}, REBBR_RATE_MBPS).describe()
            lines.append(f"| {experiment} | {cc} | {link} | {span} | {text} |")
    return lines


def median_lines(by_link: dict[str, Curves], grid: dict[str, list[float]]) -> list[str]:
    """The main experiment's median steady-state goodput per loss, algorithm and link, and ReBBR's."""
    rebbr = {round(r.loss_rate, 9): r.goodput_Mbps for r in load(SETS["rebbr-figure8"])
             if r.congestion_control == "bbr"}
    columns = [(link, cc) for link in TABLES for cc in ALGORITHMS]
    lines = ["| loss % | " + " | ".join(f"{cc}, {link}" for link, cc in columns) + " | ReBBR, Linux 4.11.1 |",
             "|---" * (len(columns) + 2) + "|"]
    for loss in grid[MAIN]:
        cells = []
        for link, cc in columns:
            runs = by_link[link].get((MAIN, cc), {}).get(loss, [])
            cells.append(f"{statistics.median(runs):.3g} ({len(runs)})" if runs else "–")
        lines.append(f"| {loss * 100:g} | " + " | ".join(cells) + f" | {rebbr[round(loss, 9)]:.3g} |")
    return lines


def span_min(rows: list[Row]) -> str:
    """Minutes from the first run's start to the last run's end (the records' own times)."""
    if not rows:
        return "0"
    windows = spans(rows)
    return f"{(max(end for _, end in windows) - min(start for start, _ in windows)).total_seconds() / 60:.0f}"


def compute() -> dict[str, str]:
    """Every value the README quotes: each link's table read once, the preset expanded once."""
    rows = {link: read_rows(link) for link in TABLES}
    by_link = {link: curves(link_rows) for link, link_rows in rows.items()}
    grid = grids()
    return {
        "pacing.link-span-min": span_min(rows["ccsweep-link"]),
        "pacing.runs": ", ".join(f"{len(link_rows)} on {link}" for link, link_rows in rows.items()),
        "pacing.cliffs": "\n\n" + "\n".join(cliff_lines(by_link, grid)) + "\n\n",
        "pacing.medians": "\n\n" + "\n".join(median_lines(by_link, grid)) + "\n\n",
    }


def main() -> None:
    regenerate_main(README, compute, __doc__)


if __name__ == "__main__":
    main()
