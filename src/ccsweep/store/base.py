"""The result store: one key layout and one set of rules, whatever the backend.

Layout (relative to the store's root or prefix):

    cells/<cell id>/result.json                      the CellResult, written last and once: "done"
    cells/<cell id>/attempt-<hash>/timeseries.json.gz  100 ms time series (TimeSeries)
    cells/<cell id>/attempt-<hash>/<file>            extra files such as uplink.log.gz
    cells/<cell id>/failed/<utc>.json                records of failed attempts (never count as done)
    cells/<cell id>/late/<utc>.json                  records of attempts whose emulator ran late (never count)
    cells/<cell id>/starved/<utc>.json               records of attempts the machine starved (never count)

An attempt record's files (what it measured before it failed, or while late) sit in the same kind
of folder as a result's, attempt-<hash of that record>, and the record lists them in `artifacts`.
    sweeps/<sweep>/manifest.json                     the plan: the spec and where its cells are, written once, last
    sweeps/<sweep>/plan-<sha256>/chunk-<n>.json      the plan's cells, PLAN_CHUNK_CELLS distinct ones per chunk
    sweeps/<sweep>/plan-<sha256>/index-<xx>.json     which chunk holds each cell whose id begins with xx
    sweeps/<sweep>/revisions/<sha256>.json           earlier plans a deliberate spec change (--revise) replaced
    sweeps/<sweep>/unplaceable.json                  cells no node could run when planned (plan --check-nodes)
    traces/<sha256>                                  the trace files the planned cells name, by content
    sweeps/<sweep>/<file>                            figures/*.png|svg, report.html, rebbr.csv

Cells are stored by content-addressed id, not under a sweep, so a cell shared by two sweeps
(figure8 inside full-sweep) runs once.  A cell's files sit in a folder named by the hash of its
record's bytes, so two runners racing on one cell (an Argo retry beside a slow first pod) never
mix: each writes its own folder, exactly one record wins, and the record names its folder.
Backends implement byte-level primitives; the rules (write once, record last, manifests never
silently replaced) live here only.  docs/services.md describes the layout for users.

A plan's cells are stored in chunks, not in its manifest, so that no step holds a whole sweep:
a cell pod reads one index bucket and one chunk, `plan --chunk` the chunks its slice spans, and
`status` one chunk at a time (docs/reliability.md, "Memory").  A manifest of schema 2 (earlier
releases) holds its cells inline and is still read.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ccsweep.cell import Cell, CellParams
from ccsweep.cell import cell_id as id_of_params
from ccsweep.gunzip import gunzip
from ccsweep.result import CellResult, TimeSeries
from ccsweep.spec import SLUG
from ccsweep.specload import normalised_spec
from ccsweep.store.migrations import MANIFEST_SCHEMA_VERSION, ManifestSchemaError, migrate


class StoreError(RuntimeError):
    """A store operation that cannot be done as asked; str() is one line."""


class StoreUnavailable(StoreError):
    """The store cannot be reached right now (server down, network); trying later may work."""


#: Distinct cells per stored chunk of a plan (a chunk is about 0.5 MB of JSON, 7 MB parsed).
PLAN_CHUNK_CELLS: Final = 500


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
    manifest names its `layout` and holds no cells: the store reads them a chunk at a time
    (ResultStore.manifest_chunks).  `cells` holds them inline only in a plan not stored yet and in
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


def chunk_entries(entries: Iterable[ManifestCell], size: int, where: dict[str, int]) -> Iterator[ManifestChunk]:
    """Cut a plan's entries into chunks of `size` distinct cells, holding one chunk at a time.

    `where` is filled with each distinct cell's chunk (the index buckets): about 100 bytes a cell,
    the only part of a plan that grows with the sweep while it is cut.
    """
    entries_now: list[ManifestCell] = []
    repeats: list[int] = []
    distinct = 0
    for entry in entries:
        if entry.id in where:
            repeats.append(len(entries_now))
        else:
            if distinct == size:
                yield ManifestChunk(index=len(where) // size - 1, entries=entries_now, repeats=repeats)
                entries_now, repeats, distinct = [], [], 0
            where[entry.id] = len(where) // size
            distinct += 1
        entries_now.append(entry)
    if entries_now:
        yield ManifestChunk(index=(len(where) - 1) // size, entries=entries_now, repeats=repeats)


class UnplaceableCells(BaseModel):
    """The cells of a sweep that no node could run when its plan step looked (`ccsweep plan
    --check-nodes`), each with why: left out of the fan-out, counted apart by `status` and the report."""

    model_config = ConfigDict(extra="forbid")
    sweep: str
    checked_at: str
    #: cell id -> one line: the algorithm no node offers and the nodes' kernels.
    cells: dict[str, str]


class ResultStore(ABC):
    """Results of cells and the files of sweeps, behind a URL (file://, s3://)."""

    url: str

    # Byte-level primitives each backend provides.
    @abstractmethod
    def read_bytes(self, key: str) -> bytes | None:
        """The object's bytes, or None if there is none."""

    @abstractmethod
    def write_bytes(self, key: str, data: bytes, *, content_type: str = "application/octet-stream",
                    exclusive: bool = False) -> bool:
        """Write a whole object atomically (readers never see a part of it).

        With exclusive=True an existing object is left untouched and False is returned.
        """

    @abstractmethod
    def exists(self, key: str) -> bool: ...

    @abstractmethod
    def list_keys(self, prefix: str) -> list[str]:
        """Keys below a prefix, sorted."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove an object if it exists (only a losing attempt's own files are ever removed)."""

    # Cells.
    def has_result(self, cell_id: str) -> bool:
        return self.exists(record_key(cell_id))

    def put_cell(self, result: CellResult, timeseries: TimeSeries | None = None,
                 files: dict[str, Path] | None = None) -> bool:
        """Store a finished cell: files first, the record last and only once.

        Returns False (and leaves the stored cell as it was) when a record for this cell is
        already stored.  A failed or late result is kept as an attempt record (failed/, late/)
        with its files, for diagnosis and for the report, and never marks the cell done.
        """
        cell_id = result.cell.id
        blobs: dict[str, bytes] = {}
        if timeseries is not None:
            blobs[TIMESERIES] = gzip.compress(timeseries.model_dump_json().encode())
        for name, path in (files or {}).items():
            blobs[name] = path.read_bytes()
        record = result.model_copy(update={"artifacts": list(blobs)}).model_dump_json(indent=1).encode()
        if result.status != "ok":
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
            self.put_attempt(attempt_record_key(cell_id, result.status, stamp), record, blobs)
            return True
        if self.has_result(cell_id):
            return False
        return self.commit_cell(cell_id, record, blobs)

    def put_attempt(self, key: str, record: bytes, files: dict[str, bytes]) -> None:
        """Write an attempt that does not count (ATTEMPT_STATUSES): its files in its own folder, then its record."""
        cell_id = key.split("/")[1]
        folder = attempt_folder(cell_id, record)
        for name, data in files.items():
            self.write_bytes(f"{folder}/{name}", data, content_type=content_type_of(name))
        self.write_bytes(key, record, content_type="application/json")

    def attempt_files(self, key: str) -> dict[str, bytes]:
        """The files stored with an attempt record (its `artifacts`), by name; {} without a record."""
        record = self.read_bytes(key)
        if record is None:
            return {}
        folder = attempt_folder(key.split("/")[1], record)
        names = json.loads(record).get("artifacts") or []  # read as it is: its files are wanted even so
        return {name: data for name in names if (data := self.read_bytes(f"{folder}/{name}")) is not None}

    def commit_cell(self, cell_id: str, record: bytes, files: dict[str, bytes]) -> bool:
        """Write one attempt of a cell: its files in the record's own folder, then the record, once.

        When another attempt's record is already there, this attempt's files are removed again
        and False is returned: a reader only ever finds the files of the record it read.
        """
        folder = attempt_folder(cell_id, record)
        for name, data in files.items():
            self.write_bytes(f"{folder}/{name}", data, content_type=content_type_of(name))
        if self.write_bytes(record_key(cell_id), record, content_type="application/json", exclusive=True):
            return True
        if self.read_bytes(record_key(cell_id)) != record:  # identical bytes would share the folder
            for name in files:
                self.delete(f"{folder}/{name}")
        return False

    def has_attempt(self, cell_id: str, status: str) -> bool:
        """Whether any attempt of a kind (ATTEMPT_STATUSES) is kept, readable or not."""
        return bool(self.list_keys(attempt_prefix(cell_id, status)))

    def latest_attempt(self, cell_id: str, status: str) -> CellResult | None:
        """The newest attempt record of a kind (ATTEMPT_STATUSES); None when there is none or it is unreadable."""
        keys = self.list_keys(attempt_prefix(cell_id, status))
        return self._read_attempt(keys[-1]) if keys else None

    def attempts(self, cell_id: str, status: str) -> list[CellResult]:
        """Every readable attempt record of a kind, oldest first: what running a cell cost beyond its result."""
        found = (self._read_attempt(key) for key in self.list_keys(attempt_prefix(cell_id, status)))
        return [attempt for attempt in found if attempt is not None]

    def _read_attempt(self, key: str) -> CellResult | None:
        data = self.read_bytes(key)
        try:
            return CellResult.model_validate_json(data) if data is not None else None
        except ValidationError:
            return None

    def get_result(self, cell_id: str) -> CellResult | None:
        data = self.read_bytes(record_key(cell_id))
        return CellResult.model_validate_json(data) if data is not None else None

    def get_timeseries(self, cell_id: str) -> TimeSeries | None:
        """The cell's stored time series (None without one), unpacked to at most
        MAX_TIMESERIES_BYTES; past that, or not a gzip'd time series, a one-line StoreError."""
        data = self.get_cell_file(cell_id, TIMESERIES)
        if data is None:
            return None
        try:
            return TimeSeries.model_validate_json(gunzip(data, MAX_TIMESERIES_BYTES))
        except ValueError as exc:  # TooLarge, NotGzip, or a ValidationError
            raise StoreError(f"cell {cell_id}: its stored {TIMESERIES}: {' '.join(str(exc).split())[:200]}") from None

    def get_cell_file(self, cell_id: str, name: str) -> bytes | None:
        """A file stored with the cell's record (None without a record or without that file)."""
        record = self.read_bytes(record_key(cell_id))
        if record is None:
            return None
        return self.read_bytes(f"{attempt_folder(cell_id, record)}/{name}")

    # Sweeps.
    def put_manifest(self, manifest: SweepManifest, *, revise: bool = False,
                     entries: Iterable[ManifestCell] | None = None) -> SweepManifest:
        """Record a sweep's plan once; return the stored one (an earlier or racing planner's).

        The plan's cells (`entries`, else the manifest's inline ones) are written in chunks first,
        one chunk held at a time, and the manifest naming them last: a reader never finds a
        manifest whose chunks are not there.  A different spec stored under the same name is
        refused: results gathered under the old plan keep their meaning. With `revise` (the spec
        was changed on purpose, such as a Sweep edited to add a loss rate) the old manifest is kept
        under revisions/ (its chunks stay in their own folder) and the new one takes its place;
        cells are stored by content, so only the new plan's new cells need to run.
        """
        key = manifest_key(manifest.name)
        stored = self.get_manifest(manifest.name)
        if stored is not None and not (revise and normalised_spec(stored.spec) != manifest.spec):
            if normalised_spec(stored.spec) != manifest.spec:
                raise self.spec_conflict(manifest.name)
            return stored
        header = self._put_chunks(manifest, manifest.cells if entries is None else entries)
        data = header.model_dump_json(indent=1).encode()
        if stored is not None:
            old = stored.model_dump_json(indent=1).encode()
            revision = f"{sweep_prefix(manifest.name)}/revisions/{hashlib.sha256(old).hexdigest()[:16]}.json"
            self.write_bytes(revision, old, content_type="application/json", exclusive=True)
            self.write_bytes(key, data, content_type="application/json")
            return header
        if self.write_bytes(key, data, content_type="application/json", exclusive=True):
            return header
        stored = self.get_manifest(manifest.name)
        assert stored is not None, f"{key}: exclusive write refused but nothing stored"
        if normalised_spec(stored.spec) != manifest.spec:
            raise self.spec_conflict(manifest.name)
        return stored

    def _put_chunks(self, manifest: SweepManifest, entries: Iterable[ManifestCell]) -> SweepManifest:
        """Write the plan's chunks and index buckets; the manifest (schema 3) that names them.

        Two planners of one spec write the same bytes under the same keys, so a race is harmless.
        """
        folder = plan_folder(manifest.spec)
        where: dict[str, int] = {}
        chunks = entry_count = 0
        for chunk in chunk_entries(entries, PLAN_CHUNK_CELLS, where):
            self.write_bytes(plan_chunk_key(manifest.name, folder, chunk.index), chunk.model_dump_json().encode(),
                             content_type="application/json")
            chunks, entry_count = chunks + 1, entry_count + len(chunk.entries)
        buckets: dict[str, dict[str, int]] = {}
        for cell_id, index in where.items():
            buckets.setdefault(cell_id[:2], {})[cell_id] = index
        for bucket, ids in sorted(buckets.items()):
            self.write_bytes(plan_index_key(manifest.name, folder, bucket), json.dumps(ids).encode(),
                             content_type="application/json")
        layout = ManifestLayout(folder=folder, chunk_size=PLAN_CHUNK_CELLS, chunks=chunks, cells=len(where),
                                entries=entry_count)
        return manifest.model_copy(update={"cells": [], "layout": layout})

    def manifest_chunks(self, manifest: SweepManifest) -> Iterator[ManifestChunk]:
        """The plan's cells chunk by chunk, in plan order: one chunk in memory at a time."""
        if manifest.layout is None:  # schema 2, or a plan not stored yet: cut its inline cells alike
            yield from chunk_entries(manifest.cells, PLAN_CHUNK_CELLS, {})
            return
        for index in range(manifest.layout.chunks):
            yield self.manifest_chunk(manifest, index)

    def manifest_chunk(self, manifest: SweepManifest, index: int) -> ManifestChunk:
        """Chunk `index` of a stored plan; a chunk missing or unreadable is a one-line StoreError."""
        if manifest.layout is None:
            return next((c for c in self.manifest_chunks(manifest) if c.index == index),
                        ManifestChunk(index=index, entries=[]))
        key = plan_chunk_key(manifest.name, manifest.layout.folder, index)
        data = self.read_bytes(key)
        if data is None:
            raise StoreError(f"{self.location(key)}: missing (the manifest of sweep {manifest.name} names it)")
        try:
            return ManifestChunk.model_validate_json(data)
        except ValidationError as exc:
            raise StoreError(f"{self.location(key)} is not a plan chunk this ccsweep reads: "
                             f"{exc.errors()[0]['msg']}") from None

    def planned_cell(self, manifest: SweepManifest, cell_id: str) -> Cell | None:
        """A planned cell by id (its first entry), reading one index bucket and one chunk."""
        if manifest.layout is None:
            return manifest.find_cell(cell_id)
        if not re.fullmatch(r"[0-9a-f]{2,64}", cell_id):
            return None
        data = self.read_bytes(plan_index_key(manifest.name, manifest.layout.folder, cell_id[:2]))
        index = json.loads(data).get(cell_id) if data is not None else None
        if not isinstance(index, int):
            return None
        chunk = self.manifest_chunk(manifest, index)
        return next((e.to_cell(manifest.name) for e in chunk.entries if e.id == cell_id), None)

    def with_cells(self, manifest: SweepManifest) -> SweepManifest:
        """The manifest with every entry inline: as large as the sweep (figures draw all of it)."""
        if manifest.layout is None:
            return manifest
        entries = [entry for chunk in self.manifest_chunks(manifest) for entry in chunk.entries]
        return manifest.model_copy(update={"layout": None, "cells": entries})

    def spec_conflict(self, sweep: str) -> StoreError:
        """The error for a spec that differs from the one planned under the same sweep name."""
        return StoreError(f"sweep {sweep!r} is already stored in {self.url} with a different spec; "
                          "rename the sweep (--sweep NAME) to keep both, or --revise to replace its plan")

    def get_manifest(self, sweep: str) -> SweepManifest | None:
        """The sweep's stored plan, migrated to this version's schema (store.migrations); a manifest
        this version cannot read is a one-line StoreError."""
        data = self.read_bytes(manifest_key(sweep))
        if data is None:
            return None
        try:  # a manifest of this schema, parsed straight from its bytes (no dict of every cell first)
            return SweepManifest.model_validate_json(data)
        except ValidationError:
            pass  # an earlier schema, or not a manifest: migrate, or say why not
        where = self.location(manifest_key(sweep))
        try:
            document = json.loads(data)
            if not isinstance(document, dict):
                raise ManifestSchemaError("not a JSON object")
            return SweepManifest.model_validate(migrate(document))
        except ValidationError as exc:
            error = exc.errors()[0]
            field = ".".join(str(part) for part in error["loc"]) or "document"
            raise StoreError(f"{where} is not a manifest this ccsweep reads "
                             f"(schema {MANIFEST_SCHEMA_VERSION}): {field}: {error['msg']}") from None
        except ValueError as exc:  # not JSON, or a schema no migration reaches (ManifestSchemaError)
            raise StoreError(f"{where} is not a manifest this ccsweep reads: {' '.join(str(exc).split())[:300]}"
                             ) from None

    # Traces, by content: planning stores the ones its cells name, so cells run without the files.
    def put_unplaceable(self, record: UnplaceableCells) -> None:
        """Record which cells no node could run, replacing the last check's (the nodes may change)."""
        self.write_bytes(unplaceable_key(record.sweep), record.model_dump_json(indent=1).encode(),
                         content_type="application/json")

    def get_unplaceable(self, sweep: str) -> dict[str, str]:
        """The cells the last node check found no node for, with why; {} when none or never checked."""
        data = self.read_bytes(unplaceable_key(sweep))
        if data is None:
            return {}
        try:
            return UnplaceableCells.model_validate_json(data).cells
        except ValidationError:
            raise StoreError(f"{self.location(unplaceable_key(sweep))} is not a record this ccsweep reads") from None

    def put_trace(self, sha256: str, data: bytes) -> None:
        if hashlib.sha256(data).hexdigest() != sha256:
            raise StoreError(f"trace {sha256[:12]}...: content does not match its hash")
        if not self.exists(trace_key(sha256)):
            self.write_bytes(trace_key(sha256), data, content_type="text/plain", exclusive=True)

    def get_trace(self, sha256: str) -> bytes | None:
        """A stored trace's bytes, checked against its hash (None when it is not stored)."""
        data = self.read_bytes(trace_key(sha256))
        if data is not None and hashlib.sha256(data).hexdigest() != sha256:
            raise StoreError(f"{self.location(trace_key(sha256))}: content does not match its hash")
        return data

    def list_sweeps(self) -> list[str]:
        return sorted({k.split("/")[1] for k in self.list_keys("sweeps/") if k.endswith("/manifest.json")})

    def put_sweep_file(self, sweep: str, name: str, data: bytes) -> str:
        """Write a figure, report or export of a sweep (these are rebuilt, so they may be replaced)."""
        key = sweep_file_key(sweep, name)
        self.write_bytes(key, data, content_type=content_type_of(name))
        return self.location(key)

    def put_sweep_stream(self, sweep: str, name: str, source: BinaryIO) -> str:
        """put_sweep_file from a file open at its start: the report of a large sweep is written
        to a temporary file as it is rendered and sent from there, never held whole in memory."""
        key = sweep_file_key(sweep, name)
        self.write_stream(key, source, content_type=content_type_of(name))
        return self.location(key)

    def write_stream(self, key: str, source: BinaryIO, *, content_type: str = "application/octet-stream") -> None:
        """Write (replace) an object from a file open at its start, as atomically as write_bytes.

        This reads the file whole; a backend that can send it in parts overrides it.
        """
        self.write_bytes(key, source.read(), content_type=content_type)

    def sweep_file_names(self, sweep: str) -> list[str]:
        """The names of a sweep's figures, report and exports (its manifest and revisions are not files)."""
        prefix = f"{sweep_prefix(sweep)}/"
        return [key[len(prefix):] for key in self.list_keys(prefix)
                if key != manifest_key(sweep) and not re.match(r"revisions/|plan-[0-9a-f]{16}/", key[len(prefix):])]

    def get_sweep_file(self, sweep: str, name: str) -> bytes | None:
        return self.read_bytes(sweep_file_key(sweep, name))

    def has_sweep_file(self, sweep: str, name: str) -> bool:
        return self.exists(sweep_file_key(sweep, name))

    def sweep_file_location(self, sweep: str, name: str) -> str:
        """Where a sweep's figure, report or export is (or will be), for a person."""
        return self.location(sweep_file_key(sweep, name))

    def location(self, key: str) -> str:
        """Where a key can be found by a person (a path or an s3:// URL)."""
        return f"{self.url.rstrip('/')}/{key}"


TIMESERIES = "timeseries.json.gz"
#: The most a stored time series may unpack to: a 1-hour cell's 36,000 samples take about 6 MB per
#: flow (170 bytes a sample), so 256 MiB holds 40 flows of the longest cell a spec allows.
MAX_TIMESERIES_BYTES = 256 << 20
#: A sweep's HTML report among its files: figures write it, the operator links a finished Sweep to it.
REPORT_FILE = "report.html"


def record_key(cell_id: str) -> str:
    return f"cells/{cell_id}/result.json"


#: Attempts that never count as the cell's result, each kept under cells/<id>/<status>/.
ATTEMPT_STATUSES = ("failed", "late", "starved")


def attempt_prefix(cell_id: str, status: str) -> str:
    assert status in ATTEMPT_STATUSES, status
    return f"cells/{cell_id}/{status}/"


def attempt_record_key(cell_id: str, status: str, stamp: str) -> str:
    return f"{attempt_prefix(cell_id, status)}{stamp}.json"


def attempt_folders_text() -> str:
    """Where a cell's attempts are kept, in words for a message: cells/<id>/failed/, late/ and starved/."""
    first, *others, last = ATTEMPT_STATUSES
    return f"{attempt_prefix('<id>', first)}, {', '.join(f'{s}/' for s in others)} and {last}/"


def manifest_key(sweep: str) -> str:
    return f"{sweep_prefix(sweep)}/manifest.json"


def plan_folder(spec: dict[str, Any]) -> str:
    """The folder of a plan's chunks, named by its spec: a revised plan never writes over a revision's."""
    return f"plan-{hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]}"


def plan_chunk_key(sweep: str, folder: str, index: int) -> str:
    return f"{sweep_prefix(sweep)}/{folder}/chunk-{index:05d}.json"


def plan_index_key(sweep: str, folder: str, bucket: str) -> str:
    return f"{sweep_prefix(sweep)}/{folder}/index-{bucket}.json"


def unplaceable_key(sweep: str) -> str:
    return f"{sweep_prefix(sweep)}/unplaceable.json"


def sweep_prefix(sweep: str) -> str:
    """Where a sweep's files live; a name that is not a slug could leave it (`..`), so it is refused here too."""
    if not re.fullmatch(SLUG, sweep):
        raise StoreError(f"sweep name {sweep[:64]!r}: not a sweep name (lowercase letters, digits and '-')")
    return f"sweeps/{sweep}"


def sweep_file_key(sweep: str, name: str) -> str:
    """A sweep's figure, report or export: `name` is relative to the sweep's folder (e.g. figures/x.png)."""
    return f"{sweep_prefix(sweep)}/{name}"


def trace_key(sha256: str) -> str:
    return f"traces/{sha256}"


def attempt_folder(cell_id: str, record: bytes) -> str:
    """Where the files of the attempt that wrote `record` live: named by the record's SHA-256.

    Every attempt's record differs (start time, host, measurements), so attempts never share a
    folder; re-uploading the same attempt (from the spool) lands in the same one.
    """
    return f"cells/{cell_id}/attempt-{hashlib.sha256(record).hexdigest()[:16]}"


def content_type_of(name: str) -> str:
    """The Content-Type stored with an object (an S3 server hands it to browsers)."""
    types = {".json": "application/json", ".gz": "application/gzip", ".png": "image/png", ".svg": "image/svg+xml",
             ".html": "text/html", ".csv": "text/csv", ".yaml": "application/yaml", ".md": "text/markdown"}
    return types.get(Path(name).suffix, "application/octet-stream")


