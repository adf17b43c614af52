"""What a daemon costs, read from /proc/PID, how busy the machine's CPUs were, and what machine a
benchmark ran on.

Shared by the benches: the cluster ones (benchmarks/fanout/, benchmarks/cluster/full_sweep.py) report
the peak CPU and memory of control-plane daemons they did not write, and /proc is the one place that
has those numbers for any process without asking the process (the API server's own metrics would
need a scrape configuration per daemon); the density bench reads the busy cores from /proc/stat.
"""

from __future__ import annotations

import os
import platform
import threading
import time
from dataclasses import dataclass
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Usage:
    cpu_s: float = 0.0
    peak_cpu: float = 0.0   # cores, averaged over one sampling interval
    peak_rss_mb: float = 0.0


def cpu_ticks(pid: int) -> int:
    """utime + stime of PID in clock ticks (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])   # fields 14 and 15 of stat; the list starts at field 3


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class ProcSampler(threading.Thread):
    """CPU and RSS of each named PID every `interval` seconds, in the background, until stop()."""

    def __init__(self, pids: dict[str, int], interval: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.pids, self.interval = pids, interval
        self.usage = {name: Usage() for name in pids}
        self._stop_event = threading.Event()
        self._last = {name: cpu_ticks(pid) for name, pid in pids.items()}
        self._t = time.monotonic()

    def sample(self) -> None:
        now = time.monotonic()
        elapsed = max(now - self._t, 1e-3)
        self._t = now
        for name, pid in self.pids.items():
            ticks = cpu_ticks(pid)
            used = max(ticks - self._last[name], 0) / TICKS
            self._last[name] = ticks
            u = self.usage[name]
            u.cpu_s += used
            u.peak_cpu = max(u.peak_cpu, used / elapsed)
            u.peak_rss_mb = max(u.peak_rss_mb, rss_mb(pid))

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            self.sample()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=5)
        self.sample()


def busy_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs from /proc/stat (busy: all but idle and iowait)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def machine() -> str:
    """CPU model, cores, memory, kernel and the load average now: the line a result file starts with."""
    info = Path("/proc/cpuinfo").read_text().splitlines()
    model = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "unknown CPU")
    mem_kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                  if line.startswith("MemTotal:"))
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return (f"{os.cpu_count()} x {model}, {mem_kb / 1024 / 1024:.0f} GiB, Linux {platform.release()}; "
            f"load average {load} at the end")
