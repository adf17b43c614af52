"""Figure kind `loss-table`: per-second throughput statistics per algorithm, loss rate and path.

The table is what pandas' describe() prints for the per-second throughput of a flow (count,
mean, std, min, quartiles, max), seconds after the warm-up, repetitions and flows pooled.  Where
the grid has a loss-free cell, each row also gives its mean's % change against that baseline (same
path and algorithm), as ThousandEyes' tables report it; with repetitions a column adds the 95 %
t-interval of the mean over repetitions.  The figure shows
the same numbers: mean with that interval, and the interquartile band, one panel per path, with
the payload-rate ideal of the panel's link (the seconds count application bytes).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.axes import Axes

from ccsweep.figures.section import FigureOut, Section, TableOut
from ccsweep.figures.style import IDEAL_STYLE, cc_color, cc_marker, new_figure
from ccsweep.result import CellResult
from ccsweep.results import sources
from ccsweep.results.data import ExperimentData
from ccsweep.results.points import Point, cc_name, flows_label, group_points, loss_series, path_label
from ccsweep.results.quantities import PAYLOAD_IDEAL_LABEL, PAYLOAD_IDEAL_MEANING, payload_ideal_mbps
from ccsweep.spec import LossDirection
from ccsweep.stats import mean_ci

COLUMNS = ["path", "algorithm", "loss (%)", "seconds", "mean", "std", "min", "25%", "50%", "75%", "max"]
CHANGE_COLUMN = "% change vs baseline"


def steady_seconds(result: CellResult) -> list[float]:
    """Per-second throughput (Mbit/s) of every flow, for the seconds that start after the warm-up."""
    warmup = result.cell.params.warmup_s
    return [value for flow in result.flows for k, value in enumerate(flow.throughput_per_s_mbps)
            if flow.start_s + k >= warmup]


def describe(values: Sequence[float]) -> list[float]:
    data = np.asarray(values, dtype=float)
    std = float(data.std(ddof=1)) if data.size > 1 else float("nan")
    return [float(data.mean()), std, float(data.min()), *map(float, np.percentile(data, [25, 50, 75])),
            float(data.max())]


def point_mean(point: Point) -> float | None:
    """Mean per-second throughput of a point, its repetitions' seconds pooled."""
    seconds = [v for r in point.results for v in steady_seconds(r)]
    return float(np.mean(seconds)) if seconds else None


def baselines(points: Sequence[Point], loss_direction: LossDirection) -> dict[int, float]:
    """Per point (by id), the mean of the loss-free point of its series (same path, algorithm and link)."""
    found: dict[int, float] = {}
    for series in loss_series(points, loss_direction):
        base = next((point_mean(p) for p in series if p.params.loss == 0), None)
        if base:
            found.update({id(p): base for p in series})
    return found


def percent_change(value: float, base: float) -> float:
    return 100 * (value - base) / base


def build(data: ExperimentData) -> Section:
    points = group_points(data.results)
    repeated = any(len(p.results) > 1 for p in points)
    base = baselines(points, data.experiment.loss_direction)
    rows: list[list[object]] = []
    paths: dict[str, list[Point]] = {}
    for point in sorted(points, key=lambda p: (path_label(p.params) != "symmetric", path_label(p.params))):
        paths.setdefault(path_label(point.params), []).append(point)
    for path, members in paths.items():
        for point in sorted(members, key=lambda p: (flows_label(p.params), p.params.loss)):
            seconds = [v for r in point.results for v in steady_seconds(r)]
            if not seconds:
                continue
            row: list[object] = [path, flows_label(point.params), round(point.params.loss * 100, 6), len(seconds),
                                 *(round(v, 3) for v in describe(seconds))]
            if base:
                row.append(round(percent_change(float(np.mean(seconds)), base[id(point)]), 1)
                           if id(point) in base else "")
            if repeated:
                mean, half = mean_ci([float(np.mean(steady_seconds(r))) for r in point.results if steady_seconds(r)])
                row.append(f"{mean:.3f} ± {half:.3f}" if half is not None else f"{mean:.3f}")
            rows.append(row)
    columns = COLUMNS + ([CHANGE_COLUMN] if base else []) + (["mean, 95 % CI over repetitions"] if repeated else [])
    table = TableOut(data.name, f"{data.title}: per-second throughput (Mbit/s)", columns, rows)
    return Section(figures=[_figure(data, paths)], tables=[table])


