"""One cell end to end: skip it when stored, stage its traces, run it, store or keep its result.

What `ccsweep cell` does, as a library call: the command only parses its arguments, calls
`run_and_store` and turns the outcome into its one JSON line and exit status. The local executor
runs each cell as such a `ccsweep cell` process (a process per cell isolates failures and lets
Ctrl-C reach each cell's own clean-up), and reads the same outcome back from that line
(`CellOutcome.from_report`), so one type describes a cell's end on both sides.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ccsweep.cell import Cell
from ccsweep.result import CellResult
from ccsweep.store import ResultStore, StoreError, StoreUnavailable


@dataclass
class CellOutcome:
    """How a cell's run ended: `status` is cached, unavailable, interrupted, or the result's own
    (ok, late, starved, failed); for a measured cell, where its result went."""

    cell: Cell
    status: str
    goodput_mbps: float | None = None
    error: str | None = None
    #: The cell's folder in the local spool while its result waits there for the store.
    spooled: Path | None = None
    #: Neither stored nor spooled (both refused): the cell's scratch folder holding its record.
    kept_in: Path | None = None
    #: Runs it took (1 unless late or starved attempts were re-run); for one run, its number.
    attempts: int = 1
    #: The measured record (None when nothing ran: cached, unavailable, interrupted).
    result: CellResult | None = None
    #: Whether the store took the result (None when nothing was measured).
    stored: bool | None = None
    #: Why the store did not take it.
    store_error: str | None = None
    #: A Ctrl-C came while the result was being stored: it is kept, and the caller stops.
    interrupted: bool = False
    #: What a late attempt's lateness was put down to (result.LatenessCause), from its report.
    late_cause: str | None = None

    def report(self) -> dict[str, Any]:
        """The one-line JSON report of `ccsweep cell` (its keys are read by the executor and by tests)."""
        report: dict[str, Any] = {"id": self.cell.id, "experiment": self.cell.experiment, "status": self.status}
        if self.result is None:
            return {**report, "error": self.error} if self.status == "unavailable" else report
        check = self.result.link.selfcheck if self.result.link else None
        return {**report, "attempt": self.attempts, "stored": self.stored,
                "spooled": str(self.spooled) if self.spooled else None,
                "kept_in": str(self.kept_in) if self.kept_in else None, "store_error": self.store_error,
                "goodput_mbps": self.goodput_mbps, "error": self.error, "late": self.result.late,
                "lateness_p99_us": check.lateness_p99_us if check else None,
                "timing": check.measured_text() if check else None, "cpu_share": check.cpu_share if check else None,
                "late_cause": check.late_cause if check else None}

    @classmethod
    def from_report(cls, cell: Cell, report: dict[str, Any], attempts: int) -> CellOutcome:
        """The outcome a `ccsweep cell` process printed (the record itself stays in the store)."""
        spooled, kept_in = report.get("spooled"), report.get("kept_in")
        return cls(cell, report["status"], goodput_mbps=report.get("goodput_mbps"), error=report.get("error"),
                   spooled=Path(spooled) if spooled else None, kept_in=Path(kept_in) if kept_in else None,
                   attempts=attempts, stored=report.get("stored"), store_error=report.get("store_error"),
                   late_cause=report.get("late_cause"))


def run_and_store(cell: Cell, store: ResultStore, *, workdir: Path | None = None, pushgateway: str | None = None,
                  namespace: str | None = None, lateness_threshold_us: float | None = None, executor: str = "local",
                  attempt: int = 1, err: TextIO | None = None, cpu_milli: int | None = None) -> CellOutcome:
    """Run `cell` unless `store` has its result, and store what it measured (or keep it durably).

    An unreachable store neither stops the cell (its result is spooled) nor loses a result
    (store.spool.store_cell). `workdir`: the scratch folder, kept; without it a temporary one,
    removed unless the record had to stay in it (`kept_in`). A Ctrl-C while the cell runs ends
    it as `interrupted`; one while its result is stored waits until the result is kept.
    Warnings (store unreachable, a trace looked for on this machine) are one line each on `err`
    (default: stderr). Live metrics go to `pushgateway`, in groups of `namespace` (a pod's own).
    `cpu_milli`: a cell pod's CPU request (None elsewhere), which sizes the emulator's reservation.
    """
    from ccsweep.runner import CellUnavailable, run_cell
    from ccsweep.runner.netns import deferred_interrupts
    from ccsweep.store.spool import store_cell

    err = err or sys.stderr
    if _stored_already(store, cell, err):
        return CellOutcome(cell, "cached")
    observer = None
    if pushgateway:
        from ccsweep.metrics import CellMetrics

        observer = CellMetrics(pushgateway, cell, namespace=namespace)
    scratch = workdir or Path(tempfile.mkdtemp(prefix=f"ccsweep-{cell.id}-"))
    scratch.mkdir(parents=True, exist_ok=True)
    outcome: CellOutcome | None = None
    try:
        _stage_traces(store, cell, scratch, err)
        try:
            output = run_cell(cell, scratch, observer=observer, lateness_threshold_us=lateness_threshold_us,
                              executor=executor, attempt=attempt, cpu_milli=cpu_milli)
        except CellUnavailable as exc:
            return CellOutcome(cell, "unavailable", error=str(exc), attempts=attempt)
        except KeyboardInterrupt:
            return CellOutcome(cell, "interrupted", attempts=attempt)
        result = output.result
        if observer is not None:
            observer.finish(result)
        outcome = CellOutcome(cell, result.status, goodput_mbps=result.goodput_mbps, error=result.error,
                              attempts=attempt, result=result)
        try:
            with deferred_interrupts():  # a Ctrl-C while storing waits until the result is kept
                kept = store_cell(store, result, output.timeseries, output.files, scratch=scratch, err=err)
                outcome.stored, outcome.spooled, outcome.kept_in = kept.stored, kept.spooled, kept.kept_in
                outcome.store_error = kept.reason
        except KeyboardInterrupt:
            outcome.interrupted = True
        return outcome
    finally:
        if workdir is None and (outcome is None or outcome.kept_in is None):
            shutil.rmtree(scratch, ignore_errors=True)


def _stored_already(store: ResultStore, cell: Cell, err: TextIO) -> bool:
    """Whether the cell is stored; an unreachable store does not stop a cell (its result is spooled)."""
    try:
        return store.has_result(cell.id)
    except StoreUnavailable as exc:
        print(f"ccsweep: warning: {exc}; running the cell anyway", file=err, flush=True)
        return False


def _stage_traces(store: ResultStore, cell: Cell, scratch: Path, err: TextIO) -> None:
    """Fetch the traces planning stored for the cell, so it runs without the trace files here."""
    from ccsweep.runner.link import stage_trace

    for trace in cell.params.traces:
        try:
            data = store.get_trace(trace.sha256)
        except StoreError as exc:  # the trace path may still have it; the runner says if not
            print(f"ccsweep: warning: {exc}; looking for trace {trace.name} on this machine", file=err, flush=True)
            continue
        if data is not None:
            stage_trace(scratch, trace.sha256, data)
