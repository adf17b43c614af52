"""Where a goodput-vs-loss curve falls off its cliff, with a bootstrap interval.

BBR's curve does not decline, it drops: on this kernel it holds near the payload-rate ideal to
about 15 % loss and delivers almost nothing from 20 %. Where it drops is the number that tells
two BBRs apart (ReBBR's held to about 45 %), so it is read as one: the lowest loss rate of the
grid at which the median run falls below `share` of the payload-rate ideal.

The cliff is a grid point, so its interval is made of grid points too: each bootstrap resample
draws every cell's runs again, each cell on its own (runs of different cells are independent),
and reads the cliff again; the interval is the percentile range of those readings, widened to
the grid points around it. A curve that never falls has its cliff "above the grid", one step past
the highest loss rate. The generator is seeded (`stats.BOOTSTRAP_SEED`): the same runs always give
the same interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ccsweep.results.data import ExperimentData
from ccsweep.results.points import cell_summary, group_points, loss_series
from ccsweep.results.quantities import STEADY_GOODPUT, payload_ideal_mbps
from ccsweep.stats import BOOTSTRAP_SEED, CONFIDENCE, RESAMPLES

#: ReBBR's reading of "keeps its throughput": at least half the payload-rate ideal.
HALF = 0.5
#: A curve of fewer loss rates has no cliff to speak of: one step cannot say where a fall begins.
MIN_LOSS_RATES = 3


@dataclass(frozen=True)
class Cliff:
    """The cliff of one curve: indexes into `losses`, where len(losses) means above the grid."""

    #: The grid's loss rates (fractions), ascending.
    losses: tuple[float, ...]
    index: int
    #: The interval's ends; None where no cell has two runs (nothing to resample).
    low: int | None
    high: int | None
    #: Runs per cell, in the grid's order.
    runs: tuple[int, ...]
    share: float = HALF
    confidence: float = CONFIDENCE

    def loss(self, index: int | None = None) -> float | None:
        """The loss rate at `index` (default: the cliff's), None above the grid."""
        at = self.index if index is None else index
        return self.losses[at] if at < len(self.losses) else None

    def _percent(self, index: int) -> str:
        loss = self.loss(index)
        return f"above {self.losses[-1] * 100:g}" if loss is None else f"{loss * 100:g}"

    def where(self) -> str:
        """'20 %', or 'above 50 %' past the grid: where the cliff is, without its interval."""
        return f"{self._percent(self.index)} %"

    def span(self) -> tuple[int, int]:
        """The interval's ends as indexes; a cliff without an interval is its own point."""
        return (self.low, self.high) if self.low is not None and self.high is not None else (self.index, self.index)

    def overlaps(self, other: Cliff) -> bool:
        """Whether two cliffs of one grid share a loss rate in their intervals: where they do not,
        what sets the two curves apart moves the cliff."""
        (low, high), (other_low, other_high) = self.span(), other.span()
        return max(low, other_low) <= min(high, other_high)

    def with_interval(self) -> str:
        """'20 % [15, 25 %]', or '20 %' where there is no interval: a table cell's value."""
        if self.low is None or self.high is None:
            return self.where()
        return f"{self.where()} [{self._percent(self.low)}, {self._percent(self.high)} %]"

    def describe(self) -> str:
        """'20 % [15, 25 %] (95 % bootstrap CI, 5-10 runs a cell)': what a table prints."""
        span = f"{min(self.runs)}" if min(self.runs) == max(self.runs) else f"{min(self.runs)}-{max(self.runs)}"
        if self.low is None or self.high is None:
            return f"{self.where()} (no interval, {span} run a cell)"
        return f"{self.with_interval()} ({self.confidence * 100:g} % bootstrap CI, {span} runs a cell)"


def find_cliff(runs_by_loss: Mapping[float, Sequence[float]], rate_mbps: float, share: float = HALF) -> Cliff:
    """The cliff of one curve: `runs_by_loss` maps each loss rate (a fraction) to its runs' goodputs
    (Mbit/s, non-finite ones dropped), on a link of `rate_mbps`."""
    losses = tuple(sorted(runs_by_loss))
    samples = [np.asarray([v for v in runs_by_loss[loss] if math.isfinite(v)], dtype=float) for loss in losses]
    empty = [f"{loss * 100:g} %" for loss, sample in zip(losses, samples, strict=True) if sample.size == 0]
    if not losses or empty:
        raise ValueError(f"a cliff needs runs at every loss rate; none at {', '.join(empty) or 'any'}")
    bounds = np.asarray([share * payload_ideal_mbps(rate_mbps, loss) for loss in losses])

    def first_below(*cells: np.ndarray, axis: int = -1) -> np.ndarray:
        below = np.stack([np.median(cell, axis=axis) for cell in cells], axis=-1) < bounds
        return np.where(below.any(axis=-1), below.argmax(axis=-1), len(losses)).astype(float)

    index = int(first_below(*samples))
    runs = tuple(int(s.size) for s in samples)
    if max(runs) < 2:
        return Cliff(losses, index, None, None, runs, share)
    # A cell of one run resamples to itself; scipy wants two observations a sample, and [v, v] is that.
    resampled = tuple(np.repeat(sample, 2) if sample.size == 1 else sample for sample in samples)
    result = stats.bootstrap(resampled, first_below, confidence_level=CONFIDENCE, n_resamples=RESAMPLES,
                             method="percentile", vectorized=True, axis=-1,
                             rng=np.random.default_rng(BOOTSTRAP_SEED))
    low, high = result.confidence_interval.low, result.confidence_interval.high
    # A resample distribution of one value leaves scipy's interval undefined: the cliff is that value.
    low, high = (index, index) if np.isnan(low) or np.isnan(high) else (math.floor(low), math.ceil(high))
    return Cliff(losses, index, min(low, index), max(high, index), runs, share)


@dataclass(frozen=True)
class SeriesCliff:
    """The cliff of one series of an experiment: its cells but the loss, named as a table row."""

    experiment: str
    series: str
    link: str
    cliff: Cliff


def experiment_cliffs(data: ExperimentData) -> list[SeriesCliff]:
    """Each loss series of the experiment on a constant-rate link, of MIN_LOSS_RATES loss rates or
    more with runs at each, and its cliff in steady-state goodput (the quantity ReBBR's "BBR holds"
    claim reads); in first-seen order."""
    out = []
    for series in loss_series(group_points(data.results), data.experiment.loss_direction):
        params = series[0].params
        runs = {point.params.loss: point.values(STEADY_GOODPUT.of) for point in series}
        if params.bandwidth_mbps is None or len(runs) < MIN_LOSS_RATES or not all(runs.values()):
            continue
        out.append(SeriesCliff(data.name, cell_summary(params, repetition=False, loss=False), params.link,
                               find_cliff(runs, params.bandwidth_mbps)))
    return out
