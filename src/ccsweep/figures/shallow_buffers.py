"""Figure kind `shallow-buffers`: several flows over drop-tail buffers from a fraction of a BDP to many.

For cells of one algorithm (e.g. 4 BBR flows): the bottleneck's loss rate after start-up against
buffer size, one line per algorithm and rate, and the standing queue over time per buffer size (in
BDPs).  For mixed cells (2 BBR + 2 CUBIC): each algorithm's share of the throughput against buffer
size -- the median and quartiles of its per-second share over time, and the mean share's 95 %
t-interval over repetitions.  For both, at the study's 1.75 BDP (or the buffer nearest it), each
flow's throughput and the bottleneck's drop rate in percent per second over time in one run, the
view in which the shallow-buffer study showed BBR's flows and losses cycling.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.colors import to_hex
from matplotlib.ticker import FixedLocator, FormatStrFormatter, NullLocator

from ccsweep.figures.section import FigureOut, Section
from ccsweep.figures.style import IDEAL_STYLE, cc_color, cc_marker, new_figure
from ccsweep.figures.timeplot import Run, per_window, plot_band, rate_from_cumulative, within
from ccsweep.result import CellResult, LinkSeries, TimeSeries
from ccsweep.results import sources
from ccsweep.results.data import ExperimentData
from ccsweep.results.loss import dropped, loss_rate_percent, steady_loss_percent
from ccsweep.results.points import (
    Point,
    bdp_bytes,
    buffer_bdp,
    cc_name,
    group_points,
    group_series,
    series_label,
    varying_facets,
)
from ccsweep.stats import Interval, bars_caption, mean_ci

#: The buffer of the study's per-flow plot, in BDPs.
FOCUS_BDP = 1.75
WINDOW_S = 1.0


def drop_rate_percent(link: LinkSeries, duration_s: float) -> Run | None:
    """Per 1 s bin of the flow, packets dropped on the data direction per packet offered, in percent.

    The study's "drop rate percent per second"; None for a record without offered packets over time.
    """
    if len(link.uplink_in_packets) != len(link.t):
        return None
    drops = per_window(link.t, list(dropped(link)), WINDOW_S, 0, duration_s)
    offered = per_window(link.t, [float(v) for v in link.uplink_in_packets], WINDOW_S, 0, duration_s)
    share = np.divide(100 * drops.y, offered.y, out=np.zeros_like(drops.y), where=offered.y > 0)
    return Run(drops.t, share)


def cell_loss_percent(data: ExperimentData, result: CellResult) -> tuple[float | None, bool]:
    """The cell's loss rate after start-up, or over the whole cell when its series cannot say; and which."""
    steady = steady_loss_percent(result, data.timeseries(result.cell.id))
    return (steady, True) if steady is not None else (loss_rate_percent(result), False)


def per_second_shares(series: TimeSeries, ccs: Sequence[str], start: float, end: float) -> dict[str, np.ndarray]:
    """Each algorithm's share of the bytes received in each whole second of [start, end)."""
    edges = np.arange(np.ceil(start), np.floor(end) + 1e-9, 1.0)
    per_flow = np.vstack([np.diff(np.interp(edges, f.receiver_t, f.receiver_bytes)) for f in series.flows])
    total = per_flow.sum(axis=0)
    busy = total > 0
    return {cc: per_flow[[i for i, c in enumerate(ccs) if c == cc]].sum(axis=0)[busy] / total[busy]
            for cc in dict.fromkeys(ccs)}


