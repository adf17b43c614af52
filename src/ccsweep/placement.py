"""Whether some node can run each cell, decided before any cell pod exists.

A cell pod selects nodes by the node probe's `ccsweep.io/cc-<alg>=true` labels. When no node
carries them, the pod stays Pending (for ever under Argo, whose retried steps never time out while
Pending) and Kubernetes says only that no node matched. The operator and `ccsweep plan
--check-nodes` (an Argo sweep's plan step) check the same labels first: the operator fails the
Sweep at once, the plan step leaves such cells out and records them as unplaceable; either says
why in one line: the algorithm, each node's kernel, and whether the kernel could load it (the
chart's node-setup option loads modules). Pure functions over labels: reading the nodes is the
caller's (operator/ccsweep_operator/kube.py, ccsweep.clusternodes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ccsweep.cell import Cell
from ccsweep.plan import CC_LABEL_PREFIX, KERNEL_LABEL, node_selector

#: Node label prefix the node probe sets for each algorithm the node's kernel could load as a module.
LOADABLE_LABEL_PREFIX = "ccsweep.io/loadable-cc-"

#: Nodes named in a message before the rest are only counted (one line, even on a big cluster).
NAMED_NODES = 5


@dataclass(frozen=True)
class Node:
    """A node as the check needs it: its name and labels."""

    name: str
    labels: Mapping[str, str]

    def offers(self, selector: Mapping[str, str]) -> bool:
        return all(self.labels.get(k) == v for k, v in selector.items())

    def can_load(self, cc: str) -> bool:
        return self.labels.get(f"{LOADABLE_LABEL_PREFIX}{cc}") == "true"

    def known(self) -> bool:
        """Whether the node probe (or a person) has said what this node offers."""
        return KERNEL_LABEL in self.labels or any(k.startswith(CC_LABEL_PREFIX) for k in self.labels)


def unplaceable(cells: Iterable[Cell], nodes: Sequence[Node]) -> str | None:
    """None when every cell has a node offering its algorithms; else why not, in one line (the
    first such cell's reason, see unplaceable_cells)."""
    reasons = unplaceable_cells(cells, nodes)
    return next(iter(reasons.values()), None)


def unplaceable_cells(cells: Iterable[Cell], nodes: Sequence[Node]) -> dict[str, str]:
    """Each cell no known node can run, by id, with why in one line; {} when all can run.

    Only nodes whose offer is known count. None known says nothing: a node pool scaled to zero,
    an API server without kubelets, or a probe that has not reported yet (just installed); the
    cells may still find nodes later. Cells come in order, and so do the reasons.
    """
    nodes = [n for n in nodes if n.known()]
    if not nodes:
        return {}
    cells = list(cells)
    why = {selector: _why_not(selector, nodes) for selector in sorted({_selector(c) for c in cells})}
    return {c.id: reason for c in cells if (reason := why[_selector(c)]) is not None}


def _selector(cell: Cell) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(node_selector(cell).items()))


def _why_not(selector: tuple[tuple[str, str], ...], nodes: Sequence[Node]) -> str | None:
    if any(n.offers(dict(selector)) for n in nodes):
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
    return ""
