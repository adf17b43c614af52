"""Figure kind `capacity-share-vs-loss`: ReBBR's bandwidth experiment, goodput over the whole flow / capacity vs loss.

Dividing by the capacity the link offered (measured by the emulator over the flow time, or the
nominal rate when the record has no measurement) puts 10 kbit/s and 100 Mbit/s on one axis; the
ideal is the payload share of the link, (1 - p) x 1448/1500.
"""

from __future__ import annotations

from ccsweep.cell import CellParams
from ccsweep.figures.lossplot import plot_vs_loss
from ccsweep.figures.section import FigureOut, Section
from ccsweep.figures.style import new_figure
from ccsweep.result import CellResult
from ccsweep.results.data import ExperimentData
from ccsweep.results.points import group_points
from ccsweep.results.quantities import GOODPUT, PAYLOAD_IDEAL_MEANING, payload_ideal_mbps


def capacity_share(result: CellResult) -> float | None:
    capacity = result.capacity_mbps or result.cell.params.bandwidth_mbps
    if result.goodput_mbps is None or not capacity:
        return None
    return result.goodput_mbps / capacity


def build(data: ExperimentData) -> Section:
    fig, (ax,) = new_figure()

    def ideal(params: CellParams, loss: float) -> float:
        return payload_ideal_mbps(1.0, loss)

    bars = plot_vs_loss(ax, group_points(data.results), capacity_share, loss_direction=data.experiment.loss_direction,
                 ylabel=f"{GOODPUT.name} / capacity offered", ideal=ideal,
                 ideal_label=lambda p: "payload-rate ideal (1 − p) × 1448/1500")
    ax.set_ylim(0, 1.05)
    ax.set_title(data.title)
    return Section(figures=[FigureOut(data.name, data.title, fig,
                                      f"{GOODPUT.name.capitalize()} ({GOODPUT.meaning}) over the capacity offered "
                                      f"during the flow. Dotted: {PAYLOAD_IDEAL_MEANING}, as a share of the link. "
                                      f"Line: median over repetitions; {bars}.")])
