"""Cluster benchmark: what an Argo fan-out costs per cell, and what that means for the full sweep.

Run as root (`make bench-cluster`). Brings up the local cluster (hack/cluster), the real Argo
controller and the node services, submits a sweep of short cells with the real `argo` CLI
(workflows/full-sweep.yaml, spec inline), watches every pod, tears everything down, and prints:

- per-cell overhead: pod created -> main container running -> cell runner started -> first byte
  of the flow (the flows' common start t0, which every result records as flows_started_at);
  goal: under 3 s;
- efficiency: the sum of the cells' flow times / (wall time x parallel slots), for the fan-out
  alone and for the whole workflow (plan and figures included);
- the projected wall time of the full sweep (ReBBR's 390 cells, their real durations from the
  `full-sweep` preset) on N nodes, by longest-first scheduling of (flow time + measured overhead)
  onto the slots, plus the measured plan and figures steps.

Pod times come from a watch (millisecond resolution; the API's own timestamps have seconds).
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import statistics
import subprocess
import time
import uuid
from datetime import datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table

from benchmarks.cluster.attempts import nodes_of
from ccsweep.storeurls import namespace_store
from support.clusterlib import CACHE, Cluster, NodeServices, PodWatch, template_of

REPO = Path(__file__).resolve().parents[2]

NAMESPACE = "ccsweep-bench"
FULL_SWEEP = "full-sweep"
EXECUTOR_CPU = 0.1  # Argo's wait container (hack/cluster/argo.sh's executor resources)


# The start-up stages of a cell pod, as the watch sees them, between "created" and "main running".
STAGES = {
    "scheduled": lambda pod: bool(pod.get("spec", {}).get("nodeName")),
    "init running": lambda pod: PodWatch.container_in(pod, "init", ("running", "terminated"), init=True),
    "init done": lambda pod: PodWatch.container_in(pod, "init", ("terminated",), init=True),
}


def spec_yaml(cells_per_cc: int, duration_s: float) -> str:
    losses = [0, 0.1, 1, 2, 5, 10, 15, 20][:cells_per_cc]
    return f"""\
name: bench
description: Short cells to measure what the Argo fan-out costs per cell.
experiments:
  - name: bench
    title: "bench: goodput vs loss, 20 Mbit/s, 20 ms RTT"
    figure: goodput-vs-loss
    cc: [cubic, bbr]
    loss_percent: {json.dumps(losses)}
    rtt_ms: [20]
    bandwidth_mbps: [20]
    queue:
      - {{kind: droptail, bdp: 1, min_bytes: 30000}}
    duration_s: {duration_s:g}
    warmup_s: 2
