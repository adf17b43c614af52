"""Figure kind `goodput-vs-loss`: the BBR paper's Figure 8 and ReBBR's algorithms and RTT experiments.

Goodput (application bytes at the receiver over the whole flow, start-up included, as the paper
measured 60 s flows) against loss on a log axis, and the ideal (1 - p) x link rate the paper drew.
"""

from __future__ import annotations

from ccsweep.cell import CellParams
from ccsweep.figures.data import ExperimentData
from ccsweep.figures.lossplot import plot_vs_loss
from ccsweep.figures.points import group_points, rate_label
from ccsweep.figures.section import FigureOut, Section
from ccsweep.figures.style import new_figure


def ideal_goodput(params: CellParams, loss: float) -> float | None:
    """(1 - p) x link rate: the most a flow can deliver when a fraction p of packets is lost."""
    rate = params.bandwidth_mbps
    return (1 - loss) * rate if rate is not None else None


def build(data: ExperimentData) -> Section:
    fig, (ax,) = new_figure()
    points = group_points(data.results)
    several_rates = len({p.params.bandwidth_mbps for p in points}) > 1
    bars = plot_vs_loss(ax, points, lambda r: r.goodput_mbps, loss_direction=data.experiment.loss_direction,
                 ylabel="goodput (Mbit/s)", ideal=ideal_goodput,
                 ideal_label=lambda p: f"ideal (1 − p) × {rate_label(p.bandwidth_mbps or 0)}" if several_rates
                 else "ideal (1 − p) × link rate")
    ax.set_title(data.title)
    return Section(figures=[FigureOut(data.name, data.title, fig,
                                      f"Goodput over the whole flow; line: median over repetitions; {bars}.")])
