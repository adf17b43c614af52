"""Sweeps across two nodes of the local cluster, and through the loss of one.

The shared e2e cluster has one node. This module adds a second for its tests and removes it after
them, whether they pass or not (hack/cluster/node.sh: its own containerd, kubelet, certificate,
address, pod network and pod cgroup). The second node gets 1 of the machine's 2 cores as
allocatable; the first keeps its 2, as the rest of the suite uses it, so the scheduler sees 3
cores on a 2-core machine. The cells are short and time-scaled, and judged by the bookkeeping
tests' lateness threshold, so this overcommit does not decide any result here.

Every cell pod asks for 990m (its main container) + 10m (Argo's wait container): the second
node's 1000m holds one such pod at a time, the first node's 2000m two.

One kernel serves both nodes, so the second cannot really lack an algorithm. Its node probe is
given another kernel's list instead (bbr and reno, no cubic), and the node is labelled from it as
the chart's probe labels a node from /proc/sys/net/ipv4/tcp_available_congestion_control.

The tests run in order and share the module's second node: placement, then its loss, then its
return.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import pytest

from ccsweep.storeurls import namespace_store
from support.clusterlib import NodeServices, PodEvent, PodWatch
from test_argo_sweep import SweepRun, attempts, run_sweep, running_nodes

if TYPE_CHECKING:  # the fixture's type; conftest is not imported at run time
    from conftest import TestCluster

pytestmark = pytest.mark.e2e

FIRST = "ccsweep-node"
SECOND = "ccsweep-node-2"
SECOND_CPU_MILLI = 1000
#: What the second node's probe is told its kernel offers: not cubic (this kernel has it).
SECOND_ALGORITHMS = ["bbr", "reno"]
#: The cells' first CPU request: with the wait container's 10m, a pod of 1000m.
CELL_CPU = "990m"
POD_CPU_MILLI = 1000
#: The upstream taint that declares a node shut down for good (non-graceful node shutdown, GA in
#: Kubernetes 1.28): the pod garbage collector then deletes its pods, and their cells are retried.
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
#: up.sh: --node-monitor-grace-period=20s, checked every 2 s; the rest is the API's and our polling.
LOSS_NOTICED_WITHIN_S = 40


def spec(name: str, cc: list[str], loss_percent: list[int], duration_s: int) -> str:
    """A one-experiment spec: 20 Mbit/s, 100 ms, one flow per cell (time-scaled by the sweep)."""
    return json.dumps({
        "name": name, "description": "Short cells for the multi-node tests on the local cluster.",
        "experiments": [{"name": name, "cc": cc, "loss_percent": loss_percent, "rtt_ms": [100],
                         "bandwidth_mbps": [20], "queue": [{"kind": "droptail", "bdp": 1, "min_bytes": 30000}],
                         "duration_s": duration_s, "warmup_s": 2}]})


#: 3 bbr cells, then 3 cubic (the plan keeps the spec's order): the first three pods are all bbr,
#: so whatever the scheduler's scores, one of them lands on the second node (the first holds two).
SPREAD_SPEC = spec("e2e-nodes", ["bbr", "cubic"], [0, 1, 2], 20)
#: 4 bbr cells of 8 s flows (80 s at time scale 0.1): three start at once, one on the second node,
#: which is lost under it once Argo has its attempt as Running.
LOSS_SPEC = spec("e2e-node-loss", ["bbr"], [0, 1, 2, 5], 80)


def node_of(events: list[PodEvent]) -> str | None:
    return next((e.pod["spec"]["nodeName"] for e in events if e.pod.get("spec", {}).get("nodeName")), None)


def ended(pod: dict) -> bool:
    return pod.get("status", {}).get("phase") in ("Succeeded", "Failed")


def cell_pods_of(run: SweepRun) -> dict[str, list[PodEvent]]:
    """This Workflow's cell pods by pod name (a resubmission has the sweep's name, not its pods)."""
    workflow = run.workflow["metadata"]["name"]
    return {name: events for name, events in run.pods.items()
            if events[0].pod["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "cell"
            and events[0].pod["metadata"]["labels"].get("workflows.argoproj.io/workflow") == workflow}


def most_at_once(pods: dict[str, list[PodEvent]]) -> dict[str, int]:
    """The most cell pods each node held at once, each from its binding to its end (a terminal
    phase or its deletion). One watch delivers a namespace's events in the API's order, so a pod
    the scheduler placed after another ended is seen starting after that end."""
    spans: list[tuple[str, float, float]] = []
    for events in pods.values():
        node = node_of(events)
        start = PodWatch.first(events, lambda p: bool(p.get("spec", {}).get("nodeName")))
        if node is not None and start is not None:
            end = next((e.at for e in events if e.kind == "DELETED" or ended(e.pod)), math.inf)
            spans.append((node, start, end))
    most: dict[str, int] = {}
    for node, start, _ in spans:
        held = len([1 for n, s, e in spans if n == node and s <= start < e])
        most[node] = max(most.get(node, 0), held)
    return most


def stored_results(services: NodeServices, prefix: str) -> dict[str, bytes]:
    """Every result record under the sweep's store, by key, with its bytes."""
    return {key: services.s3_get(key) or b"" for key in services.s3_keys(f"{prefix}/cells/")
            if key.endswith("/result.json")}


