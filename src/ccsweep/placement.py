"""Whether some node can run each cell, decided before any cell pod exists.

A cell pod selects nodes by the node probe's `ccsweep.io/cc-<alg>=true` labels and asks for its
requests (podrequests.py). When no node carries the labels, or none of those that do can hold the
requests, the pod stays Pending (for ever under Argo, whose retried steps never time out while
Pending) and Kubernetes says only that no node matched. The operator and `ccsweep plan
--check-nodes` (an Argo sweep's plan step) check the same labels first (the plan step the nodes'
allocatable too): the operator fails the Sweep at once, the plan step leaves such cells out and
records them as unplaceable; either says why in one line: the algorithm, each node's kernel, and
whether the kernel could load it (the chart's node-setup option loads modules, and registers
BPF ones), or the pod's
requests and the largest node's allocatable. Pure functions over nodes: reading them is the
caller's (operator/ccsweep_operator/kube.py, ccsweep.clusternodes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ccsweep.bpfcc import is_bpf
from ccsweep.cell import Cell
from ccsweep.plan import CC_LABEL_PREFIX, KERNEL_LABEL, node_selector
from ccsweep.podrequests import EXECUTOR_CPU_MILLI, EXECUTOR_MEMORY_BYTES, PodRequests

#: Node label prefix the node probe sets for each algorithm the node's kernel could load as a module.
LOADABLE_LABEL_PREFIX = "ccsweep.io/loadable-cc-"

#: Nodes named in a message before the rest are only counted (one line, even on a big cluster).
NAMED_NODES = 5


@dataclass(frozen=True)
class Node:
    """A node as the check needs it: its name, labels and allocatable CPU (millicores) and memory
    (bytes), None where not known (then nothing is refused for its size)."""

    name: str
    labels: Mapping[str, str]
    cpu_milli: int | None = None
    memory_bytes: int | None = None

    def offers(self, selector: Mapping[str, str]) -> bool:
        return all(self.labels.get(k) == v for k, v in selector.items())

    def holds(self, pod: PodRequests) -> bool:
        """Whether the node's allocatable can hold a pod of these requests (an unknown size can)."""
        return ((self.cpu_milli is None or pod.cpu_milli <= self.cpu_milli)
                and (self.memory_bytes is None or pod.memory_bytes <= self.memory_bytes))

    def can_load(self, cc: str) -> bool:
        return self.labels.get(f"{LOADABLE_LABEL_PREFIX}{cc}") == "true"

    def known(self) -> bool:
        """Whether the node probe (or a person) has said what this node offers."""
        return KERNEL_LABEL in self.labels or any(k.startswith(CC_LABEL_PREFIX) for k in self.labels)


#: A cell's whole pod's requests (podrequests.PodRequests.with_executor), when sizes are checked.
PodOf = Callable[[Cell], PodRequests]


def unplaceable(cells: Iterable[Cell], nodes: Sequence[Node]) -> str | None:
    """None when every cell has a node offering its algorithms; else why not, in one line (the
    first such cell's reason, see unplaceable_cells)."""
    reasons = unplaceable_cells(cells, nodes)
    return next(iter(reasons.values()), None)


def unplaceable_cells(cells: Iterable[Cell], nodes: Sequence[Node], pod_of: PodOf | None = None) -> dict[str, str]:
    """Each cell no known node can run, by id, with why in one line; {} when all can run. With
    `pod_of`, a node runs a cell only if its allocatable also holds the cell's pod.

    Only nodes whose offer is known count. None known says nothing: a node pool scaled to zero,
    an API server without kubelets, or a probe that has not reported yet (just installed); the
    cells may still find nodes later. Cells come in order, and so do the reasons.
    """
    nodes = [n for n in nodes if n.known()]
    if not nodes:
        return {}
    cells = list(cells)
    keys = {c.id: (_selector(c), pod_of(c) if pod_of else None) for c in cells}
    why = {key: _why_not(*key, nodes) for key in set(keys.values())}
    return {c.id: reason for c in cells if (reason := why[keys[c.id]]) is not None}


