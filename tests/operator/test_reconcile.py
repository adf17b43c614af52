"""The operator's decisions as plain functions: a Sweep and a store in, a status and a Workflow out.

Stores are real file stores; stored cells are real result records (as `ccsweep cell` writes
them). The Workflow the operator creates is checked against Argo's own JSON schema and against
the sweep WorkflowTemplate it references, so a renamed template parameter breaks a test here.
"""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

import pytest
import yaml

from ccsweep.cell import Cell
from ccsweep.crd import SweepStatus, store_name, sweep_from_resource
from ccsweep.expand import expand
from ccsweep.manifest import SweepManifest
from ccsweep.plan import planned_cells
from ccsweep.result import CellResult, Environment
from ccsweep.specload import parse_spec
from ccsweep.store import ResultStore, open_store
from ccsweep.storedplan import get_manifest, put_manifest, with_cells
from ccsweep.storeurls import namespace_store
from ccsweep_operator.reconcile import (
    OperatorSettings,
    SweepObject,
    cell_phases,
    decide,
    follow,
    owner_of,
    stop_patch,
    with_condition,
    workflow_name,
)
from support.versions import argo_module_dir

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "operator/examples"
#: The quick example's sweep in the store: derived from its namespace and name, not chosen by it.
STORED = store_name("lab", "quick-e2e")


def lab_store(root: Path) -> ResultStore:
    """Namespace lab's folder of the operator's store at `root`: where it plans lab's Sweeps."""
    return open_store(namespace_store(f"file://{root}", "lab"))


def sweep_object(example: str, generation: int = 1, status: dict | None = None) -> SweepObject:
    body = yaml.safe_load((EXAMPLES / example / "sweep.yaml").read_text())
    body["metadata"] |= {"namespace": "lab", "uid": "0d6c1f3e-9a57-4b3e-8f43-5c7e3f1b2a90", "generation": generation}
    body["status"] = status or {}
    return SweepObject.from_body(body)


def settings(store: Path) -> OperatorSettings:
    return OperatorSettings(store=f"file://{store}")


def store_result(store_dir: Path, cell: Cell) -> None:
    env = Environment(hostname="node", kernel="6.18", available_cc=["bbr", "cubic"], ccsweep_version="0.1.0",
                      python="3.11", executor="argo")
    result = CellResult(cell=cell, status="ok", started_at="2026-11-23T00:00:00Z", finished_at="2026-11-23T00:00:06Z",
                        goodput_mbps=9.1, environment=env)
    assert lab_store(store_dir).put_cell(result)


def test_invalid_spec_is_reported_with_one_line_and_runs_nothing(tmp_path: Path):
    decision = decide(sweep_object("invalid-spec"), settings(tmp_path))
    assert decision.workflow is None
    status = SweepStatus.model_validate(decision.status)  # the CRD's status schema holds it
    assert status.phase == "Invalid"
    assert status.message == "Sweep invalid-spec: experiments[warmup]: warmup_s 5.0 must be below duration_s 5.0"
    valid = next(c for c in status.conditions if c.type == "Valid")
    assert (valid.status, valid.reason, valid.message) == ("False", "InvalidSpec", status.message)
    assert not tmp_path.exists() or not any(tmp_path.iterdir()), "nothing is stored for an invalid spec"


def test_new_sweep_is_planned_and_gets_a_workflow_owned_by_it(tmp_path: Path):
    sweep = sweep_object("quick")
    decision = decide(sweep, settings(tmp_path))
    status = SweepStatus.model_validate(decision.status)
    assert status.phase == "Pending"
    assert status.cells.model_dump() == {"total": 2, "cached": 0, "running": 0, "done": 0, "failed": 0}
    # Planned in namespace lab's folder of the store; the Workflow gets the base, its pods derive the same.
    assert status.sweep == STORED and status.store == f"file://{tmp_path}/namespaces/lab"
    assert [(c.type, c.status, c.reason) for c in status.conditions] == [
        ("Valid", "True", "SpecValid"), ("Planned", "True", "Planned"), ("Complete", "False", "WorkflowCreated")]
    workflow = decision.workflow
    assert workflow["metadata"]["name"] == status.workflow == "quick-e2e-1"
    assert owner_of(workflow) == "quick-e2e"
    assert workflow["metadata"]["ownerReferences"] == [{
        "apiVersion": "ccsweep.io/v1alpha1", "kind": "Sweep", "name": "quick-e2e", "uid": sweep.uid,
        "controller": True, "blockOwnerDeletion": True}]
    assert workflow["spec"]["parallelism"] == 2
    params = {p["name"]: p["value"] for p in workflow["spec"]["arguments"]["parameters"]}
    assert params["sweep"] == STORED and params["store"] == f"file://{tmp_path}" and params["cell-cpu"] == "500m"
    # The spec travels resolved: the plan step in the pod expands the same cells.
    shipped = parse_spec(yaml.safe_load(params["spec-yaml"]))
    resource_spec = sweep_from_resource(dict(sweep.spec), sweep.name)[0]
    assert [c.id for c in expand(shipped)] == [c.id for c in expand(resource_spec)]
    store = lab_store(tmp_path)
    manifest = with_cells(store, get_manifest(store, STORED))
    assert [c.id for c in manifest.cells] == [c.id for c in expand(shipped)]
    assert "lateness-threshold-us" not in params  # unset: each cell's own threshold (the template's empty default)


