"""Cells no node can run are set aside at planning, counted apart by the verdict and listed by the report.

The nodes are label dicts as the node probe writes them (reading them from a real API server is
tests/e2e/test_argo_sweep.py's unplaceable test); the store is a real file store, the sweep the
real algorithms preset, whose bic, vegas and westwood cells (39) no node of this kernel offers.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from click.testing import CliRunner

from ccsweep.cli import main
from ccsweep.figures.report import render_report
from ccsweep.placement import Node, unplaceable_cells
from ccsweep.plan import plan_chunk, set_aside_cells
from ccsweep.result import CellResult
from ccsweep.results.data import load_sweep
from ccsweep.specload import load_spec
from ccsweep.store import open_store
from ccsweep.storedplan import get_unplaceable
from synthetic import ENV
from wholeplan import plan_sweep, without_unplaceable

#: A node of this machine's kind: its kernel offers bbr, cubic and reno, and could load none of the rest.
NODE = Node("node-1", {"ccsweep.io/kernel": "6.18.44-fc-v657", "ccsweep.io/cc-bbr": "true",
                       "ccsweep.io/cc-cubic": "true", "ccsweep.io/cc-reno": "true"})


def planned(tmp_path: Path):
    store = open_store(str(tmp_path / "store"))
    return store, plan_sweep(load_spec("algorithms"), store)


def test_the_algorithms_preset_on_a_node_without_bic_vegas_and_westwood_has_39_unplaceable_cells(tmp_path: Path):
    _, plan = planned(tmp_path)
    reasons = unplaceable_cells(plan.pending, [NODE])
    assert len(plan.pending) == 78 and len(reasons) == 39
    by_cc = {cc: {c.id for c in plan.pending if c.params.cc_label == cc} for cc in ("bic", "vegas", "westwood")}
    assert set(reasons) == set().union(*by_cc.values())
    vegas = next(iter(by_cc["vegas"]))
    assert reasons[vegas] == "no node offers congestion control vegas; nodes: node-1 6.18.44-fc-v657"
    assert list(reasons) == [c.id for c in plan.pending if c.id in reasons]  # in plan order
    assert unplaceable_cells(plan.pending, [Node("fresh", {"kubernetes.io/os": "linux"})]) == {}


def test_set_aside_cells_are_not_run_and_the_verdict_counts_them_apart(tmp_path: Path):
    store, plan = planned(tmp_path)
    reasons = unplaceable_cells(plan.pending, [NODE])
    set_aside_cells(store, "algorithms", reasons)
    runnable = without_unplaceable(store, plan)
    assert len(runnable.pending) == 39 and not {c.id for c in runnable.pending} & set(reasons)
    assert get_unplaceable(store, "algorithms") == reasons
    assert not {c.id for c in plan_chunk(store, "algorithms", 0, 500)} & set(reasons)

    def status() -> tuple[int, str]:
        done = CliRunner().invoke(main, ["status", "--store", str(tmp_path / "store"), "--sweep", "algorithms"])
        return done.exit_code, done.stdout

    for cell in runnable.pending[:-1]:
        store.put_cell(CellResult(cell=cell, status="ok", started_at="a", finished_at="b", environment=ENV))
    code, out = status()
    assert code == 1 and "1 without a result" in out and "39 unplaceable" in out
    store.put_cell(CellResult(cell=runnable.pending[-1], status="ok", started_at="a", finished_at="b",
                              environment=ENV))
    code, out = status()
    assert code == 0, out
    assert out.strip() == ("sweep algorithms: 78 cells, 39 stored, 0 without a result (0 late: measured only with "
                           "the emulator late); 39 unplaceable: no node could run them (see the report)")
    # A later check that finds a node for them replaces the record: they are the verdict's again.
    set_aside_cells(store, "algorithms", {})
    assert status()[0] == 1


def test_the_report_lists_them_apart_with_why(tmp_path: Path):
    store, plan = planned(tmp_path)
    set_aside_cells(store, "algorithms", unplaceable_cells(plan.pending, [NODE]))
    runnable = without_unplaceable(store, plan)
    for cell in runnable.pending:
        store.put_cell(CellResult(cell=cell, status="ok", started_at="a", finished_at="b", environment=ENV))
    data = load_sweep(store, "algorithms")
    assert len(data.unplaceable) == 39 and len(data.distinct_results()) == 39
    report = html.unescape(render_report(data, [], [], outputs=[]))
    assert re.search(r"<span>0 missing</span>", report)
    assert "39 unplaceable</a>" in report
    section = report[report.index('id="unplaceable"'):]
    rows = re.findall(r"<tr><td><code>(\w+)</code></td><td>[^<]*</td><td>([^<]*)</td></tr>", section)
    assert {cell_id for cell_id, _ in rows} == set(get_unplaceable(store, "algorithms"))
    assert all(reason.startswith("unplaceable, not submitted: no node offers congestion control ")
               and reason.endswith("nodes: node-1 6.18.44-fc-v657") for _, reason in rows)
