"""Figure kind `step-response`: the bottleneck rate steps during the flow (BBR paper: 2x up, then down).

Three panels over time: each flow's delivery rate (tcp_info, as the sender measures it), BBR's
bandwidth estimate (TCP_CC_INFO), and the smoothed RTT, with the bottleneck's rate drawn as a
step line so how fast each algorithm follows is visible.  Repetitions: mean and 95 % band.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from matplotlib.axes import Axes

from ccsweep.cell import CellParams
from ccsweep.figures.section import FigureOut, Section
from ccsweep.figures.style import new_figure, series_colors
from ccsweep.figures.timeplot import Run, plot_band
from ccsweep.results.data import ExperimentData
from ccsweep.results.points import Point, group_points, group_series, series_label, varying_facets

RATE_STYLE: dict[str, Any] = {"color": "black", "linestyle": "--", "linewidth": 1.2}


def rate_steps(params: CellParams) -> tuple[list[float], list[float]]:
    """The data direction's bottleneck rate (Mbit/s) over the flow, as step-function corners."""
    base = params.uplink.rate_mbps or 0.0
    times, rates = [0.0], [base]
    for step in sorted(params.uplink.rate_schedule, key=lambda s: s.at_s):
        if step.at_s < params.duration_s:
            times.append(step.at_s)
            rates.append(base * step.factor)
    times.append(params.duration_s)
    rates.append(rates[-1])
    return times, rates


def build(data: ExperimentData) -> Section:
    section = Section()
    groups = group_series(group_points(data.results), flows=None)
    for index, points in enumerate(groups):
        name = data.name if len(groups) == 1 else f"{data.name}-{index + 1}"
        figure = _figure(data, points, name)
        if figure is None:
            section.notes.append(f"{name}: no time series stored.")
        else:
            section.figures.append(figure)
    return section


def _figure(data: ExperimentData, points: Sequence[Point], name: str) -> FigureOut | None:
    fig, (rate_ax, bw_ax, rtt_ax) = new_figure(3, 1, height=7.5, sharex=True)
    facets = varying_facets([p.params for p in points], skip=("schedule",))
    drawn = False
    for point, color in zip(points, series_colors([p.params for p in points]), strict=True):
        per_flow = _flow_runs(data, point)
        for flow, runs in per_flow.items():
            label = series_label(point.params, facets) + (f" #{flow + 1}" if len(per_flow) > 1 else "")
            drawn |= plot_band(rate_ax, runs["delivery"], label=label, color=color) is not None
            plot_band(bw_ax, runs["bbr_bw"], label=label, color=color)
            plot_band(rtt_ax, runs["rtt"], label=label, color=color)
    if not drawn:
        return None
    times, rates = rate_steps(points[0].params)
    for ax in (rate_ax, bw_ax):
        ax.step(times, rates, where="post", label="bottleneck rate", **RATE_STYLE)
    rtt_ax.axhline(points[0].params.rtt_ms, label="propagation RTT", **RATE_STYLE)
    _label(rate_ax, "delivery rate (Mbit/s)")
    _label(bw_ax, "BBR bandwidth estimate (Mbit/s)")
    _label(rtt_ax, "smoothed RTT (ms)")
    rtt_ax.set_xlabel("time since flow start (s)")
    fig.suptitle(data.title)
    return FigureOut(name, data.title, fig, "Sender-side samples every 100 ms; band: 95 % t-interval over repetitions.")


def _flow_runs(data: ExperimentData, point: Point) -> dict[int, dict[str, list[Run]]]:
    """Per flow index: its delivery-rate, BBR-estimate and RTT runs, one per repetition with a time series."""
    flows: dict[int, dict[str, list[Run]]] = {}
    for result in point.results:
        series = data.timeseries(result.cell.id)
        for index, flow in enumerate(series.flows if series else []):
            runs = flows.setdefault(index, {"delivery": [], "bbr_bw": [], "rtt": []})
            runs["delivery"].append(Run.of(flow.t, [b / 1e6 for b in flow.delivery_rate_bps]))
            runs["rtt"].append(Run.of(flow.t, [r / 1000 for r in flow.rtt_us]))
            if flow.bbr_bw_bps is not None:
                runs["bbr_bw"].append(Run.of(flow.t, [b / 1e6 for b in flow.bbr_bw_bps]))
    return flows


def _label(ax: Axes, ylabel: str) -> None:
    ax.set_ylabel(ylabel, fontsize=9)
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper right", fontsize=7)