def test_a_sweeps_lateness_threshold_reaches_its_workflow_as_a_number(tmp_path: Path):
    sweep = sweep_object("quick")
    sweep.spec["run"] = {**sweep.spec.get("run", {}), "lateness_threshold_us": 20000}
    workflow = decide(sweep, settings(tmp_path)).workflow
    params = {p["name"]: p["value"] for p in workflow["spec"]["arguments"]["parameters"]}
    assert params["lateness-threshold-us"] == "20000"


def test_an_adaptive_sweep_counts_the_runs_it_wants_and_its_workflow_plans_the_rounds(tmp_path: Path):
    """The operator plans an adaptive sweep with the same rule as every executor: its status counts the
    runs wanted now (min per cell), not the max planned, and says how many rounds the Workflow may run
    (the WorkflowTemplate's round steps run them)."""
    body = yaml.safe_load((EXAMPLES / "quick" / "sweep.yaml").read_text())
    body["spec"]["experiments"] = [{**e, "repetitions": {"min": 3, "max": 20, "target": {"ci_relative": 0.05}}}
                                   for e in body["spec"]["experiments"]]
    body["metadata"] |= {"namespace": "lab", "uid": "0d6c1f3e-9a57-4b3e-8f43-5c7e3f1b2a90", "generation": 1}
    decision = decide(SweepObject.from_body(body), settings(tmp_path))
    status = SweepStatus.model_validate(decision.status)
    assert status.cells is not None and (status.cells.total, status.cells.cached) == (6, 0)  # 2 cells x min 3
    planned = next(c for c in status.conditions if c.type == "Planned")
    assert planned.message == "6 cells, 0 already stored, 6 to run, up to 6 rounds of adaptive repetitions"
    assert decision.workflow is not None
    assert decision.workflow["spec"]["workflowTemplateRef"] == {"name": "ccsweep-sweep"}
    assert len(planned_cells(lab_store(tmp_path), STORED)) == 40  # every run up to max


def test_stored_cells_are_not_run_again(tmp_path: Path):
    sweep = sweep_object("quick")
    cells = expand(parse_spec(yaml.safe_load(decide(sweep, settings(tmp_path)).workflow["spec"]["arguments"]
                                             ["parameters"][0]["value"])))
    store_result(tmp_path, cells[0])
    partly = decide(sweep, settings(tmp_path))
    assert partly.status["cells"]["cached"] == 1 and partly.workflow is not None
    store_result(tmp_path, cells[1])
    # Every cell stored but no report yet: a workflow still draws the figures (its fan-out is empty).
    assert decide(sweep, settings(tmp_path)).workflow is not None
    report = lab_store(tmp_path).put_sweep_file(STORED, "report.html", b"<html></html>")
    done = decide(sweep, settings(tmp_path))
    assert done.workflow is None
    status = SweepStatus.model_validate(done.status)
    assert (status.phase, status.report, status.cells.cached, status.cells.total) == ("Succeeded", report, 2, 2)
    assert status.conditions[-1].reason == "AllCellsCached"


