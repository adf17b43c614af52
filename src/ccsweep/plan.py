"""Planning a sweep against a store: the manifest, the cells, which are done, which to run.

Every executor starts here (the local one, `ccsweep plan` in an Argo workflow, the operator), so
they agree on what a sweep is and what is done.  A pod finds its cell again from the stored
manifest, so an Argo fan-out only carries cell ids, never whole cells.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from ccsweep import __version__
from ccsweep.cell import Cell
from ccsweep.expand import expand
from ccsweep.spec import SweepSpec, parse_spec
from ccsweep.store import ManifestCell, ResultStore, StoreError, SweepManifest


@dataclass
class SweepPlan:
    """A sweep's distinct cells (first occurrence wins), split into stored ones and ones to run."""

    cells: list[Cell]
    cached: list[Cell]
    pending: list[Cell]


def plan_sweep(spec: SweepSpec, store: ResultStore) -> SweepPlan:
    """Expand, record the sweep's manifest in the store, and find the cells not stored yet."""
    cells = expand(spec)
    store.put_manifest(SweepManifest(
        name=spec.name,
        spec=spec.model_dump(mode="json"),
        cells=[ManifestCell(id=c.id, experiment=c.experiment) for c in cells],
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        ccsweep_version=__version__,
    ))
    distinct: dict[str, Cell] = {}
    for cell in cells:
        distinct.setdefault(cell.id, cell)
    cached = [c for c in distinct.values() if store.has_result(c.id)]
    done = {c.id for c in cached}
    return SweepPlan(cells=list(distinct.values()), cached=cached,
                     pending=[c for c in distinct.values() if c.id not in done])


#: Node label prefix the chart's node probe sets for each algorithm the node's kernel offers.
CC_LABEL_PREFIX = "ccsweep.io/cc-"


def node_selector(cell: Cell) -> dict[str, str]:
    """Labels a node must carry to run `cell`: one per algorithm, so no node lacking one gets it."""
    return {f"{CC_LABEL_PREFIX}{cc}": "true" for cc in sorted({f.cc for f in cell.params.flows})}


def cell_from_manifest(store: ResultStore, sweep: str, cell_id: str) -> Cell:
    """The cell `cell_id` of a planned sweep, rebuilt from the spec stored in its manifest."""
    manifest = store.get_manifest(sweep)
    if manifest is None:
        raise StoreError(f"sweep {sweep!r} has no manifest in {store.url} (run `ccsweep plan` first)")
    for cell in expand(parse_spec(manifest.spec, origin=f"{sweep} manifest")):
        if cell.id == cell_id:
            return cell
    raise StoreError(f"cell {cell_id} is not part of sweep {sweep!r}")
