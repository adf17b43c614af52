"""What the emulator benches share about the machine they run on: which core the emulator gets and
which the traffic, the ccsweep-link binary, stopping a process they started, and sampling the CPU
of a link's processes from /proc.

A module of its own so that the benches built on bench.py's pinning (the side-by-side peers,
peers.py, which bench.py runs too) import it from below rather than from each other.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from ccsweep.runner.mahimahi_run import ShellsCpu

REPO = Path(__file__).resolve().parents[2]


def link_binary() -> str:
    for candidate in (os.environ.get("CCSWEEP_LINK"), str(REPO / "bin" / "ccsweep-link"), shutil.which("ccsweep-link")):
        if candidate and Path(candidate).is_file():
            return candidate
    sys.exit("ccsweep-link is not built: run `make emulator`")


def cores() -> tuple[list[str], list[str]]:
    """taskset prefixes for the emulator and for the traffic: the last allowed core for the
    emulator, the others for iperf3 (no pinning on a single core)."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        return [], []
    others = ",".join(map(str, allowed[:-1]))
    return ["taskset", "-c", str(allowed[-1])], ["taskset", "-c", others]


EMULATOR_CPU, TRAFFIC_CPU = cores()


def stop(process: subprocess.Popen | None, timeout_s: float = 20) -> None:
    """Ends a process this benchmark started, by PID: SIGTERM, then SIGKILL after `timeout_s`."""
    if process and process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class LinkCpu(ShellsCpu):
    """The runner's sampler of Mahimahi's shells, counting every process named `names` under `root`
    (ccsweep-link's one, Mahimahi's shells, Rattan's one) and keeping each sample with its wall
    time, so that a flow window can be cut out after it ran."""

    INTERVAL_S = 0.2

    def __init__(self, root: int, names: tuple[str, ...]) -> None:
        self.trace: list[tuple[float, float]] = []
        self._lock = threading.Lock()
        super().__init__(root, names=names)

    def _sample(self) -> float:
        with self._lock:
            seconds = super()._sample()
            self.trace.append((time.time(), seconds))
            return seconds

    def between(self, start: float, end: float) -> float:
        """CPU seconds the link processes used between two wall-clock times (linear between samples)."""
        times, seconds = zip(*self.trace, strict=True)
        if start < times[0] or end > times[-1]:
            raise ValueError(f"window {start:.1f}-{end:.1f} outside the samples {times[0]:.1f}-{times[-1]:.1f}")
        return float(np.interp(end, times, seconds) - np.interp(start, times, seconds))
