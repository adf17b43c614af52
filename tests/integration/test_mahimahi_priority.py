"""Mahimahi's shells run at the real-time priority ccsweep-link's emulator asks for, the sender inside them does not.

Real processes stand in for the shells: a copy of sleep named mm-stand-in (the name is what picks
a shell), with a child whose name does not start with mm- (the sender's place).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ccsweep.runner.link import realtime_priority
from ccsweep.runner.mahimahi_run import realtime_shells

pytestmark = pytest.mark.integration


def _wait_until(done: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    """Poll `done` until it holds: `bash -c "exec ..."` becomes its program a moment after it starts."""
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def _comm(pid: int | str) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


def _wait_for_name(pid: int, name: str) -> None:
    """Before the exec the tree has no shell to raise."""
    _wait_until(lambda: _comm(pid) == name, f"process {pid} never became {name}")


def _wait_for_child_named(pid: int, name: str) -> None:
    children = Path(f"/proc/{pid}/task/{pid}/children")
    _wait_until(lambda: any(_comm(child) == name for child in children.read_text().split()),
                f"process {pid} never had a child named {name}")


def test_the_shells_are_raised_to_fifo_and_the_process_inside_them_is_not(tmp_path: Path):
    shell = tmp_path / "mm-stand-in"
    shutil.copy(shutil.which("sleep") or "/bin/sleep", shell)
    script = f"{shell} 30 & exec sleep 30"  # the shell's child is the stand-in; the sender is `sleep`
    top = subprocess.Popen(["bash", "-c", f"exec {shell} 30"])
    inner = subprocess.Popen(["bash", "-c", script])
    try:
        _wait_for_name(top.pid, shell.name)
        _wait_for_name(inner.pid, "sleep")
        _wait_for_child_named(inner.pid, shell.name)
        assert realtime_shells(top.pid) == f"fifo:{realtime_priority()}"
        assert os.sched_getscheduler(top.pid) == os.SCHED_FIFO
        assert os.sched_getparam(top.pid).sched_priority == realtime_priority()
        assert realtime_shells(inner.pid) == f"fifo:{realtime_priority()}"
        assert os.sched_getscheduler(inner.pid) == os.SCHED_OTHER, "a process not named mm-* keeps its policy"
    finally:
        for process in (top, inner):
            subprocess.run(["pkill", "-P", str(process.pid)], check=False)
            process.kill()
            process.wait()


def test_priority_zero_leaves_the_shells_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CCSWEEP_LINK_RT_PRIORITY", "0")
    shell = tmp_path / "mm-stand-in"
    shutil.copy(shutil.which("sleep") or "/bin/sleep", shell)
    top = subprocess.Popen([str(shell), "30"])
    try:
        _wait_for_name(top.pid, shell.name)
        assert realtime_shells(top.pid) == "normal"
        assert os.sched_getscheduler(top.pid) == os.SCHED_OTHER
    finally:
        top.kill()
        top.wait()


def test_a_tree_without_a_shell_is_not_recorded_as_raised():
    """The record says fifo only when a shell was raised: a tree with no mm-* process says so instead."""
    plain = subprocess.Popen(["sleep", "30"])
    try:
        _wait_for_name(plain.pid, "sleep")
        assert realtime_shells(plain.pid) == "normal (no mm-* shell found)"
        assert os.sched_getscheduler(plain.pid) == os.SCHED_OTHER
    finally:
        plain.kill()
        plain.wait()
