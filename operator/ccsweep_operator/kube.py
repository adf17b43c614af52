"""The operator's calls to the API server: status patches, Workflows and the node list, nothing else.

Kept apart from the decisions (reconcile) so those stay plain functions; every call here is one
request the operator's Role allows (see charts/ccsweep/templates/operator/rbac.yaml).
"""

from __future__ import annotations

import os
import time
from typing import Any

import kubernetes
from kubernetes.client.exceptions import ApiException

from ccsweep.crd import GROUP, MAX_SWEEP_NAME, PLURAL, VERSION
from ccsweep.placement import Node
from ccsweep_operator.reconcile import ARGO_GROUP, ARGO_VERSION, OWNER_LABEL, WORKFLOWS, Decision


def load_config() -> None:
    """In a pod: its ServiceAccount; elsewhere: $KUBECONFIG (read now, not at import) or ~/.kube/config."""
    try:
        kubernetes.config.load_incluster_config()
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))


def wait_for_resources(timeout: float = 120) -> None:
    """Block until the API server serves Sweeps and Workflows (their CRDs are established).

    kopf runs with scanning disabled (it would need to list namespaces and watch CRDs
    cluster-wide): it discovers resources once, after this returns. Installed with the chart,
    the CRD is normally there already; without Argo the operator has nothing to do and says so.
    """
    deadline = time.monotonic() + timeout
    missing: list[str] = []
    while True:
        missing = [f"{group}/{version} {plural}" for group, version, plural in
                   ((GROUP, VERSION, PLURAL), (ARGO_GROUP, ARGO_VERSION, WORKFLOWS))
                   if not _served(group, version, plural)]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the API server does not serve {' and '.join(missing)} after {timeout:.0f}s: "
                               "install the Sweep CRD (the chart does) and Argo Workflows")
        time.sleep(2)


def _served(group: str, version: str, plural: str) -> bool:
    try:
        listed = _api().get_api_resources(group, version)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return any(r.name == plural for r in listed.resources)


def _api() -> Any:  # the generated client types every response as `object`
    return kubernetes.client.CustomObjectsApi()


def patch_status(namespace: str, name: str, status: dict[str, Any]) -> bool:
    """Merge-patch a Sweep's status; False when the Sweep is gone (deleted meanwhile)."""
    try:
        _api().patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, name, {"status": status})
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def patch_workflow(namespace: str, name: str, patch: dict[str, Any]) -> bool:
    """Merge-patch a Workflow (its spec.shutdown, to stop it); False when it is gone."""
    try:
        _api().patch_namespaced_custom_object(ARGO_GROUP, ARGO_VERSION, namespace, WORKFLOWS, name, patch)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def list_nodes() -> list[Node] | None:
    """Every node with its labels; None when the operator may not list nodes (its ClusterRole is
    optional), so the placement check is skipped rather than failing every Sweep."""
    try:
        listed = kubernetes.client.CoreV1Api().list_node()
    except ApiException as exc:
        if exc.status == 403:
            return None
        raise
    return [Node(name=str(n.metadata.name), labels=dict(n.metadata.labels or {})) for n in listed.items if n.metadata]


def get_workflow(namespace: str, name: str) -> dict[str, Any] | None:
    return _get(ARGO_GROUP, ARGO_VERSION, WORKFLOWS, namespace, name)


def list_workflows(namespace: str, label_selector: str) -> list[dict[str, Any]]:
    listed = _api().list_namespaced_custom_object(ARGO_GROUP, ARGO_VERSION, namespace, WORKFLOWS,
                                                  label_selector=label_selector)
    return list(listed.get("items", []))


def get_sweep(namespace: str, name: str) -> dict[str, Any] | None:
    return _get(GROUP, VERSION, PLURAL, namespace, name)


def _get(group: str, version: str, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
    """The object, or None when there is none (404)."""
    try:
        return _api().get_namespaced_custom_object(group, version, namespace, plural, name)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def apply(decision: Decision, namespace: str, name: str) -> None:
    """Status first (so followers find the Workflow's name), then replace older Workflows by the new one."""
    if not patch_status(namespace, name, decision.status):
        return
    keep = decision.workflow["metadata"]["name"] if decision.workflow else None
    if len(name) > MAX_SWEEP_NAME:
        return  # no label selector can name it, and no Workflow was ever made for it (reconcile.decide)
    for old in list_workflows(namespace, f"{OWNER_LABEL}={name}"):
        if old["metadata"]["name"] != keep:
            try:
                _api().delete_namespaced_custom_object(ARGO_GROUP, ARGO_VERSION, namespace, WORKFLOWS,
                                                       old["metadata"]["name"], propagation_policy="Background")
            except ApiException as exc:
                if exc.status != 404:
                    raise
    if decision.workflow is not None:
        try:
            _api().create_namespaced_custom_object(ARGO_GROUP, ARGO_VERSION, namespace, WORKFLOWS,
                                                   decision.workflow)
        except ApiException as exc:
            if exc.status != 409:  # already created for this generation (a retried or resumed handler)
                raise
