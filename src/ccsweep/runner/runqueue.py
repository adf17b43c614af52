"""How long a link's processes waited to run: their run-queue delay per wake-up, from outside.

Mahimahi keeps no timing of its own: a ferry of mm-link, mm-loss or mm-delay wakes on a 1 ms
timer (or a packet) and moves whatever is due, so when the machine keeps it off the CPU, its
packets leave late by as long as it waited, and nothing in its logs says so (it logs the times
packets were due, not the times they left). The kernel does count that wait: /proc/PID/task/TID/
schedstat holds each thread's time on the CPU, its time runnable but waiting on a run queue,
and how many times it ran (CONFIG_SCHED_INFO; no schedstats sysctl, no privilege: any user may
read it). Sampled every WINDOW_S, the wait added over the runs added is the mean delay of a
thread's wake-ups in that window; the worst thread per window stands for the link. Their p99 over
the flow time is compared with the cell's lateness threshold, as ccsweep-link's per-packet p99
is.

The quantiles weigh each window by its length: a window ends at a sample where some thread had
run and spans back to the previous such sample, so a link kept off the CPU for 500 ms (no run to
see) shows as one 500 ms window at its wait per wake-up, and the sampler, late itself on a
starved machine, loses nothing either. Weighed by time, the windows stand for the packets of a
saturated link, which arrive all along.

A window's mean can hide one slow wake-up among many quick ones: the signal catches a link
kept waiting for a good part of a window (starvation), not a single late packet.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ccsweep.runner.periodic import PeriodicSampler

#: Sampling period: ten of Mahimahi's 1 ms ticks per window.
WINDOW_S = 0.01
#: The process tree is walked again this often (shells fork their ferries after start).
REFRESH_S = 0.5


@dataclass(frozen=True)
class ProcStat:
    """What /proc/PID/stat says of one process, for walking a tree and counting its CPU."""

    ppid: int
    comm: str
    cpu_ticks: int
    minor_faults: int = 0
    major_faults: int = 0


def proc_stats() -> dict[int, ProcStat]:
    """Every process's parent, name and user+system ticks (processes that end meanwhile are skipped)."""
    stats: dict[int, ProcStat] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                text = (entry / "stat").read_text()
            except OSError:
                continue
            fields = text[text.rindex(")") + 2:].split()
            stats[int(entry.name)] = ProcStat(int(fields[1]), text[text.index("(") + 1:text.rindex(")")],
                                              int(fields[11]) + int(fields[12]), int(fields[7]), int(fields[9]))
    return stats


def tree_of(root: int, stats: dict[int, ProcStat], names: tuple[str, ...]) -> list[int]:
    """The processes under `root` (itself included) whose name starts with one of `names`."""
    tree = {root}
    grew = True
    while grew:
        before = len(tree)
        tree |= {pid for pid, stat in stats.items() if stat.ppid in tree}
        grew = len(tree) > before
    return sorted(pid for pid in tree if pid in stats and stats[pid].comm.startswith(names))


@dataclass(frozen=True)
class RunQueueSummary:
    """The worst thread's mean run-queue delay per wake-up, per window of the flow time (us), time-weighted."""

    p50_us: float
    p99_us: float
    max_us: float
    windows: int


@dataclass(frozen=True)
class PageFaults:
    """Page faults of the link's processes over a span: minor (a page mapped) and major (read from disk)."""

    minor: int
    major: int


