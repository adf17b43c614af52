"""--lateness-threshold-us on every path to a cell: `ccsweep run`, `ccsweep cell`, an Argo sweep's
plan step and a Sweep's `run.lateness_threshold_us`. A bad value is one line and exit 2 before
anything is planned or run; empty (a workflow's unset parameter) is each cell's own threshold."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from ccsweep.cli import main
from ccsweep.crd import RunSettings
from ccsweep.executor import cell_command_options


@pytest.mark.parametrize("command", [["run", "quick"], ["plan", "quick"], ["cell", "--cell", "{}"]])
@pytest.mark.parametrize("value", ["0", "0.5", "1000001", "nan", "inf", "-5", "20ms"])
def test_a_threshold_out_of_bounds_is_one_line_and_exit_2(tmp_path: Path, command: list[str], value: str):
    store = tmp_path / "store"
    done = CliRunner().invoke(main, [*command, "--store", str(store), f"--lateness-threshold-us={value}"])
    assert done.exit_code == 2, done.output
    (line,) = [line for line in done.output.splitlines() if line.startswith("Error:")]
    assert "--lateness-threshold-us" in line and "from 1 to 1,000,000" in line, line
    assert not store.exists(), "nothing is planned or stored before the options are checked"


def test_the_plan_step_takes_an_empty_threshold_as_unset_and_says_when_one_is_set(tmp_path: Path):
    def plan(*args: str) -> str:
        done = CliRunner().invoke(main, ["plan", "quick", "--store", str(tmp_path / "store"), *args])
        assert done.exit_code == 0, done.output
        return done.stderr

    assert "judged late above" not in plan("--lateness-threshold-us=")
    assert "judged late above a p99 lateness of 20,000 us" in plan("--lateness-threshold-us=20000")


def test_the_local_executor_gives_every_cell_the_runs_threshold():
    assert cell_command_options(None, None) == []
    assert cell_command_options("pg:9091", 20000.0) == ["--pushgateway", "pg:9091",
                                                        "--lateness-threshold-us", "20000.0"]


def test_a_sweep_resource_bounds_its_threshold():
    assert RunSettings(lateness_threshold_us=20000).lateness_threshold_us == 20000
    for bad in (0, 1_000_001, "1000; rm -rf /"):
        with pytest.raises(ValidationError, match="lateness_threshold_us"):
            RunSettings(lateness_threshold_us=bad)
