"""The local executor with real cells: resume, Ctrl-C, unavailable algorithms, concurrency.

Cells here are short and slow (3 s at 10 Mbit/s, 20 ms RTT) so the suite stays quick; the
measurement quality of cells is tested in tests/integration.
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
from ccsweep.storedplan import get_manifest, with_cells
from support.bookkeeping import BOOKKEEPING_THRESHOLD
from tinyspec import write_tiny_spec

pytestmark = pytest.mark.integration

SPEC = {"cc": ["bbr", "cubic", "vegas"], "loss_percent": [0, 1]}


def run(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ccsweep", *args], capture_output=True, text=True, timeout=timeout)


def namespaces(cell_ids: set[str]) -> set[str]:
    """Namespaces left by these cells (`ccs-<id8>-<pid>-s|r`); other cells may run on a shared machine."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    prefixes = tuple(f"ccs-{cell_id[:8]}-" for cell_id in cell_ids)
    return {line.split()[0] for line in out.splitlines() if line.startswith(prefixes)}


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    return write_tiny_spec(tmp_path / "tiny.yaml", "tiny", **SPEC)


def test_sweep_runs_then_resumes_without_running_a_cell(spec_file: Path, tmp_path: Path):
    store_dir = tmp_path / "store"
    first = run("run", str(spec_file), "--store", str(store_dir), "--no-figures", *BOOKKEEPING_THRESHOLD)
    assert first.returncode == 0, first.stderr
    store = open_store(str(store_dir))
    ids = {c.id for c in planned_cells(store, "tiny")}
    assert len(ids) == 6
    stored = {i for i in ids if store.has_result(i)}
    # vegas is not in this kernel: its two cells are reported and skipped, the others stored.
    assert len(stored) == 4
    assert "congestion control 'vegas' is not available in this kernel" in first.stderr
    for cell_id in stored:
        result = store.get_result(cell_id)
        assert result.status == "ok"
        assert 0 < result.goodput_mbps <= 10.5  # never above the 10 Mbit/s bottleneck (+5% for rounding)
        assert result.link.selfcheck.threshold_us == float(BOOKKEEPING_THRESHOLD[1])  # judged by the run's option
    mtimes = {p: p.stat().st_mtime_ns for p in store_dir.rglob("result.json")}

    second = run("run", str(spec_file), "--store", str(store_dir), "--no-figures", *BOOKKEEPING_THRESHOLD)
    assert second.returncode == 0, second.stderr
    assert "4 already stored, 0 to run" in second.stderr
    assert {p: p.stat().st_mtime_ns for p in store_dir.rglob("result.json")} == mtimes
    assert not namespaces(ids)


