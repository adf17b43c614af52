"""The host's CPUs while a cell runs: what the hypervisor stole, and what softirqs took, per CPU.

A link can be late with its run queue idle: its process was never waiting to run on this guest,
yet its sleeps returned late or its writes took long. Two causes of that are outside the cell:
the hypervisor running something else on this guest's virtual CPU (steal: the guest cannot run
at all), and softirq work (the receiving stack of every cell on the machine) on the CPU the link
runs on. Both are counted per CPU in /proc/stat, in USER_HZ ticks (1/100 s); sampled once a second,
a window's share is read to 1 %. The worst CPU stands for the link, which may run on any of them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ccsweep.runner.periodic import PeriodicSampler

#: Sampling period: a window of 100 ticks per CPU.
WINDOW_S = 1.0
PROC_STAT = Path("/proc/stat")
#: Columns of a `cpuN` line of /proc/stat after the name (proc(5)).
SOFTIRQ_COLUMN = 6
STEAL_COLUMN = 7
#: The columns that add up to a CPU's time; guest time is counted in user and nice already.
TIME_COLUMNS = 8


@dataclass(frozen=True)
class CpuTicks:
    """One CPU's cumulative ticks: all of them, softirq's and steal's."""

    total: int
    softirq: int
    steal: int


def cpu_ticks(text: str) -> dict[str, CpuTicks]:
    """Each CPU's ticks from the text of /proc/stat (the `cpuN` lines, not the `cpu` sum)."""
    ticks: dict[str, CpuTicks] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if name.startswith("cpu") and name != "cpu":
            columns = [int(v) for v in rest.split()[:TIME_COLUMNS]]
            ticks[name] = CpuTicks(sum(columns), columns[SOFTIRQ_COLUMN], columns[STEAL_COLUMN])
    return ticks


@dataclass(frozen=True)
class HostCpuSummary:
    """The worst CPU's steal and softirq shares (%) over a span, and in its worst window."""

    steal_pct: float
    steal_max_window_pct: float
    softirq_pct: float
    softirq_max_window_pct: float


class HostCpu(PeriodicSampler):
    """Samples /proc/stat every WINDOW_S from construction until stop()."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        #: (CLOCK_MONOTONIC ns, each CPU's ticks)
        self.samples: list[tuple[int, dict[str, CpuTicks]]] = []
        self._sample()
        super().__init__(window_s, "host-cpu")

    def _sample(self) -> None:
        try:
            self.samples.append((time.monotonic_ns(), cpu_ticks(PROC_STAT.read_text())))
        except OSError:
            pass

    def stop(self) -> None:
        self._halt()
        self._sample()

    def summary(self, start_ns: int, end_ns: int) -> HostCpuSummary | None:
        """Over the samples spanning [start_ns, end_ns]: from the last one at or before the start to the
        first at or after the end; None if fewer than two."""
        return summarise(self.samples, start_ns, end_ns)


def summarise(samples: list[tuple[int, dict[str, CpuTicks]]], start_ns: int, end_ns: int) -> HostCpuSummary | None:
    """See HostCpu.summary."""
    first = max((i for i, (at, _) in enumerate(samples) if at <= start_ns), default=0)
    last = min((i for i, (at, _) in enumerate(samples) if at >= end_ns), default=len(samples) - 1)
    span = samples[first:last + 1]
    if len(span) < 2:
        return None
    windows = list(zip(span, span[1:], strict=False))
    return HostCpuSummary(
        steal_pct=worst_share(span[0][1], span[-1][1], "steal"),
        steal_max_window_pct=max(worst_share(a, b, "steal") for (_, a), (_, b) in windows),
        softirq_pct=worst_share(span[0][1], span[-1][1], "softirq"),
        softirq_max_window_pct=max(worst_share(a, b, "softirq") for (_, a), (_, b) in windows))


def worst_share(before: dict[str, CpuTicks], after: dict[str, CpuTicks], kind: str) -> float:
    """The largest share (%) of its time any CPU spent in `kind` between two samples."""
    shares = []
    for cpu, end in after.items():
        begin = before.get(cpu)
        if begin is None or end.total <= begin.total:
            continue
        shares.append(100.0 * (getattr(end, kind) - getattr(begin, kind)) / (end.total - begin.total))
    return round(max(shares, default=0.0), 1)


#: Columns of /proc/stat's `cpu` line in which a CPU did nothing: idle and iowait.
IDLE_COLUMNS = (3, 4)
#: The span the machine's busy cores are read over: a few seconds, so that one CUBIC sawtooth or
#: one cell's set-up does not open or close the machine on its own.
BUSY_WINDOW_S = 3.0


def busy_and_total_ticks(text: str) -> tuple[int, int, int]:
    """From the text of /proc/stat: the ticks all CPUs spent busy (stolen ones too: time this guest
    could not use), all their ticks, and how many CPUs there are."""
    busy = total = cpus = 0
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if name == "cpu":
            columns = [int(v) for v in rest.split()[:TIME_COLUMNS]]
            total = sum(columns)
            busy = total - sum(columns[i] for i in IDLE_COLUMNS)
        elif name.startswith("cpu"):
            cpus += 1
    return busy, total, cpus


class BusyCores:
    """The machine's busy cores over the last BUSY_WINDOW_S, from /proc/stat read whenever asked."""

    def __init__(self, window_s: float = BUSY_WINDOW_S, stat: Path = PROC_STAT) -> None:
        self.window_s = window_s
        self.stat = stat
        #: (monotonic seconds, busy ticks, total ticks, CPUs), oldest first, spanning about window_s.
        self.samples: list[tuple[float, int, int, int]] = []

    def read(self, now: float) -> float | None:
        """Busy cores between the oldest sample within the window and now; None until the samples span
        at least half the window, or where /proc/stat cannot be read."""
        try:
            busy, total, cpus = busy_and_total_ticks(self.stat.read_text())
        except (OSError, ValueError):
            return None
        self.samples.append((now, busy, total, cpus))
        while len(self.samples) > 2 and now - self.samples[1][0] >= self.window_s:
            self.samples.pop(0)
        first_at, first_busy, first_total, _ = self.samples[0]
        if now - first_at < self.window_s / 2 or total <= first_total:
            return None
        return cpus * (busy - first_busy) / (total - first_total)
