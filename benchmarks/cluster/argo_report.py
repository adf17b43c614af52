"""The quoted numbers of the full-length Argo runs' results READMEs, from the committed files alone.

    python -m benchmarks.cluster.argo_report          # rewrite the numbers between the markers
    python -m benchmarks.cluster.argo_report --check  # exit 1 if a README differs from its data

Each folder of FOLDERS (benchmarks/results/2026-11-29-argo-full/, three sittings;
benchmarks/results/2026-11-30-argo-full/, one; benchmarks/results/2026-11-30-argo-carried/, one, pods
asking for what their cells carry) holds `cells.csv` (`ccsweep export` of the run's store:
one row per stored record, with its start and end times), `records.csv` (every record the cells
left, late ones kept under late/ included, with the cause their self-check named) and
`attempts.csv` (every cell pod attempt of the kept Workflows, `benchmarks.cluster.attempts`). The
comparison with the local executor reads the full study's committed cells tables
(`benchmarks.cluster.argo_vs_local`).
`benchmarks.quoted` puts each value between its `<!-- value: NAME -->` markers.
"""

from __future__ import annotations

import csv
import statistics
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path

from benchmarks.cluster.argo_vs_local import LOCAL, SEEDS, read_cells, report, spans
from benchmarks.cluster.attempts import Attempt, read_attempts, summary_lines
from benchmarks.cluster.container_cpu import summary as container_summary
from benchmarks.lateness import demo_report
from benchmarks.quoted import block, regenerate_all
from ccsweep.clusterestimate import estimate_cluster
from ccsweep.expand import expand
from ccsweep.podspec import cpu_milli
from ccsweep.results.study import occupancy
from ccsweep.specload import load_spec

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Run:
    """A full-length run's folder and the node it ran on, as the local cluster was set up that day."""

    folder: Path
    #: Argo's wait container's CPU request (hack/cluster/argo.sh's executor resources), millicores:
    #: attempts.csv holds the main container's requests only.
    wait_cpu_milli: int
    #: The node's allocatable CPU, millicores: its 2 cores, less what CCSWEEP_CONTROL_PLANE_CPU_MILLI held back.
    node_cpu_milli: int


#: Each full-length run, oldest first; README.md's first paragraph quotes the newest.
RUNS = [Run(REPO / "benchmarks/results/2026-11-29-argo-full", 100, 2000),
        Run(REPO / "benchmarks/results/2026-11-30-argo-full", 100, 2000),
        Run(REPO / "benchmarks/results/2026-11-30-argo-carried", 100, 2000),
        Run(REPO / "benchmarks/results/2026-12-01-argo-deadline", 10, 1600)]
FOLDERS = [run.folder for run in RUNS]
NEWEST = FOLDERS[-1]


def read_records(folder: Path) -> list[dict[str, str]]:
    """Every record the run's cells left, stored and late (`records.csv`)."""
    with (folder / "records.csv").open(newline="") as handle:
        return list(csv.DictReader(handle))


def late_causes(records: list[dict[str, str]]) -> str:
    """The late records' causes, as their self-check named them, most frequent first."""
    causes = Counter(row["late_cause"] for row in records if row["status"] == "late")
    return ", ".join(f"{cause} {count}" for cause, count in causes.most_common())


def granted_sched(records: list[dict[str, str]]) -> str:
    """What scheduling the records' emulator loops got (`sched`: fifo, deadline, nice or normal),
    each with how many of those records came back late; "" where records.csv predates the column."""
    kinds: Counter[str] = Counter()
    late: Counter[str] = Counter()
    reserved_us: list[int] = []
    for row in records:
        if row.get("sched"):
            granted = row["sched"].split(" ")[0]  # e.g. deadline:150/1000us, then what was refused
            kind = granted.split(":")[0]
            kinds[kind] += 1
            late[kind] += row["status"] == "late"
            if kind == "deadline":
                reserved_us.append(int(granted.split(":")[1].split("/")[0]))
    span = f", {min(reserved_us)}-{max(reserved_us)} us of every 1 ms" if reserved_us else ""
    return ", ".join(f"{kind} {count} ({late[kind]} late{span if kind == 'deadline' else ''})"
                     for kind, count in kinds.most_common())


