"""Figure kind `capacity-share-vs-loss`: ReBBR's bandwidth experiment, goodput / capacity against loss.

Dividing by the capacity the link offered (measured by the emulator over the flow time, or the
nominal rate when the record has no measurement) puts 10 kbit/s and 100 Mbit/s on one axis.
"""

from __future__ import annotations

from ccsweep.cell import CellParams
from ccsweep.figures.data import ExperimentData
from ccsweep.figures.lossplot import plot_vs_loss
from ccsweep.figures.points import group_points
from ccsweep.figures.section import FigureOut, Section
from ccsweep.figures.style import new_figure
from ccsweep.result import CellResult


def capacity_share(result: CellResult) -> float | None:
    capacity = result.capacity_mbps or result.cell.params.bandwidth_mbps
    if result.goodput_mbps is None or not capacity:
        return None
    return result.goodput_mbps / capacity


def build(data: ExperimentData) -> Section:
    fig, (ax,) = new_figure()

    def ideal(params: CellParams, loss: float) -> float:
        return 1 - loss

    bars = plot_vs_loss(ax, group_points(data.results), capacity_share, loss_direction=data.experiment.loss_direction,
                 ylabel="goodput / capacity", ideal=ideal,
                 ideal_label=lambda p: "ideal (1 − p)")
    ax.set_ylim(0, 1.05)
    ax.set_title(data.title)
    return Section(figures=[FigureOut(data.name, data.title, fig,
                                      "Goodput over the capacity offered during the flow; line: median over "
                                      f"repetitions; {bars}.")])
