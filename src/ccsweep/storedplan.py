"""A plan in the store: how manifest.py's models are laid out in objects, written and read back.

The store keeps bytes by key (store/base.py) and knows no plan; this module is the one that
(de)serialises one, so the rules of a stored plan stand in one place: chunks and index buckets
first, the manifest naming them last and once; a different spec under a stored sweep's name
refused unless revised or different only in how it is described (the old manifest then kept as a
revision); an earlier schema migrated as it is read.  Layout (under sweeps/<sweep>/, keys in store/base.py):

    manifest.json                  the plan: the spec and where its cells are, written once, last
    plan-<sha256>/chunk-<n>.json   the plan's cells, PLAN_CHUNK_CELLS distinct ones per chunk
    plan-<sha256>/index-<xx>.json  which chunk holds each cell whose id begins with xx
    revisions/<sha256>.json        earlier plans a deliberate spec change (--revise) replaced
    unplaceable.json               cells no node could run when planned (plan --check-nodes); each
                                   earlier check kept under revisions/files/unplaceable.json/

A cell pod reads one index bucket and one chunk, `plan --chunk` the chunks its slice spans, and
`status` one chunk at a time: no step holds a whole sweep.  What a stored plan says, read back (its
spec, whether it has adaptive repetitions, its settings judged) is here too: below planning and
status both (plan.py writes plans, sweep_status.py judges them), so neither imports the other to
read one.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final

from pydantic import ValidationError

from ccsweep.adaptive import PointRuns, judge_points
from ccsweep.cell import Cell
from ccsweep.manifest import ManifestCell, ManifestChunk, ManifestLayout, SweepManifest, UnplaceableCells
from ccsweep.spec import Experiment, SpecError, SweepSpec
from ccsweep.specload import normalised_spec, parse_spec
from ccsweep.store import ResultStore, StoreError
from ccsweep.store.base import (
    UNPLACEABLE,
    manifest_key,
    plan_chunk_key,
    plan_folder,
    plan_index_key,
    revision_key,
    unplaceable_key,
)
from ccsweep.store.migrations import MANIFEST_SCHEMA_VERSION, ManifestSchemaError, migrate

#: Distinct cells per stored chunk of a plan (a chunk is about 0.5 MB of JSON, 7 MB parsed).
PLAN_CHUNK_CELLS: Final = 500


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


def get_manifest(store: ResultStore, sweep: str) -> SweepManifest | None:
    """The sweep's stored plan, migrated to this version's schema (store/migrations.py); a manifest
    this version cannot read is a one-line StoreError."""
    data = store.read_bytes(manifest_key(sweep))
    if data is None:
        return None
    try:  # a manifest of this schema, parsed straight from its bytes (no dict of every cell first)
        return SweepManifest.model_validate_json(data)
    except ValidationError:
        pass  # an earlier schema, or not a manifest: migrate, or say why not
    where = store.location(manifest_key(sweep))
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


def put_manifest(store: ResultStore, manifest: SweepManifest, *, revise: bool = False,
                 entries: Iterable[ManifestCell] | None = None) -> SweepManifest:
    """Record a sweep's plan once; return the stored one (an earlier or racing planner's).

    The plan's cells (`entries`, else the manifest's inline ones) are written in chunks first,
    one chunk held at a time, and the manifest naming them last: a reader never finds a
    manifest whose chunks are not there.  A different spec stored under the same name is
    refused: results gathered under the old plan keep their meaning. With `revise` (the spec
    was changed on purpose, such as a Sweep edited to add a loss rate), or when the specs differ
    only in PRESENTATION_FIELDS, the old manifest is kept under revisions/ (its chunks stay in
    their own folder) and the new one takes its place; cells are stored by content, so only the
    new plan's new cells need to run. `entries` are read only when the plan is written.
    """
    key = manifest_key(manifest.name)
    stored = get_manifest(store, manifest.name)
    # Compared as today's model reads it: a default added since it was stored is not a difference.
    known = normalised_spec(stored.spec) if stored is not None else None
    if known is not None and known != manifest.spec and _cells_part(known) == _cells_part(manifest.spec):
        revise = True  # only how the sweep is described and drawn changed: its cells are the same
    if stored is not None and not (revise and known != manifest.spec):
        if known != manifest.spec:
            raise spec_conflict(store, manifest.name)
        return stored
    header = _put_chunks(store, manifest, manifest.cells if entries is None else entries)
    data = header.model_dump_json(indent=1).encode()
    if stored is not None:
        old = stored.model_dump_json(indent=1).encode()
        revision = revision_key(manifest.name, hashlib.sha256(old).hexdigest()[:16])
        store.write_bytes(revision, old, content_type="application/json", exclusive=True)
        store.write_bytes(key, data, content_type="application/json")
        return header
    if store.write_bytes(key, data, content_type="application/json", exclusive=True):
        return header
    stored = get_manifest(store, manifest.name)
    assert stored is not None, f"{key}: exclusive write refused but nothing stored"
    if normalised_spec(stored.spec) != manifest.spec:
        raise spec_conflict(store, manifest.name)
    return stored


#: Spec fields that say how a sweep is described and drawn, not what its cells are. A spec that
#: differs from its stored plan only in these (a preset's description rewritten, published numbers
#: added to its figure) revises the plan by itself (the old one kept as a revision), so a store
#: planned by an earlier release is planned again without --revise, and its results stay found.
PRESENTATION_FIELDS: dict[str, tuple[str, ...]] = {"sweep": ("description",), "experiment": ("title", "published")}


def _cells_part(spec: dict[str, Any]) -> dict[str, Any]:
    """A stored spec (JSON) without its PRESENTATION_FIELDS."""
    experiments = [{k: v for k, v in e.items() if k not in PRESENTATION_FIELDS["experiment"]}
                   if isinstance(e, dict) else e for e in spec.get("experiments", [])]
    return {**{k: v for k, v in spec.items() if k not in PRESENTATION_FIELDS["sweep"]}, "experiments": experiments}


def spec_conflict(store: ResultStore, sweep: str) -> StoreError:
    """The error for a spec that differs from the one planned under the same sweep name."""
    return StoreError(f"sweep {sweep!r} is already stored in {store.url} with a different spec; "
                      "rename the sweep (--sweep NAME) to keep both, or --revise to replace its plan")


def _put_chunks(store: ResultStore, manifest: SweepManifest, entries: Iterable[ManifestCell]) -> SweepManifest:
    """Write the plan's chunks and index buckets; the manifest (schema 3) that names them.

    Two planners of one spec write the same bytes under the same keys, so a race is harmless.
    """
    folder = plan_folder(manifest.spec)
    where: dict[str, int] = {}
    chunks = entry_count = 0
    for chunk in chunk_entries(entries, PLAN_CHUNK_CELLS, where):
        store.write_bytes(plan_chunk_key(manifest.name, folder, chunk.index), chunk.model_dump_json().encode(),
                          content_type="application/json")
        chunks, entry_count = chunks + 1, entry_count + len(chunk.entries)
    buckets: dict[str, dict[str, int]] = {}
    for cell_id, index in where.items():
        buckets.setdefault(cell_id[:2], {})[cell_id] = index
    for bucket, ids in sorted(buckets.items()):
        store.write_bytes(plan_index_key(manifest.name, folder, bucket), json.dumps(ids).encode(),
                          content_type="application/json")
    layout = ManifestLayout(folder=folder, chunk_size=PLAN_CHUNK_CELLS, chunks=chunks, cells=len(where),
                            entries=entry_count)
    return manifest.model_copy(update={"cells": [], "layout": layout})


def manifest_chunks(store: ResultStore, manifest: SweepManifest) -> Iterator[ManifestChunk]:
    """The plan's cells chunk by chunk, in plan order: one chunk in memory at a time."""
    if manifest.layout is None:  # schema 2, or a plan not stored yet: cut its inline cells alike
        yield from chunk_entries(manifest.cells, PLAN_CHUNK_CELLS, {})
        return
    for index in range(manifest.layout.chunks):
        yield manifest_chunk(store, manifest, index)


