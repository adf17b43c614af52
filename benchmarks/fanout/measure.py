"""One measured fan-out: start it, wait for its Workflow to complete, keep what was seen in
Run.results (the report's only input), then delete it and wait for its pods to go.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.fanout.controlplane import NAMESPACE, ControlPlane
from benchmarks.fanout.standin import StandIn
from benchmarks.fanout.submit import create_sweep, submit
from benchmarks.fanout.watch import PodTimes, SweepStatus
from benchmarks.fanout.workload import CELL_IMAGE, chunk_list, fanout_workflow, sweep_workflow
from ccsweep.plan import chunk_parallelism
from support.procstat import ProcSampler


@dataclass
class Run:
    nodes: int
    cells: int
    parallelism: int
    qps: float
    burst: int
    mode: str = "sweep"   # sweep: workflows/full-sweep.yaml; items: the cell step fed from a parameter
    results: dict = field(default_factory=dict)


@dataclass
class Probes:
    """What watches one fan-out: the cell pods' events, the daemons' CPU and memory, the controller's
    log from where it stood at the start; the stand-in for argoexec and the Sweep's status when the
    mode has them."""

    pods: PodTimes
    sampler: ProcSampler
    controller_log: Path
    log_start: int
    stand_in: StandIn | None = None
    sweep_status: SweepStatus | None = None

    @classmethod
    def start(cls, plane: ControlPlane) -> Probes:
        pods = PodTimes(plane.kubectl_cmd())
        pods.start()
        sampler = ProcSampler(plane.pids())
        controller_log = plane.workdir / "workflow-controller.log"
        probes = cls(pods, sampler, controller_log, controller_log.stat().st_size)
        time.sleep(1)   # the watch is established
        sampler.start()
        return probes

    def stop(self) -> None:
        if self.sweep_status:
            time.sleep(5)   # the operator's last word on a finished Workflow
            self.sweep_status.stop()
        if self.stand_in:
            self.stand_in.stop()
        self.sampler.stop()
        time.sleep(1)
        self.pods.stop()

    def controller_lines(self) -> str:
        """What the workflow-controller logged since the start."""
        with self.controller_log.open("rb") as f:
            f.seek(self.log_start)
            return f.read().decode(errors="replace")


def chunking(run: Run, items: list[dict]) -> tuple[list[dict], int]:
    """The chunks the plan step lists for these items, and each chunk Workflow's share of the parallelism."""
    chunks = chunk_list(items)
    return chunks, chunk_parallelism(run.parallelism, len(chunks))


def start_fanout(plane: ControlPlane, run: Run, items: list[dict], probes: Probes) -> str:
    """Submit the run's fan-out as its mode says; the name of the Workflow that runs it."""
    _, share = chunking(run, items)
    if run.mode == "items":
        return submit(plane, fanout_workflow(items, run.parallelism))
    probes.stand_in = StandIn(plane, items)
    probes.stand_in.start()
    if run.mode == "sweep":   # each chunk Workflow gets its share of the parallelism, as the operator gives it
        return submit(plane, sweep_workflow(run.parallelism), f"image={CELL_IMAGE}",
                      "image-pull-policy=Never", "sweep=fanout", "store=s3://ccsweep/fanout",
                      f"chunk-parallelism={share}")
    sweep_name = f"fanout-{run.nodes}-{run.cells}"
    name = create_sweep(plane, sweep_name, run.parallelism)
    probes.sweep_status = SweepStatus(plane, sweep_name)
    probes.sweep_status.start()
    return name


def wait_completed(plane: ControlPlane, name: str, end: float) -> None:
    """Until Workflow `name` is completed or the clock passes `end` (time.time())."""
    # Asking for completed workflows only (Argo's label) returns nothing until one is done, so polling
    # costs the API server little, unlike reading a Workflow of thousands of nodes each second.
    done_query = (f"/apis/argoproj.io/v1alpha1/namespaces/{NAMESPACE}/workflows"
                  "?labelSelector=workflows.argoproj.io%2Fcompleted%3Dtrue")
    while time.time() < end:
        listed = plane.kubectl("get", "--raw", done_query, check=False).stdout
        if listed and any(w["metadata"]["name"] == name for w in json.loads(listed).get("items", [])):
            return
        time.sleep(1)


def plan_facts(items: list[dict], stand_in: StandIn | None, t0: float) -> dict:
    """How big the plan's result was, whether argoexec would have cut it, and when it was reported."""
    return {"plan_result_bytes": len(json.dumps(items)), "plan_result_cut": bool(stand_in and stand_in.cut),
            "plan_reported_s": (min(stand_in.plan_reported.values()) - t0) if stand_in and stand_in.plan_reported
            else None}


