"""The command line as a user meets it: one-line errors with exit 2, JSON a fan-out can consume."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ccsweep.cell import Cell
from ccsweep.cli import main


def ccsweep(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ccsweep", *args], capture_output=True, text=True, cwd=cwd, timeout=60,
                          env={**os.environ, **(env or {})})


def test_the_program_has_help():
    done = ccsweep("--help")
    assert done.returncode == 0
    assert all(name in done.stdout for name in main.commands)


@pytest.mark.parametrize("command", sorted(main.commands))  # every command, including ones added later
def test_every_command_has_help(command):
    done = CliRunner().invoke(main, [command, "--help"], prog_name="ccsweep")
    assert done.exit_code == 0, done.output
    assert done.output.startswith(f"Usage: ccsweep {command} ")
    summary = (main.commands[command].help or "").strip().split("\n\n")[0]
    assert summary and " ".join(summary.split()) in " ".join(done.output.split())
    assert "--help" in done.output


def test_expand_prints_cells_that_validate():
    done = ccsweep("expand", "figure8")
    assert done.returncode == 0, done.stderr
    cells = [Cell.model_validate(c) for c in json.loads(done.stdout)]
    assert len(cells) == 26
    assert {c.params.cc_label for c in cells} == {"bbr", "cubic"}
    assert ccsweep("expand", "figure8", "--format", "count").stdout.strip() == "26"


def test_bad_spec_is_one_line_exit_2_and_store_untouched(tmp_path: Path):
    store = tmp_path / "store"
    (store / "cells" / "abc").mkdir(parents=True)
    (store / "cells" / "abc" / "result.json").write_text("{}")
    before = sorted(p.relative_to(store) for p in store.rglob("*"))
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: bad\nexperiments:\n  - {name: x, cc: [bbr], loss_percent: [101], rtt_ms: [10], "
                    "bandwidth_mbps: [10], duration_s: 5}\n")
    done = ccsweep("run", str(spec), "--store", str(store))
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert "experiments[x].loss_percent[0]: 101.0 is outside [0, 100] (percent)" in done.stderr
    assert sorted(p.relative_to(store) for p in store.rglob("*")) == before


def test_bad_cell_json_is_one_line(tmp_path: Path):
    done = ccsweep("cell", "--cell", '{"id": "x"}', "--store", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.startswith("ccsweep: error: --cell: ")
    assert done.stderr.strip().count("\n") == 0


@pytest.mark.parametrize(("queue", "rtt", "expected"), [
    ("{kind: droptail}", 10, "experiments[x].queue[0]: kind droptail needs a limit: packets, bytes or bdp"),
    ("{kind: infinite, bdp: 1}", 10, "experiments[x].queue[0]: kind infinite takes no limit (bdp given)"),
    ("{kind: droptail, packets: 10, target_ms: 5}", 10, "experiments[x].queue[0]: target_ms: only for kind codel"),
    ("{kind: droptail, bdp: 1}", 0, "experiments[x].queue[0]: bdp 1 of a 0-byte BDP"),
])
def test_bad_queue_is_one_line_exit_2_and_store_untouched(tmp_path: Path, queue: str, rtt: int, expected: str):
    store = tmp_path / "store"
    (store / "cells" / "abc").mkdir(parents=True)
    (store / "cells" / "abc" / "result.json").write_text("{}")
    before = sorted(p.relative_to(store) for p in store.rglob("*"))
    spec = tmp_path / "bad.yaml"
    spec.write_text(f"name: bad\nexperiments:\n  - {{name: x, cc: [bbr], loss_percent: [1], rtt_ms: [{rtt}], "
                    f"bandwidth_mbps: [10], duration_s: 5, queue: [{queue}]}}\n")
    for command in (["validate", str(spec)], ["run", str(spec), "--store", str(store)]):
        done = ccsweep(*command, env={"CCSWEEP_SPOOL": str(tmp_path / "spool")})
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("ccsweep: error: ")
        assert done.stderr.strip().count("\n") == 0, done.stderr
        assert expected in done.stderr
    assert sorted(p.relative_to(store) for p in store.rglob("*")) == before


def test_status_says_whether_every_cell_of_a_sweep_is_stored(tmp_path: Path):
    """The verdict of an Argo sweep: exit 0 only when each cell of the manifest has a result."""
    import shutil

    store = tmp_path / "store"
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "goodput-vs-loss", store)
    sweep = next((store / "sweeps").iterdir()).name
    done = ccsweep("status", "--store", str(store), "--sweep", sweep)
    assert done.returncode == 0, done.stderr
    total = len({c["id"] for c in json.loads((store / "sweeps" / sweep / "manifest.json").read_text())["cells"]})
    assert done.stdout.strip() == (f"sweep {sweep}: {total} cells, {total} stored, 0 without a result "
                                   "(0 late: measured only with the emulator late)")

    lost = sorted((store / "cells").iterdir())[0]
    (lost / "result.json").unlink()
    done = ccsweep("status", "--store", str(store), "--sweep", sweep)
    assert done.returncode == 1
    assert f"{total - 1} stored, 1 without a result" in done.stdout
    assert lost.name in done.stderr

    done = ccsweep("status", "--store", str(store), "--sweep", "no-such-sweep")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("executor", ["local", "argo"])
def test_a_late_or_starved_cell_exits_75_so_a_retry_strategy_runs_it_again_and_a_failed_one_exits_1(executor: str):
    """The exit status Argo's retry expression reads: the machine's fault (late, starved) is retried, a failure not."""
    from ccsweep.cellrun import CellOutcome
    from ccsweep.cli import _cell_exit
    from ccsweep.exitcodes import EXIT_INTERRUPTED, EXIT_RETRY, EXIT_UNAVAILABLE

    cell = Cell.model_validate(json.loads(ccsweep("expand", "quick").stdout)[0])

    def stored(status: str, **fields: object) -> CellOutcome:
        return CellOutcome(cell, status, stored=True, **fields)  # type: ignore[arg-type]

    assert _cell_exit(stored("starved"), executor) == EXIT_RETRY == 75
    assert _cell_exit(stored("late"), executor) == EXIT_RETRY
    assert _cell_exit(stored("failed"), executor) == 1
    assert _cell_exit(stored("ok"), executor) == 0
    assert _cell_exit(stored("ok", interrupted=True), executor) == EXIT_INTERRUPTED
    assert _cell_exit(CellOutcome(cell, "ok", stored=False, spooled=Path("spool")), executor) == (
        0 if executor == "local" else EXIT_RETRY)
    assert _cell_exit(CellOutcome(cell, "cached"), executor) == 0
    assert _cell_exit(CellOutcome(cell, "unavailable"), executor) == EXIT_UNAVAILABLE == 3
    assert _cell_exit(CellOutcome(cell, "interrupted"), executor) == EXIT_INTERRUPTED
