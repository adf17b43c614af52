"""Whether some node can run each cell, decided before a Workflow exists.

A cell pod selects nodes by the node probe's `ccsweep.io/cc-<alg>=true` labels. When no node
carries them, Kubernetes keeps the pod Pending until its deadline, minutes later, and says only
that no node matched. The operator checks the same labels first and fails the Sweep at once with
one line: the algorithm, each node's kernel, and whether the kernel could load it (the chart's
node-setup option loads modules).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ccsweep.cell import Cell
from ccsweep.plan import CC_LABEL_PREFIX, node_selector
from ccsweep_operator.nodeprobe import KERNEL_LABEL, LOADABLE_LABEL_PREFIX

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
    """None when every cell has a node offering its algorithms; else why not, in one line.

    Only nodes whose offer is known count. None known says nothing: a node pool scaled to zero,
    an API server without kubelets, or a probe that has not reported yet (just installed); the
    cells may still find nodes later.
    """
    nodes = [n for n in nodes if n.known()]
    if not nodes:
        return None
    selectors = {tuple(sorted(node_selector(c).items())) for c in cells}
    for selector in sorted(selectors):
        if any(n.offers(dict(selector)) for n in nodes):
            continue
        wanted = [k.removeprefix(CC_LABEL_PREFIX) for k, _ in selector]
        missing = [cc for cc in wanted if not any(n.offers({f"{CC_LABEL_PREFIX}{cc}": "true"}) for n in nodes)]
        what = (f"congestion control {', '.join(missing)}" if missing
                else f"congestion controls {' and '.join(wanted)} on one node")
        return f"no node offers {what}; nodes: {_describe(nodes, missing)}{_hint(nodes, missing)}"
    return None


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