def ready_status(cluster: TestCluster, node: str) -> str:
    conditions = cluster.get_json("node", node)["status"].get("conditions", [])
    return next((c["status"] for c in conditions if c["type"] == "Ready"), "")


def wait_until(what: str, timeout_s: float, check) -> float:
    """Poll check() every 0.5 s until true; the seconds it took."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < timeout_s, f"{what}: not within {timeout_s} s"
        time.sleep(0.5)
    return time.monotonic() - start


@pytest.fixture(scope="module")
def two_nodes(request: pytest.FixtureRequest, argo: TestCluster, sweep_namespace: str) -> TestCluster:
    """The shared cluster with a second node for this module; removed afterwards, failed or not
    (node.sh remove: its pods, Node object, processes, mounts, network namespaces, cgroups)."""
    request.addfinalizer(lambda: argo.node("remove", SECOND))
    argo.node("add", SECOND, cpu_milli=SECOND_CPU_MILLI)
    argo.label_node_algorithms(SECOND, available=SECOND_ALGORITHMS)
    allocatable = argo.get_json("node", SECOND)["status"]["allocatable"]
    assert allocatable["cpu"] in ("1", f"{SECOND_CPU_MILLI}m"), allocatable
    return argo


@pytest.fixture(scope="module")
def spread(two_nodes: TestCluster, sweep_namespace: str, node_services: NodeServices) -> SweepRun:
    run = run_sweep(two_nodes, sweep_namespace, node_services, SPREAD_SPEC, f"e2e-nodes-{uuid.uuid4().hex[:6]}",
                    parallelism=3, cell_cpu=CELL_CPU, time_scale="0.05")
    print(f"\n[e2e] two-node sweep: {len(run.planned())} cells in {run.finished_at - run.submitted_at:.0f} s, "
          f"most pods at once per node {most_at_once(cell_pods_of(run))}")
    return run


def test_cells_spread_over_both_nodes_by_their_requests(spread: SweepRun, two_nodes: TestCluster):
    assert spread.workflow["status"]["phase"] == "Succeeded", spread.failure_report(two_nodes)
    pods = cell_pods_of(spread)
    for events in pods.values():
        main = next(c for c in events[-1].pod["spec"]["containers"] if c["name"] == "main")
        assert main["resources"]["requests"]["cpu"] in (CELL_CPU, "1980m"), main["resources"]  # first, retry
    at_once = most_at_once(pods)
    # Each node held as many pods as its allocatable fits, and no more: the second one pod, the
    # first two (a retry, at 1980m, only ever fits the first, alone).
    assert at_once.get(SECOND) == SECOND_CPU_MILLI // POD_CPU_MILLI, at_once
    assert 1 <= at_once.get(FIRST, 0) <= 2, at_once
    stored = stored_results(spread.services, spread.store_prefix)
    assert len(stored) == len(spread.planned()) == 6


def test_a_node_lacking_an_algorithm_gets_none_of_its_cells_and_the_sweep_goes_on(spread: SweepRun,
                                                                                  two_nodes: TestCluster):
    """The second node's probe says no cubic (one kernel serves both nodes here: the lack comes from
    that node's probe, standing in for a kernel without it). Its cubic cells all run on the first
    node, none is set aside as unplaceable, and the sweep ends with every cell stored."""
    assert spread.workflow["status"]["phase"] == "Succeeded", spread.failure_report(two_nodes)
    labels = two_nodes.get_json("node", SECOND)["metadata"]["labels"]
    assert "ccsweep.io/cc-cubic" not in labels and labels["ccsweep.io/cc-bbr"] == "true"
    cubic = {item["id"] for item in spread.planned() if "ccsweep.io/cc-cubic" in item["node_selector"]}
    assert len(cubic) == 3
    placed: dict[str, set[str | None]] = {}
    for events in cell_pods_of(spread).values():
        placed.setdefault(events[0].pod["metadata"]["labels"]["ccsweep.io/cell"], set()).add(node_of(events))
    assert {cell: placed.get(cell) for cell in cubic} == {cell: {FIRST} for cell in cubic}
    unplaceable = spread.services.s3_get(f"{spread.store_prefix}/sweeps/{spread.name}/unplaceable.json")
    assert unplaceable is None or not json.loads(unplaceable).get("cells"), unplaceable
    for cell in cubic:
        assert spread.services.s3_get(f"{spread.store_prefix}/cells/{cell}/result.json") is not None, cell


@dataclass
class Loss:
    """What the test saw of the second node's loss, in the sweep it interrupted."""

    killed_at: float = 0.0
    cells_on_it: set[str] = field(default_factory=set)        # cells whose pods ran there when it died
    stored_then: dict[str, bytes] = field(default_factory=dict)
    noticed_s: float = 0.0                                    # kill -> Ready Unknown (the control plane's own)
    reason: str = ""


