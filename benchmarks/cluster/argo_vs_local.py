"""The study through Argo against the same study through the local executor, from committed tables.

    python -m benchmarks.cluster.argo_vs_local ARGO_CELLS.csv [--local CELLS.csv] [--seeds CELLS.csv]

Each table is `ccsweep export`'s cells table (one row per stored record). It prints, as markdown:
- how each run occupied its machine, from the records' start and end times alone (busy wall time,
  cells at once), and the wall-time ratio Argo / local;
- per experiment, how far the two runs' goodputs lie apart, cell by cell (cells match by their
  content-addressed id): the median of |a - b| / mean(a, b), against the same measure between two
  seeds of one Figure 8 cell (the committed repetitions), the run-to-run spread a difference must
  exceed to mean anything. The seeds cover Figure 8's loss range only; that caveat is printed.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from itertools import combinations
from pathlib import Path

from ccsweep.results.study import occupancy

REPO = Path(__file__).resolve().parents[2]
LOCAL = REPO / "benchmarks/results/2026-11-25-rebbr-full/full-sweep/cells.csv"
SEEDS = REPO / "benchmarks/results/2026-11-25-rebbr-full/figure8-seeds/cells.csv"
#: The columns that differ between repetitions of one cell, or that are no parameter at all.
NOT_PARAMETERS = {"sweep", "cell_id", "seed", "repetition", "status", "attempt"}
#: Where the export's parameter columns end.
FIRST_MEASUREMENT = "started_at"

Row = dict[str, str]


def read_cells(path: Path) -> list[Row]:
    """The stored records of an export whose status is ok."""
    with path.open(newline="") as handle:
        return [row for row in csv.DictReader(handle) if row.get("status", "ok") == "ok"]


def spans(rows: Iterable[Row]) -> list[tuple[datetime, datetime]]:
    return [(datetime.fromisoformat(r["started_at"]), datetime.fromisoformat(r["finished_at"])) for r in rows]


def apart(a: float, b: float) -> float:
    """|a - b| relative to their mean: symmetric, so neither run is the reference."""
    mean = (a + b) / 2
    return abs(a - b) / mean if mean > 0 else 0.0


def parameters(row: Row, columns: Sequence[str]) -> tuple[str, ...]:
    """A record's parameters: the columns up to the first measurement, less seed and repetition."""
    return tuple(row[c] for c in columns if c not in NOT_PARAMETERS)


def seed_spread(rows: list[Row]) -> list[float]:
    """Every pair of repetitions of one cell (all parameters equal but the seed): how far apart."""
    columns = list(rows[0])[: list(rows[0]).index(FIRST_MEASUREMENT)]
    groups: dict[tuple[str, ...], list[float]] = defaultdict(list)
    for row in rows:
        groups[parameters(row, columns)].append(float(row["goodput_mbps"]))
    return [apart(a, b) for runs in groups.values() for a, b in combinations(runs, 2)]


def quartiles(values: Sequence[float]) -> str:
    """median [p25-p75] in percent."""
    if len(values) < 2:
        return f"{100 * values[0]:.1f} %" if values else "-"
    p25, p50, p75 = statistics.quantiles(values, n=4, method="inclusive")
    return f"{100 * p50:.1f} % [{100 * p25:.1f}-{100 * p75:.1f}]"


def report(argo: list[Row], local: list[Row], seeds: list[Row]) -> list[str]:
    """The comparison's markdown lines."""
    argo_used, local_used = occupancy(spans(argo)), occupancy(spans(local))
    lines = ["| run | cells | busy wall time | cells at once (max, mean) |", "|---|---|---|---|"]
    for name, rows, used in (("Argo", argo, argo_used), ("local executor", local, local_used)):
        lines.append(f"| {name} | {len(rows)} | {used.busy_s / 60:.1f} min | {used.peak}, {used.mean_at_once:.1f} |")
    lines += ["", f"Wall-time ratio, Argo / local: **{argo_used.busy_s / local_used.busy_s:.2f}** "
              "(busy wall time: pauses between sittings are not counted).", ""]
    by_id = {r["cell_id"]: r for r in local}
    per_experiment: dict[str, list[float]] = defaultdict(list)
    for row in argo:
        if row["cell_id"] in by_id:
            per_experiment[row["experiment"]].append(
                apart(float(row["goodput_mbps"]), float(by_id[row["cell_id"]]["goodput_mbps"])))
    spread = seed_spread(seeds)
    lines += ["| experiment | cells in both | goodput apart, Argo vs local: median [p25-p75] |", "|---|---|---|"]
    lines += [f"| {e} | {len(v)} | {quartiles(v)} |" for e, v in sorted(per_experiment.items())]
    lines += [f"| *run-to-run: two seeds of one Figure 8 cell* | {len(spread)} pairs | {quartiles(spread)} |", "",
              "The seeds' spread covers Figure 8's cells (CUBIC and BBR, 100 Mbit/s, 100 ms, losses up to 50 %); "
              "the other experiments have no committed repetitions to set their spread."]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cluster.argo_vs_local",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("argo", type=Path, help="cells table of the run through Argo (ccsweep export)")
    parser.add_argument("--local", type=Path, default=LOCAL, help="cells table of the local executor's run")
    parser.add_argument("--seeds", type=Path, default=SEEDS, help="cells table of repeated cells (the spread)")
    args = parser.parse_args(argv)
    for name in ("argo", "local", "seeds"):
        if not getattr(args, name).is_file():
            parser.error(f"{name}: no such file: {getattr(args, name)}")
    print("\n".join(report(read_cells(args.argo), read_cells(args.local), read_cells(args.seeds))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
