"""Intervals for repeated cells, from scipy.stats, each able to say what it is.

A cell repeated with other seeds is a distribution, not one number: on this kernel some Figure 8
cells have two modes (runs near 43 Mbit/s or below 5 at 15 % loss).  A mean with a Student-t
interval misdescribes such a cell (the mean lies between the modes, where no run is), so a
cell's value is its median, with a percentile-bootstrap interval of the median, which assumes no
shape.  The bootstrap draws from a generator seeded with a constant, so the same runs always give
the same interval (a figure rebuilt later is the same figure).

Time-series bands (a mean curve over repetitions) keep the t-interval of the mean, with the
quantile from scipy.stats.t.  Every interval carries its own label, e.g. "95 % bootstrap CI of
the median, n = 12", for captions and tables.

scipy.stats is imported by the functions that use it, not with this module: planning imports this
module (adaptive repetitions judge stored runs with `median_ci`), so a cell pod reading its cell
from the plan and `ccsweep status` load it, and scipy.stats' import would cost them more than the
rest of their start-up (4 s against 2.4 s for `ccsweep.plan`, on a loaded 2-core machine).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
#: Resamples per bootstrap interval: its end points move by well under 1 % between seeds at n <= 20.
RESAMPLES = 4999
#: The bootstrap generator's seed: the same runs give the same interval on every rebuild.
BOOTSTRAP_SEED = 20170604
#: A run collapsed when its goodput fell below this fraction of the bottleneck rate (5 Mbit/s of
#: 100): at high loss BBR runs sit near 43 Mbit/s or below 5, and the fraction below is its own quantity.
COLLAPSE_FRACTION = 0.05


@dataclass(frozen=True)
class Interval:
    """A statistic of n runs with its two-sided interval (low/high None when n < 2)."""

    center: float
    low: float | None
    high: float | None
    n: int
    statistic: str
    method: str
    confidence: float = CONFIDENCE

    @property
    def label(self) -> str:
        """What the interval is: '95 % bootstrap CI of the median, n = 12'."""
        if self.low is None:
            return f"{self.statistic} of {self.n} run{'s' if self.n != 1 else ''}, no interval"
        return f"{self.confidence * 100:g} % {self.method} CI of the {self.statistic}, n = {self.n}"

    @property
    def half_width(self) -> float | None:
        return None if self.low is None or self.high is None else (self.high - self.low) / 2

    @property
    def relative_half_width(self) -> float:
        """Half the interval's width over |center|: inf without an interval, 0 for a zero-width one."""
        half = self.half_width
        if half is None:
            return math.inf
        if half == 0:
            return 0.0
        return half / abs(self.center) if self.center else math.inf

    def errorbar(self) -> tuple[float, float]:
        """(below, above) the center, as matplotlib's yerr wants them (0 without an interval)."""
        if self.low is None or self.high is None:
            return 0.0, 0.0
        return self.center - self.low, self.high - self.center

    def text(self, digits: int = 3) -> str:
        """'41.2 [38.0, 43.1]' (or just the center without an interval)."""
        if self.low is None or self.high is None:
            return f"{self.center:.{digits}g}"
        return f"{self.center:.{digits}g} [{self.low:.{digits}g}, {self.high:.{digits}g}]"


def bars_caption(intervals: Sequence[Interval]) -> str:
    """A caption for a figure's interval bars: what they are and the n behind them ('n = 3 to 20 per point').
    No intervals (a planned sweep with no result stored yet, drawn beside published numbers): no bars."""
    if not intervals:
        return "no run stored yet"
    shown = [i for i in intervals if i.low is not None]
    if not shown:
        ns = sorted({i.n for i in intervals})
        return f"one run per point ({'no interval' if ns == [1] else 'n = ' + _span(ns)})"
    first = shown[0]
    ns = sorted({i.n for i in intervals})
    return (f"bars: {first.confidence * 100:g} % {first.method} CI of the {first.statistic}, n = {_span(ns)} per "
            "point; dots: each run")


def _span(ns: Sequence[int]) -> str:
    return str(ns[0]) if len(ns) == 1 else f"{ns[0]} to {ns[-1]}"


def _rng() -> np.random.Generator:
    return np.random.default_rng(BOOTSTRAP_SEED)


