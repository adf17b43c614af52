"""The import graph keeps its shape: no loop inside src/ccsweep or operator/, and no import from a
lower floor up to a higher one.

Read from the source with `ast` (nothing is imported), every import counted, those inside
functions too: a lazy import is still a dependency. Floors, ground first; a module imports only
from its own floor or below. Modules not named here are not ranked (only their loops count).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOTS = {"ccsweep": REPO / "src" / "ccsweep", "ccsweep_operator": REPO / "operator" / "ccsweep_operator"}
#: ccsweep's parts by floor, ground first: a part is a module or a package directly under ccsweep.
FLOORS = (("cell", "exitcodes"), ("linkrules",), ("spec", "result"), ("store",), ("expand", "plan"),
          ("figures",), ("runner",), ("executor", "metrics"), ("cli",))
#: Loops known today, each with why it stands; an entry that no longer loops fails the test.
KNOWN_LOOPS: dict[frozenset[str], str] = {
    frozenset({"ccsweep.runner.run", "ccsweep.runner.mahimahi_run"}):
        "Mahimahi's run is handed the cell part way through run.py's lifecycle and calls back into "
        "its helpers; one lifecycle with a Link protocol ends it (issue 26, item 1)",
}


def _modules() -> dict[str, Path]:
    found = {}
    for package, root in ROOTS.items():
        for path in root.rglob("*.py"):
            parts = [package, *path.relative_to(root).with_suffix("").parts]
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project's modules that `name` imports: `from a import b` is a.b when that is a module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            targets |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                        for alias in node.names}
    return {t for t in targets if t in modules and t != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _loops(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    loops: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while (member := stack.pop()) != node:
                component.add(member)
            if component:
                loops.append(frozenset({node, *component}))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return loops


def _floor(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "ccsweep" or len(parts) < 2:
        return None
    return next((i for i, floor in enumerate(FLOORS) if parts[1] in floor), None)


def test_no_import_loop_but_the_known_ones():
    loops = set(_loops(_graph()))
    assert loops - KNOWN_LOOPS.keys() == set(), "new import loops"
    assert KNOWN_LOOPS.keys() - loops == set(), "a known loop is gone: take it off KNOWN_LOOPS"


def test_no_import_runs_up_a_floor():
    upward = sorted(f"{source} (floor {_floor(source)}) imports {target} (floor {_floor(target)})"
                    for source, targets in _graph().items() for target in targets
                    if (low := _floor(source)) is not None and (high := _floor(target)) is not None and high > low)
    assert upward == []


@pytest.mark.parametrize("source, expected", [
    ("from ccsweep.runner import run", {"ccsweep.runner.run"}),
    ("from ccsweep import linkrules", {"ccsweep.linkrules"}),
    ("from .. import cell", {"ccsweep.cell"}),
    ("import ccsweep.store.base", {"ccsweep.store.base"}),
])
def test_the_reader_resolves_each_form_of_import(tmp_path: Path, source: str, expected: set[str]):
    path = tmp_path / "x.py"
    path.write_text(f"def f():\n    {source}\n")
    assert _imports("ccsweep.runner.x", path, _modules()) == expected