def build(data: ExperimentData) -> Section:
    points = group_points(data.results)
    single = [p for p in points if len({f.cc for f in p.params.flows}) == 1]
    mixed = [p for p in points if p not in single]
    section = Section()
    names = iter([data.name, *(f"{data.name}-{suffix}" for suffix in ("share", "share-2", "share-3"))])
    if single:
        loss, whole = _loss_figure(data, single, next(names))
        section.figures.append(loss)
        if whole:
            section.notes.append(f"{whole} cell(s) without offered-packet counts over time: their loss rate is over "
                                 "the whole cell, start-up included.")
        queue = _queue_figure(data, single, f"{data.name}-queue")
        if queue is None:
            section.notes.append("No link time series stored: standing queue not drawn.")
        else:
            section.figures.append(queue)
    for group in group_series(mixed, uplink__queue=None):
        share = _share_figure(data, group, next(names))
        if share is None:
            section.notes.append("No time series stored: throughput shares not drawn.")
        else:
            section.figures.append(share)
    flows = _focus_figure(data, points, f"{data.name}-flows")
    if flows is None:
        section.notes.append("No time series stored: per-flow throughput and drops over time not drawn.")
    else:
        section.figures.append(flows)
    return section


def _buffer_axis(ax: Axes, buffers: Sequence[float]) -> None:
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sorted(set(buffers))))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.set_xlabel("bottleneck buffer (BDP), log scale")


def _loss_figure(data: ExperimentData, points: Sequence[Point], name: str) -> tuple[FigureOut, int]:
    """Loss after start-up against buffer size, and how many cells fell back to their whole-cell rate."""
    fig, (ax,) = new_figure()
    series = group_series(points, uplink__queue=None)
    facets = varying_facets([s[0].params for s in series], skip=("queue",))
    buffers: list[float] = []
    whole = sum(not cell_loss_percent(data, r)[1] for p in points for r in p.results)
    drawn: list[Interval] = []
    for members in series:
        measured = [(buffer_bdp(p.params), p.median_ci(lambda r: cell_loss_percent(data, r)[0])) for p in members]
        rows = sorted(((b, stat) for b, stat in measured if b is not None and stat is not None), key=lambda r: r[0])
        if not rows:
            continue
        drawn += [s for _, s in rows]
        cc = members[0].params.flows[0].cc
        xs, ys = [b for b, _ in rows], [s.center for _, s in rows]
        ax.plot(xs, ys, color=cc_color(cc), marker=cc_marker(cc), label=series_label(members[0].params, facets))
        if any(s.low is not None for _, s in rows):
            ax.errorbar(xs, ys, yerr=np.array([s.errorbar() for _, s in rows]).T, fmt="none", ecolor=cc_color(cc),
                        capsize=3, label="_ci")
        buffers += xs
    _buffer_axis(ax, buffers)
    study = _study_loss_line(ax, points, min(buffers, default=0.25))
    ax.set_ylabel("loss rate at the bottleneck after start-up (%)")
    ax.set_ylim(bottom=0)
    ax.set_title(data.title)
    ax.legend(loc="best")
    return FigureOut(name, data.title, fig, "Drops over packets offered to the bottleneck from the end of the "
                     f"warm-up to the end of the flow; line: median over repetitions; "
                     f"{bars_caption(drawn).removesuffix('; dots: each run')}." + study), whole


def _several_bbr(points: Sequence[Point]) -> bool:
    return any(len(p.params.flows) >= 2 and {f.cc for f in p.params.flows} == {"bbr"} for p in points)


def _study_loss_line(ax: Axes, points: Sequence[Point], smallest: float) -> str:
    """The study's printed peak (up to 12 % below 1.5 BDP, 4 BBR flows) as a reference line; its caption words."""
    if not _several_bbr(points):
        return ""
    numbers = sources.shallow_numbers()
    edge, peak = numbers["edge"], numbers["peak_loss_below_1.5_bdp"]
    # From the smallest buffer drawn (the axis is logarithmic) to the study's edge.
    ax.plot([min(smallest, edge), edge], [peak, peak], label=f"study, published: up to {peak:g} % below {edge:g} BDP",
            **IDEAL_STYLE)
    return (f" Dotted: the most loss {sources.CITATION[sources.SHALLOW]} printed for 4 BBR flows at 80 Mbit/s and "
            f"25 ms below {edge:g} BDP ({peak:g} %), the only number it gives for this plot.")


