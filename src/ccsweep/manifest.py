"""What a plan is: the manifest models a planned sweep is stored as.

Planning writes these and every step after it reads them (cell pods, `status`, figures, the
operator). They stand apart from the store, which keeps bytes by key and knows no plan: how a plan
is laid out in the store's objects is storedplan.py's, what it means is planning's.  A stored
plan's cells stand in chunks (ManifestChunk), not in its manifest, so that no step holds a
whole sweep (docs/reliability.md, "Memory").  A manifest of schema 2 (earlier releases) holds its
cells inline and is still read (store/migrations.py).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ccsweep.cell import Cell, CellParams
from ccsweep.cell import cell_id as id_of_params
from ccsweep.store import StoreError
from ccsweep.store.migrations import MANIFEST_SCHEMA_VERSION


class ManifestCell(BaseModel):
    """One planned cell: its id, the experiment that asked for it and its resolved parameters.

    The parameters are stored, not only the id, so nothing after planning expands the spec again:
    a pod finds its cell here, figures describe a cell that has no result, and a trace file edited
    or removed after planning cannot change what the sweep is.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    experiment: str
    params: CellParams

    @model_validator(mode="after")
    def _id_matches_params(self) -> ManifestCell:
        if self.id != id_of_params(self.params):
            raise ValueError(f"cell {self.id}: id does not match its parameters (manifest edited?)")
        return self

    def to_cell(self, sweep: str) -> Cell:
        return Cell(id=self.id, sweep=sweep, experiment=self.experiment, params=self.params)


class ManifestLayout(BaseModel):
    """Where a stored plan keeps its cells: `chunks` chunk objects in the plan's own folder."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    #: plan-<SHA-256 of the spec>: a revised plan writes its own folder, so a revision keeps its cells.
    folder: str = Field(pattern=r"^plan-[0-9a-f]{16}$")
    chunk_size: int = Field(ge=1)
    chunks: int = Field(ge=0)
    #: Distinct cells (what runs) and entries (with a cell repeated under another experiment).
    cells: int = Field(ge=0)
    entries: int = Field(ge=0)


class ManifestChunk(BaseModel):
    """Up to `chunk_size` distinct cells of a plan, in plan order, and the entries that repeat
    an earlier cell under another experiment (kept where the plan has them, for figures)."""

    model_config = ConfigDict(extra="forbid")
    index: int
    entries: list[ManifestCell]
    #: Positions in `entries` whose id an earlier entry of the plan already has.
    repeats: list[int] = []

    def distinct_cells(self, sweep: str) -> list[Cell]:
        """This chunk's share of the plan's distinct cells, in plan order."""
        skip = set(self.repeats)
        return [entry.to_cell(sweep) for i, entry in enumerate(self.entries) if i not in skip]


class SweepManifest(BaseModel):
    """The one statement of what a sweep is: its spec and every cell planned from it, in order.

    Written once by planning; the executors, pods, `status`, figures and the operator read it.
    The same cell may stand under two experiments (first occurrence wins when it runs).  A stored
    manifest names its `layout` and holds no cells: they are read a chunk at a time
    (storedplan.manifest_chunks).  `cells` holds them inline only in a plan not stored yet and in
    a manifest written as schema 2 (store/migrations.py).
    """

    model_config = ConfigDict(extra="forbid")
    schema_version: Literal[3] = MANIFEST_SCHEMA_VERSION
    name: str
    spec: dict[str, Any]
    cells: list[ManifestCell] = []
    layout: ManifestLayout | None = None
    created_at: str
    ccsweep_version: str

    @model_validator(mode="after")
    def _cells_in_one_place(self) -> SweepManifest:
        if self.layout is not None and self.cells:
            raise ValueError("a manifest with a chunk layout holds no cells inline")
        return self

    def distinct_cells(self) -> list[Cell]:
        """Each planned cell once, in plan order (cells held inline only: see with_cells)."""
        seen: dict[str, Cell] = {}
        for entry in self._inline():
            if entry.id not in seen:
                seen[entry.id] = entry.to_cell(self.name)
        return list(seen.values())

    def find_cell(self, wanted: str) -> Cell | None:
        return next((entry.to_cell(self.name) for entry in self._inline() if entry.id == wanted), None)

    def _inline(self) -> list[ManifestCell]:
        if self.layout is not None:
            raise StoreError(f"sweep {self.name}: its cells are stored in chunks; read them through the store")
        return self.cells


class UnplaceableCells(BaseModel):
    """The cells of a sweep that no node could run when its plan step looked (`ccsweep plan
    --check-nodes`), each with why: left out of the fan-out, counted apart by `status` and the report."""

    model_config = ConfigDict(extra="forbid")
    sweep: str
    checked_at: str
    #: cell id -> one line: the algorithm no node offers and the nodes' kernels.
    cells: dict[str, str]
