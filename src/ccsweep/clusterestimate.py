"""How long a sweep will take through Argo on a cluster of N nodes of C cores, before it starts.

Through Argo a sweep's wall time is set by how many cell pods the nodes hold at once (each node
takes pods while the sum of their CPU requests fits its allocatable, podrequests.py), by the
Workflow's `parallelism` (pods at once, Pending ones included), and by what each pod holds its
place for: the cell's flow time plus the slot overhead measured on the local cluster (pod bound to
Succeeded, minus the flow: set-up, storing the result, Argo's wait container, the kubelet's
relist). Argo creates pods in the plan's order; the scheduler binds each pending pod, oldest
first, to the node with the most CPU left that holds it, and a pod that fits nowhere yet waits
without holding back those behind it. This module plays that on a simulated clock, with the plan
and figures steps around it. Late retries are not modelled, nor the control plane's pace (it kept
up at these sizes, docs/scaling.md): the estimate is for a cluster that keeps time.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ccsweep.cell import Cell
from ccsweep.podrequests import CellSizing

#: Seconds a pod holds its place beyond its cell's flow time: the median of pod bound -> Succeeded
#: minus the flow over 325 cells of the full sweep through Argo on the local cluster
#: (benchmarks/results/2026-11-23-full-sweep.md; 3.96 min, 4.62 p90).
SLOT_OVERHEAD_S = 4.1
#: Seconds of the plan and figures steps in that run, around the cells.
FIXED_STEPS_S = 5.0
#: Pods at once in the sweep's Workflow (spec.parallelism of workflows/templates/ccsweep-sweep.yaml).
DEFAULT_PARALLELISM = 50


@dataclass(frozen=True)
class ClusterEstimate:
    """The simulated run of a sweep's cells through Argo on `nodes` nodes of `cores` cores each."""

    nodes: int
    cores: float
    cells: int
    wall_s: float
    #: Most cell pods running at once.
    peak_pods: int
    #: Cells whose pod no node holds (unplaceable: not run, not in `wall_s`).
    unplaceable: int


def estimate_cluster(cells: Sequence[Cell], nodes: int, cores: float, *, sizing: CellSizing | None = None,
                     parallelism: int = DEFAULT_PARALLELISM, slot_overhead_s: float = SLOT_OVERHEAD_S,
                     hold_s: Callable[[Cell], float] | None = None,
                     pod_cpu_milli: Callable[[Cell], int] | None = None) -> ClusterEstimate:
    """Simulates `cells` (in plan order) through one Argo Workflow on `nodes` nodes of `cores`
    allocatable cores, each pod asking what `sizing` gives it (the cost model's by default), or
    `pod_cpu_milli(cell)` millicores for the whole pod (a past run's own requests, to check the
    estimate against it), and held for its flow time plus `slot_overhead_s` (or `hold_s(cell)`)."""
    if nodes < 1 or cores < 1 or parallelism < 1:
        raise ValueError(f"nodes, cores and parallelism must be at least 1, got {nodes}, {cores}, {parallelism}")
    sizing = sizing or CellSizing()
    capacity = round(cores * 1000)
    request = {c.id: sizing.pod(c).cpu_milli if pod_cpu_milli is None else pod_cpu_milli(c) for c in cells}
    placeable = [c for c in cells if request[c.id] <= capacity]
    hold = hold_s or (lambda cell: cell.params.duration_s + slot_overhead_s)
    free = [capacity] * nodes
    running: list[tuple[float, int, int, int]] = []  # (end, order, node, millicores): a heap by end time
    waiting: list[Cell] = []  # created by Argo, not bound yet: oldest first
    queue = list(reversed(placeable))  # not created yet; popped from the end, in plan order
    now, order, peak = 0.0, 0, 0
    while queue or waiting or running:
        while queue and len(waiting) + len(running) < parallelism:
            waiting.append(queue.pop())
        still: list[Cell] = []
        for cell in waiting:
            node = max(range(nodes), key=lambda n: free[n])
            if free[node] < request[cell.id]:
                still.append(cell)
                continue
            free[node] -= request[cell.id]
            heapq.heappush(running, (now + hold(cell), order, node, request[cell.id]))
            order += 1
        waiting = still
        peak = max(peak, len(running))
        now, _, node, milli = heapq.heappop(running)
        free[node] += milli
        while running and running[0][0] <= now:  # every pod ending at the same instant
            _, _, node, milli = heapq.heappop(running)
            free[node] += milli
    return ClusterEstimate(nodes=nodes, cores=cores, cells=len(cells), wall_s=now + FIXED_STEPS_S, peak_pods=peak,
                           unplaceable=len(cells) - len(placeable))
