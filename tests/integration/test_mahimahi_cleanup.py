"""A Mahimahi cell leaves none of Mahimahi's shells behind, however it ends, and names its
sender's namespace without ever leaving a mount point behind a failure.

Mahimahi's outer mm-delay forks a copy of itself for the inner shell; stopping only the top PID
orphaned that copy (seen running for an hour under PID 1 after cells failed on a loaded machine).
Both ways a cell's shells are stopped are produced for real: the receiver dying while the shells
still set up, and the top shell getting no CPU (SIGSTOP, as a starved machine does to it) so that
Child.stop's SIGTERM goes unanswered and only its SIGKILL ends it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from ccsweep.linkrules import LinkError
from ccsweep.runner import mahimahi_run
from ccsweep.runner.netns import namespace_names
from ccsweep.runner.procs import ChildTimeout
from ccsweep.runner.runqueue import proc_stats
from support.mahimahi_host import mahimahi_host, mahimahi_missing

MAHIMAHI_MISSING = mahimahi_missing()
needs_mahimahi = pytest.mark.skipif(MAHIMAHI_MISSING is not None, reason=f"Mahimahi is not built ({MAHIMAHI_MISSING})")


def spec(seed: int) -> dict:
    return {"name": "mm-cleanup", "experiments": [{
        "name": "mm-cleanup", "cc": ["bbr"], "loss_percent": [0], "rtt_ms": [20], "bandwidth_mbps": [10],
        "duration_s": 6, "warmup_s": 1, "seed": seed, "link": "mahimahi"}]}


def wait_for(find, what: str, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = find()
        if found:
            return found
        time.sleep(0.05)
    pytest.fail(f"no {what} within {timeout} s")


def top_shell(runner_pid: int) -> int | None:
    """The shells' Child: the mm-delay the runner started (with a forked copy under it already)."""
    stats = proc_stats()
    tops = [pid for pid, s in stats.items() if s.ppid == runner_pid and s.comm == "mm-delay"]
    return next((pid for pid in tops if any(s.ppid == pid and s.comm.startswith("mm-") for s in stats.values())), None)


@needs_mahimahi
@pytest.mark.parametrize("how", ["receiver dies during set-up", "top shell starved, then killed"])
def test_no_mahimahi_process_outlives_its_cell(cells, how):
    (cell,) = cells.of(spec(seed=11 if how.startswith("receiver") else 12))
    scratch = f"ccsweep-mm-{cell.id[:8]}-"  # every shell's command line names the cell's traces there
    with mahimahi_host(("bbr",)):
        process = cells.start(cell)
        names = namespace_names(cell.id, process.pid)
        if how.startswith("receiver"):
            line = wait_for(lambda: [p for p in cells.processes_mentioning(f"--label {names.sender}")
                                     if "receiver" in p], "receiver")[0]
            os.kill(int(line.split(":")[0]), signal.SIGKILL)  # a process this test's cell started
        else:
            top = wait_for(lambda: top_shell(process.pid), "forked shell")
            os.kill(top, signal.SIGSTOP)  # no CPU for it: the runner's SIGTERM goes unanswered
            line = wait_for(lambda: [p for p in cells.processes_mentioning(f"--label {names.sender}")
                                     if "receiver" in p], "receiver")[0]
            os.kill(int(line.split(":")[0]), signal.SIGKILL)
        run = cells.finish(cell, process)
    left = cells.processes_mentioning(scratch)  # the runner has exited: whatever runs now outlives it
    assert run.returncode == 1, run.describe()
    assert not left, f"left running after the cell: {left}"
    assert not {names.sender, names.receiver} & cells.namespaces()


def nobody_sleeper() -> subprocess.Popen[bytes]:
    """A process of nobody's, whose namespace (the host's: only a name is made for it) is attached."""
    return subprocess.Popen(mahimahi_run._nobody("sleep", "60"))


def mounted(path: Path) -> bool:
    return any(line.split()[4] == str(path) for line in Path("/proc/self/mountinfo").read_text().splitlines())


@pytest.fixture
def netns_name():
    name = f"ccs-00000000-{os.getpid()}-m"  # a cell's pattern: a leftover is removed like a cell's
    yield name
    subprocess.run(["ip", "netns", "delete", name], capture_output=True)


def test_attach_names_a_nobody_process_namespace_and_unname_removes_it(netns_name):
    sleeper = nobody_sleeper()
    try:
        mahimahi_run._attach_netns(netns_name, sleeper.pid)
        target = mahimahi_run.NETNS_RUN_DIR / netns_name
        assert mounted(target)
        mahimahi_run._unname(target)
        assert not mounted(target) and not target.exists()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_helper_failing_after_its_mount_leaves_no_mount_point_and_reports_its_own_error(netns_name, monkeypatch):
    """Fake: the helper exits 1 right after a real mount, standing for one killed at the timeout while
    its mount() ran, which cannot be timed for real. Before, unlinking the mount point raised EBUSY,
    which hid the real error and left the name mounted."""
    monkeypatch.setattr(mahimahi_run, "_ATTACH_AS", mahimahi_run._ATTACH_AS + "\nsys.exit('killed after the mount')\n")
    sleeper = nobody_sleeper()
    try:
        with pytest.raises(LinkError, match="killed after the mount"):
            mahimahi_run._attach_netns(netns_name, sleeper.pid)
    finally:
        sleeper.kill()
        sleeper.wait()
    target = mahimahi_run.NETNS_RUN_DIR / netns_name
    assert not mounted(target) and not target.exists()


def test_a_set_up_command_out_of_time_is_the_machines_fault(monkeypatch):
    """A real command past a (shortened) bound: the attempt is starved (re-run), not failed."""
    monkeypatch.setattr(mahimahi_run, "SETUP_COMMAND_TIMEOUT_S", 0.2)
    with pytest.raises(ChildTimeout, match="took more than 0.2 s") as caught:
        mahimahi_run._setup_run(["sleep", "5"], "a sleep")
    assert isinstance(caught.value, LinkError)
