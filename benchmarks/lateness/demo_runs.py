"""The demo as a new user meets it: `ccsweep run quick` from an empty store, N times, every attempt kept.

Run as root from the repository root: `.venv/bin/python -m benchmarks.lateness.demo_runs --runs 5
--out benchmarks/results/DATE-demo-cold`. Each run gets a fresh store (a store never runs a stored
cell again), so every run is a first contact: the executor starts its cells one at a time and
grows how many run at once as they come back on time.

It writes, into `--out`:
- `attempts.csv`: one row per attempt of every cell of every run, the late, starved and failed
  ones too, with its timing (started, flows started, finished), its lateness, its run-queue delay,
  everything the record measured about that lateness (`selfcheck.evidence`) and the cause the
  record names (`late_cause`), and what it cost against what it carried (its link's rate, the
  Mbit/s its link took in over the flows' duration, its emulator's CPU share);
- `machine.csv`: the machine once a second while the runs went: load average, and the busiest
  CPU's steal and softirq share in that second (/proc/stat);
- `runs.csv`: per run, its wall time, cells, late attempts and re-runs, as `ccsweep run` printed them.
`python -m benchmarks.lateness.demo_report DIR` turns the folder into its README.

A whole study runs the same way, once: `--runs 1 --spec full-sweep --store DIR --timeout-min 240`.
`--store` keeps that run's store in DIR instead of a scratch folder, so a run stopped part-way
resumes with only its missing cells (and the rows then count the earlier sitting's attempts too).
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from ccsweep.plan import planned_cells
from ccsweep.result import CellResult
from ccsweep.runner.hostcpu import PROC_STAT, cpu_ticks, worst_share
from ccsweep.store import open_store

#: The attempt kinds a store keeps beside a cell's result.
ATTEMPT_KINDS = ("late", "starved", "failed")
EVIDENCE_FIELDS = ("steal_pct", "steal_max_window_pct", "softirq_pct", "softirq_max_window_pct", "minor_faults",
                   "major_faults", "overshoot_p99_us", "overshoot_max_us", "write_p99_us", "write_max_us",
                   "write_total_s", "read_p99_us", "read_max_us", "work_p99_us", "work_max_us")


def attempt_row(run: int, record: CellResult) -> dict[str, Any]:
    """One attempt as a flat row: the cell, its timing, its lateness and what was measured about it."""
    p = record.cell.params
    check = record.link.selfcheck if record.link else None
    evidence = check.evidence if check else None
    row: dict[str, Any] = {
        "run": run, "cell": record.cell.id, "cc": p.cc_label, "loss": p.loss, "attempt": record.attempt,
        "status": record.status, "started_at": record.started_at, "flows_started_at": record.flows_started_at,
        "finished_at": record.finished_at, "goodput_mbps": record.goodput_mbps,
        "threshold_us": check.threshold_us if check else None,
        "lateness_p99_us": check.lateness_p99_us if check else None,
        "lateness_max_us": check.lateness_max_us if check else None,
        "runqueue_p99_us": check.runqueue_p99_us if check else None,
        "late_cause": check.late_cause if check else None,
        "sched": check.sched if check else None, "error": record.error}
    for name in EVIDENCE_FIELDS:
        row[name] = getattr(evidence, name) if evidence else None
    # What the cell cost against what it carried: the emulator's CPU follows the packets it carries,
    # not its link's rate (admission's model prices the rate).
    uplink = record.link.uplink if record.link else None
    row["rate_mbps"] = p.uplink.rate_mbps
    row["carried_mbps"] = round(uplink.in_bytes * 8 / 1e6 / p.duration_s, 4) if uplink else None
    row["emulator_cpu_share"] = check.cpu_share if check else None
    return row


def store_rows(run: int, store_dir: Path, sweep: str) -> list[dict[str, Any]]:
    """Every attempt the run left in its store: each cell's result and its kept attempts."""
    store = open_store(str(store_dir))
    rows = []
    for cell in planned_cells(store, sweep):
        records = [a for kind in ATTEMPT_KINDS for a in store.attempts(cell.id, kind)]
        result = store.get_result(cell.id)
        records += [result] if result is not None else []
        rows += [attempt_row(run, r) for r in sorted(records, key=lambda r: r.attempt)]
    return rows


