"""`ccsweep run quick --link mahimahi`: the quick look on upstream Mahimahi, chosen at run time.

The preset names no link; --link puts every cell on Mahimahi's nested shells, the sweep is stored
as quick-mahimahi (the spec's own plan is left alone), and every stored record says its link was
Mahimahi's. Flows are shortened (--time-scale 0.25: 5 s each) so the 8 cells take 2.5 minutes
(151 s measured at load average 29, beside a full-length study).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ccsweep.runner.link import realtime_priority
from ccsweep.store import open_store
from ccsweep.storedplan import get_manifest, with_cells
from support.mahimahi_host import mahimahi_host, mahimahi_missing

MISSING = mahimahi_missing()

pytestmark = pytest.mark.skipif(MISSING is not None, reason=f"Mahimahi is not built ({MISSING})")


def test_run_quick_with_link_mahimahi_stores_mahimahi_results_under_a_sweep_of_its_own(tmp_path: Path):
    store = tmp_path / "store"
    env = {**os.environ, "CCSWEEP_SPOOL": str(tmp_path / "spool")}
    with mahimahi_host():
        done = subprocess.run([sys.executable, "-m", "ccsweep", "run", "quick", "--link", "mahimahi",
                               "--time-scale", "0.25", "--store", str(store)],
                              capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    opened = open_store(str(store))
    manifest = get_manifest(opened, "quick-mahimahi-x0-25")
    assert manifest is not None, sorted(p.name for p in (store / "sweeps").iterdir())
    assert get_manifest(opened, "quick") is None
    cell_ids = {c.id for c in with_cells(opened, manifest).cells}
    assert len(cell_ids) == 8
    results = [opened.get_result(cell_id) for cell_id in cell_ids]
    assert all(r is not None and r.status == "ok" for r in results), done.stderr[-2000:]
    assert {r.link.backend for r in results if r and r.link} == {"mahimahi"}
    assert {r.link.selfcheck.sched for r in results if r and r.link} == {f"fifo:{realtime_priority()}"}
    assert all(r and r.cell.params.link == "mahimahi" for r in results)
    assert all(r and r.goodput_mbps and r.goodput_mbps > 0 for r in results)
    report = (store / "sweeps" / "quick-mahimahi-x0-25" / "report.html").read_text()
    assert "mahimahi" in report.lower()
    assert json.loads((store / "sweeps" / "quick-mahimahi-x0-25" / "manifest.json").read_text())["name"] \
        == "quick-mahimahi-x0-25"
