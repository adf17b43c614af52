"""Late cells are re-run, not counted: lateness injected into the real emulator on purpose.

CCSWEEP_DEBUG_INJECT_LATENESS makes ccsweep-link hold a share of its releases back (its
--inject-lateness option), so a real cell's self-check measures a late emulator: the one fault
here that is produced on purpose rather than waited for. Cells are short and slow (3 s at
10 Mbit/s, 20 ms RTT), judged against the bookkeeping tests' 20 ms threshold (tinyspec.py), so
that a host whose CPU is stolen does not make the attempts meant to be on time late; holding 5%
of releases by 50 ms puts p99 far above it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ccsweep.plan import planned_cells
from ccsweep.store import open_store
from support.bookkeeping import BOOKKEEPING_THRESHOLD
from tinyspec import write_tiny_spec

pytestmark = pytest.mark.integration

INJECT = "fixed:50ms,p=0.05"


def ccsweep_run(spec: Path, store: Path, *args: str, inject_attempts: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CCSWEEP_DEBUG_INJECT_LATENESS": INJECT, "CCSWEEP_DEBUG_INJECT_ATTEMPTS": inject_attempts}
    return subprocess.run([sys.executable, "-m", "ccsweep", "run", str(spec), "--store", str(store),
                           *BOOKKEEPING_THRESHOLD, *args], capture_output=True, text=True, timeout=240, env=env)


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    return write_tiny_spec(tmp_path / "late.yaml", "late", queue=None)


def test_a_late_attempt_is_kept_and_the_cell_runs_again(spec_file: Path, tmp_path: Path):
    store_dir = tmp_path / "store"
    done = ccsweep_run(spec_file, store_dir, inject_attempts="1")
    assert done.returncode == 0, done.stderr
    store = open_store(str(store_dir))
    (cell,) = planned_cells(store, "late")
    late = store.latest_attempt(cell.id, "late")
    assert late is not None and late.status == "late" and late.attempt == 1
    assert late.link is not None and late.link.selfcheck.lateness_p99_us > late.link.selfcheck.threshold_us
    assert late.link.selfcheck.late_cause == "injected", late.link.selfcheck.measured_text()
    result = store.get_result(cell.id)
    assert result is not None and (result.status, result.attempt) == ("ok", 2)
    assert not result.link.selfcheck.late
    # A second attempt of three runs beside others (asking for twice its cost); only a last one runs alone.
    assert "running it again; " in done.stderr and "1 late or starved attempt(s) run again" in done.stderr
    report = (store_dir / "sweeps" / "late" / "report.html").read_text()
    assert 'class="untrusted"' not in report and "Every stored cell's emulator kept time" in report


def test_a_cell_late_on_every_attempt_ends_late(spec_file: Path, tmp_path: Path):
    store_dir = tmp_path / "store"
    done = ccsweep_run(spec_file, store_dir, "--max-attempts", "2", inject_attempts="")
    assert done.returncode == 1, done.stderr
    store = open_store(str(store_dir))
    (cell,) = planned_cells(store, "late")
    assert store.get_result(cell.id) is None
    assert len(store.list_keys(f"cells/{cell.id}/late/")) == 2
    assert "1 late on every attempt" in done.stderr
    report = (store_dir / "sweeps" / "late" / "report.html").read_text()
    assert f'<tr class="untrusted"><td><code>{cell.id}</code>' in report
    status = subprocess.run([sys.executable, "-m", "ccsweep", "status", "--store", str(store_dir), "--sweep", "late"],
                            capture_output=True, text=True, timeout=60)
    assert status.returncode == 1 and "1 late" in status.stdout
