"""The sender's modules, copied where an unprivileged process can read them.

Mahimahi's sender runs as nobody (runner.mahimahi_run). ccsweep itself may be installed where
nobody can reach it: a clone in root's mode-700 home is where a root user clones. The sender is
one module (`ccsweep.runner.flow`) and the few it imports at module level, all standard library
underneath, so those files are copied, readable by all, into a folder of the cell's own, and the
sender imports them from there. The set is found by reading the modules' top-level imports, so
a new import in the sender is copied too, never missed.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

#: The package's folder (src/ccsweep), from this module's place in it.
PACKAGE = Path(__file__).resolve().parents[1]

#: The module the sender runs (runner.endpoints.sender_args).
SENDER_MODULE = "ccsweep.runner.flow"


def module_file(name: str) -> Path:
    """The source file of a ccsweep module or package, by dotted name."""
    path = PACKAGE.joinpath(*name.split(".")[1:])
    package = path / "__init__.py"
    return package if package.is_file() else path.with_suffix(".py")


def _top_level_imports(path: Path) -> set[str]:
    """The ccsweep modules `path` imports at module level (an `if TYPE_CHECKING:` block or a
    function's imports run later, or never, in the sender)."""
    found: set[str] = set()
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.split(".")[0] == "ccsweep" and module_file(name).is_file()}


def sender_modules(start: str = SENDER_MODULE) -> set[str]:
    """Every ccsweep module importing `start` loads: it, what it imports, and their packages."""
    wanted, seen = [start], set()
    while wanted:
        name = wanted.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        wanted += [".".join(parts[:i]) for i in range(1, len(parts))]  # importing a.b.c runs a and a.b
        wanted += sorted(_top_level_imports(module_file(name)))
    return seen


def copy_sender_modules(folder: Path) -> Path:
    """Copy the sender's modules into `folder` (made here), readable by all; returns the folder to
    put on the sender's PYTHONPATH."""
    root = PACKAGE.parent
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)  # whatever the umask
    for name in sorted(sender_modules()):
        source = module_file(name)
        target = folder / source.relative_to(root)
        for parent in reversed(target.relative_to(folder).parents):
            if parent != Path("."):
                (folder / parent).mkdir(mode=0o755, exist_ok=True)
                (folder / parent).chmod(0o755)
        shutil.copyfile(source, target)
        target.chmod(0o644)
    return folder
