"""A cell pod checks what it was made with, whatever made it (issue 39, item 3).

The plan step checks the CPU and memory it puts into a sweep's plan items, but whoever may submit a
Workflow can name the `cell` template directly with other values, and its node selector is a
strategic merge patch over the chart's node pool. So `ccsweep cell` itself refuses, before it opens
the store, a CPU request or memory limit (as the downward API reports them) outside the bounds
of ccsweep.podspec, and, once it has read its cell, any node selector but the one the plan gives
that cell. The cells here are planned into a real file store, and the accepted one is stored
already, so `ccsweep cell` ends at "cached" without running anything.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ccsweep.cell import Cell
from ccsweep.cli import main
from ccsweep.plan import node_selector
from support.stored_cell import SWEEP, planned_stored_cell


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Cell]:
    """The quick preset planned into a file store; its first cell stored as run."""
    store = f"file://{tmp_path_factory.mktemp('store')}"
    return store, planned_stored_cell(store)


def cell_pod(store: str, cell: Cell, selector: str, cpu_milli: int = 1000, memory_bytes: int = 512 << 20) -> Any:
    """`ccsweep cell` as the cell template runs it, with the downward API's values in its environment."""
    args = ["cell", f"--sweep={SWEEP}", f"--id={cell.id}", f"--store={store}", "--executor=argo",
            f"--node-selector={selector}"]
    env = {"CCSWEEP_POD_CPU_MILLI": str(cpu_milli), "CCSWEEP_POD_MEMORY_BYTES": str(memory_bytes)}
    return CliRunner().invoke(main, args, env=env)


def argo_json(selector: dict[str, str]) -> str:
    """An object parameter as Argo renders `{{item.node_selector}}`: compact JSON."""
    return json.dumps(selector, separators=(",", ":"))


def test_the_plans_own_values_pass(planned: tuple[str, Cell]):
    store, cell = planned
    done = cell_pod(store, cell, argo_json(node_selector(cell)))
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout.splitlines()[-1])["status"] == "cached"


@pytest.mark.parametrize(("cpu_milli", "memory_bytes", "message"), [
    (60_000, 512 << 20, "--pod-cpu-milli (this pod's CPU request) 60000m: must be 100m to 16 cores"),  # cpu=60
    (50, 512 << 20, "--pod-cpu-milli (this pod's CPU request) 50m: must be 100m to 16 cores"),
    (1000, 1 << 40, "--pod-memory-bytes (this pod's memory limit) 1099511627776: must be 128Mi to 16Gi"),  # 1Ti
    (1000, 64 << 20, "--pod-memory-bytes (this pod's memory limit) 67108864: must be 128Mi to 16Gi"),
])
def test_resources_outside_the_bounds_stop_the_pod_before_the_store_is_opened(
        tmp_path: Path, planned: tuple[str, Cell], cpu_milli: int, memory_bytes: int, message: str):
    _, cell = planned
    nowhere = f"file://{tmp_path}/never-opened"
    done = cell_pod(nowhere, cell, argo_json(node_selector(cell)), cpu_milli, memory_bytes)
    assert done.exit_code == 2
    assert done.output == f"ccsweep: error: {message}\n"
    assert not (tmp_path / "never-opened").exists()


@pytest.mark.parametrize("selector", [
    {"$patch": "replace"},
    {"node.example.org/pool": "other"},     # overrides the chart's pool key
    {"$patch": "replace", "ccsweep.io/cc-bbr": "true"},
    {},
    {"ccsweep.io/cc-bbr": "false"},
])
def test_a_node_selector_other_than_the_plans_stops_the_pod(planned: tuple[str, Cell], selector: dict[str, str]):
    store, cell = planned
    given = argo_json({**node_selector(cell), **selector}) if selector else "{}"
    done = cell_pod(store, cell, given)
    assert done.exit_code == 2, done.output
    assert done.output.startswith(f"ccsweep: error: --node-selector {given}: not the node selector the plan "
                                  f"gives cell {cell.id}")


def test_a_node_selector_that_is_not_json_stops_the_pod(planned: tuple[str, Cell]):
    store, cell = planned
    done = cell_pod(store, cell, '{"ccsweep.io/cc-bbr": "true"')
    assert done.exit_code == 2 and "not the node selector the plan gives" in done.output
