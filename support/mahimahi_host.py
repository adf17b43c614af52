"""What a host must allow before Mahimahi's nested shells run, set for a test or benchmark and undone after.

The runner only checks these (runner.mahimahi_run): they are host-wide, so changing them is the
operator's decision. Tests and benchmarks set the narrowest form and restore the old values:
- new namespaces made inside another inherit its devconf (net.core.devconf_inherit_init_net=3),
  so Mahimahi's namespaces forward because the cell's sender namespace does; namespaces made
  from the host's stay as before. Where the host forwards already, nothing is changed;
- the cell's algorithms join net.ipv4.tcp_allowed_congestion_control, since the sender runs
  unprivileged.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ccsweep.runner.mahimahi import find_mahimahi

SYSCTL = Path("/proc/sys")


def _read(name: str) -> str:
    return (SYSCTL / name.replace(".", "/")).read_text().strip()


def _write(name: str, value: str) -> None:
    subprocess.run(["sysctl", "-q", "-w", f"{name}={value}"], check=True)


def mahimahi_missing() -> str | None:
    """Why Mahimahi cannot run here (for a skip), or None."""
    try:
        find_mahimahi()
    except RuntimeError as exc:
        return str(exc)
    return None


@contextmanager
def mahimahi_host(algorithms: tuple[str, ...] = ("bbr", "cubic")) -> Iterator[None]:
    """The host settings above for the duration of the block; the old values are written back after."""
    changed: dict[str, str] = {}
    try:
        if _read("net.ipv4.ip_forward") != "1" and _read("net.core.devconf_inherit_init_net") != "3":
            changed["net.core.devconf_inherit_init_net"] = _read("net.core.devconf_inherit_init_net")
            _write("net.core.devconf_inherit_init_net", "3")
        allowed = _read("net.ipv4.tcp_allowed_congestion_control").split()
        if any(cc not in allowed for cc in algorithms):
            changed["net.ipv4.tcp_allowed_congestion_control"] = " ".join(allowed)
            _write("net.ipv4.tcp_allowed_congestion_control",
                   " ".join(allowed + [cc for cc in algorithms if cc not in allowed]))
        yield
    finally:
        for name, value in changed.items():
            _write(name, value)
