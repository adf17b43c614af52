"""Overload never turns a measurement into a failure: three times the cells admission would pick, forced.

Saturating cells (BBR at 100 Mbit/s, 20 ms RTT) are forced to run at once with `--jobs` and a
`--cpu-budget` far above the machine's cores, three times as many as the executor's own
admission would start on this machine (its prior cost model and default budget: 4 on a 2-core
machine, so 12 here). The executor starts at most one cell a second, and the overload itself slows
its starts: the executor and each new cell's Python share the cores with the running cells'
real-time emulators (in one cold run on a 2-vCPU guest, 15 starts took 34 s, and 18 s flows
overlapped only 9 at once). So each cell's flows last twice as many seconds as there are cells,
plus 3: the last one starts while the first still runs, and at least twice admission's pick run
at once (checked from the stored records). The overload is real: the
cells' emulators, endpoints and kernel TCP compete for the same cores. Cells may come back late
or starved; each such attempt must be kept with what it measured and the cell run again, until
every cell is stored on time. No cell may fail, and every attempt that ran must be in the store.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from ccsweep.admission import prior_cost
from ccsweep.executor import default_cpu_budget
from ccsweep.expand import expand
from ccsweep.plan import planned_cells
from ccsweep.result import RERUN_STATUSES, CellResult
from ccsweep.specload import parse_spec
from ccsweep.store import open_store
from tinyspec import tiny_spec, write_tiny_spec

pytestmark = pytest.mark.integration

#: How many times admission's own pick are forced to run at once.
OVERLOAD = 3


def at_once(records: list[CellResult]) -> int:
    """Most attempts whose runs overlapped in time, from the stored records' start and finish."""
    events = sorted([(datetime.fromisoformat(r.started_at), 1) for r in records]
                    + [(datetime.fromisoformat(r.finished_at), -1) for r in records])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return peak


def test_cells_forced_past_admission_all_end_stored_and_no_measurement_is_lost(tmp_path: Path):
    fields = {"bandwidth_mbps": [100], "queue": None}
    (one,) = expand(parse_spec(tiny_spec("overload", **fields)))
    admitted = max(1, int(default_cpu_budget() / prior_cost(one)))
    cells = OVERLOAD * admitted
    spec = write_tiny_spec(tmp_path / "overload.yaml", "overload", repetitions=cells, duration_s=2 * cells + 3,
                           **fields)
    store_dir = tmp_path / "store"
    done = subprocess.run([sys.executable, "-m", "ccsweep", "run", str(spec), "--store", str(store_dir),
                           "--no-figures", "--jobs", str(cells), "--cpu-budget", str(cells)],
                          capture_output=True, text=True, timeout=900)
    store = open_store(str(store_dir))
    planned = planned_cells(store, "overload")
    assert len(planned) == cells
    failed = [key for c in planned for key in store.list_keys(f"cells/{c.id}/failed/")]
    assert not failed, [store.read_bytes(key) for key in failed]
    assert done.returncode == 0, done.stderr
    results = [store.get_result(c.id) for c in planned]
    assert all(r is not None and r.status == "ok" and r.goodput_mbps for r in results), done.stderr
    attempts = [CellResult.model_validate_json(store.read_bytes(key) or b"") for c in planned
                for status in RERUN_STATUSES for key in store.list_keys(f"cells/{c.id}/{status}/")]
    # No measurement lost: every run of every cell is in the store, a spoiled one with its flows and logs.
    runs = sum(r.attempt for r in results if r is not None)
    assert len(attempts) + len(results) == runs, done.stderr
    for attempt in attempts:
        if attempt.flows_started_at is not None:
            assert attempt.flows and "uplink.log.gz" in attempt.artifacts, attempt.error
    # The overload happened: the first attempts ran far more cells at once than admission would have.
    first_runs = [r for r in [*results, *attempts] if r is not None and r.attempt == 1]
    print(f"{cells} cells (admission picks {admitted}), {at_once(first_runs)} at once, attempts kept: "
          f"{sorted(a.status for a in attempts)}")  # shown with -rP, and when an assertion fails
    assert at_once(first_runs) >= 2 * admitted, f"only {at_once(first_runs)} at once; admission picks {admitted}"
