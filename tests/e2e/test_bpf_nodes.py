"""BPF congestion controls on the real cluster: the chart's node setup registers bbr_bpf, the node
probe labels the node, a bbr_bpf cell runs there through Argo and its record carries the digest of
the object registered on its node; once the node setup is uninstalled the kernel lists no bbr_bpf.

One kernel serves the cluster and this machine, so the test registers nothing itself and runs only
where no one else has bbr_bpf registered (it never touches another's registration). Whatever
happens, its finalizer uninstalls the release and, should the node setup have died without
unregistering, unregisters exactly what the node setup's own state file says it registered
(ccsweep.bpfregister.recover: only entries whose owner is gone).
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml

from ccsweep import bpfregister
from ccsweep.storeurls import namespace_store
from support.chartlib import CHART, helm
from support.clusterlib import CELL_IMAGE, NodeServices, template_of

if TYPE_CHECKING:  # the fixture's type; conftest is not imported at run time
    from conftest import TestCluster

pytestmark = pytest.mark.e2e

NAME = "bbr_bpf"
RELEASE = "bpf"
NAMESPACE = "ccsweep-bpf"
NODE = "ccsweep-node"
LABEL = f"ccsweep.io/cc-{NAME}"
#: The node setup's state, as the chart's DaemonSet keeps it on the node.
NODE_STATE = Path("/run/ccsweep/node/bpf-registrations.json")
AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
SPEC = f"""\
name: e2e-bpf
experiments:
  - name: bpf
    figure: goodput-vs-loss
    cc: [{NAME}]
    loss_percent: [0]
    rtt_ms: [100]
    bandwidth_mbps: [20]
    queue:
      - {{kind: droptail, bdp: 1, min_bytes: 30000}}
    duration_s: 10
    warmup_s: 2
