"""Printed paths are never broken across lines, however narrow the terminal: a person copies them.

`ccsweep figures` on a copy of a fixture store under a long folder name, with a 40-column
terminal: every `wrote` line names a whole location that exists.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_figures_prints_every_written_location_whole(tmp_path: Path):
    store = tmp_path / ("a-long-folder-name-" * 4) / "store"
    shutil.copytree(FIXTURES / "loss-table", store)
    (sweep,) = [p.name for p in (store / "sweeps").iterdir()]
    done = subprocess.run([sys.executable, "-m", "ccsweep", "figures", "--store", str(store), "--sweep", sweep],
                          env={**os.environ, "COLUMNS": "40"}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    wrote = [line for line in done.stderr.splitlines() if line.startswith("wrote ")]
    assert wrote, done.stderr
    for line in wrote:
        location = line.removeprefix("wrote ").removeprefix("file://")
        assert len(line) > 40 and Path(location).is_file(), line
