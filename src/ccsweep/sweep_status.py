"""How complete a planned sweep is, cell by cell: the one answer `ccsweep status`, the figures and
the metrics all read, so a cell is never complete for one of them and missing for another.

Each distinct cell of the stored manifest has one state, from what the store holds, first match:

- stored: a record that counts (measured, with an emulator that kept time: `counts`);
- unwanted: with adaptive repetitions, a run its rule has not asked for (planned, not missing);
- unplaceable: no record, and the plan step found no node to run it (never submitted);
- late: a record flagged late by an earlier version, or an attempt kept under late/;
- failed: a failure record; starved: an attempt the machine starved;
- missing: nothing stored says why (not run yet, or interrupted).

The attempt behind late, failed or starved is kept for a cell whatever its state (the report
shows an unplaceable cell's late attempt too). The manifest is read one stored chunk at a time;
a sweep with adaptive repetitions is judged whole, as its wanted runs depend on each other, but
read in two passes a chunk at a time all the same (`judged_whole`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from ccsweep.adaptive import PointRuns, target_value, unwanted_ids
from ccsweep.cell import Cell
from ccsweep.manifest import ManifestChunk, SweepManifest
from ccsweep.result import CellResult
from ccsweep.spec import Experiment
from ccsweep.store import ResultStore
from ccsweep.storedplan import (
    get_unplaceable,
    is_adaptive,
    judged_points,
    manifest_chunks,
    stored_manifest,
    stored_spec,
)

#: Every state, in the order they are decided (see the module docstring).
STATES = ("stored", "unwanted", "unplaceable", "late", "failed", "starved", "missing")
#: The kinds of attempt a cell without a counted record may have, looked for in this order.
ATTEMPT_KINDS = ("late", "failed", "starved")


def counts(result: CellResult) -> bool:
    """Whether a stored record is a data point: measured, and with an emulator that kept time.

    Records of this version are written only when on time (or, with a link that measured no
    lateness, unmeasured); a record flagged late by its self-check (as earlier versions stored
    them) is shown as late, never drawn.
    """
    return result.status == "ok" and result.late is not True


@dataclass
class CellStatus:
    """One planned cell and what the store says of it."""

    cell: Cell
    state: str
    #: The stored record: one that counts, or (kind late) one flagged late by an earlier version.
    result: CellResult | None = None
    #: late, failed or starved: the first kind of attempt found for a cell without a counted record.
    attempt_kind: str | None = None
    #: That kind's latest attempt (None for a failure record that cannot be read).
    attempt: CellResult | None = None
    #: Why no node could run it, when the plan step set it aside.
    unplaceable: str | None = None

    @property
    def counted(self) -> CellResult | None:
        return self.result if self.state == "stored" else None


def cell_statuses(store: ResultStore, manifest: SweepManifest, unplaceable: dict[str, str]) -> Iterator[CellStatus]:
    """Each distinct cell of `manifest` with its state, one stored chunk at a time; `unwanted` is
    never decided here (judged_whole does, for a sweep with adaptive repetitions)."""
    for _chunk, statuses in chunk_statuses(store, manifest, unplaceable):
        yield from statuses


def chunk_statuses(store: ResultStore, manifest: SweepManifest,
                   unplaceable: dict[str, str]) -> Iterator[tuple[ManifestChunk, Iterator[CellStatus]]]:
    """Each stored chunk of the plan with its distinct cells' states, read as the inner iterator
    is (take it before the next chunk): for a reader that needs the chunk's entries too, as the
    figures do for each cell's experiments, without holding the whole plan."""
    for chunk in manifest_chunks(store, manifest):
        yield chunk, (_status(store, cell, unplaceable.get(cell.id)) for cell in chunk.distinct_cells(manifest.name))
        del chunk  # not held while the next one is read: one parsed chunk (some 4 MiB) at a time


