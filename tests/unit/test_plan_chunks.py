"""A plan stored in chunks: no step after planning holds the whole sweep (docs/reliability.md, Memory).

The chunk size is cut to 4 cells here so that a 10-cell sweep spans three chunks; the memory
these chunks bound at 400 to 40,000 cells is measured by benchmarks/memory, not here.
"""

import json
from pathlib import Path

import pytest

from ccsweep.expand import expand
from ccsweep.manifest import ManifestCell, SweepManifest
from ccsweep.plan import plan_chunk, survey
from ccsweep.result import CellResult, Environment
from ccsweep.specload import parse_spec
from ccsweep.store import StoreError, open_store
from ccsweep.store.base import manifest_key
from ccsweep.storedplan import get_manifest, manifest_chunk, planned_cell, with_cells
from wholeplan import pending_chunks, plan_sweep

SPEC = {"name": "p", "experiments": [
    {"name": "a", "cc": ["bbr", "cubic"], "loss": [0, 0.01, 0.02, 0.03, 0.04], "rtt_ms": [10],
     "bandwidth_mbps": [10], "duration_s": 5},
    # a cell of `a` again under another experiment: one more entry, no more cells
    {"name": "b", "cc": ["bbr"], "loss": [0], "rtt_ms": [10], "bandwidth_mbps": [10], "duration_s": 5},
]}
ENV = Environment(hostname="h", kernel="k", available_cc=["bbr"], ccsweep_version="0", python="3")


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ccsweep.storedplan.PLAN_CHUNK_CELLS", 4)


def test_a_stored_plan_keeps_its_cells_in_chunks_and_a_cell_is_found_by_its_bucket(tmp_path: Path):
    store = open_store(str(tmp_path))
    spec = parse_spec(SPEC)
    plan_sweep(spec, store)
    manifest = get_manifest(store, "p")
    assert manifest is not None and manifest.schema_version == 3 and manifest.cells == []
    assert manifest.layout is not None and (manifest.layout.chunks, manifest.layout.cells,
                                            manifest.layout.entries) == (3, 10, 11)
    expanded = expand(spec)
    assert [(e.id, e.experiment) for e in with_cells(store, manifest).cells] == [(c.id, c.experiment) for c in expanded]
    last = manifest_chunk(store, manifest, 2)
    assert len(last.entries) == 3 and last.repeats == [2] and len(last.distinct_cells("p")) == 2
    for cell in expanded[:10]:
        assert planned_cell(store, manifest, cell.id) == cell
    assert planned_cell(store, manifest, "0" * 16) is None and planned_cell(store, manifest, "../x") is None
    with pytest.raises(StoreError, match="stored in chunks"):
        manifest.distinct_cells()   # a header has no cells to give: reading it so would silently find none
    assert store.sweep_file_names("p") == []   # the plan's chunks are not figures


@pytest.mark.parametrize("size", [3, 4, 7, 20])
def test_surveying_chunk_by_chunk_agrees_with_the_whole_plan(tmp_path: Path, size: int):
    store = open_store(str(tmp_path))
    spec = parse_spec(SPEC)
    whole = plan_sweep(spec, store)
    for cell in whole.cells[2:7]:
        store.put_cell(CellResult(cell=cell, status="ok", started_at="a", finished_at="b", environment=ENV))
    whole = plan_sweep(spec, store)
    found = survey(store, get_manifest(store, "p"), size)
    assert (found.wanted, found.cached, found.missing) == (10, 5, [c.id for c in whole.pending])
    assert found.chunks() == pending_chunks(whole, size)
    assert found.to_run == (whole.pending if len(whole.pending) <= size else [])
    for index in range(-(-10 // size) + 1):
        assert plan_chunk(store, "p", index, size) == [c for c in whole.cells[index * size:(index + 1) * size]
                                                      if c in whole.pending]


def test_cells_set_aside_are_counted_apart_and_a_check_sees_one_chunk_at_a_time(tmp_path: Path):
    store = open_store(str(tmp_path))
    whole = plan_sweep(parse_spec(SPEC), store)
    seen: list[int] = []

    def check(cells):
        seen.append(len(cells))
        return {c.id: "no node offers cubic" for c in cells if c.params.flows[0].cc == "cubic"}

    found = survey(store, get_manifest(store, "p"), 500, set_aside={whole.cells[0].id: "earlier check"}, check=check)
    assert seen == [3, 4, 2] and len(found.unplaceable) == 6 and found.wanted == 10
    assert found.missing == [c.id for c in whole.cells if c.params.flows[0].cc == "bbr"][1:]


def test_a_revised_plan_leaves_the_revisions_chunks_readable(tmp_path: Path):
    store = open_store(str(tmp_path))
    plan_sweep(parse_spec(SPEC), store)
    old = get_manifest(store, "p")
    plan_sweep(parse_spec({**SPEC, "experiments": SPEC["experiments"][:1]}), store, revise=True)
    new = get_manifest(store, "p")
    assert old.layout and new.layout and old.layout.folder != new.layout.folder and new.layout.entries == 10
    assert len(with_cells(store, old).cells) == 11


def test_a_manifest_of_schema_2_with_its_cells_inline_is_still_read(tmp_path: Path):
    """Earlier releases stored every cell in the manifest: pods, chunks and status read it alike."""
    store = open_store(str(tmp_path))
    spec = parse_spec(SPEC)
    cells = expand(spec)
    inline = SweepManifest(name="p", spec=spec.model_dump(mode="json"), created_at="t", ccsweep_version="0",
                           cells=[ManifestCell(id=c.id, experiment=c.experiment, params=c.params) for c in cells])
    store.write_bytes(manifest_key("p"), json.dumps({**inline.model_dump(mode="json"), "schema_version": 2}).encode())
    manifest = get_manifest(store, "p")
    assert manifest is not None and manifest.layout is None and len(manifest.cells) == 11
    assert planned_cell(store, manifest, cells[9].id) == cells[9]
    assert [c.id for c in plan_chunk(store, "p", 2, 4)] == [c.id for c in cells[8:10]]
    assert survey(store, manifest, 4).chunks() == [{"chunk": 0, "cells": 4}, {"chunk": 1, "cells": 4},
                                                   {"chunk": 2, "cells": 2}]
    assert get_manifest(store, "p") == manifest   # planning again reads it, writes nothing over it
    assert plan_sweep(spec, store).manifest.layout is None
