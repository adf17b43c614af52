"""The quoted numbers of the full-length Argo run's results README, from the committed files alone.

    python -m benchmarks.cluster.argo_report          # rewrite the numbers between the markers
    python -m benchmarks.cluster.argo_report --check  # exit 1 if the README differs from its data

benchmarks/results/2026-11-29-argo-full/ holds `cells.csv` (`ccsweep export` of the run's store:
one row per stored record, with its start and end times), `records.csv` (every record the cells
left, late ones kept under late/ included, with the cause their self-check named) and
`attempts.csv` (every cell pod attempt of the kept Workflows, `benchmarks.cluster.attempts`). The
comparison with the local executor reads the full study's committed cells tables
(`benchmarks.cluster.argo_vs_local`).
`benchmarks.quoted` puts each value between its `<!-- value: NAME -->` markers.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import Counter
from pathlib import Path

from benchmarks.cluster.argo_vs_local import LOCAL, SEEDS, read_cells, report, spans
from benchmarks.cluster.attempts import read_attempts, summary_lines
from benchmarks.quoted import fill
from ccsweep.results.study import occupancy

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "benchmarks/results/2026-11-29-argo-full"
README = FOLDER / "README.md"


def late_causes() -> str:
    """The late records' causes, as their self-check named them, most frequent first."""
    with (FOLDER / "records.csv").open(newline="") as handle:
        causes = Counter(row["late_cause"] for row in csv.DictReader(handle) if row["status"] == "late")
    return ", ".join(f"{cause} {count}" for cause, count in causes.most_common())


def compute() -> dict[str, str]:
    """Every value the README quotes."""
    cells = read_cells(FOLDER / "cells.csv")
    used = occupancy(spans(cells))
    return {
        "argo.late-causes": late_causes(),
        "argo.cells": str(len(cells)),
        "argo.flow-h": f"{sum(float(r['duration_s']) for r in cells) / 3600:.1f}",
        "argo.busy-min": f"{used.busy_s / 60:.1f}",
        "argo.peak": str(used.peak),
        "argo.mean-at-once": f"{used.mean_at_once:.1f}",
        "argo.attempts": "\n\n" + "\n".join(summary_lines(read_attempts(FOLDER / "attempts.csv"))) + "\n\n",
        "argo.comparison": "\n\n" + "\n".join(report(cells, read_cells(LOCAL), read_cells(SEEDS))) + "\n\n",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if the README differs")
    args = parser.parse_args()
    committed = README.read_text()
    regenerated = fill(committed, compute())
    if args.check:
        if regenerated != committed:
            print(f"{README.relative_to(REPO)}: its quoted numbers differ from what the data gives", file=sys.stderr)
        sys.exit(0 if regenerated == committed else 1)
    if regenerated != committed:
        README.write_text(regenerated)
        print(f"rewrote {README.relative_to(REPO)}")


if __name__ == "__main__":
    main()
