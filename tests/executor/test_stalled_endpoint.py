"""A cell whose wait on a process runs out is kept as a starved attempt, never as a failure, and run again.

The other way the machine spoils a cell (tests/executor/test_starved_cells.py covers the first: a
link starved for a few seconds comes back late). Here a process gets no CPU at all for longer than
the runner waits: the test stops the first attempt's receiver with SIGSTOP in the middle of its
flows, so the runner's bounded wait for the flows' end (15 s past it) runs out. The attempt is
kept under starved/ with what it measured; the executor runs the cell again, alone, and stores the
second attempt.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ccsweep.plan import planned_cells
from ccsweep.store import open_store
from support.bookkeeping import BOOKKEEPING_THRESHOLD
from tinyspec import write_tiny_spec

pytestmark = pytest.mark.integration


def receiver_pid(cell_prefix: str, timeout: float = 60) -> int:
    """The PID of the flow receiver of the cell whose namespaces start with `ccs-<cell_prefix>`, once it runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in Path("/proc").iterdir():
            try:
                args = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:  # not a process, or it just ended
                continue
            if b"receiver" in args and any(a.startswith(f"ccs-{cell_prefix}-".encode()) for a in args):
                return int(proc.name)
        time.sleep(0.1)
    pytest.fail(f"no receiver of cell {cell_prefix} within {timeout} s")


def test_a_starved_attempt_is_kept_apart_and_the_cell_runs_again(tmp_path: Path):
    spec = write_tiny_spec(tmp_path / "starved.yaml", "starved", duration_s=3)
    store_dir = tmp_path / "store"
    plan = subprocess.run([sys.executable, "-m", "ccsweep", "plan", str(spec), "--store", str(store_dir)],
                          capture_output=True, text=True, timeout=60)
    assert plan.returncode == 0, plan.stderr
    (cell,) = planned_cells(open_store(str(store_dir)), "starved")
    sweep = subprocess.Popen([sys.executable, "-m", "ccsweep", "run", str(spec), "--store", str(store_dir),
                              "--no-figures", *BOOKKEEPING_THRESHOLD],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stopped = receiver_pid(cell.id[:8])
        time.sleep(1.5)  # mid-flow
        os.kill(stopped, signal.SIGSTOP)  # a process this test's cell started: no CPU from now on
        out, err = sweep.communicate(timeout=180)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    assert sweep.returncode == 0, err
    store = open_store(str(store_dir))
    (key,) = store.list_keys(f"cells/{cell.id}/starved/")
    starved = json.loads(store.read_bytes(key))
    assert starved["status"] == "starved" and starved["attempt"] == 1
    assert starved["error"].startswith("the flows did not end within 15 s of their end time (receiver still running)")
    assert "flows end " in starved["error"], starved["error"]
    # What the attempt measured is kept: the sender's samples and the link's logs.
    assert starved["flows"] and starved["flows"][0]["rtt_mean_ms"] is not None
    assert {"timeseries.json.gz", "uplink.log.gz", "downlink.log.gz"} <= set(starved["artifacts"])
    assert not store.list_keys(f"cells/{cell.id}/failed/"), "a starved attempt is no failure of the cell"
    result = store.get_result(cell.id)
    assert result is not None and (result.status, result.attempt) == ("ok", 2)
    # Attempt 2 of 3 runs beside others, asking for twice its cost; only a last attempt runs alone.
    assert "the machine starved it" in err and "running it again; " in err, err
    assert "1 late or starved attempt(s) run again" in err and ", 0 failed" in err, err