"""


def kernel_lists(name: str) -> bool:
    return name in AVAILABLE.read_text().split()


def wait_for(what: str, probe: Callable[[], object], timeout: float, every: float = 1) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := probe():
            return value
        time.sleep(every)
    raise AssertionError(f"{what}: not reached in {timeout:.0f} s")


class NodeSetup:
    """The chart installed with only its node probe and its node setup registering NAME."""

    def __init__(self, cluster: TestCluster, workdir: Path) -> None:
        self.cluster, self.workdir = cluster, workdir
        self.installed = False

    def helm(self, *args: str, check: bool = True, timeout: float = 300) -> str:
        done = self.cluster.in_ns(str(helm()), f"--kubeconfig={self.cluster.base / 'admin.kubeconfig'}", *args,
                                  timeout=timeout)
        assert done.returncode == 0 or not check, f"helm {' '.join(args)}: {done.stderr}"
        return done.stdout

    def install(self) -> None:
        registry, _, rest = CELL_IMAGE.partition("/")
        repository, _, tag = rest.rpartition(":")
        values = {"image": {"registry": registry, "repository": repository, "tag": tag, "pullPolicy": "Never"},
                  "crds": {"install": False}, "operator": {"enabled": False}, "workflows": {"install": False},
                  "tests": {"enabled": False}, "nodeProbe": {"intervalSeconds": 10, "kernelModules": ""},
                  "nodeSetup": {"enabled": True, "modules": [], "bpfAlgorithms": [NAME]}}
        (self.workdir / "values.yaml").write_text(yaml.safe_dump(values))
        self.cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": NAMESPACE, "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}})
        self.installed = True
        self.helm("install", RELEASE, str(CHART), "-n", NAMESPACE, "-f", str(self.workdir / "values.yaml"),
                  "--wait", "--timeout=3m")

    def uninstall(self) -> None:
        if self.installed:
            self.helm("uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout=2m", check=False)
            self.installed = False

    def pod(self) -> str:
        pods = self.cluster.get_json("pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/component=node-setup")
        (pod,) = pods["items"]
        return str(pod["metadata"]["name"])

    def exec(self, *cmd: str) -> str:
        return self.cluster.kubectl("exec", "-n", NAMESPACE, self.pod(), "-c", "bpf", "--", *cmd).stdout


@pytest.fixture(scope="module")
def node_setup(argo: TestCluster, sweep_namespace: str, tmp_path_factory) -> Iterator[NodeSetup]:
    if (missing := bpfregister.missing_support([NAME])) is not None:
        pytest.skip(f"this kernel cannot register {NAME}: {missing}")
    if kernel_lists(NAME):
        pytest.skip(f"{NAME} is registered on this machine by someone else: the test leaves it alone")
    had_state = NODE_STATE.parent.exists()
    setup = NodeSetup(argo, tmp_path_factory.mktemp("bpf-nodes"))
    try:
        setup.install()
        yield setup
    finally:
        setup.uninstall()
        argo.kubectl("delete", "namespace", NAMESPACE, "--wait=true", "--timeout=120s", check=False)
        argo.kubectl("label", "node", NODE, f"{LABEL}-", check=False)
        # The node setup's pod is gone now: whatever its state file still names, no one holds.
        left = bpfregister.recover(NODE_STATE)
        if not had_state and NODE_STATE.exists() and not json.loads(NODE_STATE.read_text())["registrations"]:
            for leftover in NODE_STATE.parent.iterdir():
                leftover.unlink()
            NODE_STATE.parent.rmdir()
        assert not left, f"the node setup left {left} registered; unregistered them"


def test_the_node_setup_registers_and_a_bbr_bpf_cell_records_the_registered_objects_digest(
        argo: TestCluster, sweep_namespace: str, node_services: NodeServices, node_setup: NodeSetup):
    started = time.monotonic()
    wait_for(f"the kernel lists {NAME}", lambda: kernel_lists(NAME), timeout=60)
    times = {"registered_s": time.monotonic() - started}
    # What the node setup published for cell pods, and the object the image built from bpf/cc/.
    held = json.loads(node_setup.exec("cat", "/run/ccsweep/node/bpf-held.json"))["programs"]
    image_object = node_setup.exec("sha256sum", f"/opt/ccsweep/bpf/{NAME}.bpf.o").split()[0]
    assert held == {NAME: image_object}
    labels = wait_for(f"the node probe's {LABEL}", lambda: argo.get_json("node", NODE)["metadata"]["labels"]
                      if argo.get_json("node", NODE)["metadata"]["labels"].get(LABEL) == "true" else None,
                      timeout=90)
    assert isinstance(labels, dict) and labels[LABEL] == "true"
    times["labelled_s"] = time.monotonic() - started

    name = f"e2e-bpf-{uuid.uuid4().hex[:6]}"
    prefix = f"runs/{name}"
    workflow_name = argo.submit_sweep(sweep_namespace, node_services, spec_yaml=SPEC, sweep=name,
                                      store_prefix=prefix, parallelism=1, cell_cpu="1")
    argo.argo("wait", "-n", sweep_namespace, workflow_name, timeout=600, check=False)
    times["sweep_s"] = time.monotonic() - started - times["labelled_s"]
    workflow = argo.get_json("workflow", "-n", sweep_namespace, workflow_name)
    logs = argo.argo("logs", "-n", sweep_namespace, workflow_name, check=False, timeout=60).stdout[-3000:]
    assert workflow["status"]["phase"] == "Succeeded", logs
    (plan,) = [n for n in workflow["status"]["nodes"].values() if n["type"] == "Pod" and template_of(n) == "plan"]
    (item,) = json.loads(plan["outputs"]["result"])
    assert item["node_selector"][LABEL] == "true", item  # only a node that offers it
    store = namespace_store(prefix, sweep_namespace)
    record = json.loads(node_services.s3_get(f"{store}/cells/{item['id']}/result.json") or b"{}")
    assert record.get("status") == "ok", record.get("error") or logs
    assert record["environment"]["bpf_programs"] == [{"name": NAME, "sha256": image_object}]
    assert record["cell"]["params"]["bpf_programs"] == [{"name": NAME, "sha256": image_object}]

    uninstalled = time.monotonic()
    node_setup.uninstall()
    wait_for(f"the kernel no longer lists {NAME}", lambda: not kernel_lists(NAME), timeout=60)
    times["unregistered_after_uninstall_s"] = time.monotonic() - uninstalled
    sys.stderr.write(f"\n[bpf-nodes] {json.dumps({k: round(v, 1) for k, v in times.items()})}\n")
