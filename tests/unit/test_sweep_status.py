"""One answer to "how complete is this sweep": `ccsweep status`, the figures and the final metrics
all read sweep_status, so each cell is in the same one state for all three.

A recorded sweep is given one cell in every state a store can put it in (a late attempt, a failure
with a starved attempt besides, a starved attempt alone, a record flagged late by an earlier
version, an unplaceable cell with a late attempt, a cell never run), and each reader is asked.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner

from ccsweep.cli import main
from ccsweep.manifest import UnplaceableCells
from ccsweep.metrics import final_counts
from ccsweep.results.data import load_sweep
from ccsweep.store.file import FileStore
from ccsweep.storedplan import put_unplaceable
from ccsweep.sweep_status import sweep_status

FIXTURE = Path(__file__).parents[1] / "fixtures" / "goodput-vs-loss"


def test_status_figures_and_metrics_put_each_cell_in_the_same_state(tmp_path: Path):
    root = tmp_path / "store"
    shutil.copytree(FIXTURE, root)
    (sweep,) = [p.name for p in (root / "sweeps").iterdir()]
    store = FileStore(root)
    stored = load_sweep(store, sweep).distinct_results()
    late, failed, starved, flagged, unplaceable, never, *_ = stored
    for result in (late, failed, starved, unplaceable, never):
        shutil.rmtree(root / "cells" / result.cell.id)
    store.put_cell(late.model_copy(update={"status": "late"}))
    store.put_cell(failed.model_copy(update={"status": "failed", "error": "the receiver died"}))
    store.put_cell(failed.model_copy(update={"status": "starved", "error": "no CPU"}))
    store.put_cell(starved.model_copy(update={"status": "starved", "error": "no CPU"}))
    store.put_cell(unplaceable.model_copy(update={"status": "late"}))
    record = root / "cells" / flagged.cell.id / "result.json"
    old = json.loads(record.read_text())
    old["link"]["selfcheck"]["late"] = True  # stored anyway, as earlier versions did
    record.write_text(json.dumps(old))
    put_unplaceable(store, UnplaceableCells(sweep=sweep, checked_at=datetime.now(UTC).isoformat(),
                                           cells={unplaceable.cell.id: "no node offers vegas"}))

    found = sweep_status(store, sweep)
    expected = {late.cell.id: "late", flagged.cell.id: "late", failed.cell.id: "failed",
                starved.cell.id: "starved", unplaceable.cell.id: "unplaceable", never.cell.id: "missing"}
    assert dict(found.unstored) == expected
    counted = len(stored) - len(expected)
    assert found.wanted == len(stored) and found.by_state["stored"] == counted

    done = CliRunner().invoke(main, ["status", "--store", str(root), "--sweep", sweep])
    assert done.exit_code == 1
    assert (f"sweep {sweep}: {len(stored)} cells, {counted} stored, 5 without a result (2 late: measured only "
            "with the emulator late, 1 starved: the machine starved an attempt); 1 unplaceable") in done.output

    data = load_sweep(store, sweep)
    assert {r.cell.id for r in data.distinct_results()} == {r.cell.id for r in stored} - expected.keys()
    # The report shows the unplaceable cell's late attempt too; its state (what it counts as) is unplaceable.
    assert {r.cell.id for r in data.late} == {late.cell.id, flagged.cell.id, unplaceable.cell.id}
    assert [f.cell_id for f in data.failures] == [failed.cell.id]
    assert [r.cell.id for r in data.starved] == [starved.cell.id]
    assert [m.cell_id for m in data.unplaceable] == [unplaceable.cell.id]

    cells, results, counts = final_counts(store, sweep)
    assert counts == {"stored": counted, "late": 2, "starved": 1, "failed": 1, "unplaceable": 1, "missing": 1}
    assert results.keys() == {r.cell.id for r in data.distinct_results()} and len(cells) == len(stored)
