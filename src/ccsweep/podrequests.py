"""What a cell pod asks Kubernetes for: CPU and memory requests from what the cell measurably costs.

A request decides how many cells a node takes at once (the scheduler sums requests against the
node's allocatable) and, with no CPU limit, each cell's share of a busy node (CFS weights follow
requests). A flat request of a whole core made a 2-core node run 2 cells where the local executor
runs about 8 on time, and a Mahimahi cell's flat 2185m fit no 2-core node at all. So the plan step
asks for each cell what the local executor's admission expects it to cost (admission.prior_cost:
link backend, rate and what the cell is expected to carry of it, release window from the delay,
offloads), with headroom, a floor and a cap;
memory from what its processes and its socket buffers can hold. A retry asks for twice as much
(at most what the largest node holds): a cell that ran late or starved must not meet the same
crowding again. `--cell-cpu` / `--cell-memory` (the chart's workflows.cellCpu and cellMemory)
override the model for every cell's first attempt.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ccsweep.admission import prior_cost
from ccsweep.cell import Cell
from ccsweep.podspec import CPU_MILLI_RANGE, MEMORY_BYTES_RANGE, check_cpu, check_memory, cpu_milli, memory_bytes

#: Request over expected mean cost. The local executor fills 1.5 of a 2-core machine with cells at
#: their prior cost and keeps them on time (benchmarks/results/2026-11-25-rebbr-full: mean 7.8 cells
#: at once); a 2-core node's allocatable is its 2 cores, so 2 / 1.5 packs it as tightly. The rest is
#: for the bursts a mean hides (interpreters starting, slow start) and the kubelet's own work.
CPU_HEADROOM = 4 / 3
#: Below 100m a cell misses the emulator's 1 ms budget (podspec.CPU_MILLI_RANGE); the runner and two
#: endpoint interpreters start in the cell's first second whatever its rate, hence half again.
CPU_FLOOR_MILLI = 150
#: The model is fitted up to 1 Gbit/s (0.56 cores measured) and linear beyond; Mahimahi's shells
#: measured 57 % of the fit per 100 Mbit/s at 400 Mbit/s. Past 4 cores it extrapolates too far to
#: be worth a node, so no first attempt asks for more.
CPU_CAP_MILLI = 4_000
#: Memory of a cell's processes beside its sockets: the runner (43 MiB at start, numpy and the
#: results after the flows), two endpoint interpreters, the emulator or Mahimahi's shells and
#: their dnsmasq, and Argo's emissary around them. Measured as a memory cgroup's peak (cgroup v1,
#: which leaves socket buffers out; page cache in) for figure8's CUBIC cell at 100 Mbit/s, 100 ms:
#: 58 MiB with 15 s flows, 134 MiB with 140 s (the study's longest), on 2026-11-29. Twice the
#: longest leaves room for the emissary and for what a longer series holds.
MEMORY_BASE_BYTES = 256 << 20
#: Per flow, what its sockets and the link can hold at most: the sender's buffer (tcp_wmem's
#: maximum), a copy of what is in flight in the link's queue and delay line (no more than the
#: sender keeps unacknowledged), and the receiver's buffer (tcp_rmem's maximum). A cgroup v2 node
#: charges socket buffers to the pod.
MEMORY_CAP_BYTES = 8 << 30
#: Memory requests are rounded up to this, so equal cells ask for equal quantities.
MEMORY_STEP_BYTES = 64 << 20
#: What a retry asks for, times the first attempt's request (capped by the largest node).
RETRY_FACTOR = 2
#: What a cell pod holds beside its main container: Argo's wait container, at the executor
#: resources the local cluster's controller gives it (hack/cluster/argo.sh: 10m, since the emissary
#: only waits while the cell runs, 1.6m median over a pod's life; 100m held a 2-core node to 8
#: pods). A controller with none
#: configured asks nothing for it, and then this is a margin on the safe side.
EXECUTOR_CPU_MILLI = 10
EXECUTOR_MEMORY_BYTES = 128 << 20


@dataclass(frozen=True)
class PodRequests:
    """A cell pod's main container requests (memory is also its limit), in millicores and bytes."""

    cpu_milli: int
    memory_bytes: int

    @property
    def cpu(self) -> str:
        """The CPU request as a Kubernetes quantity, checked against podspec's range."""
        return check_cpu(f"{self.cpu_milli}m")

    @property
    def memory(self) -> str:
        """The memory request as a Kubernetes quantity (whole MiB), checked against podspec's range."""
        return check_memory(f"{-(-self.memory_bytes // (1 << 20))}Mi")

    def with_executor(self) -> PodRequests:
        """The whole pod's requests, Argo's wait container included: what a node must have free."""
        return PodRequests(self.cpu_milli + EXECUTOR_CPU_MILLI, self.memory_bytes + EXECUTOR_MEMORY_BYTES)


