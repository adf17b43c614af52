"""The store owns its layout: no key of it (cells/, sweeps/, traces/, a cell's late/, failed/ or
starved/ attempts, result.json, manifest.json, unplaceable.json, plan chunks, revisions, time series)
is spelled outside src/ccsweep/store/. Everyone else asks the store's methods, so the layout can
change in one package (a schema migration) without a reader left behind.

Read from the source with `ast`: every string constant and every literal part of an f-string,
docstrings aside (they may say where things are, for a person).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOTS = (REPO / "src" / "ccsweep", REPO / "operator" / "ccsweep_operator")
STORE = REPO / "src" / "ccsweep" / "store"
KEY = re.compile(r"(^|/)(cells|sweeps|traces)/|\b(result|manifest|unplaceable)\.json"
                 r"|(^|/)(late|failed|starved|revisions)/|timeseries\.json|chunk-\d|index-[0-9a-f]{2}\.|plan-[0-9a-f]")
#: Strings that look like a key and are not one, each with why.
NOT_KEYS = {
    # A report's own asset, relative to the report: the store puts it among the sweep's files
    # (put_sweep_file decides where), as it does figures/x.png.
    ("figures/cell_series.py", "cells/"),
}


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def spelled_keys(path: Path, root: Path) -> list[str]:
    """Each string in `path` that looks like a store key, as `file:line: text`."""
    tree = ast.parse(path.read_text(), str(path))
    docs = _docstrings(tree)
    name = path.relative_to(root).as_posix()
    return [f"{name}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
            and KEY.search(node.value) and (name, node.value) not in NOT_KEYS]


def test_no_store_key_is_spelled_outside_the_store():
    found = [line for root in ROOTS for path in sorted(root.rglob("*.py")) if not path.is_relative_to(STORE)
             for line in spelled_keys(path, root)]
    assert found == []


@pytest.mark.parametrize("source, spelled", [
    ('key = f"cells/{cell_id}/result.json"', True),
    ('prefix = "sweeps/" + name', True),
    ('folder = f"cells/{i}/{status}/"', True),
    ('where = f"see {x}/late/ for it"', True),
    ('"""Records are at cells/<id>/result.json."""', False),  # a docstring says where, for a person
    ('text = "late: measured with the emulator late"', False),
])
def test_the_check_finds_a_key_in_each_form(tmp_path: Path, source: str, spelled: bool):
    path = tmp_path / "x.py"
    path.write_text(source + "\n")
    assert bool(spelled_keys(path, tmp_path)) is spelled


def test_the_store_spells_the_keys_the_check_looks_for():
    """The pattern matches the store's own keys, so a key moved out of store/ would be found."""
    from ccsweep.store.base import attempt_prefix, manifest_key, record_key, sweep_file_key, trace_key

    for key in (record_key("ab"), attempt_prefix("ab", "late"), manifest_key("s"), sweep_file_key("s", "report.html"),
                trace_key("00")):
        assert KEY.search(key), key
