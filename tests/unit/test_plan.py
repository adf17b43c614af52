"""Planning: the manifest in the store, stored cells skipped, a pod finding its cell by id."""

import json
from pathlib import Path

import pytest

from ccsweep.expand import expand as expand_cells
from ccsweep.plan import cell_from_manifest
from ccsweep.result import CellResult, Environment
from ccsweep.specload import parse_spec
from ccsweep.store import StoreError, open_store
from ccsweep.storedplan import get_manifest, with_cells
from wholeplan import plan_sweep

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
    manifest = with_cells(store, get_manifest(store, "p"))
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
    assert get_manifest(store, "p").spec == parse_spec(more).model_dump(mode="json")
    (old,) = store.list_keys("sweeps/p/revisions/")
    assert json.loads(store.read_bytes(old))["spec"] == parse_spec(SPEC).model_dump(mode="json")
    # Planning the revised spec again (the workflow's plan step after the operator's) reads it.
    assert plan_sweep(parse_spec(more), store).cells == revised.cells


def test_a_new_description_or_published_overlay_replans_by_itself_and_keeps_every_result(tmp_path: Path):
    """A preset whose words or overlay changed (quick got ReBBR's numbers) is the same sweep: a store
    planned by the earlier release plans it again without --revise; a changed cell still needs it."""
    store = open_store(str(tmp_path))
    first = plan_sweep(parse_spec(SPEC), store)
    env = Environment(hostname="h", kernel="k", available_cc=["bbr"], ccsweep_version="0", python="3")
    store.put_cell(CellResult(cell=first.cells[0], status="ok", started_at="a", finished_at="b", environment=env))
    reworded = {**SPEC, "description": "what the run shows", "experiments": [
        SPEC["experiments"][0] | {"title": "A", "figure": "goodput-vs-loss", "published": ["rebbr-figure8"]},
        SPEC["experiments"][1]]}
    again = plan_sweep(parse_spec(reworded), store)
    assert again.cells == first.cells and [c.id for c in again.cached] == [first.cells[0].id]
    assert get_manifest(store, "p").spec == parse_spec(reworded).model_dump(mode="json")
    assert len(store.list_keys("sweeps/p/revisions/")) == 1
    moved = {**reworded, "experiments": [reworded["experiments"][0] | {"rtt_ms": [20]}, SPEC["experiments"][1]]}
    with pytest.raises(StoreError, match="different spec.*--revise"):
        plan_sweep(parse_spec(moved), store)


def test_chunks_are_cut_from_the_manifest_and_list_only_cells_to_run(tmp_path: Path):
    """An Argo sweep too large for one Workflow runs a Workflow per chunk; each chunk's step reads
    its cells from the stored manifest, so a chunk names the same cells however many are stored."""
    from click.testing import CliRunner

    from ccsweep.cli import main
    from ccsweep.plan import chunk_parallelism, plan_chunk
    from wholeplan import pending_chunks

    spec = {**SPEC, "experiments": [SPEC["experiments"][0] | {"loss": [0, 0.01, 0.02, 0.03, 0.04]}]}   # 10 cells
    store = open_store(str(tmp_path / "store"))
    planned = plan_sweep(parse_spec(spec), store)
    assert [c["cells"] for c in pending_chunks(planned, 4)] == [4, 4, 2]
    env = Environment(hostname="h", kernel="k", available_cc=["bbr"], ccsweep_version="0", python="3")
    for cell in planned.cells[:5]:   # chunk 0 is all stored, chunk 1 one cell of four
        store.put_cell(CellResult(cell=cell, status="ok", started_at="a", finished_at="b", environment=env))
    again = plan_sweep(parse_spec(spec), store)
    assert pending_chunks(again, 4) == [{"chunk": 1, "cells": 3}, {"chunk": 2, "cells": 2}]
    assert [c.id for c in plan_chunk(store, "p", 1, 4)] == [c.id for c in planned.cells[5:8]]
    assert plan_chunk(store, "p", 0, 4) == [] and plan_chunk(store, "p", 3, 4) == []
    assert chunk_parallelism(50, 2) == 25 and chunk_parallelism(5, 8) == 1

    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec))
    chunks = tmp_path / "chunks.json"

    def plan(*args: str) -> list:
        done = CliRunner().invoke(main, ["plan", f"--store={tmp_path / 'store'}", *args], prog_name="ccsweep")
        assert done.exit_code == 0, done.output
        return json.loads(done.stdout)

    # More to run than a chunk holds: no cell in the output (the step result), the chunks in the file.
    assert plan("--chunks-file", str(chunks), "--chunk-size=4", str(spec_file)) == []
    assert json.loads(chunks.read_text()) == [{"chunk": 1, "cells": 3}, {"chunk": 2, "cells": 2}]
    assert [i["id"] for i in plan("--sweep=p", "--chunk=2", "--chunk-size=4")] == [c.id for c in planned.cells[8:]]
    # As many as a chunk holds or fewer: the cells themselves, as before, and no chunk.
    items = plan("--chunks-file", str(chunks), "--chunk-size=5", str(spec_file))
    assert [i["id"] for i in items] == [c.id for c in planned.cells[5:]] and json.loads(chunks.read_text()) == []
    assert set(items[0]) == {"id", "experiment", "node_selector", "deadline_s", "link", "cpu", "memory", "retry_cpu",
                             "retry_memory"}
    done = CliRunner().invoke(main, ["plan", f"--store={tmp_path / 'store'}", "--sweep=nope", "--chunk=0"])
    assert done.exit_code == 2 and "has no manifest" in done.output