def _queue_figure(data: ExperimentData, points: Sequence[Point], name: str) -> FigureOut | None:
    """One panel per algorithm and rate: the queue over time at each buffer size."""
    groups = group_series(points, uplink__queue=None)
    facets = varying_facets([g[0].params for g in groups], skip=("queue",))
    fig, axes = new_figure(len(groups), 1, height=3.2 * len(groups), sharex=True)
    cmap = colormaps["viridis"]
    drawn = False
    for ax, group in zip(axes, groups, strict=True):
        ordered = sorted((p for p in group if buffer_bdp(p.params) is not None),
                         key=lambda p: buffer_bdp(p.params) or 0)
        for index, point in enumerate(ordered):
            bdp = bdp_bytes(point.params) or 1.0
            runs = []
            for result in point.results:
                series = data.timeseries(result.cell.id)
                if series is not None and series.link is not None:
                    run = Run.of(series.link.t, [q / bdp for q in series.link.uplink_queue_bytes])
                    runs.append(within(run, 0, point.params.duration_s))
            color = to_hex(cmap(index / max(1, len(ordered) - 1) * 0.9))
            drawn |= plot_band(ax, runs, label=f"{buffer_bdp(point.params):g} BDP buffer", color=color) is not None
        if _several_bbr(group):
            standing = sources.shallow_numbers()["standing_queue"]
            ax.axhline(standing, label=f"study, published: {standing:g} BDP standing", **IDEAL_STYLE)
        ax.set_ylabel("queue (BDP)")
        ax.set_ylim(bottom=0)
        ax.set_title(series_label(group[0].params, facets), fontsize=9)
        ax.legend(loc="upper right", ncols=2, fontsize=7)
    if not drawn:
        return None
    axes[-1].set_xlabel("time since flow start (s)")
    fig.suptitle(f"{data.title}: standing queue")
    return FigureOut(name, f"{data.title}: standing queue", fig,
                     "Bottleneck queue every 100 ms in multiples of the BDP; band: 95 % t-interval. Dotted, on panels "
                     f"of several BBR flows: the standing queue {sources.CITATION[sources.SHALLOW]} printed for 4 BBR "
                     "flows at 80 Mbit/s, 25 ms in a 200,000-byte buffer, \"1.12 BDP\" (its other form, \"28,000 B\", "
                     "is a tenth of that).")


def focus_points(points: Sequence[Point]) -> list[Point]:
    """Per algorithm mix and rate, the point whose buffer is nearest the study's 1.75 BDP."""
    chosen = []
    for group in group_series(points, uplink__queue=None):
        sized = [p for p in group if buffer_bdp(p.params) is not None]
        if sized:
            chosen.append(min(sized, key=lambda p: abs((buffer_bdp(p.params) or 0) - FOCUS_BDP)))
    return chosen


