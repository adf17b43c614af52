"""Strict template referencing on the real Argo controller, as docs/install.md sets it up.

The local cluster's controller runs with `templateReferencing: Strict` and
WORKFLOW_USER_OVERRIDE_ALLOWLIST=parallelism (hack/cluster/argo.sh). A Workflow submitter there
cannot run a pod of their own (an inline Workflow) nor widen the pods of ccsweep's templates (a pod
field on a Workflow that references one), while a Workflow's own spec.parallelism, which a Sweep's
run.parallelism and every chunk Workflow set, still runs: the sweep tests in test_argo_sweep.py
submit theirs with it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from support.clusterlib import CELL_IMAGE

if TYPE_CHECKING:  # the fixture's type; conftest is not imported at run time
    from conftest import TestCluster

pytestmark = pytest.mark.e2e

WAIT_S = 120


def submit(argo: TestCluster, namespace: str, spec: dict) -> dict:
    """Create a Workflow with `spec`, wait until it has ended, and return it with the pods it made."""
    workflow = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
                "metadata": {"generateName": "e2e-strict-", "namespace": namespace}, "spec": spec}
    created = argo.kubectl("create", "-o", "name", "-f", "-", input=json.dumps(workflow)).stdout
    name = created.strip().split("/")[-1]
    argo.argo("wait", "-n", namespace, name, timeout=WAIT_S, check=False)
    ended = argo.get_json("workflow", "-n", namespace, name)
    pods = argo.get_json("pods", "-n", namespace, "-l", f"workflows.argoproj.io/workflow={name}")["items"]
    return {"phase": ended["status"].get("phase"), "message": ended["status"].get("message", ""), "pods": pods}


def test_an_inline_privileged_workflow_is_refused_and_runs_no_pod(argo: TestCluster, sweep_namespace: str):
    container = {"image": CELL_IMAGE, "imagePullPolicy": "Never", "command": ["true"],
                 "securityContext": {"privileged": True}}
    spec = {"entrypoint": "main", "templates": [{"name": "main", "container": container}]}
    ended = submit(argo, sweep_namespace, spec)
    assert ended["phase"] == "Error"
    assert ended["message"] == ("workflows must use workflowTemplateRef to be executed when the controller is in "
                                "reference mode")
    assert ended["pods"] == []


@pytest.mark.parametrize("field, value, refused", [
    ("podSpecPatch", json.dumps({"hostNetwork": True}), "PodSpecPatch"),
    ("serviceAccountName", "default", "ServiceAccountName"),
    ("securityContext", {"runAsUser": 0}, "SecurityContext"),
])
def test_a_pod_field_on_a_workflow_that_references_a_template_is_refused(argo: TestCluster, sweep_namespace: str,
                                                                         field: str, value: object, refused: str):
    """parallelism beside it is allowed, so the refusal names the pod field alone."""
    ended = submit(argo, sweep_namespace, {"workflowTemplateRef": {"name": "ccsweep-cell"}, "entrypoint": "cell",
                                           "parallelism": 1, field: value})
    assert ended["phase"] == "Error"
    assert ended["message"] == (f"fields [{refused}] are not permitted when using workflowTemplateRef with "
                                "templateReferencing restriction")
    assert ended["pods"] == []
