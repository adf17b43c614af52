"""A sweep stored by the previous release runs on with today's code.

tests/fixtures/upgrade-3748187/store was written by ccsweep at commit 3748187: `ccsweep plan
tiny.yaml` (its manifest, schema 2) and one of its two cells run and stored (`ccsweep cell`). Today's
code must plan it again without a spec conflict, run only the missing cell, and build the figures
from both results: defaults added to the spec model since then must not make the stored sweep
"different", and the manifest, read through store/migrations.py, is neither replaced nor revised.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.bookkeeping import BOOKKEEPING_THRESHOLD

pytestmark = pytest.mark.integration

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "upgrade-3748187"
STORED, MISSING = "75b91f9f80f3dc79", "3d18b2c568e60620"


def ccsweep(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ccsweep", *args], capture_output=True, text=True, timeout=300)


def test_a_sweep_the_previous_release_stored_plans_runs_its_missing_cell_and_draws(tmp_path: Path):
    store = tmp_path / "store"
    shutil.copytree(FIXTURE / "store", store)
    before = (store / "cells" / STORED / "result.json").read_bytes()
    manifest = store / "sweeps" / "upgrade" / "manifest.json"
    planned_before = manifest.read_bytes()
    planned = ccsweep("plan", str(FIXTURE / "tiny.yaml"), "--store", str(store))
    assert planned.returncode == 0, planned.stderr
    assert [item["id"] for item in json.loads(planned.stdout)] == [MISSING]
    ran = ccsweep("run", str(FIXTURE / "tiny.yaml"), "--store", str(store), *BOOKKEEPING_THRESHOLD)
    assert ran.returncode == 0, ran.stderr
    assert (store / "cells" / MISSING / "result.json").is_file()
    assert (store / "cells" / STORED / "result.json").read_bytes() == before  # the old result is kept as it was
    # Read through the migrations and compared as today's model reads it: the same plan, not replaced.
    assert manifest.read_bytes() == planned_before
    assert not list((store / "sweeps" / "upgrade" / "revisions").glob("*.json")), "no plan revision"
    # (the report and figures `run` built are kept under revisions/files/, as every version of them is)
    drawn = ccsweep("figures", "--store", str(store), "--sweep", "upgrade")
    assert drawn.returncode == 0, drawn.stderr
    cells = (store / "sweeps" / "upgrade" / "cells.csv").read_text()
    assert STORED in cells and MISSING in cells
    status = ccsweep("status", "--store", str(store), "--sweep", "upgrade")
    assert status.returncode == 0, status.stdout + status.stderr