@pytest.fixture(scope="module")
def loss(two_nodes: TestCluster, sweep_namespace: str,
         node_services: NodeServices) -> tuple[SweepRun, Loss]:
    """A sweep of 4 cells, 3 at once: once the cell on the second node runs and Argo has its
    attempt as Running, the node is lost for real (node.sh kill: its kubelet, containerd, shims and
    every process of its pods SIGKILLed, nothing said to the API server). Once the control plane
    has found the node unreachable by itself, the node is declared out of service as
    docs/kubernetes.md says an administrator (or a node-remediation controller) does; the sweep
    then finishes. (A pod lost while Argo still has its attempt as Pending, seen once when the
    node was killed 1.5 s after the main container started, is created again under the same name
    on the other node, with no retry used: not the path under test.)"""
    seen = Loss()
    name = f"e2e-node-loss-{uuid.uuid4().hex[:6]}"
    stored_at = namespace_store(f"runs/{name}", sweep_namespace)  # where run_sweep's pods store it

    def lose_the_second_node(watch: PodWatch) -> None:
        deadline = time.time() + 180
        while not seen.cells_on_it:
            assert time.time() < deadline, "no cell pod ran on the second node"
            for events in list(watch.pods().values()):
                pod = events[-1].pod
                labels = pod["metadata"].get("labels", {})
                if (labels.get("ccsweep.io/sweep") == name and node_of(events) == SECOND
                        and PodWatch.first(events, PodWatch.main_started) and not ended(pod)
                        and pod["metadata"].get("annotations", {}).get("workflows.argoproj.io/node-id")
                        in running_nodes(two_nodes, sweep_namespace, labels["workflows.argoproj.io/workflow"])):
                    seen.cells_on_it.add(labels["ccsweep.io/cell"])
            time.sleep(0.2)
        seen.stored_then = stored_results(node_services, stored_at)
        seen.killed_at = time.time()
        two_nodes.node("kill", SECOND)
        seen.noticed_s = wait_until("the control plane finds the node lost", LOSS_NOTICED_WITHIN_S,
                                    lambda: ready_status(two_nodes, SECOND) == "Unknown")
        conditions = two_nodes.get_json("node", SECOND)["status"]["conditions"]
        seen.reason = next(c["reason"] for c in conditions if c["type"] == "Ready")
        two_nodes.kubectl("taint", "node", SECOND, f"{OUT_OF_SERVICE}=nodeshutdown:NoExecute")

    run = run_sweep(two_nodes, sweep_namespace, node_services, LOSS_SPEC, name, parallelism=3, cell_cpu=CELL_CPU,
                    during=lose_the_second_node, time_scale="0.1")
    print(f"\n[e2e] node loss: noticed {seen.noticed_s:.1f} s after the kill ({seen.reason}); sweep ended "
          f"{run.finished_at - seen.killed_at:.0f} s after it, {run.finished_at - run.submitted_at:.0f} s in all")
    return run, seen