#: ThousandEyes' baselines (868.50 and 827.20 Mbit/s) suggest 1 Gbit/s links: its numbers are drawn
#: beside cells of that rate only.
THOUSANDEYES_RATE_MBPS = 1000.0


def _thousandeyes(ax: Axes, members: list[Point], path: str) -> bool:
    """ThousandEyes' published means on a panel of 1 Gbit/s single-flow cells (symmetric or asymmetric)."""
    if not any(p.params.bandwidth_mbps == THOUSANDEYES_RATE_MBPS and len(p.params.flows) == 1 for p in members):
        return False
    topology = "symmetric" if path == "symmetric" else "asymmetric"
    published = [row for row in sources.thousandeyes() if row.topology == topology]
    for cc in sorted({row.algorithm for row in published} & {p.params.flows[0].cc for p in members}):
        rows = sorted((row for row in published if row.algorithm == cc), key=lambda row: row.loss_percent)
        ax.plot([row.loss_percent for row in rows], [row.mean for row in rows], color=cc_color(cc),
                marker=cc_marker(cc), markerfacecolor="none", linestyle="--", linewidth=1,
                label=f"ThousandEyes, published: {cc_name(cc)} mean ({topology})")
    return True


def _ideal(ax: Axes, members: list[Point]) -> None:
    """The payload-rate ideal over the panel's losses, per constant link rate it holds."""
    rates = sorted({p.params.bandwidth_mbps for p in members if p.params.bandwidth_mbps})
    losses = sorted({p.params.loss for p in members})
    for rate in rates:
        label = PAYLOAD_IDEAL_LABEL + (f", {rate:g} Mbit/s" if len(rates) > 1 else "")
        ax.plot([loss * 100 for loss in losses], [payload_ideal_mbps(rate, loss) for loss in losses], label=label,
                **IDEAL_STYLE)


def _figure(data: ExperimentData, paths: dict[str, list[Point]]) -> FigureOut:
    fig, axes = new_figure(1, len(paths), width=4.2 * len(paths) + 1, sharex=True, sharey=True)
    overlaid = False
    for ax, (path, members) in zip(axes, paths.items(), strict=True):
        for series in loss_series(members, data.experiment.loss_direction):
            cc = series[0].params.flows[0].cc
            color = cc_color(cc)
            rows = []
            for point in sorted(series, key=lambda p: p.params.loss):
                seconds = [v for r in point.results for v in steady_seconds(r)]
                means = [float(np.mean(s)) for s in (steady_seconds(r) for r in point.results) if s]
                if seconds:
                    rows.append((point.params.loss * 100, *np.percentile(seconds, [25, 75]), mean_ci(means)))
            if not rows:
                continue
            xs = [r[0] for r in rows]
            ys = [r[3][0] for r in rows]
            ax.plot(xs, ys, color=color, marker=cc_marker(cc), label=f"{cc_name(cc)} mean")
            ax.fill_between(xs, [r[1] for r in rows], [r[2] for r in rows], color=color, alpha=0.2, linewidth=0,
                            label=f"{cc_name(cc)} 25-75 %")
            if any(r[3][1] is not None for r in rows):
                ax.errorbar(xs, ys, yerr=[r[3][1] or 0.0 for r in rows], fmt="none", ecolor=color, capsize=3,
                            label="_ci")
        _ideal(ax, members)
        overlaid |= _thousandeyes(ax, members, path)
        ax.set_yscale("log")
        ax.set(xlabel="loss rate (%)", title=path)
        ax.legend(loc="best", fontsize=7)
    axes[0].set_ylabel("per-second throughput (Mbit/s), log scale")
    fig.suptitle(data.title)
    caption = ("Mean per-second throughput after the warm-up with its 95 % t-interval over repetitions; "
               f"band: interquartile range of the seconds. Dotted: {PAYLOAD_IDEAL_MEANING}.")
    if overlaid:
        caption += (f" Dashed, hollow: the means {sources.CITATION[sources.THOUSANDEYES]} printed (BBR: its Tables "
                    "1, 2, 5 and 6; CUBIC: the means its text quotes from its Part 1, at 0 and 1 % only), per-second "
                    "iperf3 readings of an unstated number of runs on paths whose RTT it does not print; drawn on "
                    "this figure's panels by topology.")
    return FigureOut(data.name, data.title, fig, caption)
