"""Figure kind `goodput-vs-loss`: the BBR paper's Figure 8 and ReBBR's algorithms and RTT experiments.

Goodput over the whole flow (application bytes at the receiver, start-up included, as the paper
measured 60 s flows) against loss on a log axis, and the ideal for that quantity: the payload-rate
ideal (1 - p) x link rate x 1448/1500, since receiver goodput carries no headers and cannot reach
the paper's (1 - p) x link rate.  The quantity ReBBR compared with the paper's line, the bottleneck
throughput, is drawn beside ReBBR's numbers in the `-published` figure.
"""

from __future__ import annotations

from ccsweep.cell import CellParams
from ccsweep.figures.data import ExperimentData
from ccsweep.figures.lossplot import plot_vs_loss
from ccsweep.figures.points import group_points, rate_label
from ccsweep.figures.quantities import GOODPUT, PAYLOAD_IDEAL_LABEL, PAYLOAD_IDEAL_MEANING, payload_ideal_mbps
from ccsweep.figures.section import FigureOut, Section
from ccsweep.figures.style import new_figure


def ideal_goodput(params: CellParams, loss: float) -> float | None:
    """The payload-rate ideal: the most goodput the link can deliver when a fraction p of packets is lost."""
    rate = params.bandwidth_mbps
    return payload_ideal_mbps(rate, loss) if rate is not None else None


def build(data: ExperimentData) -> Section:
    fig, (ax,) = new_figure()
    points = group_points(data.results)
    several_rates = len({p.params.bandwidth_mbps for p in points}) > 1
    bars = plot_vs_loss(ax, points, lambda r: r.goodput_mbps, loss_direction=data.experiment.loss_direction,
                 ylabel=GOODPUT.axis, ideal=ideal_goodput,
                 ideal_label=lambda p: f"{PAYLOAD_IDEAL_LABEL}, {rate_label(p.bandwidth_mbps or 0)}" if several_rates
                 else PAYLOAD_IDEAL_LABEL)
    ax.set_title(data.title)
    return Section(figures=[FigureOut(data.name, data.title, fig,
                                      f"{GOODPUT.name.capitalize()}: {GOODPUT.meaning}. Dotted: "
                                      f"{PAYLOAD_IDEAL_MEANING}. Line: median over repetitions; {bars}.")])
