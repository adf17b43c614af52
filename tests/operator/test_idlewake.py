"""The node-setup container that holds a node's idle CPUs to a wake-up bound: a real process holding
the real /dev/cpu_dma_latency (root on a machine that has it), released when it is sent SIGTERM."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from ccsweep.runner.wakelatency import CPU_LATENCY_QOS

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "operator"), str(REPO / "src")])}


def bound_in_force() -> int:
    """The kernel's CPU-latency bound now: the least of every request held (2,000,000,000 for none)."""
    return struct.unpack("=i", CPU_LATENCY_QOS.read_bytes()[:4])[0]


@pytest.mark.skipif(not os.access(CPU_LATENCY_QOS, os.W_OK), reason="needs root and /dev/cpu_dma_latency")
def test_the_bound_is_held_until_sigterm_then_released():
    holder = subprocess.Popen([sys.executable, "-m", "ccsweep_operator.idlewake", "7"], env=ENV,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == f"{CPU_LATENCY_QOS}: holding 7 us until SIGTERM\n"
        assert bound_in_force() <= 7  # another holder (a cell running) may ask for less
    finally:
        holder.send_signal(signal.SIGTERM)
        out, err = holder.communicate(timeout=30)
    assert holder.returncode == 0, err
    assert out == f"{CPU_LATENCY_QOS}: released on SIGTERM\n"


@pytest.mark.parametrize("bound", ["-1", "10001", "0.5", "7us"])
def test_a_bound_out_of_range_is_refused_in_one_line(bound: str):
    done = subprocess.run([sys.executable, "-m", "ccsweep_operator.idlewake", bound], env=ENV,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (f"python -m ccsweep_operator.idlewake: error: argument BOUND_US: "
                                            f"{bound!r}: give a whole number of microseconds from 0 to 10000")
