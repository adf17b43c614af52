"""Figure kind `bufferbloat`: RTT over time and its distribution, per algorithm, over a deep buffer.

The BBR paper's claim: a loss-based algorithm fills a deep buffer, so its RTT grows to the
propagation delay plus the buffer's drain time; BBR keeps it near the propagation delay.  Both
limits are drawn as reference lines.  The distribution is a CDF of the smoothed-RTT samples after
the warm-up; with repetitions it is the mean of their quantile curves with a 95 % band.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ccsweep.cell import CellParams
from ccsweep.figures.section import FigureOut, Section
from ccsweep.figures.style import new_figure, series_colors
from ccsweep.figures.timeplot import Run, plot_band, within
from ccsweep.results.data import ExperimentData
from ccsweep.results.points import (
    MSS_BYTES,
    Point,
    bdp_bytes,
    drain_ms,
    group_points,
    group_series,
    series_label,
    varying_facets,
)
from ccsweep.stats import mean_ci_columns

QUANTILES = np.linspace(0, 1, 201)


def full_buffer_rtt_ms(params: CellParams) -> float | None:
    """Propagation RTT plus the time the bottleneck needs to drain a full queue."""
    drain = drain_ms(params)
    return params.rtt_ms + drain if drain is not None else None


def rtt_runs(data: ExperimentData, point: Point) -> list[Run]:
    """Smoothed RTT (ms) of every flow of every repetition; samples before the first ACK are dropped."""
    runs = []
    for result in point.results:
        series = data.timeseries(result.cell.id)
        for flow in series.flows if series else []:
            t = np.asarray(flow.t, dtype=float)
            rtt = np.asarray(flow.rtt_us, dtype=float) / 1000
            keep = rtt > 0
            runs.append(Run(t[keep], rtt[keep]))
    return runs


def build(data: ExperimentData) -> Section:
    section = Section()
    groups = group_series(group_points(data.results), flows=None)
    for index, points in enumerate(groups):
        suffix = "" if len(groups) == 1 else f"-{index + 1}"
        figures = _figures(data, points, data.name + suffix)
        if not figures:
            section.notes.append(f"{data.name + suffix}: no time series stored.")
        section.figures.extend(figures)
    return section


def _figures(data: ExperimentData, points: Sequence[Point], name: str) -> list[FigureOut]:
    time_fig, (time_ax,) = new_figure()
    cdf_fig, (cdf_ax,) = new_figure()
    facets = varying_facets([p.params for p in points])
    drawn = False
    for point, color in zip(points, series_colors([p.params for p in points]), strict=True):
        runs = rtt_runs(data, point)
        label = series_label(point.params, facets)
        drawn |= plot_band(time_ax, runs, label=label, color=color) is not None
        steady = [within(r, point.params.warmup_s, point.params.duration_s) for r in runs]
        _plot_cdf(cdf_ax, [r.y for r in steady if r.y.size], label=label, color=color)
    if not drawn:
        return []
    params = points[0].params
    for ax, horizontal in ((time_ax, True), (cdf_ax, False)):
        line = ax.axhline if horizontal else ax.axvline
        line(params.rtt_ms, color="black", linestyle=":", label="propagation RTT")
        full = full_buffer_rtt_ms(params)
        if full is not None:
            line(full, color="black", linestyle="--", label="full buffer")
        ax.legend(loc="best")
    time_ax.set(xlabel="time since flow start (s)", ylabel="smoothed RTT (ms)", title=data.title)
    time_ax.set_ylim(bottom=0)
    cdf_ax.set(xlabel="smoothed RTT (ms)", ylabel="fraction of samples (CDF)", title=f"{data.title}: RTT distribution")
    cdf_ax.set_ylim(0, 1)
    figures = [FigureOut(name, data.title, time_fig, "Sender's smoothed RTT every 100 ms; band: 95 % t-interval."),
               FigureOut(f"{name}-cdf", f"{data.title}: RTT distribution", cdf_fig,
                         "After the warm-up; with repetitions, the mean quantile curve and its 95 % t-interval.")]
    inflight = _inflight_figure(data, points, f"{name}-inflight")
    return figures + ([inflight] if inflight is not None else [])


def _inflight_figure(data: ExperimentData, points: Sequence[Point], name: str) -> FigureOut | None:
    """The BBR paper's Figure 1 (in ReBBR's slides), measured: RTT and delivery rate against data in flight.

    Each 100 ms sample of each algorithm's first run is a dot: below 1 BDP in flight the RTT stays at
    the propagation delay and the delivery rate grows; above it the rate is the bottleneck's and the
    RTT grows with the queue.  BBR aims at the knee, a loss-based flow at the buffer's end.  Drawn
    only from records that kept the packets in flight (tcp_info), never inferred from other series.
    """
    fig, (rtt_ax, rate_ax) = new_figure(2, 1, height=6.5, sharex=True)
    facets = varying_facets([p.params for p in points])
    drawn = False
    for point, color in zip(points, series_colors([p.params for p in points]), strict=True):
        bdp = bdp_bytes(point.params)
        series = data.timeseries(point.results[0].cell.id) if point.results else None
        for flow in series.flows if series and bdp else []:
            if not flow.inflight or len(flow.inflight) != len(flow.t):
                continue
            x = np.asarray(flow.inflight, dtype=float) * MSS_BYTES / (bdp or 1)
            label = series_label(point.params, facets)
            rtt_ax.scatter(x, np.asarray(flow.rtt_us) / 1000, s=6, color=color, alpha=0.5, label=label)
            rate_ax.scatter(x, np.asarray(flow.delivery_rate_bps) / 1e6, s=6, color=color, alpha=0.5, label=label)
            drawn = True
    if not drawn:
        return None
    params = points[0].params
    rtt_ax.axhline(params.rtt_ms, color="black", linestyle=":", label="propagation RTT")
    if params.bandwidth_mbps is not None:
        rate_ax.axhline(params.bandwidth_mbps, color="black", linestyle=":", label="bottleneck rate")
    for ax in (rtt_ax, rate_ax):
        ax.axvline(1.0, color="0.5", linestyle="--", label="1 BDP in flight")
        ax.set_ylim(bottom=0)
        ax.legend(loc="best", fontsize=7)
    rtt_ax.set_ylabel("smoothed RTT (ms)")
    rate_ax.set(ylabel="delivery rate (Mbit/s)", xlabel="data in flight (BDP; packets x 1448 B)")
    title = f"{data.title}: RTT and delivery rate against data in flight"
    fig.suptitle(title)
    return FigureOut(name, title, fig, "The BBR paper's Figure 1 (shown in ReBBR's slides), measured: each dot is a "
                     "100 ms sample of the first run's sender (tcp_info: packets in flight, smoothed RTT, delivery "
                     "rate). Below 1 BDP in flight the RTT stays at the propagation delay and the rate grows; above "
                     "it the rate is the bottleneck's and the RTT grows with the queue.")


def _plot_cdf(ax, samples: Sequence[np.ndarray], *, label: str, color: object) -> None:
    if not samples:
        return
    curves = np.vstack([np.quantile(s, QUANTILES) for s in samples])
    mean, half = mean_ci_columns(curves)
    ax.plot(mean, QUANTILES, label=label, color=color)
    if half is not None:
        ax.fill_betweenx(QUANTILES, mean - half, mean + half, color=color, alpha=0.2, linewidth=0, label="_ci")
