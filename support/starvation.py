"""A real starvation of a running cell: a CPU hog at a real-time priority on the cell's core, for a bounded time.

Once the cell's flows run (its receiver has an established connection), the run's processes
named `names` (all of them by default) are pinned to one core, a busy loop at SCHED_FIFO
HOG_PRIORITY (above ccsweep-link's own FIFO 10, far above Mahimahi's normal priority) takes that
core for `seconds`, and then the processes get every core back. The loop ends itself and is
killed past a hard bound; the kernel's real-time throttling (95% of each second) leaves the
core's other tasks a little time.

Pinning only the link's processes starves the link while the sender keeps sending, as a
neighbour on the emulator's core would; pinning all of them freezes the whole cell, as on a pod
whose cores (a cpuset) are all taken.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from ccsweep.runner.runqueue import proc_stats, tree_of

HOG_PRIORITY = 50
RECEIVER_PORT = 5201
#: The hog is killed this long past its own end, whatever happens.
HOG_BOUND_S = 5.0
BUSY_LOOP = "import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end:\n    pass\n"


def starved_core() -> int:
    """The core to starve: the last this process may use (the machine's other cores keep running)."""
    return max(os.sched_getaffinity(0))


def flows_running(cell_id: str) -> bool:
    """Whether a namespace of the cell holds an established connection to the receiver's port."""
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10).stdout.split()
    for name in (n for n in names if n.startswith(f"ccs-{cell_id[:8]}-")):
        done = subprocess.run(["ip", "netns", "exec", name, "ss", "-Htn", "state", "established",
                               f"( sport = :{RECEIVER_PORT} )"], capture_output=True, text=True, timeout=10)
        if done.stdout.strip():
            return True
    return False


def _pin(pids: list[int], cores: set[int]) -> None:
    for pid in pids:
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue
        for tid in tids:
            try:
                os.sched_setaffinity(tid, cores)
            except OSError:
                pass  # ended meanwhile


def starve(root_pid: int, seconds: float, core: int, names: tuple[str, ...] = ("",)) -> None:
    """Pin the processes `names` under `root_pid` to `core`, hog it at FIFO HOG_PRIORITY for `seconds`, unpin."""
    everywhere = os.sched_getaffinity(0)
    pids = tree_of(root_pid, proc_stats(), names)
    _pin(pids, {core})
    try:
        subprocess.run(["timeout", "-s", "KILL", f"{seconds + HOG_BOUND_S:g}", "chrt", "-f", str(HOG_PRIORITY),
                        "taskset", "-c", str(core), sys.executable, "-c", BUSY_LOOP, f"{seconds:g}"],
                       check=True, timeout=seconds + 2 * HOG_BOUND_S)
    finally:
        _pin(tree_of(root_pid, proc_stats(), names), everywhere)


@dataclass
class Starver:
    """Starves the first attempt of `cell_id` (run under `root_pid`) `after_s` into its flows, once."""

    root_pid: int
    cell_id: str
    seconds: float
    after_s: float = 1.0
    names: tuple[str, ...] = ("",)
    core: int = field(default_factory=starved_core)
    started_at: float | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._run, name="starver", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        deadline = time.monotonic() + 120
        try:
            while not flows_running(self.cell_id):
                if time.monotonic() > deadline:
                    self.error = "the cell's flows never started"
                    return
                time.sleep(0.2)
            time.sleep(self.after_s)
            self.started_at = time.time()
            starve(self.root_pid, self.seconds, self.core, self.names)
        except (OSError, subprocess.SubprocessError) as exc:
            self.error = str(exc)

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)