def _status(store: ResultStore, cell: Cell, unplaceable: str | None) -> CellStatus:
    result = store.get_result(cell.id)
    if result is not None and counts(result):
        return CellStatus(cell, "stored", result=result)
    status = CellStatus(cell, "missing", result=result, unplaceable=unplaceable)
    if result is not None:  # flagged late by an earlier version
        status.attempt_kind, status.attempt = "late", result
    else:
        status.attempt_kind, status.attempt = _latest_attempt(store, cell.id)
    status.state = "unplaceable" if result is None and unplaceable is not None else status.attempt_kind or "missing"
    return status


def _latest_attempt(store: ResultStore, cell_id: str) -> tuple[str | None, CellResult | None]:
    """The first kind of attempt stored for the cell, and its latest record."""
    for kind in ATTEMPT_KINDS:
        if kind == "failed":
            if store.has_attempt(cell_id, kind):  # a failure counts even when its record cannot be read
                return kind, store.latest_attempt(cell_id, kind)
        elif (attempt := store.latest_attempt(cell_id, kind)) is not None:
            return kind, attempt
    return None, None


@dataclass
class SweepStatus:
    """A sweep's cells by state, and each cell that is wanted and has no counted record."""

    sweep: str
    by_state: Counter[str] = field(default_factory=Counter)
    #: (cell id, state) of every wanted cell without a counted record, in manifest order.
    unstored: list[tuple[str, str]] = field(default_factory=list)

    @property
    def wanted(self) -> int:
        """Cells the sweep wants a result for: every planned cell but the unwanted runs."""
        return self.by_state.total() - self.by_state["unwanted"]

    def ids(self, *states: str) -> list[str]:
        return [cell_id for cell_id, state in self.unstored if state in states]


def sweep_cells(store: ResultStore, sweep: str) -> Iterator[CellStatus]:
    """Every distinct cell of a planned sweep with its state, unwanted runs decided (a StoreError
    when it has no manifest), one stored chunk at a time."""
    manifest = stored_manifest(store, sweep)
    unplaceable = get_unplaceable(store, sweep)
    if not is_adaptive(manifest):
        yield from cell_statuses(store, manifest, unplaceable)
        return
    _points, chunks = judged_whole(store, manifest, unplaceable, stored_spec(manifest).experiments)
    for _chunk, statuses in chunks:
        yield from statuses


Chunks = Iterator[tuple[ManifestChunk, Iterator[CellStatus]]]


def judged_whole(store: ResultStore, manifest: SweepManifest, unplaceable: dict[str, str],
                 experiments: Iterable[Experiment]) -> tuple[list[PointRuns], Chunks]:
    """A sweep with adaptive repetitions judged whole (its wanted runs depend on each other), yet
    read a stored chunk at a time: a first pass over the plan judges every point from its runs'
    counted values (a number a run is held, not its record), then each chunk's distinct cells
    come with their states, as `chunk_statuses` gives them, the runs no round has asked for
    marked unwanted. Returns the adaptive points and those chunks (read them in order, once)."""
    points = judged_points(store, manifest, experiments, lambda cell_id: _counted_value(store, cell_id))
    unwanted = unwanted_ids(points)

    def marked(statuses: Iterator[CellStatus]) -> Iterator[CellStatus]:
        for status in statuses:
            if status.state != "stored" and status.cell.id in unwanted:
                status.state = "unwanted"
            yield status

    def chunks() -> Chunks:
        for chunk, statuses in chunk_statuses(store, manifest, unplaceable):
            yield chunk, marked(statuses)
            del chunk, statuses  # not held while the next one is read

    return points, chunks()


def _counted_value(store: ResultStore, cell_id: str) -> float | None:
    """A run's value for its point's judgement: only from a record that counts."""
    result = store.get_result(cell_id)
    return target_value(result) if result is not None and counts(result) else None


def sweep_status(store: ResultStore, sweep: str) -> SweepStatus:
    """How many cells of a planned sweep are in each state, and which wanted ones lack a counted record."""
    found = SweepStatus(sweep)
    for status in sweep_cells(store, sweep):
        found.by_state[status.state] += 1
        if status.state not in ("stored", "unwanted"):
            found.unstored.append((status.cell.id, status.state))
    return found
