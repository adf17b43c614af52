"""The plan step as one service: a fresh plan, a later round of adaptive repetitions, or a chunk.

`ccsweep plan` is the first step of every Argo sweep and of every chunk Workflow, and it runs in
three modes. Each mode plans or reads the stored plan its own way (plan.py, storedplan.py); this
module chooses among them and hands back one PlanOutcome, so the command line only formats what
was found and the planning work has one home below it. Whatever cannot be done is raised as the
error that says why (StoreError, SpecError, NodesUnreadable, UnplaceableRefused): the caller picks
the words and the exit code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ccsweep.cell import Cell
from ccsweep.clusternodes import NodesUnreadable, list_nodes
from ccsweep.placement import largest_room, unplaceable_cells
from ccsweep.plan import Survey, UnplaceableCheck, plan_chunk, set_aside_cells, store_plan, survey
from ccsweep.podrequests import CellSizing
from ccsweep.spec import SweepSpec
from ccsweep.store import ResultStore
from ccsweep.storedplan import get_unplaceable, stored_manifest


@dataclass(frozen=True)
class FreshPlan:
    """Plan `spec` (or read its stored plan), checking its cells against the cluster's nodes when asked."""

    spec: SweepSpec
    revise: bool = False
    check_nodes: bool = False
    #: With check_nodes: refuse the whole plan (UnplaceableRefused) when any cell has no node.
    refuse_unplaceable: bool = False


@dataclass(frozen=True)
class Round:
    """Round `number` (2 or more) of a planned sweep with adaptive repetitions, judged from the stored runs."""

    sweep: str
    number: int


@dataclass(frozen=True)
class Chunk:
    """The cells of chunk `index` of a planned sweep still to run (plan.plan_chunk)."""

    sweep: str
    index: int


PlanRequest = FreshPlan | Round | Chunk


@dataclass(frozen=True)
class PlanOutcome:
    """What one plan step found, all its caller prints and writes.

    A fresh plan and a round survey the whole plan (`survey`); a chunk reads only its slice and
    has no survey, its cells to run in `cells`. `sizing` is how cell pods are sized, with the room
    the largest node leaves a retry once the nodes were read.
    """

    sweep: str
    sizing: CellSizing
    survey: Survey | None = None
    cells: list[Cell] | None = None


class UnplaceableRefused(RuntimeError):
    """A fresh plan asked to refuse cells no node can run found some: `reasons` maps each id to why."""

    def __init__(self, reasons: dict[str, str]) -> None:
        super().__init__(f"{len(reasons)} cells no node can run: {next(iter(reasons.values()))}")
        self.reasons = reasons


def plan_step(store: ResultStore, request: PlanRequest, *, chunk_size: int, sizing: CellSizing, keep_all: bool,
              warn: Callable[[str], None]) -> PlanOutcome:
    """Do what `request` asks of `store`'s plans, cutting the cells to run in chunks of `chunk_size`
    (every one kept with `keep_all`, else only while they fit one Workflow). `warn` hears, when it
    happens, why the nodes were not checked although asked to be."""
    if isinstance(request, Chunk):
        return PlanOutcome(request.sweep, sizing, cells=plan_chunk(store, request.sweep, request.index, chunk_size))
    if isinstance(request, Round):
        found = survey(store, stored_manifest(store, request.sweep), chunk_size,
                       set_aside=get_unplaceable(store, request.sweep), keep_all=keep_all)
        return PlanOutcome(request.sweep, sizing, survey=found)
    manifest = store_plan(request.spec, store, revise=request.revise)
    check, sizing = _node_check(sizing, warn) if request.check_nodes else (None, sizing)
    found = survey(store, manifest, chunk_size, check=check, keep_all=keep_all)
    if check is not None:
        if found.unplaceable and request.refuse_unplaceable:
            raise UnplaceableRefused(found.unplaceable)
        set_aside_cells(store, request.spec.name, found.unplaceable)
    return PlanOutcome(request.spec.name, sizing, survey=found)


def _node_check(sizing: CellSizing, warn: Callable[[str], None]) -> tuple[UnplaceableCheck | None, CellSizing]:
    """What tells cells no node of the cluster can run from the rest (placement.unplaceable_cells:
    no node offers their algorithms, or none that does holds their pods), and `sizing` with the room
    the largest node leaves a retry. Nodes that cannot be read for good (not in a cluster, no RBAC)
    give no check, said to `warn`: cells are not checked; an API that does not answer raises
    NodesUnreadable, to be tried again."""
    try:
        nodes = list_nodes()
    except NodesUnreadable as exc:
        if not exc.lasting:
            raise
        warn(f"ccsweep: warning: --check-nodes: {exc}: cells are not checked against the nodes, and a cell "
             "no node offers waits Pending (grant get/list on nodes: the chart's workflow ServiceAccount has it)")
        return None, sizing
    sized = replace(sizing, room=largest_room(nodes))
    return (lambda cells: unplaceable_cells(cells, nodes, sized.pod)), sized
