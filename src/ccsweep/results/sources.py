"""The other sources' printed numbers, shipped as data: ThousandEyes' tables, the shallow-buffer study's, Mininet's.

ReBBR's CSVs have their own module (results.published_sets); these three sources printed tables or a
few numbers in their text, typed into CSVs under ccsweep/published/<source>/ with a README citing
each.  Every file is pinned by its SHA-256 like ReBBR's: a changed or missing file stops the
figures with a one-line PublishedDataError naming it, never a different number under the label.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable

from ccsweep.results.published_sets import pinned_bytes

DATA: Traversable = files("ccsweep") / "published"

THOUSANDEYES = "thousandeyes/tables.csv"
SHALLOW = "shallow-buffers/numbers.csv"
MININET = "mininet/latency.csv"
PINNED = {
    THOUSANDEYES: "838bdec9824d7364d4c4bfa5f2e10161d588405ad04cead14b3adcc5ce81d40b",
    SHALLOW: "4b0c7b73590d31fd34cf7548e14f81efb8ead6b1aa745937f6062a95d14941d3",
    MININET: "dfc362991ccd2cd39b93df18337292f7da6dcc7a55bbcf2b5859d5ab0e8622c2",
}
#: How each source is cited beside its numbers.
CITATION = {
    THOUSANDEYES: "ThousandEyes, \"Path Quality Part 3: Is BBR the Future of Congestion Avoidance?\" (K. Sanjta)",
    SHALLOW: "the shallow-buffer study (an untitled, unsigned write-up)",
    MININET: "\"TCP BBR Congestion Control on Mininet\" (tutorial blog post)",
}


def rows(name: str, folder: Traversable | None = None) -> list[dict[str, str]]:
    """A shipped file's rows, after checking it against its pinned SHA-256."""
    data = pinned_bytes(name, (folder or DATA) / name, PINNED[name], "the file typed from the source",
                        CITATION[name])
    return list(csv.DictReader(io.StringIO(data.decode())))


@dataclass(frozen=True)
class TableRow:
    """One row of ThousandEyes' tables (CUBIC's rows carry the mean only)."""

    topology: str
    algorithm: str
    loss_percent: float
    mean: float
    p25: float | None
    p75: float | None


def thousandeyes(folder: Traversable | None = None) -> list[TableRow]:
    def number(text: str) -> float | None:
        return float(text) if text else None

    return [TableRow(r["topology"], r["algorithm"], float(r["loss_percent"]), float(r["mean"]), number(r["p25"]),
                     number(r["p75"])) for r in rows(THOUSANDEYES, folder)]


def shallow_numbers(folder: Traversable | None = None) -> dict[str, float]:
    """The study's printed numbers by claim name (standing_queue 1.12 BDP, peak_loss_below_1.5_bdp 12 %, ...)."""
    return {r["claim"]: float(r["value"]) for r in rows(SHALLOW, folder)}


def mininet_latency(folder: Traversable | None = None) -> dict[str, tuple[float, float]]:
    """(CUBIC, BBR) latency in ms by case: average, worst."""
    return {r["case"]: (float(r["cubic_ms"]), float(r["bbr_ms"])) for r in rows(MININET, folder)}
