"""Planning a sweep: expand it once, store the plan, and say which cells are done and which to run.

Every executor starts here (the local one, `ccsweep plan` in an Argo workflow, the operator), so
they agree on what a sweep is and what is done.  This is the only place a spec is expanded into
cells for a run: the manifest it stores holds every cell with its resolved parameters, and the
trace files those cells name are stored beside it by content.  Everything after (cell pods,
`status`, figures, the operator) reads the manifest, so none needs the spec's trace files, and a
trace edited after planning cannot change a planned sweep.  Planning the same spec again reads
the stored manifest instead of expanding.

The cells are expanded and stored one chunk at a time (storedplan.put_manifest), and the Argo
steps and the local executor read them so (`survey`, `plan_chunk`, `cells_to_run`, storedplan's
planned_cell): memory stays that of a chunk however large the sweep.  A sweep with adaptive
repetitions is judged whole, as its wanted runs depend on each other, but every step reads it so
all the same: a first pass keeps each run's id and value and judges the settings
(storedplan.judged_points, as `status` does), a second reads the chunks with the runs no round has
asked for left out.  No step holds a sweep's whole plan.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ccsweep.adaptive import PointRuns, round_bound, target_value, unwanted_ids
from ccsweep.cell import Cell
from ccsweep.linkrules import small_writes_rates
from ccsweep.manifest import ManifestCell, SweepManifest, UnplaceableCells
from ccsweep.spec import SweepSpec
from ccsweep.store import ResultStore, StoreError
from ccsweep.storedplan import (
    PLAN_CHUNK_CELLS,
    get_unplaceable,
    judged_points,
    manifest_chunk,
    manifest_chunks,
    planned_cell,
    put_manifest,
    put_unplaceable,
    stored_manifest,
    stored_spec,
    with_cells,
)
from ccsweep.version import __version__


def store_plan(spec: SweepSpec, store: ResultStore, *, revise: bool = False) -> SweepManifest:
    """The sweep's stored manifest, made and stored now (one chunk at a time) if there is none.

    A different spec under a stored sweep's name is refused, unless `revise` says the change is
    meant, or only how the sweep is described and drawn changed: then the new plan replaces the old
    one (kept as a revision), see storedplan.put_manifest. The spec is expanded only when a plan is
    written.
    """
    return put_manifest(store, _new_manifest(spec), revise=revise, entries=_planned_entries(spec, store))


def _judged(store: ResultStore, manifest: SweepManifest, spec: SweepSpec) -> list[PointRuns]:
    """The adaptive points of a stored plan ([] without adaptive repetitions), judged from the
    stored runs' goodput, the plan read a chunk at a time (storedplan.judged_points)."""
    if not any(e.adaptive is not None for e in spec.experiments):
        return []
    return judged_points(store, manifest, spec.experiments, lambda cell_id: target_value(store.get_result(cell_id)))


def rounds_of(spec: SweepSpec) -> int:
    """Rounds of planning and running the sweep needs at most (1 without adaptive repetitions)."""
    return max((round_bound(e.adaptive) for e in spec.experiments if e.adaptive is not None), default=1)


@dataclass
class Survey:
    """What the store holds of a planned sweep's distinct cells, read one stored chunk at a time.

    Only ids of cells without a result are kept (about 100 bytes each), and the cells to run
    themselves only while they fit one Workflow (`size`): the plan step and `status` stay within
    a chunk's memory at any sweep size.
    """

    size: int
    #: Distinct cells planned, and those wanted: all but the runs no adaptive round has asked for.
    planned: int = 0
    wanted: int = 0
    #: Distinct cells with a stored result, by experiment.
    stored: Counter[str] = field(default_factory=Counter)
    #: Ids of the cells without a result, not set aside as unplaceable, in plan order.
    missing: list[str] = field(default_factory=list)
    #: Cells without a result set aside as unplaceable (by the last check, or by this one).
    unplaceable: dict[str, str] = field(default_factory=dict)
    #: Chunk (positions index*size up to (index+1)*size) -> its cells to run.
    chunk_counts: dict[int, int] = field(default_factory=dict)
    #: The cells to run, while they are at most `size` (or kept_all); [] beyond.
    to_run: list[Cell] = field(default_factory=list)
    #: With adaptive repetitions: every setting judged from the stored runs, and the rounds it needs at most.
    points: list[PointRuns] = field(default_factory=list)
    rounds: int = 1
    #: Cells to run whose sender may set their rate, per bottleneck rate (linkrules.small_writes_rates).
    small_writes: Counter[float] = field(default_factory=Counter)

    @property
    def cached(self) -> int:
        """Distinct cells with a stored result."""
        return self.stored.total()

    def chunks(self) -> list[dict[str, int]]:
        """The chunks with cells to run: [{chunk, cells}], `cells` counting those to run; [] when
        the cells to run fit one Workflow."""
        if len(self.missing) <= self.size:
            return []
        return [{"chunk": i, "cells": n} for i, n in sorted(self.chunk_counts.items())]


#: Given a chunk's cells to run, those no node can run with why (placement.unplaceable_cells).
UnplaceableCheck = Callable[[list[Cell]], dict[str, str]]


