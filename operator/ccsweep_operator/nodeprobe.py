"""Label this node with the congestion controls its kernel offers, could load, and its release.

Runs in the chart's node-probe DaemonSet (one per node). A cell pod asks for nodes labelled
`ccsweep.io/cc-<alg>=true` for each of its algorithms (ccsweep.plan.node_selector), so a cell
never lands on a kernel lacking one. `tcp_available_congestion_control` is global to the kernel
(not per network namespace), so an unprivileged pod reads the node's own list.

What the kernel could load (`ccsweep.io/loadable-cc-<alg>=true`, from the modules under
/lib/modules/RELEASE, mounted read-only from the node) is what the chart's privileged node-setup
DaemonSet can make available; the operator names it when a Sweep asks for an algorithm no node
offers yet.

    python -m ccsweep_operator.nodeprobe [--node NAME] [--interval 300] [--modules /lib/modules] [--once]
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
from collections.abc import Mapping, Sequence
from pathlib import Path

import kubernetes

from ccsweep.placement import LOADABLE_LABEL_PREFIX
from ccsweep.plan import CC_LABEL_PREFIX, KERNEL_LABEL
from ccsweep_operator.kube import load_config

AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
MODULES = Path("/lib/modules")
#: net/ipv4's tcp_*.ko modules that are not congestion controls.
NOT_CONGESTION_CONTROLS = frozenset({"diag"})
#: A module file: its name without the .ko and any compression suffix.
MODULE_FILE = re.compile(r"^tcp_(?P<alg>[a-z0-9_]+)\.ko(\.(xz|zst|gz))?$")

log = logging.getLogger("ccsweep.nodeprobe")


def label_value(text: str) -> str:
    """`text` as a valid label value: [A-Za-z0-9._-], alphanumeric at both ends, at most 63 characters."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", text)[:63]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", cleaned)


def probe(available_file: Path = AVAILABLE) -> tuple[list[str], str]:
    """The kernel's available congestion controls and its release."""
    return sorted(available_file.read_text().split()), platform.release()


def loadable(kernel: str, modules: Path = MODULES) -> list[str]:
    """Congestion controls the kernel could load: its tcp_* modules under net/ipv4.

    Empty when the node's modules are not mounted (or the kernel has none): then nothing is
    claimed loadable, and the labels say only what is available now.
    """
    ipv4 = modules / kernel / "kernel/net/ipv4"
    found = (MODULE_FILE.match(p.name) for p in ipv4.iterdir()) if ipv4.is_dir() else iter(())
    return sorted({m["alg"] for m in found if m and m["alg"] not in NOT_CONGESTION_CONTROLS})


def label_patch(available: list[str], kernel: str, current: Mapping[str, str],
                can_load: Sequence[str] = ()) -> dict[str, str | None]:
    """Labels to merge into the node: one per algorithm available and loadable, the kernel; None
    removes a label whose algorithm is gone since."""
    wanted: dict[str, str | None] = {f"{CC_LABEL_PREFIX}{cc}": "true" for cc in available}
    wanted |= {f"{LOADABLE_LABEL_PREFIX}{cc}": "true" for cc in can_load}
    wanted[KERNEL_LABEL] = label_value(kernel)
    stale = {k: None for k in current
             if k.startswith((CC_LABEL_PREFIX, LOADABLE_LABEL_PREFIX)) and k not in wanted}
    return {k: v for k, v in {**wanted, **stale}.items() if current.get(k) != v}


def label_node(node: str, available_file: Path = AVAILABLE, modules: Path = MODULES) -> dict[str, str | None]:
    """Probe and patch `node`'s labels; returns what changed (empty when nothing did)."""
    api = kubernetes.client.CoreV1Api()
    available, kernel = probe(available_file)
    metadata = api.read_node(node).metadata
    current = (metadata.labels if metadata else None) or {}
    patch = label_patch(available, kernel, current, loadable(kernel, modules))
    if patch:
        api.patch_node(node, {"metadata": {"labels": patch}})
    return patch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ccsweep_operator.nodeprobe", description=__doc__.split("\n\n")[0])
    parser.add_argument("--node", default=os.environ.get("NODE_NAME"), help="the node to label (default: $NODE_NAME)")
    parser.add_argument("--interval", type=float, default=300, help="seconds between probes (default: 300)")
    parser.add_argument("--modules", type=Path, default=MODULES,
                        help="the node's kernel modules, mounted read-only (default: /lib/modules)")
    parser.add_argument("--once", action="store_true", help="probe and label once, then exit")
    args = parser.parse_args(argv)
    if not args.node:
        parser.error("--node or $NODE_NAME is required")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    load_config()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while True:
        delay = args.interval
        try:
            changed = label_node(args.node, modules=args.modules)
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