def test_ctrl_c_stops_cleanly_and_keeps_finished_results(tmp_path: Path):
    # 15 s cells, one at a time: the run lasts a minute, so Ctrl-C two seconds after the first result
    # lands mid-run even when this process is slow to notice that result (6 s cells once finished
    # all four before it did, in the full suite).
    spec = write_tiny_spec(tmp_path / "long.yaml", "long", loss_percent=[0, 0.5, 1, 2], duration_s=15)
    store_dir = tmp_path / "store"
    # Started as from an interactive shell, which never ignores SIGINT: this test's own process may run with
    # SIGINT ignored (a suite started in the background), and a child inherits that.
    proc = subprocess.Popen([sys.executable, "-m", "ccsweep", "run", str(spec), "--store", str(store_dir),
                             "--no-figures", *BOOKKEEPING_THRESHOLD,
                             "--jobs", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not list(store_dir.rglob("result.json")):
        time.sleep(0.5)
    assert list(store_dir.rglob("result.json")), "the first cell should finish within 90 s"
    time.sleep(2)  # the second cell is now mid-flow
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole process group
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "every finished result is kept" in err
    kept = list(store_dir.rglob("result.json"))
    assert 1 <= len(kept) < 4
    for path in kept:
        assert json.loads(path.read_text())["status"] == "ok"
    assert not namespaces({c.id for c in planned_cells(open_store(str(store_dir)), "long")})
    resumed = run("run", str(spec), "--store", str(store_dir), "--no-figures", *BOOKKEEPING_THRESHOLD)
    assert f"{len(kept)} already stored, {4 - len(kept)} to run" in resumed.stderr
    assert resumed.returncode == 0, resumed.stderr



def test_a_background_run_stopped_with_sigterm_stops_its_cells_cleanly(tmp_path: Path):
    """`nohup ccsweep run ... &` starts with SIGINT ignored, and its cells inherit that: stopping
    them must not rely on SIGINT, or they run on and are killed without removing their namespaces."""
    # Flows longer than the executor's stop timeout: a cell that ignored the stop would be killed.
    spec = write_tiny_spec(tmp_path / "bg.yaml", "bg", loss_percent=[0, 1], duration_s=60)
    store_dir = tmp_path / "store"
    proc = subprocess.Popen([sys.executable, "-m", "ccsweep", "run", str(spec), "--store", str(store_dir),
                             "--no-figures", *BOOKKEEPING_THRESHOLD,
                             "--jobs", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(namespaces({c.id for c in _planned(store_dir, "bg")})) < 4:
        time.sleep(0.5)
    cells = _planned(store_dir, "bg")
    assert len(namespaces({c.id for c in cells})) == 4, "both cells should be mid-flow"
    proc.terminate()  # the executor alone, as `kill PID` does
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 130, err
    assert "stopping 2 running cell(s)" in err
    assert not namespaces({c.id for c in cells}), "a cell that ignored the stop was killed before cleaning up"


def _planned(store_dir: Path, sweep: str) -> list:
    store = open_store(str(store_dir)) if store_dir.exists() else None
    manifest = get_manifest(store, sweep) if store is not None else None
    return list(with_cells(store, manifest).cells) if store is not None and manifest is not None else []

def test_a_cell_killed_with_sigkill_leaves_nothing_after_gc_and_the_next_run_finishes(spec_file: Path,
                                                                                       tmp_path: Path):
    spec = write_tiny_spec(tmp_path / "killed.yaml", "killed", duration_s=8)
    store_dir = tmp_path / "store"
    planned = run("plan", str(spec), "--store", str(store_dir))
    (cell,) = json.loads(planned.stdout)
    proc = subprocess.Popen([sys.executable, "-m", "ccsweep", "cell", "--sweep", "killed", "--id", cell["id"],
                             "--store", str(store_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(namespaces({cell["id"]})) < 2:
        time.sleep(0.2)
    time.sleep(2)  # mid-flow: emulator and endpoints running
    proc.kill()  # SIGKILL: the cell process cannot clean up
    proc.communicate(timeout=30)
    assert len(namespaces({cell["id"]})) == 2, "a SIGKILLed cell leaves its namespaces (what gc is for)"
    gc = run("gc")
    assert gc.returncode == 0 and "removed 2 namespace(s)" in gc.stdout, gc.stdout + gc.stderr
    assert not namespaces({cell["id"]})
    leftover = subprocess.run(["pgrep", "-f", f"ccs-{cell['id'][:8]}-{proc.pid}"], capture_output=True, text=True)
    assert leftover.stdout.strip() == "", "the orphaned emulator is stopped too"
    finished = run("run", str(spec), "--store", str(store_dir), "--no-figures", *BOOKKEEPING_THRESHOLD)
    assert finished.returncode == 0, finished.stderr
    assert open_store(str(store_dir)).get_result(cell["id"]).status == "ok"


def test_the_executor_killed_with_sigkill_then_a_second_run_finishes_the_sweep(tmp_path: Path):
    """SIGKILL of `ccsweep run` and its cells (the whole process group, as an OOM killer or a
    closed laptop would): their namespaces are left behind; the next run removes them and runs
    what is not stored, and nothing is stored twice."""
    spec = write_tiny_spec(tmp_path / "killed-run.yaml", "killed-run", loss_percent=[0, 1, 2], duration_s=6)
    store_dir = tmp_path / "store"
    proc = subprocess.Popen([sys.executable, "-m", "ccsweep", "run", str(spec), "--store", str(store_dir),
                             "--no-figures", *BOOKKEEPING_THRESHOLD,
                             "--jobs", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    planned = store_dir / "sweeps" / "killed-run" / "manifest.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (planned.exists() and namespaces(
            {c.id for c in planned_cells(open_store(str(store_dir)), "killed-run")})):
        time.sleep(0.2)
    ids = {c.id for c in planned_cells(open_store(str(store_dir)), "killed-run")}
    time.sleep(2)  # a cell mid-flow
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert namespaces(ids), "SIGKILL leaves the running cell's namespaces behind"
    second = run("run", str(spec), "--store", str(store_dir), "--no-figures", *BOOKKEEPING_THRESHOLD)
    assert second.returncode == 0, second.stderr
    assert "left by a dead cell" in second.stderr
    store = open_store(str(store_dir))
    assert all(store.get_result(i) is not None for i in ids)
    assert len(list(store_dir.rglob("result.json"))) == len(ids), "each cell stored once"
    assert not namespaces(ids)
