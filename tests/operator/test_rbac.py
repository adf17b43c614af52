"""The chart's RBAC against a real authorizer: enough for the operator and the probe, nothing more.

The chart's own ServiceAccounts, Roles and bindings are rendered with Helm and applied to the
envtest API server (RBAC mode); the operator then runs under kopf with a token of its
ServiceAccount, so every request it makes is authorized as it would be in the cluster.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from envtest import EnvTest

sys.path.insert(0, str(Path(__file__).parent))
from operatorlib import apply_example, getter, operator, phase_is, wait_for  # noqa: E402
from support.chartlib import render

RBAC_KINDS = ("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")


@pytest.fixture
def release(envtest: EnvTest, namespace: str) -> str:
    """The chart's RBAC installed in `namespace` under a release name of its own."""
    name = f"r{uuid.uuid4().hex[:6]}"
    docs = [d for d in render(namespace=namespace, release=name) if d["kind"] in RBAC_KINDS]
    envtest.apply_docs(docs)
    yield name
    for d in docs:
        if d["kind"].startswith("Cluster"):
            envtest.kubectl("delete", d["kind"], d["metadata"]["name"], "--wait=false", check=False)


def can(envtest: EnvTest, user: str, verb: str, resource: str, namespace: str) -> bool:
    """`kubectl auth can-i`; a subresource is written resource/subresource (sweeps.ccsweep.io/status)."""
    resource, _, sub = resource.partition("/")
    args = ["auth", "can-i", verb, resource, "-n", namespace, *([f"--subresource={sub}"] if sub else [])]
    done = envtest.kubectl(*args, as_user=user, check=False)
    assert "doesn't have a resource type" not in done.stderr, done.stderr
    return done.stdout.strip() == "yes"


def test_operator_may_do_its_job_and_nothing_else(envtest: EnvTest, namespace: str, release: str):
    operator_sa = f"system:serviceaccount:{namespace}:{release}-ccsweep-operator"
    for verb, resource in [("create", "workflows.argoproj.io"), ("delete", "workflows.argoproj.io"),
                           ("patch", "workflows.argoproj.io"), ("watch", "sweeps.ccsweep.io"),
                           ("patch", "sweeps.ccsweep.io/status"), ("list", "nodes")]:
        assert can(envtest, operator_sa, verb, resource, namespace), (verb, resource)
    for verb, resource in [("get", "secrets"), ("create", "pods"), ("delete", "sweeps.ccsweep.io"),
                           ("update", "workflows.argoproj.io"), ("create", "workflowtemplates.argoproj.io"),
                           ("patch", "nodes")]:
        assert not can(envtest, operator_sa, verb, resource, namespace), (verb, resource)
    assert not can(envtest, operator_sa, "create", "workflows.argoproj.io", "default")  # its namespace only


def test_node_probe_may_label_nodes_only(envtest: EnvTest, namespace: str, release: str):
    probe_sa = f"system:serviceaccount:{namespace}:{release}-ccsweep-node-probe"
    assert can(envtest, probe_sa, "patch", "nodes", namespace)
    for verb, resource in [("delete", "nodes"), ("list", "pods"), ("get", "secrets"), ("patch", "nodes/status")]:
        assert not can(envtest, probe_sa, verb, resource, namespace), (verb, resource)


def test_workflow_pods_may_only_report_their_outputs(envtest: EnvTest, namespace: str, release: str):
    """...and list nodes (the plan step's --check-nodes), changing none."""
    pods_sa = f"system:serviceaccount:{namespace}:ccsweep-workflow"
    assert can(envtest, pods_sa, "create", "workflowtaskresults.argoproj.io", namespace)
    assert can(envtest, pods_sa, "list", "nodes", namespace)
    for verb, resource in [("get", "workflows.argoproj.io"), ("get", "secrets"), ("list", "pods")]:
        assert not can(envtest, pods_sa, verb, resource, namespace), (verb, resource)
    for verb in ("patch", "update", "delete"):
        assert not can(envtest, pods_sa, verb, "nodes", namespace), verb


def test_operator_runs_with_its_service_accounts_token(envtest: EnvTest, namespace: str, release: str,
                                                       operator_env: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch):
    import kubernetes

    token = envtest.kubectl("create", "token", f"{release}-ccsweep-operator", "-n", namespace).stdout.strip()
    config = yaml.safe_load(envtest.kubeconfig.read_text())
    config["users"] = [{"name": "admin", "user": {"token": token}}]
    config["contexts"][0]["context"]["namespace"] = namespace
    kubeconfig = tmp_path / "operator.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.setattr(kubernetes.config.kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(kubeconfig))
    with operator(namespace) as runner:
        apply_example(envtest, namespace, "quick")  # as admin: the test is the user here
        sweep = wait_for(getter(envtest, namespace, "sweep", "quick-e2e"), phase_is("Pending"))
        envtest.kubectl("patch", "workflow", "quick-e2e-1", "-n", namespace, "--type=merge",
                        "-p", json.dumps({"status": {"phase": "Running"}}))
        wait_for(getter(envtest, namespace, "sweep", "quick-e2e"), phase_is("Running"))
    assert sweep["status"]["workflow"] == "quick-e2e-1"
    assert "Forbidden" not in runner.output and "403" not in runner.output, runner.output