def largest_room(nodes: Sequence[Node]) -> PodRequests | None:
    """The most a cell's main container may ask for on the largest node whose size is known (its
    allocatable less Argo's wait container), or None when no node's size is known."""
    sized = [n for n in nodes if n.cpu_milli is not None and n.memory_bytes is not None]
    if not sized:
        return None
    return PodRequests(cpu_milli=max(0, max(n.cpu_milli or 0 for n in sized) - EXECUTOR_CPU_MILLI),
                       memory_bytes=max(0, max(n.memory_bytes or 0 for n in sized) - EXECUTOR_MEMORY_BYTES))


def _selector(cell: Cell) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(node_selector(cell).items()))


def _why_not(selector: tuple[tuple[str, str], ...], pod: PodRequests | None, nodes: Sequence[Node]) -> str | None:
    offering = [n for n in nodes if n.offers(dict(selector))]
    if pod is not None and offering and not any(n.holds(pod) for n in offering):
        return _too_large(pod, offering)
    if offering:
        return None
    wanted = [k.removeprefix(CC_LABEL_PREFIX) for k, _ in selector if k.startswith(CC_LABEL_PREFIX)]
    missing = [cc for cc in wanted if not any(n.offers({f"{CC_LABEL_PREFIX}{cc}": "true"}) for n in nodes)]
    kernel = dict(selector).get(KERNEL_LABEL)
    if missing:
        what = f"congestion control {', '.join(missing)}"
    elif kernel is not None and not any(n.labels.get(KERNEL_LABEL) == kernel for n in nodes):
        what = f"kernel {kernel}"
    else:
        on_kernel = f" on kernel {kernel}" if kernel else ""
        what = f"congestion controls {' and '.join(wanted)}{on_kernel} on one node"
    return f"no node offers {what}; nodes: {_describe(nodes, missing)}{_hint(nodes, missing)}"


def _describe(nodes: Sequence[Node], missing: Sequence[str]) -> str:
    named = []
    for node in nodes[:NAMED_NODES]:
        kernel = node.labels.get(KERNEL_LABEL, "kernel unknown (no node probe)")
        loadable = [cc for cc in missing if node.can_load(cc)]
        named.append(f"{node.name} {kernel}" + (f" (could load {', '.join(loadable)})" if loadable else ""))
    more = len(nodes) - NAMED_NODES
    return "; ".join(named) + (f"; and {more} more" if more > 0 else "")


def _hint(nodes: Sequence[Node], missing: Sequence[str]) -> str:
    if missing and any(n.can_load(cc) for n in nodes for cc in missing):
        return " - the chart's nodeSetup.enabled=true with nodeSetup.modules loads them"
    if bpf := [cc for cc in missing if is_bpf(cc)]:
        return (f" - BPF congestion controls are the admin's to register: the chart's nodeSetup.enabled=true "
                f"with {', '.join(bpf)} in nodeSetup.bpfAlgorithms")
    return ""


def _too_large(pod: PodRequests, offering: Sequence[Node]) -> str:
    """Why no node that offers a cell's algorithms can take its pod: its requests and the largest such node."""
    largest = max(offering, key=lambda n: (n.cpu_milli or 0, n.memory_bytes or 0))
    sizes = ", ".join(part for part in (
        f"{largest.cpu_milli / 1000:g} CPU" if largest.cpu_milli is not None else "",
        f"{largest.memory_bytes / (1 << 30):.1f}Gi" if largest.memory_bytes is not None else "") if part)
    return (f"no node can hold its pod's requests, {pod.cpu_milli / 1000:g} CPU and {pod.memory_bytes >> 20}Mi "
            f"(the cell's cost model and Argo's wait container); the largest node offering its algorithms: "
            f"{largest.name} {sizes} allocatable")