"""


def parse_time(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def node_duration(node: dict) -> float:
    return parse_time(node["finishedAt"]) - parse_time(node["startedAt"]) if node.get("finishedAt") else 0.0


def allocatable_cpu(cluster: Cluster) -> float:
    cpu = cluster.get_json("node", "ccsweep-node")["status"]["allocatable"]["cpu"]
    return int(cpu[:-1]) / 1000 if cpu.endswith("m") else float(cpu)


def cpu_value(text: str) -> float:
    return int(text[:-1]) / 1000 if text.endswith("m") else float(text)


def makespan(durations: list[float], slots: int) -> float:
    """Longest-first list scheduling onto `slots` parallel slots (what a fan-out does, near enough)."""
    ends = [0.0] * slots
    for d in sorted(durations, reverse=True):
        heapq.heapreplace(ends, ends[0] + d)
    return max(ends)


def full_sweep_durations() -> tuple[list[float], str]:
    done = subprocess.run([str(REPO / ".venv/bin/ccsweep"), "expand", FULL_SWEEP],
                          capture_output=True, text=True, cwd=REPO)
    if done.returncode == 0:
        cells = {c["id"]: c for c in json.loads(done.stdout)}
        return [c["params"]["duration_s"] for c in cells.values()], f"the {FULL_SWEEP} preset ({len(cells)} cells)"
    return [60.0] * 390, f"390 cells of 60 s (preset {FULL_SWEEP!r} not found: {done.stderr.strip()[:80]})"


def bring_up(cluster: Cluster) -> NodeServices:
    """The cluster as `make cluster-up` makes it (the same scripts; what runs already is kept), and
    NAMESPACE ready for sweeps."""
    cluster.build_tools("apt", "kubernetes", "argo", "minio")
    cluster.up()
    cluster.start_argo()
    services = cluster.start_services()
    cluster.import_image("cell")
    cluster.prepare_sweep_namespace(NAMESPACE, services)
    return services


def measure(cluster: Cluster, services: NodeServices, args: argparse.Namespace, slots: int) -> dict:
    name = f"bench-{uuid.uuid4().hex[:6]}"
    watch = PodWatch(cluster, NAMESPACE)
    try:
        start = time.time()
        workflow_name = cluster.submit_sweep(NAMESPACE, services, spec_yaml=spec_yaml(args.cells // 2, args.duration),
                                             sweep=name, store_prefix=f"runs/{name}", parallelism=slots,
                                             cell_cpu=args.cell_cpu)
        # Exits 1 for a failed workflow; the report says which cells failed.
        cluster.argo("wait", "-n", NAMESPACE, workflow_name, timeout=1800, check=False)
        end = time.time()
        time.sleep(1)
    finally:
        watch.stop()
    workflow = cluster.get_json("workflow", "-n", NAMESPACE, workflow_name)
    cells = []
    for pod_events in watch.pods().values():
        labels = pod_events[0].pod["metadata"].get("labels", {})
        if labels.get("app.kubernetes.io/component") != "cell":
            continue
        created = pod_events[0].at
        main = PodWatch.first(pod_events, PodWatch.main_started)
        done = PodWatch.first(pod_events, lambda p: p.get("status", {}).get("phase") in ("Succeeded", "Failed"))
        record = {"id": labels["ccsweep.io/cell"], "created": created, "main": main, "done": done}
        for stage, seen in STAGES.items():
            record[stage] = PodWatch.first(pod_events, seen)
        stored = services.s3_get(f"{namespace_store(f'runs/{name}', NAMESPACE)}/cells/{labels['ccsweep.io/cell']}"
                                 "/result.json")
        if stored:
            result = json.loads(stored)
            record["runner_start"] = parse_time(result["started_at"])
            if result.get("flows_started_at"):
                record["first_byte"] = parse_time(result["flows_started_at"])
        cells.append(record)
    steps = {template_of(n): node_duration(n) for n in nodes_of(workflow).values()
             if n["type"] == "Pod" and template_of(n) in ("plan", "figures")}
    return {"workflow": workflow, "phase": workflow["status"]["phase"], "cells": cells, "start": start, "end": end,
            "steps": steps}


def stats(values: list[float]) -> str:
    if not values:
        return "n/a"
    return f"{statistics.median(values):.2f} / {max(values):.2f}"


def report(console: Console, run: dict, args: argparse.Namespace, slots: int, node_cpu: float) -> None:
    cells = [c for c in run["cells"] if c["done"]]
    if not cells:
        console.print(f"[red]no cell pod finished (workflow {run['phase']})")
        return
    table = Table(title=f"Per-cell overhead, {len(cells)} cells of {args.duration:g} s, {slots} slots "
                        f"({args.cell_cpu} CPU each on a {node_cpu:g}-CPU node); median / max, seconds")
    table.add_column("interval")
    table.add_column("seconds", justify="right")
    for stage in STAGES:
        table.add_row(f"pod created -> {stage}", stats([c[stage] - c["created"] for c in cells if c[stage]]))
    table.add_row("pod created -> main container running",
                  stats([c["main"] - c["created"] for c in cells if c["main"]]))
    table.add_row("pod created -> cell runner started",
                  stats([c["runner_start"] - c["created"] for c in cells if "runner_start" in c]))
    table.add_row("pod created -> first byte of the flow (goal < 3)",
                  stats([c["first_byte"] - c["created"] for c in cells if "first_byte" in c]))
    overhead = [c["done"] - c["created"] - args.duration for c in cells]
    table.add_row("pod lifetime - flow time (all per-cell overhead)", stats(overhead))
    console.print(table)

    flow_time = args.duration * len(cells)
    fan_out_wall = max(c["done"] for c in cells) - min(c["created"] for c in cells)
    workflow_wall = run["end"] - run["start"]
    eff = Table(title="Efficiency = sum of flow times / (wall time x parallel slots)")
    for column in ("scope", "wall s", "efficiency"):
        eff.add_column(column, justify="right" if column != "scope" else "left")
    eff.add_row("cell fan-out", f"{fan_out_wall:.1f}", f"{flow_time / (fan_out_wall * slots):.0%}")
    steps = run["steps"]
    eff.add_row(f"whole workflow (plan {steps.get('plan', 0):.0f} s, figures {steps.get('figures', 0):.0f} s)",
                f"{workflow_wall:.1f}", f"{flow_time / (workflow_wall * slots):.0%}")
    console.print(eff)

    durations, source = full_sweep_durations()
    per_cell_overhead = statistics.median(overhead)
    fixed = sum(run["steps"].values())
    slots_per_node = max(1, math.floor((args.node_cores - 0.5) / (cpu_value(args.cell_cpu_full) + EXECUTOR_CPU)))
    proj = Table(title=f"Projected wall time of the full sweep: {source}, {sum(durations) / 3600:.1f} h of flows; "
                       f"{args.node_cores}-core nodes, {args.cell_cpu_full} CPU per cell -> "
                       f"{slots_per_node} slots per node; "
                       f"+{per_cell_overhead:.1f} s measured overhead per cell, +{fixed:.0f} s plan and figures")
    for column in ("nodes", "slots", "wall time", "efficiency"):
        proj.add_column(column, justify="right")
    for nodes in args.nodes:
        total_slots = nodes * slots_per_node
        wall = makespan([d + per_cell_overhead for d in durations], total_slots) + fixed
        efficiency = sum(durations) / (wall * total_slots)
        proj.add_row(str(nodes), str(total_slots), f"{wall / 60:.0f} min", f"{efficiency:.0%}")
    console.print(proj)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cells", type=int, default=8, help="cells to run (even: half cubic, half bbr; at most 16)")
    p.add_argument("--duration", type=float, default=10, help="flow time of each cell, seconds")
    p.add_argument("--cell-cpu", default="500m", help="CPU request (= limit) of each cell pod here")
    p.add_argument("--node-cores", type=int, default=8, help="cores of each node in the projection")
    p.add_argument("--cell-cpu-full", default="1", help="CPU per cell in the projection")
    p.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32])
    p.add_argument("--keep", action="store_true", help="leave the cluster running afterwards")
    args = p.parse_args()
    console = Console()
    cluster = Cluster(CACHE / "bench-cluster", "ccsweep-bench")
    try:
        services = bring_up(cluster)
        node_cpu = allocatable_cpu(cluster)
        slots = max(1, math.floor(node_cpu / (cpu_value(args.cell_cpu) + EXECUTOR_CPU)))
        run = measure(cluster, services, args, slots)
    finally:
        if args.keep:
            console.print(f"cluster left running: hack/cluster/down.sh {cluster.base} {cluster.ns}")
        else:
            cluster.down()
    console.print(f"workflow {run['phase']}; setup {json.dumps({k: round(v) for k, v in cluster.timings.items()})}")
    report(console, run, args, slots, node_cpu)


if __name__ == "__main__":
    main()
