"""The operator under kopf against a real API server (envtest): every example, kopf style.

Each example in operator/examples/ is applied while the operator runs in-process
(kopf.testing.KopfRunner), and what the API server then holds is checked: the Sweep's status
and the Workflow it owns. No Argo controller runs here, so where a test needs a Workflow to
progress it writes the Workflow's status the way Argo's controller does (node types, phases and
inputs as in workflow/controller/operator.go); tests/e2e/test_helm_operator.py runs the real one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from ccsweep.crd import store_name
from ccsweep.storeurls import namespace_store
from envtest import EnvTest

sys.path.insert(0, str(Path(__file__).parent))
from operatorlib import EXAMPLES, apply_example, getter, operator, phase_is, wait_for  # noqa: E402


def test_api_server_accepts_the_generated_crd_and_refuses_a_bad_field(envtest: EnvTest, namespace: str):
    crd = json.loads(envtest.kubectl("get", "crd", "sweeps.ccsweep.io", "-o", "json").stdout)
    established = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert established["Established"] == "True" and established.get("NonStructuralSchema") is None
    bad = envtest.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "invalid-field/sweep.yaml"), check=False)
    assert bad.returncode != 0
    assert 'spec.experiments[0].loss_direction: Unsupported value: "sideways"' in bad.stderr
    unknown = envtest.kubectl("apply", "-n", namespace, "-f", "-", check=False, input=json.dumps(
        {**yaml.safe_load((EXAMPLES / "quick/sweep.yaml").read_text()),
         "spec": {"experiments": [{"name": "x", "rtt": [1]}]}}))
    assert unknown.returncode != 0 and 'unknown field "spec.experiments[0].rtt"' in unknown.stderr


def test_api_server_refuses_the_text_the_spec_refuses(envtest: EnvTest, namespace: str):
    """The CRD's text patterns (\\x{...} classes) compile in the API server's Go regexp and refuse a
    bidirectional override and a line separator, as the spec loader does; plain text passes."""
    quick = yaml.safe_load((EXAMPLES / "quick/sweep.yaml").read_text())
    experiment = quick["spec"]["experiments"][0]
    for title, refused in (("goodput \u202eevil", True), ("first\u2028second", True), ("BBR vs CUBIC, 1 %", False)):
        sweep = {**quick, "metadata": {"name": "text"}, "spec": {**quick["spec"],
                                                                 "experiments": [{**experiment, "title": title}]}}
        done = envtest.kubectl("apply", "-n", namespace, "-f", "-", "--dry-run=server", check=False,
                               input=json.dumps(sweep))
        assert (done.returncode != 0) == refused, (title, done.stderr)
        assert not refused or "spec.experiments[0].title: Invalid value" in done.stderr


def test_api_server_applies_the_crds_cel_rules_with_defaults(envtest: EnvTest, namespace: str):
    quick = yaml.safe_load((EXAMPLES / "quick/sweep.yaml").read_text())
    experiment = quick["spec"]["experiments"][0]
    both = {**quick, "spec": {**quick["spec"], "experiments": [{**experiment, "mixes": [[{"cc": "bbr"}]]}]}}
    refused = envtest.kubectl("apply", "-n", namespace, "-f", "-", check=False, input=json.dumps(both))
    assert refused.returncode != 0
    assert "each experiment (or defaults) gives exactly one of cc and mixes" in refused.stderr
    # cc from defaults counts: the same experiment without its own cc is accepted.
    from_defaults = {**quick, "metadata": {"name": "cel-defaults"}, "spec": {
        **quick["spec"], "defaults": {"cc": experiment["cc"]},
        "experiments": [{k: v for k, v in experiment.items() if k != "cc"}]}}
    envtest.kubectl("apply", "-n", namespace, "-f", "-", "--dry-run=server", input=json.dumps(from_defaults))


def test_api_server_refuses_a_name_longer_than_a_label_and_a_chosen_store_name(envtest: EnvTest, namespace: str):
    """Refused at admission, so the operator never meets them (it also fails such a Sweep once, for a
    CRD installed by an older chart: tests/operator/test_reconcile.py)."""
    quick = yaml.safe_load((EXAMPLES / "quick/sweep.yaml").read_text())
    long = envtest.kubectl("apply", "-n", namespace, "-f", "-", "--dry-run=server", check=False,
                           input=json.dumps({**quick, "metadata": {"name": "q" * 64}}))
    assert long.returncode != 0 and "metadata.name" in long.stderr and "63" in long.stderr, long.stderr
    envtest.kubectl("apply", "-n", namespace, "-f", "-", "--dry-run=server",
                    input=json.dumps({**quick, "metadata": {"name": "q" * 63}}))
    chosen = envtest.kubectl("apply", "-n", namespace, "-f", "-", "--dry-run=server", check=False, input=json.dumps(
        {**quick, "spec": {**quick["spec"], "name": "someone-elses-sweep"}}))
    assert chosen.returncode != 0 and "spec.name must be unset or metadata.name" in chosen.stderr, chosen.stderr
    envtest.kubectl("apply", "-n", namespace, "-f", "-", "--dry-run=server", input=json.dumps(
        {**quick, "spec": {**quick["spec"], "name": quick["metadata"]["name"]}}))


def test_api_server_takes_repetitions_as_a_count_or_an_adaptive_rule(envtest: EnvTest, namespace: str):
    """No structural type (and no CEL rule: the server builds no CEL type for an untyped field) covers
    `3` and `{min, max, target}`: the API server keeps either, and the operator checks the shape."""
    quick = yaml.safe_load((EXAMPLES / "quick/sweep.yaml").read_text())
    experiment = quick["spec"]["experiments"][0]
    for accepted in (3, {"min": 3, "max": 20, "target": {"ci_relative": 0.05}}):
        envtest.kubectl("apply", "-n", namespace, "-f", "-", "--dry-run=server", input=json.dumps(
            {**quick, "metadata": {"name": "repetitions"}, "spec": {
                **quick["spec"], "experiments": [{**experiment, "repetitions": accepted}]}}))


def test_api_server_takes_the_links_offloads_and_refuses_another(envtest: EnvTest, namespace: str):
    """`link_offload` is an enum that may be left unset (null: the link's own): the server keeps tso,
    none and null and refuses any other word, as the spec does."""
    quick = yaml.safe_load((EXAMPLES / "quick/sweep.yaml").read_text())
    experiment = quick["spec"]["experiments"][0]

    def apply(offload: object) -> subprocess.CompletedProcess[str]:
        return envtest.kubectl("apply", "-n", namespace, "-f", "-", "--dry-run=server", check=False, input=json.dumps(
            {**quick, "metadata": {"name": "offloads"}, "spec": {
                **quick["spec"], "experiments": [{**experiment, "link_offload": offload}]}}))

    for accepted in ("tso", "none", None):
        done = apply(accepted)
        assert done.returncode == 0, (accepted, done.stderr)
    refused = apply("gro")
    assert refused.returncode != 0 and 'spec.experiments[0].link_offload: Unsupported value: "gro"' in refused.stderr


def sweeps_in(store: Path, namespace: str) -> Path:
    """The sweeps folder of `namespace` in the operator's file store: it plans each Sweep in its
    namespace's folder (storeurls.namespace_store)."""
    return Path(namespace_store(str(store), namespace)) / "sweeps"


def test_quick_example_is_planned_into_a_workflow_it_owns(envtest: EnvTest, namespace: str, operator_env: Path):
    with operator(namespace):
        apply_example(envtest, namespace, "quick")
        sweep = wait_for(getter(envtest, namespace, "sweep", "quick-e2e"), phase_is("Pending"))
    status = sweep["status"]
    assert status["cells"] == {"total": 2, "cached": 0, "running": 0, "done": 0, "failed": 0}
    assert status["observedGeneration"] == 1 and status["workflow"] == "quick-e2e-1"
    workflow = getter(envtest, namespace, "workflow", "quick-e2e-1")()
    assert workflow["metadata"]["ownerReferences"][0]["uid"] == sweep["metadata"]["uid"]
    assert workflow["spec"]["workflowTemplateRef"] == {"name": "ccsweep-sweep"}
    # The manifest is in the namespace's folder of the operator's store: planning really happened there.
    assert (sweeps_in(operator_env, namespace) / store_name(namespace, "quick-e2e") / "manifest.json").is_file()
    assert status["sweep"] == store_name(namespace, "quick-e2e")
    # `kubectl get sweeps` shows the printer columns.
    table = envtest.kubectl("get", "sweeps", "-n", namespace).stdout.split("\n")
    assert table[0].split()[:7] == ["NAME", "PHASE", "CELLS", "CACHED", "RUNNING", "DONE", "FAILED"]
    assert table[1].split()[:7] == ["quick-e2e", "Pending", "2", "0", "0", "0", "0"]


def test_defaults_example_counts_its_cells(envtest: EnvTest, namespace: str, operator_env: Path):
    with operator(namespace):
        apply_example(envtest, namespace, "defaults")
        sweep = wait_for(getter(envtest, namespace, "sweep", "rtt-and-buffers"), phase_is("Pending"))
    assert sweep["status"]["cells"]["total"] == 12
    assert sweep["status"]["sweep"] == store_name(namespace, "rtt-and-buffers")
    assert getter(envtest, namespace, "workflow", "rtt-and-buffers-1")()["spec"]["parallelism"] == 4


def test_invalid_spec_example_gets_a_condition_and_no_workflow(envtest: EnvTest, namespace: str, operator_env: Path):
    with operator(namespace):
        apply_example(envtest, namespace, "invalid-spec")
        sweep = wait_for(getter(envtest, namespace, "sweep", "invalid-spec"), phase_is("Invalid"))
    valid = next(c for c in sweep["status"]["conditions"] if c["type"] == "Valid")
    assert (valid["status"], valid["reason"]) == ("False", "InvalidSpec")
    assert valid["message"] == "Sweep invalid-spec: experiments[warmup]: warmup_s 5.0 must be below duration_s 5.0"
    listed = json.loads(envtest.kubectl("get", "workflows", "-n", namespace, "-o", "json").stdout)
    assert listed["items"] == []


def argo_progress(envtest: EnvTest, namespace: str, name: str, phase: str, cells: dict[str, str], **extra) -> None:
    """Write a Workflow's status as Argo's controller would: a Retry node per cell, with its inputs."""
    nodes = {f"{name}-{i}": {"id": f"{name}-{i}", "name": f"{name}[1].cell({i})", "type": "Retry", "phase": p,
                             "templateRef": {"name": "ccsweep-cell", "template": "cell"},
                             "inputs": {"parameters": [{"name": "id", "value": cell_id}]}}
             for i, (cell_id, p) in enumerate(cells.items())}
    status = {"phase": phase, "startedAt": "2026-11-23T01:00:00Z", "nodes": nodes, **extra}
    envtest.kubectl("patch", "workflow", name, "-n", namespace, "--type=merge", "-p", json.dumps({"status": status}))


def test_status_follows_the_workflow_to_success(envtest: EnvTest, namespace: str, operator_env: Path):
    with operator(namespace):
        apply_example(envtest, namespace, "quick")
        get = getter(envtest, namespace, "sweep", "quick-e2e")
        wait_for(get, phase_is("Pending"))
        argo_progress(envtest, namespace, "quick-e2e-1", "Running", {"c1": "Running", "c2": "Pending"})
        running = wait_for(get, lambda s: s["status"]["cells"]["running"] == 2)
        assert running["status"]["phase"] == "Running" and running["status"]["startedAt"] == "2026-11-23T01:00:00Z"
        argo_progress(envtest, namespace, "quick-e2e-1", "Succeeded", {"c1": "Succeeded", "c2": "Succeeded"},
                      finishedAt="2026-11-23T01:02:00Z")
        done = wait_for(get, phase_is("Succeeded"))
    status = done["status"]
    assert status["cells"] == {"total": 2, "cached": 0, "running": 0, "done": 2, "failed": 0}
    assert status["finishedAt"] == "2026-11-23T01:02:00Z"
    report = sweeps_in(operator_env, namespace) / store_name(namespace, "quick-e2e") / "report.html"
    assert status["report"] == str(report)
    complete = next(c for c in status["conditions"] if c["type"] == "Complete")
    assert (complete["status"], complete["reason"]) == ("True", "WorkflowSucceeded")


def test_changed_spec_replaces_the_workflow(envtest: EnvTest, namespace: str, operator_env: Path):
    with operator(namespace):
        apply_example(envtest, namespace, "quick")
        get = getter(envtest, namespace, "sweep", "quick-e2e")
        wait_for(get, phase_is("Pending"))
        # A Sweep edited (generation 2) re-plans under its own name on purpose: the old plan is kept
        # as a revision.
        quick = yaml.safe_load((EXAMPLES / "quick/sweep.yaml").read_text())["spec"]["experiments"][0]
        apply_example(envtest, namespace, "quick", experiments=[{**quick, "duration_s": 8}])
        sweep = wait_for(get, lambda s: s["status"].get("observedGeneration") == 2
                         and s["status"]["phase"] == "Pending")
        stored = store_name(namespace, "quick-e2e")
        assert sweep["status"]["workflow"] == "quick-e2e-2" and sweep["status"]["sweep"] == stored
        assert list((sweeps_in(operator_env, namespace) / stored / "revisions").iterdir())
        wait_for(lambda: json.loads(envtest.kubectl("get", "workflows", "-n", namespace, "-o", "json").stdout),
                 lambda wfs: [w["metadata"]["name"] for w in wfs["items"]] == ["quick-e2e-2"])


def test_a_sweep_past_the_planning_bound_fails_alone_and_the_operator_plans_the_next(
        envtest: EnvTest, namespace: str, operator_env: Path, monkeypatch):
    """100,000 cells take longer than the 4 s this operator may plan for (about 17 s on an idle core; two
    cells under 3 s even on a busy machine, tests/operator/test_planworker.py): that Sweep fails with one
    line, and the operator, still running, plans the quick example next."""
    monkeypatch.setenv("CCSWEEP_PLAN_TIMEOUT_S", "4")
    quick = yaml.safe_load((EXAMPLES / "quick/sweep.yaml").read_text())
    experiment = {**quick["spec"]["experiments"][0], "loss_percent": [round(0.001 * (i + 1), 4) for i in range(1000)],
                  "repetitions": 50}
    huge = {**quick, "metadata": {"name": "huge"}, "spec": {**quick["spec"], "experiments": [experiment]}}
    with operator(namespace):
        envtest.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(huge))
        failed = wait_for(getter(envtest, namespace, "sweep", "huge"), phase_is("Failed"), timeout=60)
        apply_example(envtest, namespace, "quick")
        wait_for(getter(envtest, namespace, "sweep", "quick-e2e"), phase_is("Pending"), timeout=60)
    planned = next(c for c in failed["status"]["conditions"] if c["type"] == "Planned")
    assert (planned["status"], planned["reason"]) == ("False", "PlanFailed")
    assert planned["message"] == failed["status"]["message"] == (
        "Sweep huge: planning took longer than the operator's 4 s (operator.plan.timeoutSeconds); "
        "the Sweep was not planned")
    assert getter(envtest, namespace, "workflow", "quick-e2e-1")() is not None
    assert getter(envtest, namespace, "workflow", "huge-1")() is None
