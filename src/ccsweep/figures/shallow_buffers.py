"""Figure kind `shallow-buffers`: several flows over drop-tail buffers from a fraction of a BDP to many.

For cells of one algorithm (e.g. 4 BBR flows): the bottleneck's loss rate against buffer size,
and the standing queue over time per buffer size (in BDPs).  For mixed cells (2 BBR + 2 CUBIC):
each algorithm's share of the throughput against buffer size -- the median and quartiles of its
per-second share over time, and the mean share's 95 % t-interval over repetitions.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.colors import to_hex
from matplotlib.ticker import FixedLocator, FormatStrFormatter, NullLocator

from ccsweep.figures.data import ExperimentData
from ccsweep.figures.points import (
    Point,
    bdp_bytes,
    buffer_bdp,
    cc_name,
    group_points,
    group_series,
    series_label,
    varying_facets,
)
from ccsweep.figures.section import FigureOut, Section
from ccsweep.figures.stats import mean_ci
from ccsweep.figures.style import cc_color, cc_marker, new_figure
from ccsweep.figures.timeplot import Run, plot_band, within
from ccsweep.result import CellResult, TimeSeries


def loss_rate_percent(result: CellResult) -> float | None:
    """Packets dropped on the data direction (queue, AQM and random loss) per packet offered."""
    if result.link is None or not result.link.uplink.in_packets:
        return None
    up = result.link.uplink
    return 100 * (up.drops_queue + up.drops_aqm + up.drops_loss) / up.in_packets


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
        section.figures.append(_loss_figure(data, single, next(names)))
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
    return section


def _buffer_axis(ax: Axes, buffers: Sequence[float]) -> None:
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sorted(set(buffers))))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.set_xlabel("bottleneck buffer (BDP), log scale")


def _loss_figure(data: ExperimentData, points: Sequence[Point], name: str) -> FigureOut:
    fig, (ax,) = new_figure()
    series = group_series(points, uplink__queue=None)
    facets = varying_facets([s[0].params for s in series], skip=("queue",))
    buffers: list[float] = []
    for members in series:
        measured = [(buffer_bdp(p.params), p.mean_ci(loss_rate_percent)) for p in members]
        rows = sorted((b, stat) for b, stat in measured if b is not None and stat is not None)
        if not rows:
            continue
        cc = members[0].params.flows[0].cc
        xs, ys = [b for b, _ in rows], [s[0] for _, s in rows]
        ax.plot(xs, ys, color=cc_color(cc), marker=cc_marker(cc), label=series_label(members[0].params, facets))
        if any(s[1] is not None for _, s in rows):
            ax.errorbar(xs, ys, yerr=[s[1] or 0.0 for _, s in rows], fmt="none", ecolor=cc_color(cc), capsize=3,
                        label="_ci")
        buffers += xs
    _buffer_axis(ax, buffers)
    ax.set_ylabel("loss rate at the bottleneck (%)")
    ax.set_ylim(bottom=0)
    ax.set_title(data.title)
    ax.legend(loc="best")
    return FigureOut(name, data.title, fig, "Drops over packets offered to the bottleneck; bars: 95 % t-interval.")


def _queue_figure(data: ExperimentData, points: Sequence[Point], name: str) -> FigureOut | None:
    fig, (ax,) = new_figure()
    ordered = sorted((p for p in points if buffer_bdp(p.params) is not None), key=lambda p: buffer_bdp(p.params) or 0)
    cmap = colormaps["viridis"]
    drawn = False
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
    if not drawn:
        return None
    ax.set(xlabel="time since flow start (s)", ylabel="queue at the bottleneck (BDP)",
           title=f"{data.title}: standing queue")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper right", ncols=2)
    return FigureOut(name, f"{data.title}: standing queue", fig,
                     "Bottleneck queue every 100 ms in multiples of the BDP; band: 95 % t-interval.")


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
