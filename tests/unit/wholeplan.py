"""A sweep's whole plan at once: the oracle the chunked steps are compared with.

ccsweep's steps read a stored plan a chunk at a time (plan.survey, plan.plan_chunk, the local
executor, status, the figures), so none holds a sweep of 100,000 cells whole. Tests plan small
sweeps and compare those steps' answers with this one, which holds every distinct cell, the stored
ones and those to run, as the steps did before they read the plan by chunks.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ccsweep.adaptive import PointRuns, target_value, unwanted_ids
from ccsweep.cell import Cell
from ccsweep.manifest import SweepManifest
from ccsweep.plan import rounds_of, store_plan
from ccsweep.spec import SweepSpec
from ccsweep.store import ResultStore
from ccsweep.storedplan import get_unplaceable, judged_points, stored_manifest, stored_spec, with_cells


@dataclass
class SweepPlan:
    """A sweep's distinct cells (first occurrence wins), split into stored ones and ones to run.

    With adaptive repetitions the manifest plans every run up to each experiment's `max`; `points`
    says per setting how many are wanted after the rounds so far, and `pending` holds only wanted
    cells (a run the rule has not asked for is neither run nor missing).
    """

    manifest: SweepManifest
    cells: list[Cell]
    cached: list[Cell]
    pending: list[Cell]
    points: list[PointRuns] = field(default_factory=list)
    #: Rounds of planning and running the sweep needs at most (1 without adaptive repetitions).
    rounds: int = 1

    @property
    def wanted(self) -> list[Cell]:
        """The cells wanted so far: stored ones and those to run."""
        unwanted, stored = unwanted_ids(self.points), {c.id for c in self.cached}
        return [c for c in self.cells if c.id not in unwanted or c.id in stored]


def plan_sweep(spec: SweepSpec, store: ResultStore, *, revise: bool = False) -> SweepPlan:
    """The sweep's stored plan (made and stored now if there is none, plan.store_plan), whole."""
    return whole_plan(store_plan(spec, store, revise=revise), spec, store)


def replan(store: ResultStore, sweep: str) -> SweepPlan:
    """The whole plan of a planned sweep from its stored manifest alone: a later round."""
    manifest = stored_manifest(store, sweep)
    return whole_plan(manifest, stored_spec(manifest), store)


def whole_plan(manifest: SweepManifest, spec: SweepSpec, store: ResultStore) -> SweepPlan:
    """Stored cells, and the wanted ones still to run (adaptive points judged from what is stored)."""
    distinct: dict[str, Cell] = {}
    for entry in with_cells(store, manifest).cells:
        if entry.id not in distinct:
            distinct[entry.id] = entry.to_cell(manifest.name)
    cells = list(distinct.values())
    cached = [c for c in cells if store.has_result(c.id)]
    done = {c.id for c in cached}
    adaptive = any(e.adaptive is not None for e in spec.experiments)
    points = judged_points(store, manifest, spec.experiments,
                           lambda cell_id: target_value(store.get_result(cell_id))) if adaptive else []
    unwanted = unwanted_ids(points)
    return SweepPlan(manifest=manifest, cells=cells, cached=cached,
                     pending=[c for c in cells if c.id not in done and c.id not in unwanted], points=points,
                     rounds=rounds_of(spec))


def without_unplaceable(store: ResultStore, plan: SweepPlan) -> SweepPlan:
    """The plan without the cells its sweep's last node check set aside."""
    unplaceable = get_unplaceable(store, plan.manifest.name)
    return replace(plan, pending=[c for c in plan.pending if c.id not in unplaceable]) if unplaceable else plan


def chunk_cells(cells: list[Cell], index: int, size: int) -> list[Cell]:
    """Chunk `index` of a plan's distinct cells: positions index*size up to (index+1)*size."""
    return cells[index * size:(index + 1) * size]


def pending_chunks(plan: SweepPlan, size: int) -> list[dict[str, int]]:
    """The chunks of `plan` with cells still to run: [{chunk, cells}], `cells` counting those to run;
    [] when the cells to run fit one Workflow (at most `size`)."""
    if len(plan.pending) <= size:
        return []
    todo = {c.id for c in plan.pending}
    counts = [sum(c.id in todo for c in chunk_cells(plan.cells, i, size))
              for i in range(-(-len(plan.cells) // size))]
    return [{"chunk": i, "cells": n} for i, n in enumerate(counts) if n]
