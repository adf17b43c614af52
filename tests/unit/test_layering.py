"""The import graph keeps its shape: no loop inside src/ccsweep or operator/, no import from a
lower floor up to a higher one, every module of src/ccsweep and of the operator on a floor, and
benches and their shared helpers (benchmarks/, support/) are packages that import each other, never
reach into tests/ by path.

Read from the source with `ast` (nothing is imported), every import counted, those inside
functions too: a lazy import is still a dependency. Floors, ground first; a module imports only
from its own floor or below. The package's own `__init__` stands on the top floor: it lends
`ccsweep.load` from `analysis`, so a module that read the version from it would import up.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOTS = {"ccsweep": REPO / "src" / "ccsweep", "ccsweep_operator": REPO / "operator" / "ccsweep_operator"}
#: ccsweep's parts by floor, ground first: a part is a module or a package directly under ccsweep.
FLOORS = (("linkdesc", "cell", "exitcodes", "stats", "podspec", "version", "bpfcc", "storeurls", "gunzip"),
          ("linkrules", "buildinfo", "bpfregister", "carried"),
          ("spec", "result"), ("specload",), ("adaptive", "admission", "crd", "podrequests"), ("store",),
          ("manifest", "storedplan"),
          ("expand", "plan"), ("sweep_status", "placement", "clusternodes", "estimate", "clusterestimate", "planning"),
          ("results",), ("compare", "analysis"), ("checks",), ("figures",), ("runner",),
          ("executor", "metrics", "cellrun"), ("cli", "__main__", "__init__"))
#: The operator's modules by floor, ground first, as FLOORS: they all stand above ccsweep, which never
#: imports them (the operator is a client of ccsweep's planning, not a part of it).
OPERATOR_FLOORS = (("reconcile", "chartcheck", "idlewake", "nodesetup"), ("kube", "planworker"),
                   ("handlers", "nodeprobe", "__init__"))
#: Loops known today, each with why it stands; an entry that no longer loops fails the test.
KNOWN_LOOPS: dict[frozenset[str], str] = {}


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
    """The floor of a module (its part's; a package itself is its `__init__`), None where unranked.
    The operator's floors stand above all of ccsweep's."""
    package, *parts = module.split(".")
    part = parts[0] if parts else "__init__"
    if package == "ccsweep":
        return next((i for i, floor in enumerate(FLOORS) if part in floor), None)
    if package == "ccsweep_operator":
        return next((len(FLOORS) + i for i, floor in enumerate(OPERATOR_FLOORS) if part in floor), None)
    return None


def test_no_import_loop_but_the_known_ones():
    loops = set(_loops(_graph()))
    assert loops - KNOWN_LOOPS.keys() == set(), "new import loops"
    assert KNOWN_LOOPS.keys() - loops == set(), "a known loop is gone: take it off KNOWN_LOOPS"


def test_every_module_is_on_a_floor():
    """A module on no floor could import from any floor unseen: each one of src/ccsweep and of the
    operator is ranked."""
    assert sorted(m for m in _modules() if _floor(m) is None) == []


def test_no_import_runs_up_a_floor():
    upward = sorted(f"{source} (floor {_floor(source)}) imports {target} (floor {_floor(target)})"
                    for source, targets in _graph().items() for target in targets
                    if (low := _floor(source)) is not None and (high := _floor(target)) is not None and high > low)
    assert upward == []


def test_the_cell_lifecycle_names_no_link():
    """run.py drives every link through the Link protocol: it imports no link's own module (runner.links
    picks one by the cell's name for it), so a new link is a new module and no edit to run.py."""
    links = {"ccsweep.runner.link", "ccsweep.runner.link_run", "ccsweep.runner.mahimahi",
             "ccsweep.runner.mahimahi_run"}
    assert _graph()["ccsweep.runner.run"] & links == set()


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


#: Importable packages at the repository root (pytest's pythonpath, `python -m benchmarks...`), with what
#: each may not import: support/ serves tests and benches alike, so it stands below both.
ROOT_PACKAGES = {"support": {"benchmarks"}, "benchmarks": set()}


def _test_helpers() -> set[str]:
    """The names tests/ files are imported by when pytest puts their folder on sys.path."""
    return {path.stem for path in (REPO / "tests").rglob("*.py")} - set(sys.stdlib_module_names)


def _reaches(path: Path, forbidden: set[str]) -> list[str]:
    """Where `path` edits sys.path, loads a module from a file, or imports a test helper or a
    forbidden package: each as file:line: what, in the file's order."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", None) == "sys":
            found.append((node.lineno, "sys.path"))
        elif isinstance(node, ast.Attribute) and node.attr == "spec_from_file_location":
            found.append((node.lineno, "a module loaded from its file"))
        elif isinstance(node, ast.Import | ast.ImportFrom) and not getattr(node, "level", 0):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            found += [(node.lineno, f"imports {name}") for name in names
                      if name.split(".")[0] in forbidden | {"tests"}]
    return [f"{path.name}:{line}: {what}" for line, what in sorted(found)]


@pytest.mark.parametrize("package", sorted(ROOT_PACKAGES))
def test_benches_and_support_import_by_package_never_from_tests(package: str):
    forbidden = _test_helpers() | ROOT_PACKAGES[package]
    assert [line for path in sorted((REPO / package).rglob("*.py")) for line in _reaches(path, forbidden)] == []


def test_the_package_check_finds_each_way_into_tests(tmp_path: Path):
    path = tmp_path / "bench.py"
    path.write_text("import sys\nimport importlib.util\nsys.path.insert(0, 'tests/operator')\n"
                    "from operatorlib import wait_for\nimport benchmarks.fanout\n"
                    "spec = importlib.util.spec_from_file_location('b', 'b.py')\n")
    assert _reaches(path, _test_helpers() | {"benchmarks"}) == [
        "bench.py:3: sys.path", "bench.py:4: imports operatorlib", "bench.py:5: imports benchmarks.fanout",
        "bench.py:6: a module loaded from its file"]