def survey(store: ResultStore, manifest: SweepManifest, size: int, *, set_aside: Mapping[str, str] | None = None,
           check: UnplaceableCheck | None = None, keep_all: bool = False) -> Survey:
    """Count a planned sweep's cells chunk by chunk: stored, set aside (`set_aside`, ids of cells the
    last node check found no node for, and what `check` finds now) and to run, cut in chunks of `size`.
    With `keep_all` every cell to run is kept, however many (a list asked for whole). A sweep with
    adaptive repetitions is judged first (a pass over its plan keeping each run's id and value), and
    the runs no round has asked for are neither wanted nor to run, though they keep their positions."""
    spec = stored_spec(manifest)
    result = Survey(size=size, rounds=rounds_of(spec), points=_judged(store, manifest, spec))
    unwanted = unwanted_ids(result.points)
    for chunk in manifest_chunks(store, manifest):
        todo: list[tuple[int, Cell]] = []
        for cell in chunk.distinct_cells(manifest.name):
            position, result.planned = result.planned, result.planned + 1
            if store.has_result(cell.id):
                result.wanted += 1
                result.stored[cell.experiment] += 1
                continue
            if cell.id in unwanted:
                continue
            result.wanted += 1
            if set_aside and cell.id in set_aside:
                result.unplaceable[cell.id] = set_aside[cell.id]
            else:
                todo.append((position, cell))
        found = check([cell for _, cell in todo]) if check and todo else {}
        result.unplaceable |= found
        result.small_writes.update(small_writes_rates(cell for _, cell in todo if cell.id not in found))
        for position, cell in todo:
            if cell.id in found:
                continue
            result.missing.append(cell.id)
            result.chunk_counts[position // size] = result.chunk_counts.get(position // size, 0) + 1
            if keep_all or len(result.missing) <= size:
                result.to_run.append(cell)
            else:
                result.to_run.clear()
    return result


@dataclass(frozen=True)
class PlanCounts:
    """A sweep's plan in numbers, for the operator: what its Sweep's status says and its Workflow needs."""

    wanted: int
    cached: int
    pending: int
    rounds: int
    #: Chunk Workflows the cells to run need (0: they fit one Workflow).
    chunks: int
    #: Why a cell to run has no node that can run it (the first such cell's reason), else None.
    unplaceable: str | None = None


def plan_counts(spec: SweepSpec, store: ResultStore, *, revise: bool = False,
                check: UnplaceableCheck | None = None) -> PlanCounts:
    """Plan `spec` (store_plan) and count its cells a stored chunk at a time, so the operator's
    memory does not grow with the sweep (one with adaptive repetitions too: see survey)."""
    found = survey(store, store_plan(spec, store, revise=revise), CHUNK_SIZE, check=check)
    return PlanCounts(wanted=found.wanted, cached=found.cached, pending=len(found.missing) + len(found.unplaceable),
                      rounds=found.rounds, chunks=len(found.chunks()),
                      unplaceable=next(iter(found.unplaceable.values()), None))


def set_aside_cells(store: ResultStore, sweep: str, unplaceable: dict[str, str]) -> None:
    """Record the cells no node can run (id -> why), replacing the last check's record."""
    put_unplaceable(store, UnplaceableCells(sweep=sweep, cells=unplaceable,
                                           checked_at=datetime.now(UTC).isoformat(timespec="seconds")))


def _new_manifest(spec: SweepSpec) -> SweepManifest:
    """The manifest of a plan not stored yet; its cells come from _planned_entries."""
    return SweepManifest(name=spec.name, spec=spec.model_dump(mode="json"),
                         created_at=datetime.now(UTC).isoformat(timespec="seconds"), ccsweep_version=__version__)


def _planned_entries(spec: SweepSpec, store: ResultStore) -> Iterator[ManifestCell]:
    """Expand the spec (the one place a run does), one cell at a time, storing each trace the
    cells name when it is first named."""
    from ccsweep.expand import find_trace, iter_cells

    traces: set[str] = set()
    for cell in iter_cells(spec):
        for trace in cell.params.traces:
            if trace.sha256 not in traces:
                store.put_trace(trace.sha256, find_trace(trace.name).read_bytes())
                traces.add(trace.sha256)
        yield ManifestCell(id=cell.id, experiment=cell.experiment, params=cell.params)


#: Node label prefix the chart's node probe sets for each algorithm the node's kernel offers.
CC_LABEL_PREFIX = "ccsweep.io/cc-"
#: Node label the node probe sets to the node's kernel release.
KERNEL_LABEL = "ccsweep.io/kernel"


def node_selector(cell: Cell) -> dict[str, str]:
    """Labels a node must carry to run `cell`: one per algorithm, so no node lacking one gets it,
    and the kernel release when the cell is pinned to one (a `kernels` axis)."""
    labels = {f"{CC_LABEL_PREFIX}{cc}": "true" for cc in sorted({f.cc for f in cell.params.flows})}
    if cell.params.kernel is not None:
        labels[KERNEL_LABEL] = cell.params.kernel
    return labels


def node_selector_refusal(given: str, cell: Cell) -> str | None:
    """Why a cell pod's node selector (`given`, the JSON its template patched into the pod) is not
    the one `node_selector` gives `cell` (one line), or None.

    The cell template applies it as a strategic merge patch over the chart's node pool: a key of
    the pool's would move the pod off the pool, and `{"$patch": "replace"}` would drop the pool
    whole. Whoever may submit a Workflow can name the template with any value, so the pod itself
    (`ccsweep cell`) accepts exactly the plan's labels, which only add to the pool.
    """
    wanted = node_selector(cell)
    try:
        same = json.loads(given) == wanted
    except ValueError:
        same = False
    if same:
        return None
    return (f"--node-selector {given[:120]}: not the node selector the plan gives cell {cell.id} "
            f"({json.dumps(wanted, sort_keys=True)}): a cell pod adds only its algorithms' labels to the chart's pool")


#: What a cell pod spends beside its flows, at most: start-up and set-up (the runner allows 40 s
#: for the emulator and endpoints to come up, 15 s for the flows to end) and storing the result
#: (the spool's 120 s deadline after calls of at most about 30 s each).
POD_OVERHEAD_BUDGET_S = 300


def pod_deadline_s(cell: Cell) -> int:
    """A cell pod's activeDeadlineSeconds: its flows plus the overhead budget, so no cell is cut short."""
    return int(cell.params.duration_s + POD_OVERHEAD_BUDGET_S)


def planned_cells(store: ResultStore, sweep: str) -> list[Cell]:
    """Every distinct cell of a planned sweep, in plan order: as large as the sweep."""
    return with_cells(store, stored_manifest(store, sweep)).distinct_cells()


def cell_from_manifest(store: ResultStore, sweep: str, cell_id: str) -> Cell:
    """The cell `cell_id` of a planned sweep, read from its stored plan (nothing is expanded): its
    manifest, one index bucket and one chunk, whatever the sweep's size."""
    cell = planned_cell(store, stored_manifest(store, sweep), cell_id)
    if cell is None:
        raise StoreError(f"cell {cell_id} is not part of sweep {sweep!r}")
    return cell


#: Cells one Workflow fans out at most (the `chunk-size` parameter of the ccsweep-sweep template).
#: A plan item is about 120 bytes, so 500 stay far below the 256 KiB argoexec keeps of a step's
#: result, and a Workflow of 500 cell pods keeps its compressed status far below Argo's 1 MiB
#: (MAX_WORKFLOW_SIZE), which about 3,000 cells pass (docs/scaling.md).
CHUNK_SIZE = PLAN_CHUNK_CELLS


def chunk_parallelism(parallelism: int, chunks: int) -> int:
    """Each chunk Workflow's share of a sweep's cell pods at once (at least 1), chunks all running."""
    return max(1, -(-parallelism // max(chunks, 1)))


def plan_chunk(store: ResultStore, sweep: str, index: int, size: int) -> list[Cell]:
    """The cells of chunk `index` of a planned sweep still to run (wanted, not stored, nor set aside
    as unplaceable), from its stored plan: only the stored chunks that the slice spans are read. A
    chunk is cut from the plan's distinct cells in plan order (positions index*size up to
    (index+1)*size), not from the cells still to run, so it names the same cells whenever it is read.
    A sweep with adaptive repetitions is judged first, a pass over its plan keeping each run's id and
    value (as survey does): the runs no round has asked for are not to run."""
    if size < 1 or index < 0:
        raise ValueError(f"chunk {index} of size {size}: the index must be >= 0 and the size >= 1")
    manifest = stored_manifest(store, sweep)
    unwanted = unwanted_ids(_judged(store, manifest, stored_spec(manifest)))
    unplaceable = get_unplaceable(store, sweep)
    return [c for c in _distinct_slice(store, manifest, index * size, (index + 1) * size)
            if c.id not in unplaceable and c.id not in unwanted and not store.has_result(c.id)]


def cells_to_run(store: ResultStore, manifest: SweepManifest, found: Survey) -> Iterator[list[Cell]]:
    """The cells a survey found to run (`found.missing`), a chunk of `found.size` at a time in plan
    order, read again from the stored plan: what is held is a chunk's cells and the ids to run."""
    missing = set(found.missing)
    for index in sorted(found.chunk_counts):
        yield [c for c in _distinct_slice(store, manifest, index * found.size, (index + 1) * found.size)
               if c.id in missing]


def _distinct_slice(store: ResultStore, manifest: SweepManifest, start: int, stop: int) -> list[Cell]:
    """The plan's distinct cells at positions start up to stop, reading only the chunks holding them."""
    if manifest.layout is None:  # schema 2: every cell is in memory already
        return manifest.distinct_cells()[start:stop]
    size = manifest.layout.chunk_size
    cells: list[Cell] = []
    for index in range(start // size, min(-(-stop // size), manifest.layout.chunks)):
        chunk = manifest_chunk(store, manifest, index)
        cells += [c for i, c in enumerate(chunk.distinct_cells(manifest.name), index * size) if start <= i < stop]
    return cells
