"""Quantities over time: repetitions resampled on one time grid, drawn as a mean line and a band.

Each repetition's samples fall at slightly different instants (100 ms sampling started per
process), so runs are interpolated onto a common grid before averaging; the band is the 95 %
t-interval of the mean at each instant.  A single run is drawn as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from ccsweep.stats import mean_ci_columns

GRID_STEP_S = 0.1


@dataclass
class Run:
    """One repetition's samples of a quantity."""

    t: np.ndarray
    y: np.ndarray

    @classmethod
    def of(cls, t: Sequence[float], y: Sequence[float]) -> Run:
        return cls(np.asarray(t, dtype=float), np.asarray(y, dtype=float))


def plot_band(ax: Axes, runs: Sequence[Run], *, label: str, color: object, step: float = GRID_STEP_S,
              **line: Any) -> Line2D | None:
    """Mean of the runs over their common time span, with a t-interval band when there are several."""
    runs = [r for r in runs if r.t.size]
    if not runs:
        return None
    if len(runs) == 1:
        (handle,) = ax.plot(runs[0].t, runs[0].y, label=label, color=color, **line)
        return handle
    start, end = max(r.t[0] for r in runs), min(r.t[-1] for r in runs)
    grid = np.arange(start, end + step / 2, step) if end > start else np.array([start])
    mean, half = mean_ci_columns(np.vstack([np.interp(grid, r.t, r.y) for r in runs]))
    (handle,) = ax.plot(grid, mean, label=label, color=color, **line)
    if half is not None:
        ax.fill_between(grid, mean - half, mean + half, color=color, alpha=0.2, linewidth=0, label="_ci")
    return handle


def rate_from_cumulative(t: Sequence[float], cumulative: Sequence[float], window_s: float, start: float,
                         end: float) -> Run:
    """Mbit/s in consecutive windows from `start` to `end` of a cumulative byte count (e.g. 1 s bins)."""
    counts = per_window(t, cumulative, window_s, start, end)
    return Run(counts.t, counts.y * 8 / window_s / 1e6)


def per_window(t: Sequence[float], cumulative: Sequence[float], window_s: float, start: float, end: float) -> Run:
    """How much a cumulative count grew in each window from `start` to `end`, at the windows' middles.

    The bin edges are fixed by the caller, not by the series' first sample, so series sampled by
    different clocks (the emulator's capacity counter starts before the flow, the receiver at it)
    share their bins.  Only bins the samples cover are kept: outside them there is no count.
    """
    ts = np.asarray(t, dtype=float)
    edges = np.arange(start, end + 1e-9, window_s)
    if ts.size < 2 or edges.size < 2:
        return Run(np.array([]), np.array([]))
    counts = np.interp(edges, ts, np.asarray(cumulative, dtype=float))
    covered = (edges[:-1] >= ts[0] - 1e-9) & (edges[1:] <= ts[-1] + 1e-9)
    return Run((edges[1:] - window_s / 2)[covered], np.diff(counts)[covered])


def within(run: Run, start: float, end: float) -> Run:
    keep = (run.t >= start) & (run.t <= end)
    return Run(run.t[keep], run.y[keep])