def _focus_figure(data: ExperimentData, points: Sequence[Point], name: str) -> FigureOut | None:
    """Per chosen point, its first stored run: each flow's throughput, and the drops per second."""
    shown = [(point, result, series, series.link) for point in focus_points(points) for result in point.results[:1]
             if (series := data.timeseries(result.cell.id)) is not None and series.link is not None]
    if not shown:
        return None
    facets = varying_facets([point.params for point, _, _, _ in shown], skip=("queue",))
    fig, axes = new_figure(2 * len(shown), 1, height=2.4 * 2 * len(shown), sharex=True)
    for index, (point, result, series, link) in enumerate(shown):
        rate_ax, drop_ax = axes[2 * index], axes[2 * index + 1]
        duration = point.params.duration_s
        ccs = [f.cc for f in point.params.flows]
        for number, (cc, flow) in enumerate(zip(ccs, series.flows, strict=False)):
            run = rate_from_cumulative(flow.receiver_t, flow.receiver_bytes, WINDOW_S, 0, duration)
            shade = ccs[:number].count(cc)
            rate_ax.plot(run.t, run.y, color=cc_color(cc, shade, ccs.count(cc)), drawstyle="steps-mid",
                         label=f"flow {number + 1} ({cc_name(cc)})")
        label = series_label(point.params, facets)
        rate_ax.set(ylabel="Mbit/s", title=f"{label}, {buffer_bdp(point.params):g} BDP buffer, "
                    f"repetition {result.cell.params.repetition}")
        rate_ax.set_ylim(bottom=0)
        rate_ax.legend(loc="upper right", ncols=2, fontsize=7)
        rate = drop_rate_percent(link, duration)
        if rate is not None:
            drop_ax.plot(rate.t, rate.y, color="0.3", drawstyle="steps-mid", label="drop rate")
            drop_ax.set_ylabel("drop rate (% per s)")
        else:  # a record from before offered packets were kept over time: a count is all it has
            drops = per_window(link.t, list(dropped(link)), WINDOW_S, 0, duration)
            drop_ax.plot(drops.t, drops.y / WINDOW_S, color="0.3", drawstyle="steps-mid", label="drops")
            drop_ax.set_ylabel("drops / s (no offered count)")
        drop_ax.set_ylim(bottom=0)
    axes[-1].set_xlabel("time since flow start (s)")
    fig.suptitle(f"{data.title}: flows and drops near {FOCUS_BDP:g} BDP")
    return FigureOut(name, f"{data.title}: flows and drops near {FOCUS_BDP:g} BDP", fig,
                     f"One run per algorithm mix and rate at the buffer nearest {FOCUS_BDP:g} BDP (the study's "
                     "plot): each flow's throughput at the receiver and the drop rate at the bottleneck in percent "
                     "per second, as the study plotted it (packets dropped in each 1 s bin over packets offered in "
                     "it; a record without offered counts over time shows drops per second, and its axis says so).")


def _share_figure(data: ExperimentData, points: Sequence[Point], name: str) -> FigureOut | None:
    fig, (ax,) = new_figure()
    ccs = [f.cc for f in points[0].params.flows]
    stats: dict[str, list[tuple[float, np.ndarray, tuple[float, float | None]]]] = {cc: [] for cc in dict.fromkeys(ccs)}
    for point in points:
        buffer = buffer_bdp(point.params)
        if buffer is None:
            continue
        pooled: dict[str, list[np.ndarray]] = {cc: [] for cc in stats}
        for result in point.results:
            series = data.timeseries(result.cell.id)
            if series is None:
                continue
            for cc, shares in per_second_shares(series, ccs, point.params.warmup_s, point.params.duration_s).items():
                if shares.size:
                    pooled[cc].append(shares)
        for cc, runs in pooled.items():
            if runs:
                quartiles = np.percentile(np.concatenate(runs), [25, 50, 75])
                stats[cc].append((buffer, quartiles, mean_ci([float(r.mean()) for r in runs])))
    if not any(stats.values()):
        return None
    buffers: list[float] = []
    for cc, rows in stats.items():
        rows.sort(key=lambda row: row[0])
        xs = [b for b, _, _ in rows]
        q = np.array([quart for _, quart, _ in rows])
        color = cc_color(cc)
        ax.plot(xs, q[:, 1], color=color, marker=cc_marker(cc), label=f"{cc_name(cc)} median share")
        ax.fill_between(xs, q[:, 0], q[:, 2], color=color, alpha=0.2, linewidth=0, label=f"{cc_name(cc)} 25-75 %")
        means = [m for _, _, (m, _) in rows]
        if any(h is not None for _, _, (_, h) in rows):
            ax.errorbar(xs, means, yerr=[h or 0.0 for _, _, (_, h) in rows], fmt="none", ecolor=color, capsize=3,
                        label="_ci")
        ax.axhline(ccs.count(cc) / len(ccs), color=color, linestyle=":", linewidth=1, label="_fair")
        buffers += xs
    _buffer_axis(ax, buffers)
    ax.set_ylabel("share of throughput (per second)")
    ax.set_ylim(0, 1)
    ax.set_title(f"{data.title}: throughput share")
    ax.legend(loc="best")
    return FigureOut(name, f"{data.title}: throughput share", fig,
                     "Per-second shares after the warm-up: median and quartiles over time (repetitions pooled); "
                     "bars: 95 % t-interval of the mean share; dotted: fair share.")