class MachineLog:
    """Load average and the busiest CPU's steal and softirq share, once a second, on a thread; each
    row carries the run going on (`run`) and what the caller calls it (`label`)."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.run = 0
        self.label = ""
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        before = cpu_ticks(PROC_STAT.read_text())
        while not self._done.wait(1.0):
            now = cpu_ticks(PROC_STAT.read_text())
            load = Path("/proc/loadavg").read_text().split()
            self.rows.append({"run": self.run, "label": self.label, "time": round(time.time(), 1),
                              "load1": float(load[0]),
                              "steal_pct": worst_share(before, now, "steal"),
                              "softirq_pct": worst_share(before, now, "softirq")})
            before = now

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]) if rows else ["run"])
        writer.writeheader()
        writer.writerows(rows)


def summary_line(log: str) -> str:
    """`ccsweep run`'s closing count line."""
    return next((line for line in reversed(log.splitlines()) if "cells measured on time" in line), "")


#: The longest a run may take (`--timeout-min`): the full study took 85-140 min on a busy machine.
MAX_TIMEOUT_MIN = 600


def run_sweep(spec: str, store: Path, timeout_s: float) -> tuple[int, str]:
    """`ccsweep run SPEC` into `store`, its progress passed through to our stderr; (exit, its stderr)."""
    tail: deque[str] = deque(maxlen=200)  # what summary_line reads: the end, not a whole study's progress
    with subprocess.Popen([sys.executable, "-m", "ccsweep", "run", spec, "--store", str(store), "--no-figures"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as child:
        timer = threading.Timer(timeout_s, child.terminate)  # SIGTERM: the executor stops cleanly, keeps results
        timer.start()
        try:
            assert child.stderr is not None
            for line in child.stderr:
                tail.append(line)
                sys.stderr.write(line)
        finally:
            timer.cancel()
        return child.wait(), "".join(tail)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="cold runs, each from an empty store (default 5)")
    parser.add_argument("--spec", default="quick", help="the sweep to run (default: the demo's, quick)")
    parser.add_argument("--out", type=Path, required=True, help="folder for the CSVs")
    parser.add_argument("--store", type=Path, help="keep the store here (one run only; a stopped run resumes)")
    parser.add_argument("--timeout-min", type=float, default=60,
                        help=f"stop a run after this long, 1 to {MAX_TIMEOUT_MIN} min (default 60)")
    args = parser.parse_args(argv)
    if not 1 <= args.runs <= 50:
        parser.error("--runs: give 1 to 50")
    if args.store is not None and args.runs != 1:
        parser.error("--store: give it with --runs 1 (every other run starts from an empty store)")
    if not 1 <= args.timeout_min <= MAX_TIMEOUT_MIN:
        parser.error(f"--timeout-min: give 1 to {MAX_TIMEOUT_MIN}")
    args.out.mkdir(parents=True, exist_ok=True)
    machine = MachineLog()
    attempts: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    try:
        for run in range(1, args.runs + 1):
            machine.run = run
            scratch: AbstractContextManager[str] = (
                nullcontext(str(args.store.parent)) if args.store is not None
                else tempfile.TemporaryDirectory(prefix="ccsweep-demo-"))
            with scratch as folder:
                store = args.store if args.store is not None else Path(folder) / "store"
                start = time.monotonic()
                code, log = run_sweep(args.spec, store, args.timeout_min * 60)
                wall = time.monotonic() - start
                rows = store_rows(run, store, args.spec)
            attempts += rows
            late = sum(r["status"] in ("late", "starved") for r in rows)
            runs.append({"run": run, "exit": code, "wall_s": round(wall, 1),
                         "cells": len({r["cell"] for r in rows}), "attempts": len(rows), "late_or_starved": late,
                         "summary": summary_line(log)})
            print(f"run {run}: exit {code}, {wall:.0f} s, {late} late or starved attempt(s)", flush=True)
    finally:
        machine.stop()
    write_csv(args.out / "attempts.csv", attempts)
    write_csv(args.out / "machine.csv", machine.rows)
    write_csv(args.out / "runs.csv", runs)
    store_option = " --store STORE" if args.store is not None else ""
    (args.out / "command.txt").write_text(
        f"python -m benchmarks.lateness.demo_runs --runs {args.runs} --spec {args.spec}{store_option} "
        f"--timeout-min {args.timeout_min:g} --out {args.out}\n"
        f"machine: {os.cpu_count()} CPUs ({cpu_model()}), Linux {platform.release()}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
