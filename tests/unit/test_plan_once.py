"""Plan once, read the plan everywhere: after planning, nothing expands the spec again.

A trace-driven sweep is planned with its trace files on the trace path; then the files are
removed (and expansion itself is made to fail), and every consumer still works from the stored
manifest: a pod finding its cell and its trace, `ccsweep status`, figures describing cells
without a result, the operator deciding again, and planning the same spec again.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ccsweep.cli import main
from ccsweep.crd import store_name
from ccsweep.plan import cell_from_manifest
from ccsweep.results.data import load_sweep
from ccsweep.results.points import cell_summary
from ccsweep.runner.link import prepare_traces
from ccsweep.specload import parse_spec
from ccsweep.store import StoreError, open_store
from ccsweep.store.base import manifest_key
from ccsweep.storedplan import get_manifest, with_cells
from ccsweep.storeurls import namespace_store
from wholeplan import plan_sweep

#: A small Mahimahi trace: 3 opportunities per ms for 10 ms (36 Mbit/s).
TRACE = "".join(f"{ms}\n" * 3 for ms in range(1, 11))

SPEC = {"name": "cellular-small", "experiments": [
    {"name": "cell", "figure": "cellular", "cc": ["bbr", "cubic"], "loss_percent": [0, 1], "rtt_ms": [40],
     "trace": [{"name": "small", "uplink": "small.up", "downlink": "small.down"}], "duration_s": 5}]}


@pytest.fixture
def planned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A planned trace-driven sweep whose trace files were removed after planning."""
    traces = tmp_path / "traces"
    traces.mkdir()
    for name in ("small.up", "small.down"):
        (traces / name).write_text(TRACE)
    monkeypatch.setenv("CCSWEEP_TRACES", str(traces))
    store = open_store(str(tmp_path / "store"))
    plan = plan_sweep(parse_spec(SPEC), store)
    # The same spec as the operator stores a Sweep of that name in namespace lab (in lab's folder).
    plan_sweep(parse_spec({**SPEC, "name": store_name("lab", SPEC["name"])}),
               open_store(namespace_store(str(tmp_path / "store"), "lab")))
    for path in traces.iterdir():
        path.unlink()

    def no_expansion(*args: object, **kwargs: object) -> None:
        raise AssertionError("expanded after planning")

    monkeypatch.setattr("ccsweep.expand.expand", no_expansion)
    monkeypatch.setattr("ccsweep.expand.expand_experiment", no_expansion)
    return store, plan


def test_the_manifest_holds_every_cell_and_the_traces(planned):
    store, plan = planned
    manifest = with_cells(store, get_manifest(store, "cellular-small"))
    assert [c.id for c in manifest.distinct_cells()] == [c.id for c in plan.cells] and len(plan.cells) == 4
    assert manifest.distinct_cells() == plan.cells
    (sha,) = {t.sha256 for c in plan.cells for t in c.params.traces}
    assert store.get_trace(sha) == TRACE.encode()


def test_a_pod_finds_its_cell_and_its_trace_in_the_store(planned, tmp_path: Path):
    store, plan = planned
    cell = cell_from_manifest(store, "cellular-small", plan.cells[-1].id)
    assert cell == plan.cells[-1]
    from ccsweep.cellrun import _stage_traces

    _stage_traces(store, cell, tmp_path / "work", sys.stderr)
    traces = prepare_traces(cell, tmp_path / "work", lead_s=0, length_s=10)
    assert {p.read_text() for p in traces.values()} == {TRACE}
    with pytest.raises(StoreError, match="is not part of sweep"):
        cell_from_manifest(store, "cellular-small", "0" * 16)


def test_status_figures_and_planning_again_read_the_manifest(planned):
    store, plan = planned
    result = CliRunner().invoke(main, ["status", "--store", store.root.as_posix(), "--sweep", "cellular-small"])
    assert result.exit_code == 1 and "4 cells, 0 stored, 4 without a result" in result.output
    missing = load_sweep(store, "cellular-small").experiments[0].missing
    assert [(m.cell_id, m.summary) for m in missing] == [(c.id, cell_summary(c.params)) for c in plan.cells]
    again = plan_sweep(parse_spec(SPEC), store)
    assert again.cells == plan.cells and [c.id for c in again.pending] == [c.id for c in plan.cells]
    printed = CliRunner().invoke(main, ["plan", "--store", store.root.as_posix(), "--sweep", "cellular-small",
                                       _spec_file(store.root.parent)])
    assert printed.exit_code == 0, printed.output
    assert [item["id"] for item in json.loads(printed.stdout)] == [c.id for c in plan.cells]


def test_the_operator_decides_from_the_manifest(planned, tmp_path: Path):
    reconcile = pytest.importorskip("ccsweep_operator.reconcile")
    store, plan = planned
    sweep = reconcile.SweepObject(name="cellular-small", namespace="lab", uid="u", generation=1,
                                  spec=dict(SPEC))
    decision = reconcile.decide(sweep, reconcile.OperatorSettings(store=f"file://{store.root}"))
    assert decision.status["phase"] == "Pending", decision.status["message"]
    assert decision.status["cells"]["total"] == len(plan.cells) and decision.workflow is not None


def test_an_unreadable_manifest_is_one_line(tmp_path: Path):
    store = open_store(str(tmp_path))
    store.write_bytes(manifest_key("broken"), b'{"name": "broken", "cells": 5}')
    with pytest.raises(StoreError) as err:
        get_manifest(store, "broken")
    assert "is not a manifest this ccsweep reads" in str(err.value) and "\n" not in str(err.value)
    result = CliRunner().invoke(main, ["status", "--store", str(tmp_path), "--sweep", "broken"])
    assert result.exit_code == 2 and "not a manifest" in result.output


def _spec_file(folder: Path) -> str:
    path = folder / "cellular-small.yaml"
    path.write_text(json.dumps(SPEC))
    return str(path)
