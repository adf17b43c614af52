"""Each cell pod attempt of a full-length Argo run beside the record its cell left, and how many
cells ran at once.

    python -m benchmarks.cluster.timeline attempts.csv records.csv --csv timeline.csv --figure at-once.png

`attempts.csv` is `benchmarks.cluster.attempts`' (the Workflow's view: pod created and ended, the
requests, the node); `records.csv` is every record the cells left, stored and late
(`benchmarks.lateness.demo_runs.store_rows`: the runner's own start, its flows' start, its end,
the emulator's CPU share). An attempt's record is its cell's record of the same attempt (Argo
counts from 0, the runner from 1); an attempt that left none (failed before its flow) has empty
record columns. The figure counts, over the run, the cells whose flows were running and the pods
created but not yet started, which wait for a node with room for their requests.
"""

from __future__ import annotations

import argparse
import csv
import sys
from datetime import datetime
from pathlib import Path

from matplotlib.figure import Figure

from benchmarks.cluster.attempts import read_attempts, timestamp
from ccsweep.results.study import at_once

COLUMNS = ["workflow", "cell", "attempt", "node", "cpu_request", "outcome", "pod_created_at", "runner_started_at",
           "flows_started_at", "record_finished_at", "pod_finished_at", "waited_s", "after_record_s",
           "record_status", "late_cause", "lateness_p99_us", "emulator_cpu_share", "emulator_cpu_s"]


def _seconds(start: str, end: str) -> str:
    a, b = timestamp(start), timestamp(end)
    return f"{(b - a).total_seconds():.1f}" if a and b else ""


def timeline(attempts_csv: Path, records_csv: Path) -> list[dict[str, str]]:
    """One row per pod attempt with its record's times; `waited_s` is pod created to runner started
    (scheduling and start), `after_record_s` record stored to pod ended."""
    with records_csv.open(newline="") as handle:
        records = {(r["cell"], int(r["attempt"])): r for r in csv.DictReader(handle)}
    rows = []
    for a in read_attempts(attempts_csv):
        r = records.get((a.cell, a.attempt + 1), {})
        cpu_share, span = r.get("emulator_cpu_share", ""), _seconds(r.get("started_at", ""), r.get("finished_at", ""))
        rows.append({
            "workflow": a.workflow, "cell": a.cell, "attempt": str(a.attempt), "node": a.node,
            "cpu_request": a.cpu_request, "outcome": a.outcome, "pod_created_at": a.created_at,
            "runner_started_at": r.get("started_at", ""), "flows_started_at": r.get("flows_started_at", ""),
            "record_finished_at": r.get("finished_at", ""), "pod_finished_at": a.finished_at,
            "waited_s": _seconds(a.created_at, r.get("started_at", "")),
            "after_record_s": _seconds(r.get("finished_at", ""), a.finished_at),
            "record_status": r.get("status", ""), "late_cause": r.get("late_cause", ""),
            "lateness_p99_us": r.get("lateness_p99_us", ""), "emulator_cpu_share": cpu_share,
            "emulator_cpu_s": f"{float(cpu_share) * float(span):.1f}" if cpu_share and span else ""})
    return rows


def counts(rows: list[dict[str, str]], start: str, end: str) -> list[tuple[datetime, int]]:
    """How many rows are between their `start` and `end` columns over time: a step per change
    (rows without both times are left out)."""
    spans = [(a, b) for row in rows if (a := timestamp(row[start])) and (b := timestamp(row[end]))]
    return at_once(spans)


def draw(rows: list[dict[str, str]], path: Path) -> None:
    """Cells with flows running, and pods waiting to start, over the run."""
    flows = counts(rows, "flows_started_at", "record_finished_at")
    waiting = counts(rows, "pod_created_at", "runner_started_at")
    if not flows:
        return
    origin = min(at for at, _ in flows + waiting)
    fig = Figure(figsize=(9, 3.2), layout="constrained")
    ax = fig.subplots()
    for series, label, colour in ((flows, "cells with flows running", "tab:blue"),
                                  (waiting, "pods created, not yet started", "tab:grey")):
        ax.step([(at - origin).total_seconds() / 60 for at, _ in series], [level for _, level in series],
                where="post", label=label, color=colour)
    ax.set_xlabel("minutes since the first pod was created")
    ax.set_ylabel("at once")
    ax.legend(loc="upper right", fontsize=8)
    fig.savefig(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cluster.timeline", description=__doc__.split("\n\n")[0])
    parser.add_argument("attempts", type=Path, help="benchmarks.cluster.attempts' CSV")
    parser.add_argument("records", type=Path, help="every record the cells left (store_rows' CSV)")
    parser.add_argument("--csv", type=Path, required=True, help="write one row per attempt here")
    parser.add_argument("--figure", type=Path, help="write the cells-at-once figure here (PNG or SVG)")
    args = parser.parse_args(argv)
    for name in ("attempts", "records"):
        if not getattr(args, name).is_file():
            parser.error(f"{name}: no such file: {getattr(args, name)}")
    rows = timeline(args.attempts, args.records)
    with args.csv.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    if args.figure:
        draw(rows, args.figure)
    matched = sum(1 for row in rows if row["record_status"])
    print(f"{len(rows)} attempts, {matched} with their record")
    return 0


if __name__ == "__main__":
    sys.exit(main())