def test_the_plan_step_gives_each_items_pod_the_requests_of_its_cost(tmp_path: Path):
    import yaml
    from click.testing import CliRunner

    from ccsweep.cli import main

    spec = tmp_path / "both.yaml"
    spec.write_text(yaml.safe_dump({"name": "both", "experiments": [
        {"name": name, "cc": ["bbr"], "loss_percent": [0], "rtt_ms": [100], "bandwidth_mbps": [100],
         "duration_s": 10, "link": name} for name in ("ccsweep-link", "mahimahi")]}))

    def requests(*args: str) -> dict[str, tuple[str, ...]]:
        done = CliRunner().invoke(main, ["plan", str(spec), "--store", str(tmp_path / "store"), *args])
        assert done.exit_code == 0, done.output
        items = json.loads(done.stdout.strip().splitlines()[-1])
        return {i["link"]: (i["cpu"], i["memory"], i["retry_cpu"], i["retry_memory"]) for i in items}

    # The cost model's, per backend (a flat "1" and "2185m" before, which no 2-core node can hold);
    # a retry asks for twice as much.
    assert requests() == {"ccsweep-link": ("224m", "320Mi", "448m", "640Mi"),
                          "mahimahi": ("490m", "320Mi", "980m", "640Mi")}
    # An override is every cell's first attempt, whatever its backend.
    assert requests("--cell-cpu", "1", "--cell-memory", "1Gi") == {
        link: ("1000m", "1024Mi", "2000m", "2048Mi") for link in ("ccsweep-link", "mahimahi")}


def test_the_plan_step_notes_fast_cells_writing_small_messages_on_stderr(tmp_path: Path):
    """The Argo and operator path says what `ccsweep run` says: a 1 KB writer may set a fast cell's rate.
    Counted over the cells to run, a chunk at a time, so a sweep in chunks is noted too."""
    import yaml
    from click.testing import CliRunner

    from ccsweep.cli import main

    spec = tmp_path / "fast.yaml"
    spec.write_text(yaml.safe_dump({"name": "fast", "experiments": [
        {"name": "small", "cc": ["bbr", "cubic"], "loss_percent": [0], "rtt_ms": [100], "bandwidth_mbps": [100, 400],
         "duration_s": 10},
        {"name": "bulk", "cc": ["bbr"], "loss_percent": [0], "rtt_ms": [100], "bandwidth_mbps": [1000],
         "duration_s": 10, "message_bytes": 65536}]}))

    def plan(*args: str) -> list[str]:
        done = CliRunner().invoke(main, ["plan", str(spec), "--store", str(tmp_path / "store"), *args])
        assert done.exit_code == 0, done.output
        return [line for line in done.stderr.splitlines() if line.startswith("note:")]

    note, = plan("--chunks-file", str(tmp_path / "chunks.json"), "--chunk-size", "1")
    assert note.startswith("note: 2 cell(s) at 400 Mbit/s write messages of under 65536 bytes")
    assert "set message_bytes: 65536" in note
    env = Environment(hostname="h", kernel="k", available_cc=["bbr"], ccsweep_version="0", python="3")
    store = open_store(str(tmp_path / "store"))
    for cell in expand_cells(parse_spec(yaml.safe_load(spec.read_text()))):
        if cell.params.bandwidth_mbps == 400:
            store.put_cell(CellResult(cell=cell, status="ok", started_at="a", finished_at="b", environment=env))
    assert plan() == []  # stored: nothing left to note
