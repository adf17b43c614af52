"""The links a cell can name (`link:` in its parameters), each a Link for run.py's one lifecycle.

A link is described once, for every layer, in ccsweep.linkdesc; here its runner module is named
by that descriptor's name (tests/unit/test_link_registry.py holds the two to the same links).
run.py takes whatever Link it is given.
"""

from __future__ import annotations

from collections.abc import Callable

from ccsweep.cell import Cell, LinkBackend
from ccsweep.linkrules import LinkError
from ccsweep.runner.attempt import Link
from ccsweep.runner.link import find_link_binary
from ccsweep.runner.link_run import EmulatorLink
from ccsweep.runner.mahimahi_run import MahimahiLink, host_tools

LINKS: dict[LinkBackend, Callable[[], Link]] = {"ccsweep-link": EmulatorLink, "mahimahi": MahimahiLink}


def _emulator_host(algorithms: list[str]) -> None:
    find_link_binary()


#: What each link needs of the host whatever the cell: a LinkError says what is missing.
HOST_CHECKS: dict[LinkBackend, Callable[[list[str]], object]] = {"ccsweep-link": _emulator_host,
                                                                 "mahimahi": host_tools}


def host_refusal(link: LinkBackend, algorithms: list[str]) -> str | None:
    """Why this host can run no cell of `link` with these algorithms (the link's tools are missing
    or out of reach); None if it can. The local executor asks once per sweep, before any cell."""
    try:
        HOST_CHECKS[link](algorithms)
    except LinkError as exc:
        return str(exc)
    return None


def link_for(cell: Cell) -> Link:
    """A fresh Link (one per attempt) of the kind the cell names."""
    return LINKS[cell.params.link]()
