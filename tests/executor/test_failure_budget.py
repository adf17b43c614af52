"""The local executor's failure budget with real cells whose emulator is broken (it exits at once).

A broken binary, image or kernel fails every cell alike; past --max-failed-cells no new cell starts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ccsweep.store import open_store
from ccsweep.storedplan import get_manifest
from tinyspec import write_tiny_spec

pytestmark = pytest.mark.integration



def test_cells_past_the_budget_are_not_started_and_the_run_says_why(tmp_path: Path):
    spec = write_tiny_spec(tmp_path / "budget.yaml", "budget", cc=["bbr", "cubic"], loss_percent=[0, 1])
    store_dir = tmp_path / "store"
    env = {**os.environ, "CCSWEEP_LINK": shutil.which("false") or "/bin/false"}  # an emulator that never starts
    done = subprocess.run([sys.executable, "-m", "ccsweep", "run", str(spec), "--store", str(store_dir), "--jobs", "1",
                           "--max-failed-cells", "1", "--no-figures"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 1, done.stderr
    assert "stopped: 2 cells failed, more than --max-failed-cells 1: 2 cells not run" in done.stderr
    assert done.stderr.count("failed: ccsweep-link exited") == 2  # one at a time: exactly two started
    store = open_store(str(store_dir))
    assert get_manifest(store, "budget") is not None
    assert len(store.list_keys("cells/")) == 2  # the failed cells' records; the two others never ran