def chunk_facts(run: Run, chunks: list[dict], share: int, children: list[dict]) -> dict:
    """The chunk Workflows planned and made, their phases and the largest one's size."""
    return {"chunks": len(chunks) if run.mode != "items" else 0, "chunk_parallelism": share if chunks else None,
            "chunk_workflows": len(children),
            "chunk_phases": sorted((w.get("status") or {}).get("phase", "") for w in children),
            "chunk_bytes_max": max((len(json.dumps(w)) for w in children), default=0),
            "chunk_compressed": any((w.get("status") or {}).get("compressedNodes") for w in children)}


def pod_facts(pods: PodTimes, cells: int, t0: float, t_done: float) -> dict:
    """What the pod watch saw, and the fan-out's times in seconds from the submission at t0."""
    all_bound = max(pods.bound.values()) if len(pods.bound) >= cells else None
    created = sorted(pods.created.values())
    per_second: dict[int, int] = {}
    for t in created:
        per_second[int(t - t0)] = per_second.get(int(t - t0), 0) + 1
    span = (created[-1] - created[0]) if len(created) > 1 else 0.0
    return {"pods_seen": len(created), "bound": len(pods.bound), "succeeded": len(pods.done),
            "watch_restarts": pods.restarts,
            "first_pod_s": created[0] - t0 if created else None,
            "all_created_s": created[-1] - t0 if len(created) >= cells else None,
            "all_bound_s": (all_bound - t0) if all_bound else None,
            "fan_out_s": (all_bound - created[0]) if all_bound and created else None,
            "done_s": t_done - t0,
            "pods_per_s": (len(created) - 1) / span if span else None,
            "best_second": max(per_second.values()) if per_second else 0}


def sweep_status_facts(sweep_status: SweepStatus, pods: PodTimes, phase: str, t_done: float) -> dict:
    """How long a cell pod's success and the Workflow's end took to show in the Sweep's status."""
    lags = sweep_status.lags(list(pods.done.values()))
    final = sweep_status.phase_at(phase) if phase else None
    return {"counted": max((done for _, done, _ in sweep_status.seen), default=0),
            "lag_median_s": statistics.median(lags) if lags else None, "lag_max_s": max(lags) if lags else None,
            "final_phase_lag_s": (final - t_done) if final else None}


def collect(plane: ControlPlane, run: Run, name: str, items: list[dict], probes: Probes,
            t0: float, t_done: float) -> dict:
    """Everything the report says about the run, read once the Workflow is done and the probes stopped."""
    chunks, share = chunking(run, items)
    children = json.loads(plane.kubectl("get", "workflows", "-n", NAMESPACE, "-l", f"ccsweep.io/parent={name}",
                                        "-o", "json", timeout=120).stdout)["items"]
    body = plane.kubectl("get", "workflow", "-n", NAMESPACE, name, "-o", "json").stdout
    status = json.loads(body).get("status", {})
    phase = status.get("phase", "")
    log = probes.controller_lines()
    stand_in = probes.stand_in
    results = {"workflow": name, "mode": run.mode, "phase": phase or "(timeout)", "message": status.get("message", ""),
               **plan_facts(items, stand_in, t0), **chunk_facts(run, chunks, share, children),
               "stand_in_errors": stand_in.errors[:5] if stand_in else [],
               **pod_facts(probes.pods, run.cells, t0, t_done),
               "workflow_bytes": len(body.encode()),
               "compressed_nodes": bool(status.get("compressedNodes")),
               "status_nodes": len(status.get("nodes", {})),
               "throttled_logs": log.count("client-side throttling"),
               "too_large_logs": log.count("maximum allowed size"),
               "usage": {n: vars(u) for n, u in probes.sampler.usage.items()}}
    if probes.sweep_status:
        results["sweep_status"] = sweep_status_facts(probes.sweep_status, probes.pods, phase, t_done)
    return results


def clear(plane: ControlPlane, run: Run) -> None:
    """Delete the run's Sweep and Workflows and wait (up to 5 min) until their pods are gone."""
    if run.mode == "operator":
        plane.kubectl("delete", "sweeps", "--all", "-n", NAMESPACE, "--wait=true", timeout=600)
    plane.kubectl("delete", "workflows", "--all", "-n", NAMESPACE, "--wait=true", timeout=600)
    cleared = time.monotonic() + 300
    while time.monotonic() < cleared and plane.kubectl("get", "pods", "-n", NAMESPACE, "-o", "name").stdout.strip():
        time.sleep(2)


def measure(plane: ControlPlane, run: Run, items: list[dict], timeout: float) -> None:
    """One fan-out of `items` on `plane`, as `run` says; its results in run.results."""
    probes = Probes.start(plane)
    t0 = time.time()
    name = start_fanout(plane, run, items, probes)
    wait_completed(plane, name, t0 + timeout)
    t_done = time.time()
    probes.stop()
    run.results = collect(plane, run, name, items, probes, t0, t_done)
    clear(plane, run)
