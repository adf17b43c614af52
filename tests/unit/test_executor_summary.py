"""The local executor's summary holds counts, not cells: a run's memory is bounded by a chunk.

A refused cell costs no flow time, so a large sweep the machine cannot run (too small a CPU
budget, an algorithm the kernel lacks) ends every cell at once; each is counted and dropped.
"""

from __future__ import annotations

import gc
import io
import sys
from collections import Counter
from pathlib import Path

from rich.console import Console

from ccsweep.cell import Cell
from ccsweep.cellrun import CellOutcome
from ccsweep.executor import SweepSummary, progress_line, run_sweep, summary_table
from ccsweep.expand import expand
from ccsweep.result import CellResult
from ccsweep.specload import parse_spec
from ccsweep.store import open_store

CELLS = 3000


def tiny_spec(name: str, loss_percent: list[int], repetitions: int) -> dict:
    """One experiment of 3 s cells on a 10 Mbit/s, 20 ms path: loss rates x repetitions cells."""
    return {"name": name, "experiments": [{
        "name": name, "cc": ["bbr"], "loss_percent": loss_percent, "rtt_ms": [20], "bandwidth_mbps": [10],
        "duration_s": 3, "warmup_s": 1, "repetitions": repetitions}]}


def reachable(root: object) -> list[object]:
    """Every object `root` holds, directly or not (classes and what they hold aside); a dict's string
    keys too, which the garbage collector's traversal leaves out."""
    seen: dict[int, object] = {}
    todo = [root]
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, type):
            continue
        seen[id(obj)] = obj
        todo.extend(gc.get_referents(obj))
        if isinstance(obj, dict):
            todo.extend(obj)
    return list(seen.values())


def table_row(summary: SweepSummary, experiment: str) -> list[str]:
    """The printed summary table's numbers for `experiment`, as `ccsweep run` shows them."""
    out = io.StringIO()
    Console(file=out, width=200).print(summary_table(summary))
    rows = [line.split("│")[1:-1] for line in out.getvalue().splitlines() if line.startswith("│")]
    return next([c.strip() for c in row[1:]] for row in rows if row[0].strip() == experiment)


def test_a_run_refusing_every_cell_holds_their_ids_and_counts_not_the_cells(tmp_path: Path,
                                                                            link_binary_stand_in: None):
    """CPU budget below any cell's price: every cell is `unavailable`, all at once, and the summary
    keeps no Cell, outcome or record: about 100 bytes a cell (its id in `tried`), where it held 8 KiB."""
    spec = parse_spec(tiny_spec("refused", loss_percent=list(range(CELLS // 100)), repetitions=100))
    console = Console(file=io.StringIO(), width=400)
    summary = run_sweep(spec, open_store(str(tmp_path / "store")), workdir=tmp_path / "work", cpu_budget=0.001,
                        console=console)
    assert summary.counts() == Counter(unavailable=CELLS, cached=0) and summary.reruns == 0
    held = reachable(summary)
    assert not [o for o in held if isinstance(o, Cell | CellOutcome | CellResult)]
    held_bytes = sum(sys.getsizeof(o) for o in held)
    assert held_bytes < 200 * CELLS, held_bytes
    assert list(summary.tried.values()) == ["unavailable"] * CELLS and len(set(summary.tried)) == CELLS
    assert table_row(summary, "refused") == ["0", "0", "0", "0", "0", str(CELLS), "0", "0", "0"]


def test_a_result_neither_stored_nor_spooled_stays_named_and_spooled_ones_are_counted(tmp_path: Path):
    """Counting drops an outcome but keeps the folder of a result nothing else holds (`kept_in`), and
    the spooled results by experiment; re-runs are counted per experiment."""
    first, second, third = expand(parse_spec(tiny_spec("kept", [0], repetitions=3)))
    summary = SweepSummary("kept", "file:///store", cached=Counter(kept=2))
    kept = tmp_path / "scratch" / first.id
    summary.count(CellOutcome.from_report(first, {"status": "ok", "kept_in": str(kept)}, attempts=1))
    summary.count(CellOutcome.from_report(second, {"status": "ok", "spooled": str(tmp_path / "spool")}, attempts=2))
    summary.count(CellOutcome.from_report(third, {"status": "late"}, attempts=3))
    assert summary.kept_in == [kept] and summary.spooled == {second.id: "kept"}
    del first, second, third
    assert summary.counts() == Counter(ok=2, late=1, cached=2) and summary.reruns == 3
    assert not [o for o in reachable(summary) if isinstance(o, Cell | CellOutcome)]
    # ok, cached, late, starved, failed, unavailable, interrupted, re-runs, spooled
    assert table_row(summary, "kept") == ["2", "2", "1", "0", "0", "0", "0", "3", "1"]


def test_a_run_without_a_terminal_prints_a_line_per_finished_cell():
    """A progress bar redraws nothing in a log file; each finished cell prints where the run stands."""
    line = progress_line(5, 25, 3, 300.0, 1500.0)
    assert line.endswith(" 5/25 cells done, 3 running, 20% of the flow time")
    assert progress_line(0, 0, 0, 0.0, 0.0).endswith("100% of the flow time")