def test_a_sweep_larger_than_a_chunk_shares_its_parallelism_among_the_chunks(tmp_path: Path):
    """More cells to run than one Workflow carries (ccsweep.plan.CHUNK_SIZE): the template runs a
    Workflow per chunk, all at once, so each gets its share of run.parallelism."""
    from ccsweep.plan import CHUNK_SIZE

    body = yaml.safe_load((EXAMPLES / "quick/sweep.yaml").read_text())
    losses = [round(0.001 * n, 3) for n in range(1, CHUNK_SIZE // 2 + 60)]   # 2 algorithms: CHUNK_SIZE + 118 cells
    body["spec"]["experiments"][0]["loss_percent"] = losses
    body["spec"]["run"]["parallelism"] = 301
    body["metadata"] |= {"namespace": "lab", "uid": "u", "generation": 1}
    big = decide(SweepObject.from_body(body), settings(tmp_path))
    assert big.status["cells"]["total"] == 2 * len(losses) > CHUNK_SIZE
    params = {p["name"]: p["value"] for p in big.workflow["spec"]["arguments"]["parameters"]}
    assert big.workflow["spec"]["parallelism"] == 301 and params["chunk-parallelism"] == "151"   # 2 chunks
    # Fewer than a chunk's worth: one Workflow as before, nothing to share.
    small = decide(sweep_object("quick"), settings(tmp_path / "small"))
    assert "chunk-parallelism" not in {p["name"] for p in small.workflow["spec"]["arguments"]["parameters"]}


def test_a_different_spec_under_a_stored_name_fails_with_the_stores_reason(tmp_path: Path):
    put_manifest(lab_store(tmp_path), SweepManifest(
        name=STORED, spec={"name": STORED, "experiments": []}, cells=[], created_at="t", ccsweep_version="0"))
    decision = decide(sweep_object("quick"), settings(tmp_path))
    assert decision.workflow is None
    assert decision.status["phase"] == "Failed"
    assert "already stored" in decision.status["message"] and "rename the sweep" in decision.status["message"]
    assert decision.status["conditions"][-1]["reason"] == "StoreError"


def test_an_edited_sweep_runs_only_its_new_cells(tmp_path: Path):
    first = decide(sweep_object("quick"), settings(tmp_path))
    for cell in planned_cells(lab_store(tmp_path), STORED):
        store_result(tmp_path, cell)
    edited = sweep_object("quick", generation=2)
    experiment = {**edited.spec["experiments"][0], "loss_percent": [1, 2]}
    edited = SweepObject(**{**edited.__dict__, "spec": {**edited.spec, "experiments": [experiment]}})
    decision = decide(edited, settings(tmp_path))
    assert first.workflow is not None and decision.workflow is not None, decision.status["message"]
    status = SweepStatus.model_validate(decision.status)
    assert (status.phase, status.cells.total, status.cells.cached) == ("Pending", 4, 2)
    assert decision.workflow["metadata"]["name"] == "quick-e2e-2"
    assert lab_store(tmp_path).list_keys(f"sweeps/{STORED}/revisions/")


def test_run_store_overrides_the_operators_when_the_chart_allows_it(tmp_path: Path):
    sweep = sweep_object("quick")
    own = tmp_path / "own"
    sweep = SweepObject(**{**sweep.__dict__, "spec": {**sweep.spec, "run": {"store": f"file://{own}/"}}})
    chart = OperatorSettings.from_env({"CCSWEEP_STORE": f"file://{tmp_path}/default",
                                       "CCSWEEP_ALLOWED_STORES": f"file://{tmp_path}/x/*, file://{own}"})
    decision = decide(sweep, chart)
    assert decision.status["phase"] == "Pending" and decision.status["store"] == f"file://{own}/namespaces/lab"
    assert get_manifest(lab_store(own), STORED) is not None


def test_run_link_moves_the_experiments_that_set_none_and_refuses_what_mahimahi_cannot_express(tmp_path: Path):
    sweep = sweep_object("quick")
    moved = SweepObject(**{**sweep.__dict__, "spec": {**sweep.spec, "run": {"link": "mahimahi"}}})
    decision = decide(moved, settings(tmp_path))
    assert decision.status["phase"] == "Pending" and decision.status["sweep"] == STORED
    params = {p["name"]: p["value"] for p in decision.workflow["spec"]["arguments"]["parameters"]}
    shipped = expand(parse_spec(yaml.safe_load(params["spec-yaml"])))
    assert {c.params.link for c in shipped} == {"mahimahi"}
    plain = {c.id for c in expand(sweep_from_resource(dict(sweep.spec), sweep.name)[0])}
    assert not plain & {c.id for c in shipped}
    odd = {**moved.spec, "experiments": [{**moved.spec["experiments"][0], "rtt_ms": [25]}]}
    decision = decide(SweepObject(**{**moved.__dict__, "spec": odd}), settings(tmp_path / "odd"))
    assert decision.status["phase"] == "Invalid" and decision.workflow is None
    assert decision.status["message"] == ("experiments[loss].link: mahimahi cannot delay by 12.5 ms: mm-delay takes "
                                          "whole milliseconds (give an even rtt_ms)")
    # An experiment that asks for ccsweep-link's offloads cannot be moved to Mahimahi, which has none.
    tso = {**moved.spec, "experiments": [{**moved.spec["experiments"][0], "link_offload": "tso"}]}
    decision = decide(SweepObject(**{**moved.__dict__, "spec": tso}), settings(tmp_path / "tso"))
    assert decision.status["phase"] == "Invalid" and decision.workflow is None
    assert decision.status["message"].startswith("experiments[loss].link_offload: tso needs link ccsweep-link")
    own = {**moved.spec, "experiments": [{**moved.spec["experiments"][0], "link": "ccsweep-link"}], "name": "own"}
    kept = sweep_from_resource(own, "own")[0]
    assert {e.link for e in kept.experiments} == {"ccsweep-link"}


@pytest.mark.tools  # Argo's JSON schema from its module source
def test_workflow_is_valid_for_argo_and_passes_only_template_parameters(tmp_path: Path):
    decision = decide(sweep_object("quick"), settings(tmp_path))
    schema = json.loads((argo_module_dir() / "api/jsonschema/schema.json").read_text())
    import jsonschema

    validator = jsonschema.Draft202012Validator(
        {"$ref": "#/definitions/io.argoproj.workflow.v1alpha1.Workflow", "definitions": schema["definitions"]})
    assert [e.message for e in validator.iter_errors(decision.workflow)] == []
    template = yaml.safe_load((REPO / "workflows/templates/ccsweep-sweep.yaml").read_text())
    declared = {p["name"] for p in template["spec"]["arguments"]["parameters"]}
    passed = {p["name"] for p in decision.workflow["spec"]["arguments"]["parameters"]}
    assert passed <= declared, passed - declared
    assert decision.workflow["spec"]["workflowTemplateRef"] == {"name": template["metadata"]["name"]}


def test_workflow_names_fit_in_a_label():
    long = SweepObject(name="s" * 60, namespace="n", uid="abcdef12-0000", generation=12, spec={})
    assert len(workflow_name(long)) <= 63
    assert workflow_name(long) != workflow_name(SweepObject(**{**long.__dict__, "generation": 13}))
    assert workflow_name(SweepObject(name="quick", namespace="n", uid="u", generation=3, spec={})) == "quick-3"


def test_condition_time_moves_only_on_a_status_change():
    first = with_condition([], "Complete", False, "WorkflowRunning", "1 running", 1)
    first[0]["lastTransitionTime"] = "2026-01-01T00:00:00Z"
    same = with_condition(first, "Complete", False, "WorkflowRunning", "2 running", 1)
    assert same[0]["lastTransitionTime"] == "2026-01-01T00:00:00Z" and same[0]["message"] == "2 running"
    flipped = with_condition(same, "Complete", True, "WorkflowSucceeded", "", 1)
    assert flipped[0]["lastTransitionTime"] != "2026-01-01T00:00:00Z"


# -- following a Workflow ----------------------------------------------------------------------

def cell_node(cell_id: str, node_type: str, phase: str) -> dict:
    return {"id": f"{cell_id}-{node_type}", "type": node_type, "phase": phase,
            "templateRef": {"name": "ccsweep-cell", "template": "cell"},
            "inputs": {"parameters": [{"name": "sweep", "value": "quick-e2e"}, {"name": "id", "value": cell_id}]}}


def workflow(phase: str, nodes: list[dict], name: str = "quick-e2e-1", **status) -> dict:
    return {"metadata": {"name": name, "namespace": "lab", "ownerReferences": [
                {"apiVersion": "ccsweep.io/v1alpha1", "kind": "Sweep", "name": "quick-e2e", "controller": True}]},
            "status": {"phase": phase, "nodes": {n["id"]: n for n in nodes}, **status}}


def planned(tmp_path: Path) -> SweepObject:
    return sweep_object("quick", status=decide(sweep_object("quick"), settings(tmp_path)).status)


def test_cell_phase_is_the_retry_nodes_outcome():
    nodes = [cell_node("a", "Retry", "Failed"), cell_node("a", "Pod", "Succeeded"), cell_node("b", "Pod", "Running"),
             {"id": "plan", "type": "Pod", "phase": "Succeeded", "templateName": "plan"}]
    assert cell_phases(workflow("Running", nodes)) == {"a": "Failed", "b": "Running"}


def test_cells_of_every_link_backend_are_counted():
    """A `link: mahimahi` cell runs from its own template (its descriptor's pod_template); it is a cell all the same."""
    mahimahi = [{**cell_node("m", kind, phase), "templateRef": {"name": "ccsweep-cell", "template": "cell-mahimahi"}}
                for kind, phase in (("Retry", "Succeeded"), ("Pod", "Succeeded"))]
    skipped = {"id": "s", "type": "Skipped", "phase": "Skipped", "templateRef": {"name": "ccsweep-cell",
                                                                                "template": "cell-mahimahi"}}
    nodes = [cell_node("a", "Pod", "Running"), *mahimahi, skipped]
    assert cell_phases(workflow("Running", nodes)) == {"a": "Running", "m": "Succeeded"}


def test_cell_phases_are_read_from_compressed_nodes_too():
    """Argo compresses a large workflow's nodes (gzip + base64) into status.compressedNodes."""
    nodes = [cell_node("a", "Pod", "Succeeded"), cell_node("b", "Pod", "Running")]
    packed = base64.b64encode(gzip.compress(json.dumps({n["id"]: n for n in nodes}).encode())).decode()
    compressed = workflow("Running", [], compressedNodes=packed)
    del compressed["status"]["nodes"]
    assert cell_phases(compressed) == {"a": "Succeeded", "b": "Running"}


def test_running_workflow_counts_cells(tmp_path: Path):
    sweep = planned(tmp_path)
    nodes = [cell_node("a", "Retry", "Running"), cell_node("b", "Retry", "Succeeded")]
    patch = follow(sweep, workflow("Running", nodes, startedAt="2026-11-23T01:00:00Z"))
    assert patch["phase"] == "Running"
    assert patch["cells"] == {"total": 2, "cached": 0, "running": 1, "done": 1, "failed": 0}
    assert patch["startedAt"] == "2026-11-23T01:00:00Z" and patch["finishedAt"] is None
    SweepStatus.model_validate({**sweep.status, **patch})


def test_later_rounds_of_adaptive_repetitions_add_to_the_total(tmp_path: Path):
    """The first plan counted 2 cells; a second round ran 2 more: the total follows the cells run."""
    nodes = [cell_node(c, "Retry", "Succeeded") for c in "abc"] + [cell_node("d", "Retry", "Running")]
    patch = follow(planned(tmp_path), workflow("Running", nodes))
    assert patch["cells"] == {"total": 4, "cached": 0, "running": 1, "done": 3, "failed": 0}


def test_a_sweep_run_in_chunks_counts_the_cells_of_every_chunk(tmp_path: Path):
    """A large sweep's cells run in chunk Workflows (the sweep's Workflow has only chunk pods): the
    Sweep counts them there, and a spent failure budget stops the chunks with the sweep's Workflow."""
    from ccsweep_operator.reconcile import has_chunks

    sweep = planned(tmp_path)
    chunk_pod = {"id": "chunk-0", "type": "Pod", "phase": "Running", "templateName": "chunk"}
    parent = workflow("Running", [chunk_pod, {"id": "plan", "type": "Pod", "phase": "Succeeded",
                                              "templateName": "plan"}])
    chunks = [workflow("Running", [cell_node("a", "Retry", "Running")], name="ccsweep-chunk-x1"),
              workflow("Running", [cell_node("b", "Retry", "Failed")], name="ccsweep-chunk-x2")]
    assert has_chunks(parent) and not has_chunks(chunks[0])
    assert follow(sweep, parent)["cells"]["running"] == 0   # what the sweep's Workflow alone says
    patch = follow(sweep, parent, chunks=chunks)
    assert (patch["cells"]["running"], patch["cells"]["done"], patch["cells"]["failed"]) == (1, 0, 1)
    budget = SweepObject.from_body({"metadata": {"name": sweep.name, "namespace": "lab", "uid": sweep.uid},
                                    "spec": {**sweep.spec, "run": {**sweep.spec["run"], "max_failed_cells": 0}},
                                    "status": dict(sweep.status)})
    assert stop_patch(budget, parent) is None
    assert stop_patch(budget, parent, chunks) == {"spec": {"shutdown": "Stop"}}


def test_succeeded_workflow_names_the_report(tmp_path: Path):
    sweep = planned(tmp_path)
    nodes = [cell_node("a", "Retry", "Succeeded"), cell_node("b", "Retry", "Succeeded")]
    patch = follow(sweep, workflow("Succeeded", nodes, startedAt="2026-11-23T01:00:00Z",
                                   finishedAt="2026-11-23T01:01:00Z"))
    assert patch["phase"] == "Succeeded"
    assert patch["report"] == str(tmp_path / "namespaces" / "lab" / "sweeps" / STORED / "report.html")
    assert patch["conditions"][-1]["reason"] == "WorkflowSucceeded"
    assert patch["message"] == "2 cells run, 0 were already stored"


def test_failed_workflow_says_how_many_cells_failed(tmp_path: Path):
    nodes = [cell_node("a", "Retry", "Failed"), cell_node("b", "Retry", "Succeeded")]
    patch = follow(planned(tmp_path), workflow("Failed", nodes, message="child 'x' failed"))
    assert patch["phase"] == "Failed"
    assert patch["message"] == "1 cells failed: child 'x' failed"
    assert patch["conditions"][-1]["reason"] == "WorkflowFailed"


def test_deleted_unfinished_workflow_fails_the_sweep_but_old_ones_say_nothing(tmp_path: Path):
    sweep = planned(tmp_path)
    gone = follow(sweep, workflow("Running", []), deleted=True)
    assert gone["phase"] == "Failed" and gone["conditions"][-1]["reason"] == "WorkflowDeleted"
    assert follow(sweep, workflow("Running", [], name="quick-e2e-0"), deleted=True) is None  # an older generation's
    finished = sweep_object("quick", status={**sweep.status, "phase": "Succeeded"})
    assert follow(finished, workflow("Succeeded", []), deleted=True) is None  # its TTL ran out: nothing changes


@pytest.mark.parametrize("example", ["quick", "defaults"])
def test_examples_plan_without_error(tmp_path: Path, example: str):
    assert decide(sweep_object(example), settings(tmp_path)).status["phase"] == "Pending"


def test_unreachable_store_is_retried_not_failed(monkeypatch: pytest.MonkeyPatch):
    """A real refused connection (nothing listens on the port): the sweep waits, it does not fail."""
    from envtest import free_port

    monkeypatch.setenv("CCSWEEP_S3_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("CCSWEEP_S3_ACCESS_KEY", "k")
    monkeypatch.setenv("CCSWEEP_S3_SECRET_KEY", "secret-key")
    monkeypatch.setenv("HOME", "/nonexistent")  # no ~/.config/ccsweep/s3.yaml either
    decision = decide(sweep_object("quick"), OperatorSettings(store="s3://ccsweep/results"))
    assert decision.retry and decision.workflow is None
    assert decision.status["phase"] == "Pending"
    planned = decision.status["conditions"][-1]
    assert (planned["type"], planned["status"], planned["reason"]) == ("Planned", "Unknown", "StoreUnavailable")
    assert decision.status["message"].endswith("(retrying)")


# -- what a Sweep may ask for ------------------------------------------------------------------

def with_run(sweep: SweepObject, **run) -> SweepObject:
    return SweepObject(**{**sweep.__dict__, "spec": {**sweep.spec, "run": {**(sweep.spec.get("run") or {}), **run}}})


def test_an_image_outside_the_allowlist_is_invalid_and_runs_nothing(tmp_path: Path):
    chart = OperatorSettings.from_env({"CCSWEEP_STORE": f"file://{tmp_path}",
                                       "CCSWEEP_ALLOWED_IMAGES": "ccsweep/cell:0.1.0, registry.example.org/lab/*"})
    assert chart.allowed_images == ("ccsweep/cell:0.1.0", "registry.example.org/lab/*")
    decision = decide(with_run(sweep_object("quick"), image="evil.example.com/miner:1"), chart)
    assert decision.workflow is None
    status = SweepStatus.model_validate(decision.status)
    assert status.phase == "Invalid"
    assert status.message == ("Sweep quick-e2e: run.image evil.example.com/miner:1 is not allowed; allowed: "
                              "ccsweep/cell:0.1.0, registry.example.org/lab/* (the chart's operator.allowedImages)")
    assert not tmp_path.exists() or not any(tmp_path.iterdir()), "nothing is planned for a refused image"
    # Without an allowlist (an operator run by hand), only the template's own image runs.
    refused = decide(with_run(sweep_object("quick"), image="ccsweep/cell:0.1.0"), settings(tmp_path))
    assert refused.status["phase"] == "Invalid" and "leave run.image unset" in refused.status["message"]


def test_an_allowed_image_reaches_the_workflow(tmp_path: Path):
    chart = OperatorSettings(store=f"file://{tmp_path}",
                             allowed_images=("ccsweep/cell:0.1.0", "registry.example.org/lab/*"))
    for image in ("ccsweep/cell:0.1.0", "registry.example.org/lab/cell:2@sha256:" + "a" * 64):
        decision = decide(with_run(sweep_object("quick"), image=image), chart)
        params = {p["name"]: p["value"] for p in decision.workflow["spec"]["arguments"]["parameters"]}
        assert params["image"] == image
    # A pattern does not stretch to a look-alike registry.
    assert not chart.image_allowed("registry.example.org.evil.com/lab/cell:1")
    assert not chart.image_allowed("ccsweep/cell:0.1.0-evil")


# -- the failure budget ------------------------------------------------------------------------

def budgeted(tmp_path: Path, budget: int) -> SweepObject:
    sweep = with_run(sweep_object("quick"), max_failed_cells=budget)
    return SweepObject(**{**sweep.__dict__, "status": decide(sweep, settings(tmp_path)).status})


def test_cells_failing_past_the_budget_stop_the_workflow_and_the_sweep_says_why(tmp_path: Path):
    sweep = budgeted(tmp_path, 1)
    one = [cell_node("a", "Retry", "Failed"), cell_node("b", "Retry", "Running")]
    assert stop_patch(sweep, workflow("Running", one)) is None  # within the budget: keep going
    assert follow(sweep, workflow("Running", one))["phase"] == "Running"
    two = [cell_node("a", "Retry", "Failed"), cell_node("b", "Retry", "Error"), cell_node("c", "Retry", "Pending")]
    assert stop_patch(sweep, workflow("Running", two)) == {"spec": {"shutdown": "Stop"}}
    message = "2 cells failed, more than run.max_failed_cells 1: the remaining cells were not run"
    for wf in (workflow("Running", two), workflow("Failed", two, message="Stopped with strategy 'Stop'")):
        patch = follow(sweep, wf)
        assert (patch["phase"], patch["message"]) == ("Failed", message)
        assert patch["conditions"][-1]["reason"] == "FailureBudgetExceeded"
        SweepStatus.model_validate({**sweep.status, **patch})
    stopping = {**workflow("Running", two), "spec": {"shutdown": "Stop"}}
    assert stop_patch(sweep, stopping) is None  # asked once
    assert stop_patch(sweep, workflow("Failed", two)) is None  # finished: nothing to stop


def test_no_budget_and_other_generations_never_stop_a_workflow(tmp_path: Path):
    failing = [cell_node(c, "Retry", "Failed") for c in "abc"]
    assert stop_patch(planned(tmp_path), workflow("Running", failing)) is None
    assert stop_patch(budgeted(tmp_path, 0), workflow("Running", failing, name="quick-e2e-0")) is None
    assert stop_patch(budgeted(tmp_path, 0), workflow("Running", failing[:1])) == {"spec": {"shutdown": "Stop"}}


# -- what a Sweep may reach ----------------------------------------------------------------------

@pytest.mark.parametrize(("run", "message"), [
    ({"store": "s3://victims-bucket/results"},
     "Sweep quick-e2e: run.store s3://victims-bucket/results is not allowed; allowed: s3://ccsweep/results, "
     "s3://ccsweep/teams/* (the chart's store.url and operator.allowedStores)"),
    ({"store": "s3://ccsweep/results-other"},  # a look-alike prefix is not the chart's
     "Sweep quick-e2e: run.store s3://ccsweep/results-other is not allowed; allowed: s3://ccsweep/results, "
     "s3://ccsweep/teams/* (the chart's store.url and operator.allowedStores)"),
    ({"pushgateway": "169.254.169.254:80"},
     "Sweep quick-e2e: run.pushgateway 169.254.169.254:80 is not allowed; allowed: pushgateway.monitoring:9091 "
     "(the chart's workflows.pushgateway and operator.allowedPushgateways)"),
])
def test_a_store_or_pushgateway_the_chart_does_not_list_is_invalid_and_runs_nothing(tmp_path: Path, run: dict,
                                                                                     message: str):
    """The chart's store credentials write only where the chart says, and pods send metrics only to a
    Pushgateway the chart names: a Sweep asking for another fails once, naming the field and the list."""
    chart = OperatorSettings.from_env({"CCSWEEP_STORE": "s3://ccsweep/results",
                                       "CCSWEEP_ALLOWED_STORES": "s3://ccsweep/teams/*",
                                       "CCSWEEP_ALLOWED_PUSHGATEWAYS": "pushgateway.monitoring:9091"})
    opened: list[str] = []
    decision = decide(with_run(sweep_object("quick"), **run), chart, opener=lambda url: opened.append(url) or None)
    status = SweepStatus.model_validate(decision.status)
    assert (status.phase, status.message, decision.retry, decision.workflow) == ("Invalid", message, False, None)
    valid = next(c for c in status.conditions if c.type == "Valid")
    assert (valid.status, valid.reason, valid.message) == ("False", "InvalidSpec", message)
    assert opened == [], "no store is opened for a refused Sweep"


def test_allowed_stores_and_pushgateways_reach_the_workflow(tmp_path: Path):
    chart = OperatorSettings(store=f"file://{tmp_path}/default", allowed_stores=(f"file://{tmp_path}/teams/*",),
                             allowed_pushgateways=("pushgateway.monitoring:9091",))
    decision = decide(with_run(sweep_object("quick"), store=f"file://{tmp_path}/teams/a",
                               pushgateway="pushgateway.monitoring:9091"), chart)
    params = {p["name"]: p["value"] for p in decision.workflow["spec"]["arguments"]["parameters"]}
    assert (params["store"], params["pushgateway"]) == (f"file://{tmp_path}/teams/a", "pushgateway.monitoring:9091")
    # Without a list (an operator run by hand, a chart with no Pushgateway) a Sweep names none.
    bare = decide(with_run(sweep_object("quick"), pushgateway="pushgateway.monitoring:9091"),
                  settings(tmp_path))
    assert bare.status["message"] == ("Sweep quick-e2e: run.pushgateway pushgateway.monitoring:9091 is not allowed; "
                                      "allowed: none besides the chart's own (leave run.pushgateway unset)")


def test_a_sweep_cannot_plan_over_another_namespaces_sweep(tmp_path: Path):
    """The victim's Sweep quick-e2e in namespace lab is planned; another namespace's Sweep of the same
    name, an edit of it (generation 2 re-plans on purpose), and one naming the victim's store name in
    spec.name all leave the victim's manifest as it was."""
    victim = decide(sweep_object("quick"), settings(tmp_path))
    assert victim.status["phase"] == "Pending"
    manifest = tmp_path / "namespaces" / "lab" / "sweeps" / STORED / "manifest.json"
    before = manifest.read_bytes()
    other = sweep_object("quick", generation=2)
    other = SweepObject(**{**other.__dict__, "namespace": "mallory", "spec": {
        **other.spec, "experiments": [{**other.spec["experiments"][0], "loss_percent": [5]}]}})
    theirs = decide(other, settings(tmp_path))
    assert theirs.status["phase"] == "Pending"
    assert theirs.status["sweep"] == store_name("mallory", "quick-e2e") != STORED
    # In its own namespace's folder of the shared store: nothing of it lies in lab's.
    assert theirs.status["store"] == f"file://{tmp_path}/namespaces/mallory"
    assert (tmp_path / "namespaces" / "mallory" / "sweeps" / theirs.status["sweep"] / "manifest.json").is_file()
    for name in (STORED, "quick-e2e-1"):
        named = decide(SweepObject(**{**other.__dict__, "spec": {**other.spec, "name": name}}), settings(tmp_path))
        assert named.status["phase"] == "Invalid" and named.workflow is None
        assert named.status["message"] == (f"Sweep quick-e2e: spec.name {name!r} is not allowed: a Sweep's name in the "
                                           "store is derived from its namespace and metadata.name; leave spec.name "
                                           "unset")
    assert manifest.read_bytes() == before
    assert not (tmp_path / "namespaces" / "lab" / "sweeps" / STORED / "revisions").exists()
    assert sorted(p.name for p in (tmp_path / "namespaces" / "lab" / "sweeps").iterdir()) == [STORED]
    # spec.name equal to the Sweep's own name is what leaving it unset means.
    same = decide(sweep_object("quick", generation=1), settings(tmp_path))
    named = decide(SweepObject(**{**sweep_object("quick").__dict__,
                                  "spec": {**sweep_object("quick").spec, "name": "quick-e2e"}}), settings(tmp_path))
    assert named.status["sweep"] == same.status["sweep"] == STORED


def test_a_name_longer_than_a_label_is_invalid_once_and_not_retried(tmp_path: Path):
    """A Sweep an older CRD let in (no maxLength on metadata.name) fails for good, at once."""
    long = SweepObject(**{**sweep_object("quick").__dict__, "name": "q" * 64})
    decision = decide(long, settings(tmp_path))
    status = SweepStatus.model_validate(decision.status)
    assert (status.phase, decision.retry, decision.workflow) == ("Invalid", False, None)
    assert status.message == (f"Sweep {'q' * 63}...: metadata.name has 64 characters, more than the 63 a label "
                              "holds; apply it under a shorter name")
    assert not tmp_path.exists() or not any(tmp_path.iterdir())
    assert decide(SweepObject(**{**long.__dict__, "name": "q" * 63}), settings(tmp_path)).status["phase"] == "Pending"
