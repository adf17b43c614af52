"""ccsweep-link against upstream Mahimahi: the same cells on both links, one agreement rule.

Used by tests/integration/test_mahimahi_crosscheck.py (a short grid) and benchmarks/crosscheck/
bench.py (the full grid: 30 s flows, 3 repetitions). The cells are issue 13's: BBR and CUBIC at
0, 1 and 5 % loss on the data direction, 100 Mbit/s, 100 ms RTT, infinite queue, and both over
the Verizon LTE trace pair. Cells run one at a time, the two backends of a cell back to back, so
a change in the machine's load falls on both alike; the test runs the two side by side (run_grid).

The rule: the backends' mean goodput over the repetitions agrees within 5 % for BBR (its goodput
is set by the link's rate and loss, which both links play the same), and within 25 % or 1 Mbit/s
for CUBIC (a loss-based flow at 1 % loss or more lives on a few window halvings: its run-to-run
spread on either link is that large; see the bench's measured spread).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ccsweep.cell import Cell
from ccsweep.expand import expand
from ccsweep.result import CellResult
from ccsweep.runner.run import run_cell
from ccsweep.specload import parse_spec

BACKENDS = ("ccsweep-link", "mahimahi")
BBR_RELATIVE = 0.05
CUBIC_RELATIVE = 0.25
CUBIC_ABSOLUTE_MBPS = 1.0
LOSS_PERCENT: list[float] = [0, 1, 5]
VERIZON = {"name": "verizon-lte", "uplink": "Verizon-LTE-short.up", "downlink": "Verizon-LTE-short.down"}


def grid_spec(duration_s: float, repetitions: int, loss_percent: list[float] = LOSS_PERCENT,
              bandwidth_mbps: float = 100.0, message_bytes: int = 1024) -> dict[str, Any]:
    """The cross-check's cells on both backends (one experiment per bottleneck and backend); the
    constant-rate bottleneck is 100 Mbit/s and the sender writes ReBBR's 1 KB messages unless a
    bench asks for others."""
    common = {"cc": ["bbr", "cubic"], "rtt_ms": [100], "queue": [{"kind": "infinite"}], "duration_s": duration_s,
              "warmup_s": min(5.0, duration_s / 4), "repetitions": repetitions, "message_bytes": message_bytes}
    experiments = []
    for link in BACKENDS:
        experiments.append({**common, "name": f"rate-{link}", "link": link, "loss_percent": loss_percent,
                            "bandwidth_mbps": [bandwidth_mbps]})
        experiments.append({**common, "name": f"lte-{link}", "link": link, "loss_percent": [0], "trace": [VERIZON]})
    return {"name": "crosscheck", "experiments": experiments}


def grid(duration_s: float, repetitions: int, loss_percent: list[float] = LOSS_PERCENT,
         bandwidth_mbps: float = 100.0, message_bytes: int = 1024) -> list[Cell]:
    spec = grid_spec(duration_s, repetitions, loss_percent, bandwidth_mbps, message_bytes)
    return expand(parse_spec(spec, origin="crosscheck"))


def pair_key(cell: Cell) -> tuple[str, float, str]:
    """What a cell is apart from its backend and repetition: algorithm, loss, bottleneck."""
    p = cell.params
    bottleneck = p.uplink.trace.name if p.uplink.trace else f"{p.uplink.rate_mbps:g} Mbit/s"
    return p.cc_label, p.loss, bottleneck


#: A ccsweep-link cell whose link ran late is run again, as the executor does, this often at most.
ATTEMPTS = 3


def _run_until_on_time(cell: Cell, workdir: Path, progress: Callable[[CellResult], None] | None) -> CellResult:
    """One cell, run again while its link comes back late, ATTEMPTS times at most."""
    for attempt in range(1, ATTEMPTS + 1):
        result = run_cell(cell, workdir / f"{cell.id}-{attempt}", attempt=attempt).result
        if progress is not None:
            progress(result)
        if result.status != "late":
            break
    return result


def run_grid(cells: list[Cell], workdir: Path, progress: Callable[[CellResult], None] | None = None,
             pairs_side_by_side: bool = False) -> list[CellResult]:
    """Every cell once, repetition by repetition, the two backends of a cell back to back, or with
    `pairs_side_by_side` at the same time: each backend's cell in its own namespaces, both under the
    same load at the same moment, in half the wall time (a 100 Mbit/s cell costs its link about a
    quarter of a core, so a pair leaves room on two cores; a late link is run again either way)."""
    order = sorted(cells, key=lambda c: (c.params.repetition, pair_key(c), BACKENDS.index(c.params.link)))
    if not pairs_side_by_side:
        return [_run_until_on_time(cell, workdir, progress) for cell in order]
    pairs: dict[tuple[int, tuple[str, float, str]], list[Cell]] = defaultdict(list)
    for cell in order:
        pairs[cell.params.repetition, pair_key(cell)].append(cell)
    results: list[CellResult] = []
    with ThreadPoolExecutor(max_workers=len(BACKENDS)) as pool:
        for pair in pairs.values():
            results += pool.map(lambda cell: _run_until_on_time(cell, workdir, progress), pair)
    return results


@dataclass(frozen=True)
class Comparison:
    """One cell's goodputs on both backends over the repetitions, and whether they agree."""

    key: tuple[str, float, str]
    goodput: dict[str, list[float]]
    bbr_relative: float = BBR_RELATIVE
    #: Single runs only: CUBIC under loss also agrees within this factor (None: the bench's rule alone).
    cubic_lossy_factor: float | None = None
    #: What a backend's repetitions are summed up by: their mean (the bench), or their median (the
    #: test, where a pair run again after one disagreeing pair must not carry that one run).
    summary: Literal["mean", "median"] = "mean"

    def typical(self, backend: str) -> float:
        """The backend's goodput over the repetitions: their mean or median (`summary`)."""
        values = self.goodput[backend]
        return statistics.fmean(values) if self.summary == "mean" else statistics.median(values)

    def spread(self, backend: str) -> float:
        """Sample standard deviation over the repetitions (0 with one)."""
        values = self.goodput[backend]
        return statistics.stdev(values) if len(values) > 1 else 0.0

    @property
    def difference(self) -> float:
        """Mahimahi's typical goodput minus ccsweep-link's, Mbit/s."""
        return self.typical("mahimahi") - self.typical("ccsweep-link")

    @property
    def relative(self) -> float:
        base = self.typical("ccsweep-link")
        return abs(self.difference) / base if base > 0 else float("inf")

    @property
    def factor_applies(self) -> bool:
        return self.cubic_lossy_factor is not None and self.key[0] != "bbr" and self.key[1] > 0

    @property
    def ratio(self) -> float:
        """The larger backend's typical goodput over the smaller's."""
        low, high = sorted((self.typical("ccsweep-link"), self.typical("mahimahi")))
        return high / low if low > 0 else float("inf")

    @property
    def rule(self) -> str:
        if self.key[0] == "bbr":
            return f"within {self.bbr_relative:.0%}"
        rule = f"within {CUBIC_RELATIVE:.0%} or {CUBIC_ABSOLUTE_MBPS:g} Mbit/s"
        return rule + (f" or a factor of {self.cubic_lossy_factor:g}" if self.factor_applies else "")

    @property
    def agrees(self) -> bool:
        if self.key[0] == "bbr":
            return self.relative <= self.bbr_relative
        if self.factor_applies and self.ratio <= (self.cubic_lossy_factor or 0):
            return True
        return self.relative <= CUBIC_RELATIVE or abs(self.difference) <= CUBIC_ABSOLUTE_MBPS

    def line(self) -> str:
        cc, loss, bottleneck = self.key
        return (f"{cc} {loss:.0%} loss {bottleneck}: ccsweep-link {self.typical('ccsweep-link'):.2f} "
                f"± {self.spread('ccsweep-link'):.2f}, mahimahi {self.typical('mahimahi'):.2f} "
                f"± {self.spread('mahimahi'):.2f} Mbit/s, difference {self.relative:.1%} "
                f"({self.difference:+.2f} Mbit/s), rule {self.rule}: {'agrees' if self.agrees else 'DISAGREES'}")


def compare(results: list[CellResult], bbr_relative: float = BBR_RELATIVE,
            cubic_lossy_factor: float | None = None, summary: Literal["mean", "median"] = "mean") -> list[Comparison]:
    """Group measured results by cell and backend; a failed or still late result fails loudly.

    `bbr_relative` widens BBR's margin, and `cubic_lossy_factor` CUBIC's under loss, where fewer or
    shorter runs than the bench's scatter more; `summary` sums a backend's runs up (Comparison).
    """
    goodput: dict[tuple[str, float, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for result in results:
        if result.goodput_mbps is None or result.status != "ok":
            raise AssertionError(f"{result.cell.params.link} cell {result.cell.id} {pair_key(result.cell)}: "
                                 f"{result.status} {result.error}")
        goodput[pair_key(result.cell)][result.cell.params.link].append(result.goodput_mbps)
    return [Comparison(key, dict(by_backend), bbr_relative, cubic_lossy_factor, summary)
            for key, by_backend in goodput.items()]
