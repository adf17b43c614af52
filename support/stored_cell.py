"""A cell planned into a real store and already stored there: what a cell pod's input checks are
tried against, so `ccsweep cell` given it ends at "cached" once its checks pass, running nothing."""

from __future__ import annotations

from click.testing import CliRunner

from ccsweep.cell import Cell
from ccsweep.cli import main
from ccsweep.plan import planned_cells
from ccsweep.result import CellResult, Environment
from ccsweep.store import open_store

#: The preset planned (the smallest shipped).
SWEEP = "quick"


def planned_stored_cell(store: str) -> Cell:
    """Plan SWEEP into `store` (a store URL) and store a result for its first cell; that cell."""
    done = CliRunner().invoke(main, ["plan", SWEEP, "--store", store])
    if done.exit_code != 0:
        raise RuntimeError(f"ccsweep plan {SWEEP} --store {store}: {done.output}")
    cell = planned_cells(open_store(store), SWEEP)[0]
    env = Environment(hostname="node", kernel="6.18", available_cc=["bbr", "cubic"], ccsweep_version="0.1.0",
                      python="3.11", executor="argo")
    open_store(store).put_cell(CellResult(cell=cell, status="ok", started_at="2026-11-23T00:00:00Z",
                                          finished_at="2026-11-23T00:00:06Z", goodput_mbps=9.1, environment=env))
    return cell
