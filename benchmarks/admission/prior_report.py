"""Figure 8 from an empty store under two admission priors, side by side: the link's rate (commit
571dff1) against what a cell is expected to carry (ccsweep.carried, from 70467ae), from the
committed runs alone.

    python -m benchmarks.admission.prior_report           # rewrite the README's quoted numbers
    python -m benchmarks.admission.prior_report --check   # change nothing; exit 1 if they differ

Each run's folder under FOLDER/runs/ is named PRIOR-N and holds `figure8-cells.csv` (`ccsweep
export` of its store) and `summary.txt` (the run's `wall_s=` line from /usr/bin/time and the
executor's closing line, which counts the late or starved attempts it ran again). The runs
alternated between the priors, one at a time, on an otherwise idle machine (README).
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from benchmarks.cluster.argo_vs_local import read_cells, spans
from benchmarks.quoted import block, regenerate_main
from ccsweep.results.study import occupancy

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "benchmarks/results/2026-11-30-carried-prior"
#: The priors in the order the table shows them, with what each is.
PRIORS = {"link-rate": "the link's rate (571dff1)", "carried": "what the cell is expected to carry (70467ae)"}


@dataclass(frozen=True)
class Run:
    """One run of the sweep from an empty store."""

    prior: str
    number: int
    wall_s: float
    late_attempts: int
    cells: int
    peak: int
    mean_at_once: float


def read_run(folder: Path) -> Run:
    """A run from its folder (PRIOR-N)."""
    prior, number = folder.name.rsplit("-", 1)
    summary = (folder / "summary.txt").read_text()
    wall = re.search(r"wall_s=([0-9.]+)", summary)
    late = re.search(r"\((\d+) late or starved attempt\(s\) run again\)", summary)
    if wall is None or late is None:
        raise ValueError(f"{folder / 'summary.txt'}: no wall_s= or closing line")
    rows = read_cells(folder / "figure8-cells.csv")
    used = occupancy(spans(rows))
    return Run(prior, int(number), float(wall[1]), int(late[1]), len(rows), used.peak, used.mean_at_once)


def read_runs() -> list[Run]:
    return sorted((read_run(path) for path in (FOLDER / "runs").iterdir() if path.is_dir()),
                  key=lambda run: (list(PRIORS).index(run.prior), run.number))


def table(runs: list[Run]) -> list[str]:
    """Per prior: the runs' wall times, median and range, late attempts, cells at once."""
    lines = ["| prior | runs | wall time, median [range] (s) | late attempts run again | cells at once, peak / mean |",
             "|---|---|---|---|---|"]
    for prior, title in PRIORS.items():
        mine = [run for run in runs if run.prior == prior]
        walls = [run.wall_s for run in mine]
        lines.append(f"| {title} | {len(mine)} | {statistics.median(walls):.0f} [{min(walls):.0f}, {max(walls):.0f}] "
                     f"| {', '.join(str(run.late_attempts) for run in mine)} "
                     f"| {', '.join(f'{run.peak} / {run.mean_at_once:.1f}' for run in mine)} |")
    return lines


def compute() -> dict[str, str]:
    runs = read_runs()
    median = {prior: statistics.median(run.wall_s for run in runs if run.prior == prior) for prior in PRIORS}
    return {
        "prior.table": block(table(runs)),
        "prior.ratio": f"{median['carried'] / median['link-rate']:.2f}",
        "prior.cells": f"{runs[0].cells}",
    }


def main() -> None:
    regenerate_main(FOLDER / "README.md", compute, __doc__)


if __name__ == "__main__":
    main()