def median_ci(values: Sequence[float] | np.ndarray, confidence: float = CONFIDENCE) -> Interval:
    """Median and its percentile-bootstrap interval (scipy.stats.bootstrap); no interval for one run.

    Percentile, not BCa: BCa's jackknife is undefined when the runs are all equal (a calm cell at
    the link rate), and for the median of a few runs it is no better.
    """
    data = _finite(values)
    median = float(np.median(data))
    if data.size < 2:
        return Interval(median, None, None, int(data.size), "median", "bootstrap", confidence)
    if np.all(data == data[0]):
        return Interval(median, median, median, int(data.size), "median", "bootstrap", confidence)
    from scipy import stats

    res = stats.bootstrap((data,), np.median, confidence_level=confidence, n_resamples=RESAMPLES,
                          method="percentile", vectorized=True, axis=-1, rng=_rng())
    return Interval(median, float(res.confidence_interval.low), float(res.confidence_interval.high),
                    int(data.size), "median", "bootstrap", confidence)


def median_difference_ci(a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE) -> Interval:
    """median(a) - median(b) with a percentile-bootstrap interval, each side resampled on its own.

    A side of one value is held fixed (a published number has no spread to resample); with one
    value on both sides there is no interval.
    """
    x, y = _finite(a), _finite(b)
    center = float(np.median(x) - np.median(y))
    n = int(x.size + y.size)
    if x.size < 2 and y.size < 2:
        return Interval(center, None, None, n, "difference of medians", "bootstrap", confidence)
    if x.size < 2:  # x held fixed: the difference moves opposite to median(y)
        one = median_ci(y, confidence)
        assert one.low is not None and one.high is not None
        return Interval(center, float(x[0]) - one.high, float(x[0]) - one.low, n, "difference of medians",
                        "bootstrap", confidence)
    if y.size < 2:
        one = median_ci(x, confidence)
        assert one.low is not None and one.high is not None
        return Interval(center, one.low - float(y[0]), one.high - float(y[0]), n, "difference of medians",
                        "bootstrap", confidence)

    def statistic(s: np.ndarray, t: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.asarray(np.median(s, axis=axis) - np.median(t, axis=axis))

    from scipy import stats

    res = stats.bootstrap((x, y), statistic, confidence_level=confidence, n_resamples=RESAMPLES,
                          method="percentile", vectorized=True, axis=-1, rng=_rng())
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if math.isnan(low) or math.isnan(high):  # every resample alike: the difference is the observed one
        low = high = center
    return Interval(center, low, high, n, "difference of medians", "bootstrap", confidence)


def rank_test_p(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Two-sided Mann-Whitney U p-value (scipy.stats.mannwhitneyu); None when a side is empty."""
    if not len(a) or not len(b):
        return None
    x, y = _finite(a), _finite(b)
    if np.all(x == x[0]) and np.all(y == y[0]) and x[0] == y[0]:
        return 1.0  # identical constants: no rank separates them
    from scipy import stats

    return float(stats.mannwhitneyu(x, y, alternative="two-sided").pvalue)


def collapsed_fraction(values: Sequence[float], rate_mbps: float | None,
                       fraction: float = COLLAPSE_FRACTION) -> float | None:
    """The share of runs whose goodput fell below `fraction` x the bottleneck rate; None without a rate."""
    if rate_mbps is None or not len(values):
        return None
    data = _finite(values)
    return float(np.mean(data < fraction * rate_mbps))


def mean_ci(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float | None]:
    """Mean and the half-width of its Student-t interval; no interval (None) for a single value.

    For quantities averaged within a run (per-second throughput, a time series' quantile curve);
    a cell's value over its runs is `median_ci`.
    """
    if not values:
        raise ValueError("no values")
    data = np.asarray(values, dtype=float)
    mean = float(data.mean())
    if data.size < 2:
        return mean, None
    return mean, _t(data.size, confidence) * float(data.std(ddof=1)) / math.sqrt(data.size)


def mean_ci_columns(rows: np.ndarray, confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray | None]:
    """Per column of a (runs x samples) array: mean and t-interval half-width (None for one run)."""
    mean = np.nanmean(rows, axis=0)
    if rows.shape[0] < 2:
        return mean, None
    half = _t(rows.shape[0], confidence) * np.nanstd(rows, axis=0, ddof=1) / math.sqrt(rows.shape[0])
    return mean, half


def _t(n: int, confidence: float) -> float:
    """Student's two-sided critical value for n values (n - 1 degrees of freedom)."""
    from scipy import stats

    return float(stats.t.ppf(0.5 + confidence / 2, n - 1))


def _finite(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """The finite values as an array; ValueError when there are none (nan and inf are no measurement)."""
    data = np.asarray(values, dtype=float)
    data = data[np.isfinite(data)]
    if data.size == 0:
        raise ValueError("no finite values" if len(values) else "no values")
    return data
