"""The links a cell can name (`link:` in its parameters), each a Link for run.py's one lifecycle.

The one place a new link is registered; run.py takes whatever Link it is given.
"""

from __future__ import annotations

from collections.abc import Callable

from ccsweep.cell import Cell, LinkBackend
from ccsweep.runner.attempt import Link
from ccsweep.runner.link_run import EmulatorLink
from ccsweep.runner.mahimahi_run import MahimahiLink

LINKS: dict[LinkBackend, Callable[[], Link]] = {"ccsweep-link": EmulatorLink, "mahimahi": MahimahiLink}


def link_for(cell: Cell) -> Link:
    """A fresh Link (one per attempt) of the kind the cell names."""
    return LINKS[cell.params.link]()
