"""What KWOK fakes for the fan-out: Nodes as the node probe labels them, and pods' lives.

KWOK marks a bound pod Running at once and Succeeded the simulated cell time later (its 'fast'
stages, with completion for any pod, Argo's too, not only a Job's), then lets a deleted pod go.
A chunk pod (label ccsweep.io/chunk) is left Running: the stand-in for argoexec (standin.py)
finishes it when its chunk Workflow has.
"""

from __future__ import annotations

from ccsweep.plan import CC_LABEL_PREFIX, KERNEL_LABEL

#: KWOK's status for a pod that is bound: every container ready and running, init containers done.
READY_STATUS = """{{ $now := Now }}

conditions:
- {lastTransitionTime: {{ $now | Quote }}, status: "True", type: Initialized}
- {lastTransitionTime: {{ $now | Quote }}, status: "True", type: Ready}
- {lastTransitionTime: {{ $now | Quote }}, status: "True", type: ContainersReady}
containerStatuses:
{{ range .spec.containers }}
- {image: {{ .image | Quote }}, name: {{ .name | Quote }}, ready: true, restartCount: 0,
   state: {running: {startedAt: {{ $now | Quote }}}}}
{{ end }}
initContainerStatuses:
{{ range .spec.initContainers }}
- {image: {{ .image | Quote }}, name: {{ .name | Quote }}, ready: true, restartCount: 0,
   state: {terminated: {exitCode: 0, reason: Completed, startedAt: {{ $now | Quote }}, finishedAt: {{ $now | Quote }}}}}
{{ end }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
podIP: {{ PodIPWith .spec.nodeName false ( or .metadata.uid "" ) ( or .metadata.name "" ) \
( or .metadata.namespace "" ) | Quote }}
phase: Running
startTime: {{ $now | Quote }}
"""
#: KWOK's status for a pod whose simulated cell time is over: every container ended with exit 0.
COMPLETE_STATUS = """{{ $now := Now }}

containerStatuses:
{{ range .spec.containers }}
- {image: {{ .image | Quote }}, name: {{ .name | Quote }}, ready: false, restartCount: 0, started: false,
   state: {terminated: {exitCode: 0, reason: Completed, startedAt: {{ $now | Quote }}, finishedAt: {{ $now | Quote }}}}}
{{ end }}
phase: Succeeded
"""
ALIVE = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}


def stage(name: str, selector: list[dict], nxt: dict, delay: dict | None = None) -> dict:
    """A KWOK Stage for pods matching `selector`: what happens `delay` after they match."""
    spec = {"resourceRef": {"apiGroup": "v1", "kind": "Pod"}, "selector": {"matchExpressions": selector},
            "next": nxt}
    if delay:
        spec["delay"] = delay
    return {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": name}, "spec": spec}


def pod_stages(cell_ms: int) -> list[dict]:
    """KWOK's 'fast' pod stages, with completion for any pod (Argo's too, not only a Job's) after
    `cell_ms` (up to 20% more, so cells do not all finish in the same instant)."""
    return [
        stage("pod-ready", [ALIVE, {"key": ".status.podIP", "operator": "DoesNotExist"}],
              {"statusTemplate": READY_STATUS}),
        # A chunk pod (label ccsweep.io/chunk) runs until its chunk Workflow is done: StandIn finishes it.
        stage("pod-complete", [ALIVE, {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                               {"key": '.metadata.labels["ccsweep.io/chunk"]', "operator": "DoesNotExist"}],
              {"statusTemplate": COMPLETE_STATUS},
              {"durationMilliseconds": cell_ms, "jitterDurationMilliseconds": int(cell_ms * 1.2)}),
        stage("pod-delete", [{"key": ".metadata.deletionTimestamp", "operator": "Exists"}],
              {"finalizers": {"empty": True}, "delete": True}),
    ]


def fake_node(name: str, cores: int, kernel: str, algorithms: list[str]) -> dict:
    """A Node as a kubelet would register it, with the labels the chart's node probe writes for a
    kernel offering `algorithms`."""
    resources = {"cpu": str(cores), "memory": f"{cores * 4}Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "type": "kwok", KERNEL_LABEL: kernel, **{f"{CC_LABEL_PREFIX}{cc}": "true" for cc in algorithms}}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels,
                         "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"}},
            "status": {"allocatable": resources, "capacity": resources}}   # KWOK fills in nodeInfo
