"""The command line as a user meets it: one-line errors with exit 2, JSON a fan-out can consume."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ccsweep.cell import Cell


def ccsweep(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ccsweep", *args], capture_output=True, text=True, cwd=cwd, timeout=60)


@pytest.mark.parametrize("command", [[], ["expand"], ["cell"], ["run"], ["figures"], ["validate"], ["presets"]])
def test_every_command_has_help(command):
    done = ccsweep(*command, "--help")
    assert done.returncode == 0
    assert "Usage:" in done.stdout


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
    assert "experiments[x].loss_percent: 101.0 is outside [0, 100] (percent)" in done.stderr
    assert sorted(p.relative_to(store) for p in store.rglob("*")) == before


def test_bad_cell_json_is_one_line(tmp_path: Path):
    done = ccsweep("cell", "--cell", '{"id": "x"}', "--store", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.startswith("ccsweep: error: --cell: ")
    assert done.stderr.strip().count("\n") == 0
