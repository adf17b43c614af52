"""Planning: the manifest in the store, stored cells skipped, a pod finding its cell by id."""

import json
from pathlib import Path

import pytest

from ccsweep.plan import cell_from_manifest, plan_sweep
from ccsweep.result import CellResult, Environment
from ccsweep.spec import parse_spec
from ccsweep.store import StoreError, open_store

SPEC = {"name": "p", "experiments": [
    {"name": "a", "cc": ["bbr", "cubic"], "loss": [0, 0.01], "rtt_ms": [10], "bandwidth_mbps": [10], "duration_s": 5},
    # the same cells again under another experiment: planned once
    {"name": "b", "cc": ["bbr"], "loss": [0], "rtt_ms": [10], "bandwidth_mbps": [10], "duration_s": 5},
]}


def test_plan_records_manifest_and_skips_stored_cells(tmp_path: Path):
    store = open_store(str(tmp_path))
    spec = parse_spec(SPEC)
    first = plan_sweep(spec, store)
    assert len(first.cells) == 4 and len(first.pending) == 4 and not first.cached
    manifest = store.get_manifest("p")
    assert [c.experiment for c in manifest.cells].count("b") == 1
    done = first.pending[0]
    env = Environment(hostname="h", kernel="k", available_cc=["bbr"], ccsweep_version="0", python="3")
    store.put_cell(CellResult(cell=done, status="ok", started_at="a", finished_at="b", environment=env))
    second = plan_sweep(spec, store)
    assert [c.id for c in second.cached] == [done.id]
    assert done.id not in {c.id for c in second.pending}


def test_cell_from_manifest_rebuilds_the_same_cell(tmp_path: Path):
    store = open_store(str(tmp_path))
    planned = plan_sweep(parse_spec(SPEC), store)
    for cell in planned.cells:
        assert cell_from_manifest(store, "p", cell.id) == cell
    with pytest.raises(StoreError, match="is not part of sweep 'p'"):
        cell_from_manifest(store, "p", "0" * 16)
    with pytest.raises(StoreError, match="has no manifest"):
        cell_from_manifest(store, "nope", "0" * 16)


def test_node_selector_names_every_algorithm_of_a_cell():
    from ccsweep.expand import expand
    from ccsweep.plan import node_selector

    spec = parse_spec({"name": "m", "experiments": [{"name": "m",
                                                     "mixes": [[{"cc": "bbr"}, {"cc": "cubic", "count": 2}]],
                                                     "loss": [0], "rtt_ms": [10], "bandwidth_mbps": [10],
                                                     "duration_s": 5}]})
    assert node_selector(expand(spec)[0]) == {"ccsweep.io/cc-bbr": "true", "ccsweep.io/cc-cubic": "true"}


def test_a_revised_spec_keeps_the_old_plan_and_runs_only_new_cells(tmp_path: Path):
    store = open_store(str(tmp_path))
    first = plan_sweep(parse_spec(SPEC), store)
    env = Environment(hostname="h", kernel="k", available_cc=["bbr"], ccsweep_version="0", python="3")
    for cell in first.cells:
        store.put_cell(CellResult(cell=cell, status="ok", started_at="a", finished_at="b", environment=env))
    more = {**SPEC, "experiments": [SPEC["experiments"][0] | {"loss": [0, 0.01, 0.02]}, SPEC["experiments"][1]]}
    with pytest.raises(StoreError, match="different spec.*--revise"):
        plan_sweep(parse_spec(more), store)
    revised = plan_sweep(parse_spec(more), store, revise=True)
    assert len(revised.cells) == 6 and {c.id for c in revised.cached} == {c.id for c in first.cells}
    assert len(revised.pending) == 2 and all(c.params.loss == 0.02 for c in revised.pending)
    assert store.get_manifest("p").spec == parse_spec(more).model_dump(mode="json")
    (old,) = store.list_keys("sweeps/p/revisions/")
    assert json.loads(store.read_bytes(old))["spec"] == parse_spec(SPEC).model_dump(mode="json")
    # Planning the revised spec again (the workflow's plan step after the operator's) reads it.
    assert plan_sweep(parse_spec(more), store).cells == revised.cells
