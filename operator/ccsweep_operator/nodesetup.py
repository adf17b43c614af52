"""Make congestion controls available on this node: load their modules, allow them to every user.

Runs as the init container of the chart's node-setup DaemonSet (off by default), which must be
privileged: loading a kernel module needs CAP_SYS_MODULE and the node's /lib/modules, and
`net.ipv4.tcp_allowed_congestion_control` is one setting for the whole kernel. Most distributions
build bbr, bic, vegas, westwood and the rest as modules that nothing loads until asked, so without
this a node's probe never labels them available and cells asking for them find no node.

    python -m ccsweep_operator.nodesetup tcp_bbr tcp_bic ...

Module names come from the chart's values, are checked against MODULE_NAME and reach modprobe as
one argument each (no shell). Modules the kernel lacks are reported, not fatal: the node probe
then labels what the node really offers.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ALLOWED = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
MODULE_NAME = re.compile(r"^tcp_[a-z0-9_]{1,32}$")


def allowed_after(allowed: Sequence[str], available: Sequence[str], modules: Sequence[str]) -> list[str]:
    """The allowed list with every requested algorithm the kernel now has, existing order kept."""
    wanted = [m.removeprefix("tcp_") for m in modules]
    return [*allowed, *(cc for cc in wanted if cc in available and cc not in allowed)]


def load(module: str) -> str | None:
    """modprobe one module; None when loaded (or built in), else modprobe's one-line complaint."""
    done = subprocess.run(["modprobe", "--", module], capture_output=True, text=True, timeout=60)
    if done.returncode == 0:
        return None
    lines = (done.stderr or done.stdout).strip().splitlines()
    return lines[-1] if lines else f"modprobe exited {done.returncode}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ccsweep_operator.nodesetup", description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="+", help="congestion-control modules to load, e.g. tcp_bbr tcp_bic")
    args = parser.parse_args(argv)
    bad = [m for m in args.modules if not MODULE_NAME.match(m)]
    if bad:
        parser.error(f"module {bad[0]!r}: expected tcp_ and 1-32 of a-z, 0-9, _ (e.g. tcp_bbr)")
    for module in args.modules:
        problem = load(module)
        print(f"{module}: {'loaded' if problem is None else f'not loaded ({problem})'}", flush=True)
    allowed = ALLOWED.read_text().split()
    wanted = allowed_after(allowed, AVAILABLE.read_text().split(), args.modules)
    if wanted != allowed:
        ALLOWED.write_text(" ".join(wanted) + "\n")
    print(f"tcp_allowed_congestion_control: {' '.join(wanted)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
