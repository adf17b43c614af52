"""ReBBR's published CSVs as pinned data: which sets there are, where they came from, and their rows.

Apart from the figure that draws them (figures.published) because `ccsweep compare` reads the same
sets, and the figure's note quotes what compare says: with the sets here, compare and the figure
each import them and neither imports the other's module at load.

The files ship with the package (ccsweep/published/rebbr/, whose README gives the source
repository, path, commit and license), each pinned by its SHA-256: a missing or changed file
raises PublishedDataError naming it, never a different series under the same label.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable

from ccsweep.results.rebbr_csv import RebbrRow, read_csv

REPOSITORY = "https://github.com/jervisfm/rebbr"
#: "Merge the results from 20170604_jmuindi run and make them official figures" (2017-06-04).
COMMIT = "01001609b009fe07ced7b497aaf5b3d3bfba39c7"
LICENSE = "BSD-2-Clause"
KERNEL = "Linux 4.11.1"
#: Where the files are: the package's copy (tests point it elsewhere to see a changed file refused).
DATA: Traversable = files("ccsweep") / "published" / "rebbr"


class PublishedDataError(RuntimeError):
    """A published file that is missing or not the pinned one; str() is one line naming it."""


@dataclass(frozen=True)
class PublishedSet:
    """One of ReBBR's CSVs: the spec's name for it, the file, its pinned hash and ReBBR's experiment."""

    name: str
    file: str
    sha256: str
    experiment: str
    #: For a trace experiment, the uplink trace its runs used (its rate columns are then no bottleneck).
    trace_uplink: str | None = None

    @property
    def source(self) -> str:
        return f"{REPOSITORY}, mahimahi/data/{self.file} at {COMMIT[:7]} ({LICENSE})"


SETS: dict[str, PublishedSet] = {s.name: s for s in (
    PublishedSet("rebbr-figure8", "figure8.csv",
                 "74f8dc829df48e26b664948c33025ba5faee9554db5977bdd2ee83f490e8cd3c", "Figure 8"),
    PublishedSet("rebbr-bandwidth", "experiment1.csv",
                 "730ac08b424e24fdc70bd0dfc7c29d98f4acc2274221f4cc0e35bdb18ff7e449", "experiment 1 (bandwidth)"),
    PublishedSet("rebbr-algorithms", "experiment2.csv",
                 "24fccd9b6a2de07f9117498060d3884b6d8e6c4637ecd5d7ff3aac984e7d74bb", "experiment 2 (algorithms)"),
    PublishedSet("rebbr-rtt", "experiment3.csv",
                 "d511b4df32ef2ecbdc683ea0948e0b137192342cc58dd19daceaca92e8c66382", "experiment 3 (RTT)"),
    PublishedSet("rebbr-cellular", "experiment4.csv",
                 "82d47cdd5053caa10eea5c75c41c5a939369c9988549248ac0ef357947ea9284", "experiment 4 (Verizon LTE)",
                 trace_uplink="Verizon-LTE-short.up"),
)}


def pinned_bytes(name: str, path: Traversable, sha256: str, whose: str, source: str) -> bytes:
    """A shipped data file's bytes, refused (one line naming it) when missing or not the pinned file."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PublishedDataError(f"{name}: {path} is missing ({exc.strerror or exc}); it ships with "
                                 "ccsweep (ccsweep/published/)") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise PublishedDataError(f"{name}: {path} is not {whose}: sha256 {digest}, expected {sha256} ({source}; "
                                 "see the README beside it)")
    return data


def load(published: PublishedSet, folder: Traversable | None = None) -> list[RebbrRow]:
    """The set's rows, after checking its file against the pinned SHA-256."""
    path = (folder or DATA) / published.file
    data = pinned_bytes(published.name, path, published.sha256, "ReBBR's file", published.source)
    try:
        return read_csv(data.decode())
    except (UnicodeDecodeError, ValueError) as exc:
        raise PublishedDataError(f"{published.name}: {path}: {exc}") from None