def manifest_chunk(store: ResultStore, manifest: SweepManifest, index: int) -> ManifestChunk:
    """Chunk `index` of a stored plan; a chunk missing or unreadable is a one-line StoreError."""
    if manifest.layout is None:
        return next((c for c in manifest_chunks(store, manifest) if c.index == index),
                    ManifestChunk(index=index, entries=[]))
    key = plan_chunk_key(manifest.name, manifest.layout.folder, index)
    data = store.read_bytes(key)
    if data is None:
        raise StoreError(f"{store.location(key)}: missing (the manifest of sweep {manifest.name} names it)")
    try:
        return ManifestChunk.model_validate_json(data)
    except ValidationError as exc:
        raise StoreError(f"{store.location(key)} is not a plan chunk this ccsweep reads: "
                         f"{exc.errors()[0]['msg']}") from None


def planned_cell(store: ResultStore, manifest: SweepManifest, cell_id: str) -> Cell | None:
    """A planned cell by id (its first entry), reading one index bucket and one chunk."""
    if manifest.layout is None:
        return manifest.find_cell(cell_id)
    if not re.fullmatch(r"[0-9a-f]{2,64}", cell_id):
        return None
    data = store.read_bytes(plan_index_key(manifest.name, manifest.layout.folder, cell_id[:2]))
    index = json.loads(data).get(cell_id) if data is not None else None
    if not isinstance(index, int):
        return None
    chunk = manifest_chunk(store, manifest, index)
    return next((e.to_cell(manifest.name) for e in chunk.entries if e.id == cell_id), None)


