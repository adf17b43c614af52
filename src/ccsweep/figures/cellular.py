"""Figure kind `cellular`: ReBBR's cellular experiment over Mahimahi's Verizon LTE traces.

Goodput over the whole flow against loss with the payload-rate ideal (1 - p) x the trace's mean
capacity x 1448/1500; the capacity the trace
offered over time with what each algorithm delivered (at the lowest loss rate), Mahimahi's
throughput-graph view; and at the same loss rate each packet's queueing delay at the bottleneck
over time and its distribution, Mahimahi's delay-graph view.  All come from stored results: the
capacity is the emulator's delivery-opportunity counter, sampled every 100 ms during the cell, not
the trace file, and the delays are the departure lines of the cell's stored uplink log.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ccsweep.cell import CellParams
from ccsweep.figures.lossplot import plot_vs_loss
from ccsweep.figures.section import FigureOut, Section
from ccsweep.figures.style import cc_color, new_figure
from ccsweep.figures.timeplot import plot_band, rate_from_cumulative
from ccsweep.gunzip import NotGzip, TooLarge
from ccsweep.results.data import ExperimentData
from ccsweep.results.linklog import departure_delays
from ccsweep.results.points import Point, flows_label, group_points, rate_label
from ccsweep.results.quantities import GOODPUT, PAYLOAD_IDEAL_MEANING, payload_ideal_mbps

WINDOW_S = 1.0
UPLINK_LOG = "uplink.log.gz"
#: mm-throughput-graph reports this percentile of the per-packet queueing delay.
DELAY_PERCENTILE = 95


def mean_capacity(points: Sequence[Point]) -> float | None:
    values = [v for p in points for v in p.values(lambda r: r.capacity_mbps)]
    return float(np.mean(values)) if values else None


def build(data: ExperimentData) -> Section:
    points = group_points(data.results)
    capacity = mean_capacity(points)
    section = Section()
    fig, (ax,) = new_figure()

    def ideal(params: CellParams, loss: float) -> float | None:
        return payload_ideal_mbps(capacity, loss) if capacity is not None else None

    bars = plot_vs_loss(ax, points, lambda r: r.goodput_mbps, loss_direction=data.experiment.loss_direction,
                 ylabel=GOODPUT.axis, ideal=ideal,
                 ideal_label=lambda p: "payload-rate ideal (1 − p) × mean capacity "
                 f"{rate_label(round(capacity or 0, 2))} × 1448/1500")
    ax.set_title(data.title)
    section.figures.append(FigureOut(data.name, data.title, fig,
                                     f"{GOODPUT.name.capitalize()}: {GOODPUT.meaning}. "
                                     f"Dotted: {PAYLOAD_IDEAL_MEANING}, "
                                     "with the capacity measured in the cells for the link rate. "
                                     f"Line: median over repetitions; {bars}."))
    over_time = _capacity_over_time(data, points)
    if over_time is None:
        section.notes.append("No link time series stored: capacity over time not drawn.")
    else:
        section.figures.append(over_time)
    delays = _delay_figures(data, points, section.notes)
    if delays is None:
        section.notes.append("No uplink log (with the flows' start on its clock) stored: per-packet delay not drawn.")
    else:
        section.figures.extend(delays)
    return section


def packet_delays(data: ExperimentData, point: Point, notes: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each stored run's (time since flow start, queueing delay ms) per departing packet, within the
    flow; a run whose log unpacks past its bound (linklog.MAX_LINK_LOG_BYTES) or is not gzip is left
    out, said in `notes`."""
    runs = []
    for result in point.results:
        series = data.timeseries(result.cell.id)
        start_s = series.link.flows_start_s if series is not None and series.link is not None else None
        log = data.load_file(result.cell.id, UPLINK_LOG) if start_s is not None else None
        if start_s is not None and log is not None:
            try:
                runs.append(departure_delays(log, start_s * 1000, (start_s + point.params.duration_s) * 1000))
            except (TooLarge, NotGzip) as exc:
                notes.append(f"Cell {result.cell.id}: its stored uplink log: {exc}; its packet delays are not drawn.")
    return runs


