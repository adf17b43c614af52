"""The node probe may change only ccsweep.io/ labels of its own node, on a real API server.

RBAC grants "patch nodes" for every node; the chart's ValidatingAdmissionPolicy narrows it to the
node the probe's pod is bound to, which the API server reads from the pod-bound token. Here a Pod
object bound to one of two Node objects stands in for the DaemonSet's pod (envtest runs no
kubelet), and the real probe runs with that pod's token.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from envtest import EnvTest
from support.chartlib import render

KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
         "ValidatingAdmissionPolicyBinding")


@dataclass
class Probe:
    own: str  # the node its pod is bound to
    other: str
    account: str  # its ServiceAccount
    kubeconfig: Path  # with the token of its pod


def kubeconfig_with(envtest: EnvTest, token: str, path: Path) -> Path:
    config = yaml.safe_load(envtest.kubeconfig.read_text())
    config["users"] = [{"name": "admin", "user": {"token": token}}]
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def probe(envtest: EnvTest, namespace: str, tmp_path: Path) -> Iterator[Probe]:
    """The chart's probe identity and policy, a probe pod bound to one of two nodes, and its token."""
    release = f"r{uuid.uuid4().hex[:6]}"
    docs = [d for d in render(namespace=namespace, release=release) if d["kind"] in KINDS]
    assert {d["kind"] for d in docs} == set(KINDS)
    own, other = f"own-{release}", f"other-{release}"
    envtest.apply_docs(docs)
    for node in (own, other):
        envtest.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": node, "labels": {"kubernetes.io/hostname": node, "team": "net"}}}))
    account = f"{release}-ccsweep-node-probe"
    envtest.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"},
        "spec": {"nodeName": own, "serviceAccountName": account,
                 "containers": [{"name": "probe", "image": "ccsweep/cell"}]}}))
    token = envtest.kubectl("create", "token", account, "-n", namespace, "--bound-object-kind=Pod",
                            "--bound-object-name=probe").stdout.strip()
    yield Probe(own, other, account, kubeconfig_with(envtest, token, tmp_path / "probe.kubeconfig"))
    for kind, name in [("node", own), ("node", other)] + [(d["kind"], d["metadata"]["name"]) for d in docs
                                                          if d["kind"] != "ServiceAccount"]:
        envtest.kubectl("delete", kind, name, "--wait=false", check=False)


def as_probe(envtest: EnvTest, kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    kubectl = envtest.kube_apiserver.with_name("kubectl")
    return subprocess.run([str(kubectl), f"--kubeconfig={kubeconfig}", *args], capture_output=True, text=True,
                          timeout=60)


def label(envtest: EnvTest, kubeconfig: Path, node: str, patch: dict) -> subprocess.CompletedProcess[str]:
    return as_probe(envtest, kubeconfig, "patch", "node", node, "--type=merge", "-p", json.dumps(patch))


def test_the_probe_labels_its_own_node_and_nothing_else(envtest: EnvTest, probe: Probe):
    own, other, kubeconfig = probe.own, probe.other, probe.kubeconfig
    foreign = {"metadata": {"labels": {"ccsweep.io/cc-bbr": "true"}}}
    deadline = time.monotonic() + 30  # a new policy takes effect within about a second
    while (refused := label(envtest, kubeconfig, other, foreign)).returncode == 0 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert refused.returncode != 0 and "the node probe may change only the node its pod runs on" in refused.stderr

    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "NODE_NAME": own}
    done = subprocess.run([sys.executable, "-m", "ccsweep_operator.nodeprobe", "--once"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    labels = json.loads(envtest.kubectl("get", "node", own, "-o", "json").stdout)["metadata"]["labels"]
    assert "ccsweep.io/kernel" in labels and labels["team"] == "net"

    for patch, message in [
        ({"metadata": {"labels": {"team": "other"}}}, "may change only ccsweep.io/ labels"),
        ({"metadata": {"labels": {"kubernetes.io/hostname": None}}}, "may change only ccsweep.io/ labels"),
        ({"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}}}, "may change only ccsweep.io/ labels"),
        ({"spec": {"unschedulable": True}}, "not the node's spec or annotations"),
        ({"metadata": {"annotations": {"x": "y"}}}, "not the node's spec or annotations"),
    ]:
        denied = label(envtest, kubeconfig, own, patch)
        assert denied.returncode != 0 and message in denied.stderr, (patch, denied.stderr)
    after = json.loads(envtest.kubectl("get", "node", own, "-o", "json").stdout)
    assert after["metadata"]["labels"] == labels and not after["spec"].get("unschedulable")


def test_a_token_bound_to_no_pod_labels_no_node(envtest: EnvTest, namespace: str, probe: Probe, tmp_path: Path):
    """The ServiceAccount's token alone (no pod, so no node) is refused even for ccsweep.io/ labels."""
    token = envtest.kubectl("create", "token", probe.account, "-n", namespace).stdout.strip()
    unbound = kubeconfig_with(envtest, token, tmp_path / "unbound.kubeconfig")
    deadline = time.monotonic() + 30
    patch = {"metadata": {"labels": {"ccsweep.io/cc-bbr": "true"}}}
    while (refused := label(envtest, unbound, probe.own, patch)).returncode == 0 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert refused.returncode != 0 and "only the node its pod runs on" in refused.stderr
