"""argoexec's part in the pods KWOK runs no executor in: a fake pod runs nothing, so the bench does
what argoexec would in the pods whose work the workflow waits for. A plan pod reports the plan's
items as its outputs (cut as argoexec cuts them), a chunk pod creates its chunk Workflow and ends
when that has, a figures pod reports that it has no outputs.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from datetime import UTC, datetime

import yaml

from benchmarks.fanout.controlplane import NAMESPACE, ControlPlane
from benchmarks.fanout.workload import PRESET, plan_outputs


def owner_uid(pod: dict) -> str:
    """The uid of the Workflow that owns a workflow pod (the controller sets the owner reference)."""
    return next(o["uid"] for o in pod["metadata"].get("ownerReferences", []) if o.get("kind") == "Workflow")


def sweep_parameter(workflow: dict) -> str:
    """The sweep's name as the plan step prints it: the Workflow's `sweep` parameter (the bench,
    the operator and a chunk's parent all set it), else the preset's."""
    parameters = workflow["spec"].get("arguments", {}).get("parameters", [])
    return next((p.get("value", "") for p in parameters if p["name"] == "sweep"), "") or PRESET


class StandIn(threading.Thread):
    """argoexec's part in the pods KWOK runs no executor in: plan pods report
    their outputs, chunk pods create their chunk Workflow and end when it does, figures pods report
    that they have no outputs (else the controller waits minutes for its fallback before it counts
    them done). Polls the few pods labelled plan, chunk or figures every 0.5 s; what it did, and
    when, is kept for the report."""

    def __init__(self, plane: ControlPlane, items: list[dict]) -> None:
        super().__init__(daemon=True)
        self.plane, self.items = plane, items
        self.plan_reported: dict[str, float] = {}          # plan pod -> when its outputs were reported
        self.chunk_of_pod: dict[str, str] = {}             # chunk pod -> its chunk Workflow
        self.chunk_done: dict[str, tuple[float, str]] = {}  # chunk pod -> (when, the Workflow's phase)
        self.figures_reported: set[str] = set()
        self.cut = False
        self.errors: list[str] = []
        self._stop_event = threading.Event()
        self._last_check = 0.0

    def run(self) -> None:
        while not self._stop_event.wait(0.5):
            try:
                self._pass()
            except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError, KeyError, StopIteration) as exc:
                self.errors.append(f"{time.strftime('%H:%M:%S')} {exc}"[:300])

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=30)

    def _pass(self) -> None:
        listed = self.plane.kubectl("get", "pods", "-n", NAMESPACE, "-o", "json", "-l",
                                    "app.kubernetes.io/component in (plan,chunk,figures)", timeout=60).stdout
        for pod in json.loads(listed)["items"]:
            meta = pod["metadata"]
            name, component = meta["name"], meta["labels"].get("app.kubernetes.io/component")
            if component == "plan" and name not in self.plan_reported:
                self._report_plan(pod)
            elif component == "chunk" and name not in self.chunk_of_pod:
                self._start_chunk(pod)
            elif component == "figures" and name not in self.figures_reported:
                self._task_result(pod, owner_uid(pod), {})
                self.figures_reported.add(name)
        if time.monotonic() - self._last_check >= 5:   # argoexec's RESOURCE_STATE_CHECK_INTERVAL
            self._last_check = time.monotonic()
            for pod, workflow in self.chunk_of_pod.items():
                if pod not in self.chunk_done:
                    self._check_chunk(pod, workflow)

    def _report_plan(self, pod: dict) -> None:
        """The plan pod's WorkflowTaskResult (named after its node), marked complete, as argoexec's."""
        meta = pod["metadata"]
        workflow = meta["labels"]["workflows.argoproj.io/workflow"]
        got = json.loads(self.plane.kubectl("get", "workflow", "-n", NAMESPACE, workflow, "-o", "json").stdout)
        chunk = got["metadata"].get("labels", {}).get("ccsweep.io/chunk")
        outputs, cut = plan_outputs(self.items, chunk, sweep_parameter(got))
        if chunk is None:
            self.cut = cut
        self._task_result(pod, got["metadata"]["uid"], outputs)
        self.plan_reported[meta["name"]] = time.time()

    def _task_result(self, pod: dict, workflow_uid: str, outputs: dict) -> None:
        """The pod's WorkflowTaskResult (named after its node), marked complete, as argoexec writes it:
        the controller counts a pod's node done only once its task result is complete."""
        meta = pod["metadata"]
        workflow = meta["labels"]["workflows.argoproj.io/workflow"]
        task_result = {
            "apiVersion": "argoproj.io/v1alpha1", "kind": "WorkflowTaskResult",
            "metadata": {"name": meta["annotations"]["workflows.argoproj.io/node-id"], "namespace": NAMESPACE,
                         "labels": {"workflows.argoproj.io/workflow": workflow,
                                    "workflows.argoproj.io/report-outputs-completed": "true"},
                         "ownerReferences": [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
                                              "name": workflow, "uid": workflow_uid}]},
            "outputs": outputs}
        self.plane.kubectl("create", "-f", "-", input=json.dumps(task_result))

    def _start_chunk(self, pod: dict) -> None:
        """`argoexec resource create`: the manifest of the pod's template (ARGO_TEMPLATE, in which the
        controller already set the owner reference to the sweep's Workflow)."""
        env = {e["name"]: e.get("value") for c in pod["spec"].get("initContainers", []) for e in c.get("env", [])}
        manifest = json.loads(env["ARGO_TEMPLATE"])["resource"]["manifest"]
        created = self.plane.kubectl("create", "-n", NAMESPACE, "-o", "name", "-f", "-",
                                     input=json.dumps(yaml.safe_load(manifest)))
        self.chunk_of_pod[pod["metadata"]["name"]] = created.stdout.strip().split("/")[-1]

    def _check_chunk(self, pod: str, workflow: str) -> None:
        """The resource template's success/failure condition on status.phase; then the pod ends."""
        phase = self.plane.kubectl("get", "workflow", "-n", NAMESPACE, workflow, "-o", "jsonpath={.status.phase}",
                                   check=False).stdout.strip()
        if phase not in ("Succeeded", "Failed", "Error"):
            return
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        got = json.loads(self.plane.kubectl("get", "pod", "-n", NAMESPACE, pod, "-o", "json").stdout)
        self._task_result(got, owner_uid(got), {})
        code = 0 if phase == "Succeeded" else 1
        terminated = {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                      "startedAt": got["status"].get("startTime", now), "finishedAt": now}
        status = {"phase": "Succeeded" if code == 0 else "Failed",
                  "containerStatuses": [{"name": c["name"], "image": c["image"], "ready": False, "restartCount": 0,
                                         "imageID": "", "started": False, "state": {"terminated": terminated}}
                                        for c in got["spec"]["containers"]]}
        self.plane.kubectl("patch", "pod", "-n", NAMESPACE, pod, "--subresource=status", "--type=merge",
                           "-p", json.dumps({"status": status}))
        self.chunk_done[pod] = (time.time(), phase)