def late_by_time(records: list[dict[str, str]], bin_min: int = 10) -> list[str]:
    """The records, stored and late, by when their runner started, in bins of `bin_min` minutes from
    the first: where in a run the late ones fall."""
    rows = [(datetime.fromisoformat(row["started_at"]), row["status"] == "late") for row in records]
    first = min(started for started, _ in rows)
    bins: dict[int, Counter[bool]] = {}
    for started, late in rows:
        bins.setdefault(int((started - first).total_seconds() // (bin_min * 60)), Counter())[late] += 1
    lines = [f"| minutes into the run (from {first:%H:%M} UTC) | records | late |", "|---|---|---|"]
    lines += [f"| {b * bin_min}-{(b + 1) * bin_min} | {sum(c.values())} | {c[True]} |" for b, c in sorted(bins.items())]
    return lines


#: How close `ccsweep estimate --nodes` must come to the measured busy wall time (issue 38).
ESTIMATE_WITHIN = 0.20


def estimate_check(cells: list[dict[str, str]], attempts: list[Attempt], run: Run) -> tuple[list[str], float]:
    """`ccsweep estimate --nodes 1` on the run's node for the very cells the run stored, against the run's
    busy wall time; then the same with the run's own re-runs added. The estimate models no late
    re-run, so a run with many reads longer: each late or failed attempt of the sittings whose
    records are here (created while they ran), stored cell or not, is played again as one more
    run of its cell. Each pod asks what the run's first attempt of its cell asked (the cost model
    of its day: the model has changed since), with the run's wait container. Also returns the
    minutes the re-runs add to the estimate."""
    stored = {row["cell_id"] for row in cells}
    asked = {a.cell: cpu_milli(a.cpu_request) + run.wait_cpu_milli for a in attempts if a.attempt == 0}
    # The preset's entries name a cell shared by two experiments twice; it ran once.
    every = {cell.id: cell for cell in expand(load_spec("full-sweep"))}
    planned = {cell_id: cell for cell_id, cell in every.items() if cell_id in stored}
    windows = spans(cells)
    first, last = min(start for start, _ in windows), max(end for _, end in windows)
    # A cell late on every attempt stored nothing, yet held its place each time: its attempts count too.
    again = [every[a.cell] for a in attempts if a.outcome in ("late", "failed") and a.cell in every
             and first <= datetime.fromisoformat(a.created_at) <= last]
    measured = occupancy(windows).busy_s
    lines = ["| estimate | cells played | predicted | measured busy wall time | predicted / measured |",
             "|---|---|---|---|---|"]
    once = list(planned.values())
    predicted_s = []
    cores = run.node_cpu_milli / 1000
    for name, played in ((f"`ccsweep estimate --nodes 1 --cores {cores:g}`", once),
                         ("the same, with the run's late and failed attempts played again", [*once, *again])):
        predicted = estimate_cluster(played, nodes=1, cores=cores, pod_cpu_milli=lambda c: asked[c.id]).wall_s
        predicted_s.append(predicted)
        lines.append(f"| {name} | {len(played)} | {predicted / 60:.1f} min | {measured / 60:.1f} min | "
                     f"{predicted / measured:.2f} |")
    return lines, (predicted_s[1] - predicted_s[0]) / 60


def waited(folder: Path) -> dict[str, str]:
    """How long pods waited from created to their runner's start, first attempts and retries apart
    (`timeline.csv`, `benchmarks.cluster.timeline`; none in a folder without one)."""
    path = folder / "timeline.csv"
    if not path.exists():
        return {}
    with path.open(newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if row["waited_s"]]
    out = {}
    for name, mine in (("first", [r for r in rows if r["attempt"] == "0"]),
                       ("retry", [r for r in rows if r["attempt"] != "0"])):
        minutes = sorted(float(r["waited_s"]) / 60 for r in mine)
        out[f"argo.waited-{name}"] = (f"a median of {statistics.median(minutes):.1f} min "
                                      f"({minutes[0]:.1f}-{minutes[-1]:.1f}, {len(minutes)} attempts)")
    return out


def compute(folder: Path = NEWEST) -> dict[str, str]:
    """Every value a folder's README quotes."""
    run = next(r for r in RUNS if r.folder == folder)
    cells = read_cells(folder / "cells.csv")
    used = occupancy(spans(cells))
    attempts = read_attempts(folder / "attempts.csv")
    records = read_records(folder)
    estimate_lines, rerun_gain_min = estimate_check(cells, attempts, run)
    quiet = demo_report.compute()
    return {
        "argo.late-causes": late_causes(records),
        "argo.sched": granted_sched(records),
        "argo.late-by-time": block(late_by_time(records)),
        "argo.estimate": block(estimate_lines),
        "argo.rerun-gain-min": f"{rerun_gain_min:.1f}",
        "argo.cells": str(len(cells)),
        "argo.flow-h": f"{sum(float(r['duration_s']) for r in cells) / 3600:.1f}",
        "argo.busy-min": f"{used.busy_s / 60:.1f}",
        "argo.peak": str(used.peak),
        "argo.mean-at-once": f"{used.mean_at_once:.1f}",
        "argo.attempts": block(summary_lines(attempts)),
        "argo.comparison": block(report(cells, read_cells(LOCAL), read_cells(SEEDS))),
        # The local executor's one sitting on the same kind of machine with nothing else running.
        "argo.quiet-ratio": f"{used.busy_s / 60 / float(quiet['quiet.wall-min']):.2f}",
        "argo.quiet-mean-at-once": quiet["quiet.mean-at-once"],
        **waited(folder),
        **({"argo.container-cpu": block(container_summary(folder / "container-cpu.csv"))}
           if (folder / "container-cpu.csv").exists() else {}),
    }


def main() -> None:
    regenerate_all([(folder / "README.md", partial(compute, folder)) for folder in FOLDERS], __doc__)


if __name__ == "__main__":
    main()