def with_cells(store: ResultStore, manifest: SweepManifest) -> SweepManifest:
    """The manifest with every entry inline: as large as the sweep (figures draw all of it)."""
    if manifest.layout is None:
        return manifest
    entries = [entry for chunk in manifest_chunks(store, manifest) for entry in chunk.entries]
    return manifest.model_copy(update={"layout": None, "cells": entries})


def put_unplaceable(store: ResultStore, record: UnplaceableCells) -> None:
    """Record which cells no node could run: the newest check's is read (the nodes may change), and
    every earlier one is kept among the sweep's file revisions."""
    store.put_sweep_file(record.sweep, UNPLACEABLE, record.model_dump_json(indent=1).encode())


def get_unplaceable(store: ResultStore, sweep: str) -> dict[str, str]:
    """The cells the last node check found no node for, with why; {} when none or never checked."""
    data = store.read_bytes(unplaceable_key(sweep))
    if data is None:
        return {}
    try:
        return UnplaceableCells.model_validate_json(data).cells
    except ValidationError:
        raise StoreError(f"{store.location(unplaceable_key(sweep))} is not a record this ccsweep reads") from None


def stored_manifest(store: ResultStore, sweep: str) -> SweepManifest:
    """A planned sweep's manifest, or StoreError when it was never planned in `store`."""
    manifest = get_manifest(store, sweep)
    if manifest is None:
        raise StoreError(f"sweep {sweep!r} has no manifest in {store.url} (run `ccsweep plan` first)")
    return manifest


def is_adaptive(manifest: SweepManifest) -> bool:
    """Whether a stored plan has adaptive repetitions (a setting's runs are judged together)."""
    return any(e.adaptive is not None for e in stored_spec(manifest).experiments)


def stored_spec(manifest: SweepManifest) -> SweepSpec:
    """The spec a stored plan was made from; one it no longer validates is a StoreError."""
    try:
        return parse_spec(manifest.spec, origin=f"sweep {manifest.name} manifest")
    except SpecError as exc:
        raise StoreError(str(exc)) from None


def judged_points(store: ResultStore, manifest: SweepManifest, experiments: Iterable[Experiment],
                  value_of: Callable[[str], float | None]) -> list[PointRuns]:
    """Every point of a stored plan's adaptive experiments, judged from each run's value
    (`value_of(id)`), the plan read a stored chunk at a time: what is held per run is its id and
    value, never the plan whole (plan.py's plan step and sweep_status.py's judged_whole share it)."""
    experiments = list(experiments)
    rules = {e.name for e in experiments if e.adaptive is not None}
    runs = (entry.to_cell(manifest.name) for chunk in manifest_chunks(store, manifest) for entry in chunk.entries
            if entry.experiment in rules)
    return judge_points(experiments, runs, value_of)
