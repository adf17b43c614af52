"""The x-axis ReBBR and the BBR paper use: loss rate in percent on a log scale, one line per series.

Shared by the goodput, capacity-share and cellular figures.  A series is the points of one
setting of every other axis; its median over repetitions is drawn as a line and, where a point
repeats, every run as a dot and the 95 % bootstrap interval of the median as an error bar: a cell
with two modes shows both, where a mean would sit between them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import PathCollection
from matplotlib.ticker import FixedLocator, FormatStrFormatter, NullLocator

from ccsweep.cell import CellParams
from ccsweep.figures.style import IDEAL_STYLE, cc_marker, rasterize_dense, series_colors
from ccsweep.result import CellResult
from ccsweep.results.points import Point, loss_series, series_label, varying_facets
from ccsweep.spec import LossDirection
from ccsweep.stats import Interval, bars_caption

Value = Callable[[CellResult], float | None]
#: The ideal value at a loss fraction for a series, or None where there is none.
Ideal = Callable[[CellParams, float], float | None]


def plot_vs_loss(ax: Axes, points: Sequence[Point], value: Value, *, loss_direction: LossDirection, ylabel: str,
                 ideal: Ideal | None = None, ideal_label: Callable[[CellParams], str] | None = None) -> str:
    """One line per series (median over repetitions, bootstrap-interval bars, runs as dots), and the ideal per
    distinct ideal curve.  Returns the caption of the bars (what they are, with the n behind them)."""
    series = loss_series(points, loss_direction)
    facets = varying_facets([s[0].params for s in series], skip=("loss",))
    colors = series_colors([s[0].params for s in series])
    losses: set[float] = set()
    ideals: dict[str, tuple[list[float], list[float]]] = {}
    drawn: list[Interval] = []
    dots: list[PathCollection] = []
    for members, color in zip(series, colors, strict=True):
        params = members[0].params
        cc = params.flows[0].cc
        measured = sorted(((p.params.loss, p.median_ci(value), p.values(value)) for p in members),
                          key=lambda row: row[0])
        rows = [(loss, stat, runs) for loss, stat, runs in measured if stat is not None]
        if not rows:
            continue
        drawn += [stat for _, stat, _ in rows]
        xs = [loss * 100 for loss, _, _ in rows]
        ys = [stat.center for _, stat, _ in rows]
        ax.plot(xs, ys, color=color, marker=cc_marker(cc), markersize=5, label=series_label(params, facets))
        if any(stat.low is not None for _, stat, _ in rows):
            bars = np.array([stat.errorbar() for _, stat, _ in rows]).T
            ax.errorbar(xs, ys, yerr=bars, fmt="none", ecolor=color, capsize=3, label="_ci")
            run_x = [x for x, (_, _, runs) in zip(xs, rows, strict=True) for _ in runs]
            run_y = [v for _, _, runs in rows for v in runs]
            dots.append(ax.scatter(run_x, run_y, s=9, color=color, alpha=0.35, linewidths=0, label="_runs"))
        losses.update(loss for loss, _, _ in rows)
        if ideal is not None:
            label = ideal_label(params) if ideal_label else "ideal"
            curve = ideals.setdefault(label, ([], []))
            for loss, _, _ in rows:
                target = ideal(params, loss)
                if target is not None and loss * 100 not in curve[0]:
                    curve[0].append(loss * 100)
                    curve[1].append(target)
    for label, (xs, ys) in ideals.items():
        order = np.argsort(xs)
        ax.plot(np.take(xs, order), np.take(ys, order), label=label, **IDEAL_STYLE)
    loss_axis(ax, sorted(losses))
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.legend(loc="best")
    return bars_caption(drawn) + rasterize_dense(dots)


def loss_axis(ax: Axes, losses: list[float]) -> None:
    """Log x (symlog when a cell has no loss) with a tick at each loss rate, as ReBBR drew it."""
    positive = [p * 100 for p in losses if p > 0]
    if len(positive) < len(losses):
        ax.set_xscale("symlog", linthresh=min(positive, default=0.001))
    else:
        ax.set_xscale("log")
    if 0 < len(losses) <= 16:
        ax.xaxis.set_major_locator(FixedLocator([p * 100 for p in losses]))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.tick_params(axis="x", labelrotation=90)
    ax.set_xlabel("loss rate (%), log scale")
