"""The cluster's nodes, their labels and allocatable CPU and memory, read by an Argo sweep's plan
step (`ccsweep plan --check-nodes`).

The plan pod reads them with its own ServiceAccount (the chart's ccsweep-workflow, which may get
and list nodes and nothing else cluster-wide), so that cells no node can run are left out before
the fan-out instead of staying Pending for ever. The Kubernetes client is imported here only: a
local run never needs it.
"""

from __future__ import annotations

from ccsweep.placement import Node
from ccsweep.podspec import PodValueError, cpu_milli, memory_bytes

#: Seconds the node list may take; the plan step's own deadline is 300 s.
LIST_TIMEOUT_S = 30


class NodesUnreadable(RuntimeError):
    """The nodes could not be read; str() is one line. `lasting`: asking again will not help (no
    cluster credentials here, or the API refuses this identity the node list)."""

    def __init__(self, message: str, *, lasting: bool = False) -> None:
        super().__init__(message)
        self.lasting = lasting


def list_nodes() -> list[Node]:
    """Every node with its labels, with the pod's in-cluster credentials (else the kubeconfig)."""
    try:
        import kubernetes
        from kubernetes.client.exceptions import ApiException
    except ImportError:
        raise NodesUnreadable("the Kubernetes client is not installed (pip install 'ccsweep[operator]')",
                              lasting=True) from None
    try:
        kubernetes.config.load_incluster_config()
    except kubernetes.config.ConfigException:
        try:
            kubernetes.config.load_kube_config()
        except (kubernetes.config.ConfigException, OSError) as exc:
            raise NodesUnreadable(f"not in a cluster: no in-cluster credentials and no kubeconfig ({exc})",
                                  lasting=True) from None
    try:
        listed = kubernetes.client.CoreV1Api().list_node(_request_timeout=LIST_TIMEOUT_S)
    except ApiException as exc:
        raise NodesUnreadable(f"listing nodes: {exc.status} {exc.reason}", lasting=exc.status in (401, 403)) from None
    except Exception as exc:  # noqa: BLE001 - urllib3's connection and timeout errors: the API is away
        raise NodesUnreadable(f"listing nodes: {type(exc).__name__}: {str(exc)[:200]}") from None
    return [Node(name=str(n.metadata.name), labels=dict(n.metadata.labels or {}),
                 **_allocatable(dict(getattr(n.status, "allocatable", None) or {})))
            for n in listed.items if n.metadata]


def _allocatable(quantities: dict[str, str]) -> dict[str, int | None]:
    """A node's allocatable CPU (millicores) and memory (bytes) from its status; None for a value
    absent or in a form a cell's request never takes (then the node's size refuses nothing)."""
    sizes: dict[str, int | None] = {"cpu_milli": None, "memory_bytes": None}
    for field, key, parse in (("cpu_milli", "cpu", cpu_milli), ("memory_bytes", "memory", memory_bytes)):
        try:
            sizes[field] = parse(str(quantities[key]))
        except (KeyError, PodValueError):
            pass
    return sizes