def modelled_requests(cell: Cell) -> PodRequests:
    """The requests of a cell's first attempt by the cost model, within the floor and the caps."""
    cpu = math.ceil(prior_cost(cell) * CPU_HEADROOM * 1000)
    buffers = sum(2 * cell.params.buffers.tcp_wmem[2] + cell.params.buffers.tcp_rmem[2] for _ in cell.params.flows)
    memory = -(-(MEMORY_BASE_BYTES + buffers) // MEMORY_STEP_BYTES) * MEMORY_STEP_BYTES
    return PodRequests(cpu_milli=_within(cpu, CPU_FLOOR_MILLI, CPU_CAP_MILLI),
                       memory_bytes=_within(memory, MEMORY_BYTES_RANGE[0], MEMORY_CAP_BYTES))


def first_requests(cell: Cell, cpu: str | None = None, memory: str | None = None) -> PodRequests:
    """The requests of a cell's first attempt: the model's, or the sweep's override of either
    (`cpu`, `memory` as Kubernetes quantities, checked: PodValueError)."""
    model = modelled_requests(cell)
    return PodRequests(cpu_milli=model.cpu_milli if cpu is None else cpu_milli(check_cpu(cpu)),
                       memory_bytes=model.memory_bytes if memory is None else memory_bytes(check_memory(memory)))


def retry_requests(first: PodRequests, room: PodRequests | None = None) -> PodRequests:
    """What a retry asks for: RETRY_FACTOR times `first`, at most `room` (the most a node can give a
    cell's main container, or None when no node is known) and podspec's range, never less than `first`."""
    top = room or PodRequests(CPU_MILLI_RANGE[1], MEMORY_BYTES_RANGE[1])
    return PodRequests(cpu_milli=max(first.cpu_milli, min(first.cpu_milli * RETRY_FACTOR, top.cpu_milli,
                                                          CPU_MILLI_RANGE[1])),
                       memory_bytes=max(first.memory_bytes, min(first.memory_bytes * RETRY_FACTOR, top.memory_bytes,
                                                                MEMORY_BYTES_RANGE[1])))


def _within(value: int, low: int, high: int) -> int:
    return max(low, min(value, high))


@dataclass(frozen=True)
class CellSizing:
    """How a sweep's cell pods are sized: the sweep's overrides (None: the model's request) and the
    most the largest known node can give a cell's main container (None: no node known)."""

    cpu: str | None = None
    memory: str | None = None
    room: PodRequests | None = None

    def first(self, cell: Cell) -> PodRequests:
        return first_requests(cell, self.cpu, self.memory)

    def pod(self, cell: Cell) -> PodRequests:
        """The whole pod of the cell's first attempt, as a node must hold it."""
        return self.first(cell).with_executor()

    def item_fields(self, cell: Cell) -> dict[str, str]:
        """The plan item's resource fields: the first attempt's requests and every retry's."""
        first = self.first(cell)
        retry = retry_requests(first, self.room)
        return {"cpu": first.cpu, "memory": first.memory, "retry_cpu": retry.cpu, "retry_memory": retry.memory}
