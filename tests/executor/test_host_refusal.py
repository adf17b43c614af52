"""A sweep whose link cannot run on this host says so once, before its first cell, with exit 2.

The condition is produced for real: Mahimahi's sender runs unprivileged and may only pick an
algorithm in net.ipv4.tcp_allowed_congestion_control, so CUBIC is taken out of that list (it
is put back after); where Mahimahi is not installed, its absence is the reason instead.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from support.mahimahi_host import mahimahi_missing
from tinyspec import write_tiny_spec

pytestmark = pytest.mark.integration

ALLOWED = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")


@contextmanager
def cubic_not_allowed() -> Iterator[None]:
    before = ALLOWED.read_text().split()
    narrowed = [cc for cc in before if cc != "cubic"]
    subprocess.run(["sysctl", "-q", "-w", f"net.ipv4.tcp_allowed_congestion_control={' '.join(narrowed)}"],
                   check=True)
    try:
        yield
    finally:
        subprocess.run(["sysctl", "-q", "-w", f"net.ipv4.tcp_allowed_congestion_control={' '.join(before)}"],
                       check=True)


def test_a_mahimahi_sweep_the_host_cannot_run_stops_before_its_first_cell(tmp_path: Path):
    spec = write_tiny_spec(tmp_path / "refused.yaml", "refused", cc=["cubic"], loss_percent=[0, 1])
    store = tmp_path / "store"
    with cubic_not_allowed():
        done = subprocess.run([sys.executable, "-m", "ccsweep", "run", str(spec), "--store", str(store),
                               "--link", "mahimahi", "--no-figures"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("ccsweep: error:")]
    assert len(errors) == 1, done.stderr
    assert ("Mahimahi's mm-delay" if mahimahi_missing() else "may only pick algorithms in") in errors[0], errors[0]
    assert not list(store.glob("cells/*")), "no cell may run"
