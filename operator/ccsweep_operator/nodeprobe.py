"""Label this node with the congestion controls its kernel offers, and its kernel release.

Runs in the chart's node-probe DaemonSet (one per node). A cell pod asks for nodes labelled
`ccsweep.io/cc-<alg>=true` for each of its algorithms (ccsweep.plan.node_selector), so a cell
never lands on a kernel lacking one. `tcp_available_congestion_control` is global to the kernel
(not per network namespace), so an unprivileged pod reads the node's own list.

    python -m ccsweep_operator.nodeprobe [--node NAME] [--interval 300] [--once]
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import re
import signal
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

from ccsweep.plan import CC_LABEL_PREFIX

AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
KERNEL_LABEL = "ccsweep.io/kernel"

log = logging.getLogger("ccsweep.nodeprobe")


def label_value(text: str) -> str:
    """`text` as a valid label value: [A-Za-z0-9._-], alphanumeric at both ends, at most 63 characters."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", text)[:63]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", cleaned)


def probe(available_file: Path = AVAILABLE) -> tuple[list[str], str]:
    """The kernel's available congestion controls and its release."""
    return sorted(available_file.read_text().split()), platform.release()


def label_patch(available: list[str], kernel: str, current: Mapping[str, str]) -> dict[str, str | None]:
    """Labels to merge into the node: one per algorithm, the kernel; None removes an algorithm gone since."""
    wanted: dict[str, str | None] = {f"{CC_LABEL_PREFIX}{cc}": "true" for cc in available}
    wanted[KERNEL_LABEL] = label_value(kernel)
    stale = {k: None for k in current if k.startswith(CC_LABEL_PREFIX) and k not in wanted}
    return {k: v for k, v in {**wanted, **stale}.items() if current.get(k) != v}


def label_node(node: str, available_file: Path = AVAILABLE) -> dict[str, str | None]:
    """Probe and patch `node`'s labels; returns what changed (empty when nothing did)."""
    import kubernetes

    api = kubernetes.client.CoreV1Api()
    available, kernel = probe(available_file)
    metadata = api.read_node(node).metadata
    current = (metadata.labels if metadata else None) or {}
    patch = label_patch(available, kernel, current)
    if patch:
        api.patch_node(node, {"metadata": {"labels": patch}})
    return patch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ccsweep_operator.nodeprobe", description=__doc__.split("\n\n")[0])
    parser.add_argument("--node", default=os.environ.get("NODE_NAME"), help="the node to label (default: $NODE_NAME)")
    parser.add_argument("--interval", type=float, default=300, help="seconds between probes (default: 300)")
    parser.add_argument("--once", action="store_true", help="probe and label once, then exit")
    args = parser.parse_args(argv)
    if not args.node:
        parser.error("--node or $NODE_NAME is required")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    from ccsweep_operator.kube import load_config

    load_config()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while True:
        delay = args.interval
        try:
            changed = label_node(args.node)
            log.info(f"node {args.node}: " + (", ".join(f"{k}={v}" for k, v in sorted(changed.items()))
                                              if changed else "labels up to date"))
        except Exception as exc:  # the API server may be briefly away: try again soon, never crash-loop
            if args.once:
                raise
            log.warning(f"node {args.node}: labelling failed ({str(exc).splitlines()[0]}); retrying")
            delay = min(args.interval, 30)
        if args.once or stop.wait(delay):
            return 0


if __name__ == "__main__":
    sys.exit(main())