def _delay_figures(data: ExperimentData, points: Sequence[Point],
                   notes: list[str]) -> tuple[FigureOut, FigureOut] | None:
    """Per algorithm at the lowest loss rate: each packet's delay over time, and the delays' distribution."""
    lowest = min(p.params.loss for p in points)
    chosen = [(point, runs) for point in points if point.params.loss == lowest
              if (runs := packet_delays(data, point, notes))]
    if not chosen:
        return None
    over_time, axes = new_figure(len(chosen), 1, height=2.6 * len(chosen), sharex=True, sharey=True)
    cdf, (cax,) = new_figure()
    for ax, (point, runs) in zip(axes, chosen, strict=True):
        color = cc_color(point.params.flows[0].cc)
        label = flows_label(point.params)
        t, delay = runs[0]
        # One point per packet (hundreds of thousands over a trace period): drawn as pixels even in
        # the SVG, where a vector mark each made the report tens of megabytes.
        ax.plot(t, delay, color=color, linestyle="none", marker=".", markersize=1.5, label=f"{label}, one run",
                rasterized=True)
        pooled = np.sort(np.concatenate([d for _, d in runs]))
        high = float(np.percentile(pooled, DELAY_PERCENTILE)) if pooled.size else 0.0
        ax.axhline(high, color="0.3", linestyle="--", linewidth=1,
                   label=f"{DELAY_PERCENTILE}th percentile {high:.0f} ms ({len(runs)} run(s))")
        ax.set(ylabel="queueing delay (ms)", title=f"{label}, {lowest * 100:g} % loss")
        ax.set_ylim(bottom=0)
        ax.legend(loc="upper right", fontsize=7)
        cax.plot(pooled, np.arange(1, pooled.size + 1) / pooled.size, color=color, label=label)
    axes[-1].set_xlabel("time since flow start (s)")
    over_time.suptitle(f"{data.title}: per-packet queueing delay")
    cax.set(xlabel="queueing delay at the bottleneck (ms)", ylabel="fraction of packets",
            title=f"{data.title}: queueing delay distribution, {lowest * 100:g} % loss")
    cax.set_ylim(0, 1)
    cax.set_xlim(left=0)
    cax.legend(loc="lower right")
    return (FigureOut(f"{data.name}-delay", f"{data.title}: per-packet queueing delay", over_time,
                      "Each packet's wait at the bottleneck (arrival to departure, whole ms, from the uplink "
                      "log), one run; dashed: the percentile mm-throughput-graph reports, over all runs."),
            FigureOut(f"{data.name}-delay-cdf", f"{data.title}: queueing delay distribution", cdf,
                      "Cumulative distribution of the per-packet queueing delay within the flow, runs pooled."))


def _capacity_over_time(data: ExperimentData, points: Sequence[Point]) -> FigureOut | None:
    """Per algorithm at the lowest loss rate: the capacity its cells saw, and their throughput (1 s bins)."""
    lowest = min(p.params.loss for p in points)
    chosen = [p for p in points if p.params.loss == lowest]
    fig, axes = new_figure(len(chosen), 1, height=2.6 * len(chosen), sharex=True)
    drawn = False
    for ax, point in zip(axes, chosen, strict=True):
        duration = point.params.duration_s
        capacity_runs, throughput_runs = [], []
        for result in point.results:
            series = data.timeseries(result.cell.id)
            if series is None or series.link is None:
                continue
            capacity_runs.append(rate_from_cumulative(series.link.t, series.link.uplink_capacity_bytes, WINDOW_S,
                                                      0, duration))
            flows = series.flows
            total = np.sum([np.asarray(f.receiver_bytes, dtype=float) for f in flows], axis=0)
            throughput_runs.append(rate_from_cumulative(flows[0].receiver_t, total, WINDOW_S, 0, duration))
        if not capacity_runs:
            continue
        drawn = True
        plot_band(ax, capacity_runs, label="capacity (trace)", color="0.45", drawstyle="steps-mid")
        cc = point.params.flows[0].cc
        plot_band(ax, throughput_runs, label=f"{flows_label(point.params)} throughput", color=cc_color(cc))
        ax.set_ylabel("Mbit/s")
        ax.set_ylim(bottom=0)
        ax.set_title(f"{flows_label(point.params)}, {lowest * 100:g} % loss", fontsize=9)
        ax.legend(loc="upper right")
    if not drawn:
        return None
    axes[-1].set_xlabel("time since flow start (s)")
    fig.suptitle(f"{data.title}: capacity over time")
    return FigureOut(f"{data.name}-capacity", f"{data.title}: capacity over time", fig,
                     "Capacity offered by the trace and throughput at the receiver, 1 s bins; band: 95 % t-interval.")