class RunQueueDelay(PeriodicSampler):
    """Samples the run-queue delay of the named processes under `root_pid` every WINDOW_S until stop().

    The sampler's own lateness widens a window but loses nothing: the counters are cumulative.
    """

    def __init__(self, root_pid: int, names: tuple[str, ...], window_s: float = WINDOW_S) -> None:
        self._root = root_pid
        self._names = names
        self._tasks: list[Path] = []
        self._next_walk = 0
        self._last: dict[Path, tuple[int, int]] = {}
        self._last_ns = time.monotonic_ns()
        #: (CLOCK_MONOTONIC ns at the window's end, its length in ns, worst mean delay per wake-up in it, ns)
        self.windows: list[tuple[int, int, float]] = []
        #: (CLOCK_MONOTONIC ns of a walk of the tree, each process's (minor, major) faults so far)
        self.faults: list[tuple[int, dict[int, tuple[int, int]]]] = []
        super().__init__(window_s, "runqueue-delay")

    def _sample(self) -> None:
        now = time.monotonic_ns()
        if now >= self._next_walk:
            stats = proc_stats()
            pids = tree_of(self._root, stats, self._names)
            self._tasks = [task / "schedstat" for pid in pids for task in tasks_of(pid) if carries_packets(task)]
            self.faults.append((now, {pid: (stats[pid].minor_faults, stats[pid].major_faults) for pid in pids}))
            self._next_walk = now + round(REFRESH_S * 1e9)
        worst: float | None = None
        for path in self._tasks:
            try:
                _, wait_ns, runs = map(int, path.read_text().split())
            except (OSError, ValueError):
                continue
            before = self._last.get(path)
            self._last[path] = (wait_ns, runs)
            if before is not None and runs > before[1]:
                delay = (wait_ns - before[0]) / (runs - before[1])
                worst = delay if worst is None else max(worst, delay)
        if worst is not None:  # a window spans back to the last one with a run: a thread kept off the CPU has none
            self.windows.append((now, now - self._last_ns, worst))
            self._last_ns = now

    def stop(self) -> None:
        self._halt()

    def summary(self, start_ns: int, end_ns: int) -> RunQueueSummary | None:
        """Over the windows ending within [start_ns, end_ns]; None if no thread ran in any of them."""
        return summarise(self.windows, start_ns, end_ns)

    def page_faults(self, start_ns: int, end_ns: int) -> PageFaults | None:
        """The faults between the last walk at or before `start_ns` and the last at or before
        `end_ns` (walks are REFRESH_S apart); a process first seen in between counts whole."""
        before = [counts for at, counts in self.faults if at <= start_ns]
        until = [counts for at, counts in self.faults if at <= end_ns]
        if not before or len(until) <= len(before):
            return None
        base, top = before[-1], until[-1]
        minor = sum(now[0] - base.get(pid, (0, 0))[0] for pid, now in top.items())
        major = sum(now[1] - base.get(pid, (0, 0))[1] for pid, now in top.items())
        return PageFaults(max(0, minor), max(0, major))


def summarise(windows: list[tuple[int, int, float]], start_ns: int, end_ns: int) -> RunQueueSummary | None:
    """Time-weighted quantiles of (end ns, length ns, delay ns) windows ending within [start_ns, end_ns]."""
    kept = sorted((delay, length) for at, length, delay in windows if start_ns <= at <= end_ns)
    if not kept:
        return None
    total = sum(length for _, length in kept)

    def at(q: float) -> float:
        covered = 0
        for delay, length in kept:
            covered += length
            if covered >= q * total:
                return round(delay / 1000, 1)
        return round(kept[-1][0] / 1000, 1)

    return RunQueueSummary(p50_us=at(0.5), p99_us=at(0.99), max_us=round(kept[-1][0] / 1000, 1), windows=len(kept))


#: Name prefixes (/proc/PID/task/TID/comm) of the link's threads that hold no packet: ccsweep-link's
#: log writers. At normal priority beside the packet loop's real-time one, they wait on a busy
#: machine's run queues by design, and counting their wait flagged on-time cells `late` (11 of 15
#: overloaded cells in tests/executor/test_overload.py, none with them left out).
OFF_PATH_THREADS = ("log-",)


def carries_packets(task: Path) -> bool:
    """Whether a thread (/proc/PID/task/TID) may hold packets: every one but OFF_PATH_THREADS."""
    try:
        name = (task / "comm").read_text().strip()
    except OSError:
        return True
    return not name.startswith(OFF_PATH_THREADS)


def tasks_of(pid: int) -> list[Path]:
    """/proc/PID/task/TID of each thread of a process ([] once it has ended)."""
    try:
        return list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return []