def test_a_lost_node_s_cells_are_retried_on_the_other_and_stored_exactly_once(loss: tuple[SweepRun, Loss],
                                                                             two_nodes: TestCluster):
    run, seen = loss
    assert run.workflow["status"]["phase"] == "Succeeded", run.failure_report(two_nodes)
    assert seen.reason == "NodeStatusUnknown" and seen.noticed_s < LOSS_NOTICED_WITHIN_S
    assert seen.cells_on_it
    pods = cell_pods_of(run)
    stored = stored_results(run.services, run.store_prefix)
    # Every cell stored exactly once (one record per cell: a store that writes only if absent)...
    assert sorted(stored) == sorted(f"{run.store_prefix}/cells/{item['id']}/result.json" for item in run.planned())
    # ... and what was stored before the loss is still there, byte for byte: not lost, not rewritten.
    assert {key: stored[key] for key in seen.stored_then} == seen.stored_then
    for cell in seen.cells_on_it:
        # Argo 3.7 marks the lost attempt Error ("pod deleted") once the pod garbage collector has
        # deleted its pod, and creates the pod again under the same name at once (seen in both
        # runs of this test), now on the first node: the cell runs again, as the same attempt.
        events = [e for ev in pods.values() for e in ev
                  if e.pod["metadata"].get("labels", {}).get("ccsweep.io/cell") == cell]
        assert any(e.pod["spec"].get("nodeName") == FIRST and e.at > seen.killed_at for e in events), cell
        tries = attempts(run.workflow, cell)
        assert tries[-1]["phase"] == "Succeeded" and tries[-1]["hostNodeName"] == FIRST, tries[-1]
        record = json.loads(stored[f"{run.store_prefix}/cells/{cell}/result.json"])
        # Its one record is the run after the loss: the lost run stored nothing.
        started = datetime.fromisoformat(record["started_at"].replace("Z", "+00:00")).timestamp()
        assert record["status"] == "ok" and started > seen.killed_at, record["started_at"]
    # After the loss no cell pod was placed on the lost node.
    for events in pods.values():
        late = [e for e in events if e.pod.get("spec", {}).get("nodeName") == SECOND and e.at > seen.killed_at
                and e.pod.get("status", {}).get("phase") == "Pending"]
        assert not late, events[0].pod["metadata"]["name"]


def test_when_the_node_comes_back_stored_cells_are_not_run_again(loss: tuple[SweepRun, Loss],
                                                                two_nodes: TestCluster, sweep_namespace: str,
                                                                node_services: NodeServices):
    """The lost node starts again (node.sh add clears what the dead run left and starts it afresh,
    its images kept), the administrator lifts the out-of-service taint, and the same sweep is
    submitted again: its plan finds every cell stored, no cell pod runs, nothing stored changes."""
    run, _ = loss
    before = stored_results(node_services, run.store_prefix)
    two_nodes.node("add", SECOND, cpu_milli=SECOND_CPU_MILLI)
    two_nodes.kubectl("taint", "node", SECOND, f"{OUT_OF_SERVICE}-")
    wait_until("the node's taints lifted", 60, lambda: not two_nodes.get_json("node", SECOND)["spec"].get("taints"))
    assert ready_status(two_nodes, SECOND) == "True"
    again = run_sweep(two_nodes, sweep_namespace, node_services, LOSS_SPEC, run.name, parallelism=3,
                      cell_cpu=CELL_CPU, time_scale="0.1")
    assert again.workflow["status"]["phase"] == "Succeeded", again.failure_report(two_nodes)
    assert again.planned() == []
    assert cell_pods_of(again) == {}
    assert stored_results(node_services, run.store_prefix) == before
