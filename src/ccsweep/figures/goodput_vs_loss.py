"""Figure kind `goodput-vs-loss`: the BBR paper's Figure 8 and ReBBR's algorithms and RTT experiments.

Goodput over the whole flow (application bytes at the receiver, start-up included, as the paper
measured 60 s flows) against loss on a log axis, and the ideal for that quantity: the payload-rate
ideal (1 - p) x link rate x 1448/1500, since receiver goodput carries no headers and cannot reach
the paper's (1 - p) x link rate.  The quantity ReBBR compared with the paper's line, the bottleneck
throughput, is drawn beside ReBBR's numbers in the `-published` figure.

A second figure, `<name>-limits`, shows what limited the senders: the share of each flow's busy
time it was limited by the receiver's window and by its own send buffer (tcp_info's
rwnd_limited and sndbuf_limited over busy_time, mean over the cell's flows).  That is ReBBR's
diagnosis of Linux's default socket buffers: a BBR flow far below the ideal at a long RTT with a
high rwnd-limited share is held back by the receiver, not by loss.
"""

from __future__ import annotations

from collections.abc import Callable

from ccsweep.cell import CellParams
from ccsweep.figures.lossplot import plot_vs_loss
from ccsweep.figures.section import FigureOut, Section
from ccsweep.figures.style import new_figure
from ccsweep.result import CellResult, FlowResult
from ccsweep.results.data import ExperimentData
from ccsweep.results.points import Point, group_points, rate_label
from ccsweep.results.quantities import GOODPUT, PAYLOAD_IDEAL_LABEL, PAYLOAD_IDEAL_MEANING, payload_ideal_mbps


def ideal_goodput(params: CellParams, loss: float) -> float | None:
    """The payload-rate ideal: the most goodput the link can deliver when a fraction p of packets is lost."""
    rate = params.bandwidth_mbps
    return payload_ideal_mbps(rate, loss) if rate is not None else None


def build(data: ExperimentData) -> Section:
    fig, (ax,) = new_figure()
    points = group_points(data.results)
    several_rates = len({p.params.bandwidth_mbps for p in points}) > 1
    bars = plot_vs_loss(ax, points, GOODPUT.of, loss_direction=data.experiment.loss_direction,
                        ylabel=GOODPUT.axis, ideal=ideal_goodput,
                        ideal_label=lambda p: f"{PAYLOAD_IDEAL_LABEL}, {rate_label(p.bandwidth_mbps or 0)}"
                        if several_rates else PAYLOAD_IDEAL_LABEL)
    ax.set_title(data.title)
    section = Section(figures=[FigureOut(data.name, data.title, fig,
                                         f"{GOODPUT.name.capitalize()}: {GOODPUT.meaning}. Dotted: "
                                         f"{PAYLOAD_IDEAL_MEANING}. Line: median over repetitions; {bars}.")])
    limits = limits_figure(data, points)
    if limits is not None:
        section.figures.append(limits)
    return section


def limited_percent(share: Callable[[FlowResult], float | None]) -> Callable[[CellResult], float | None]:
    """A cell's mean over its flows of a tcp_info limited-time share, in percent (None if no flow has it)."""
    def value(result: CellResult) -> float | None:
        shares = [v for v in (share(f) for f in result.flows) if v is not None]
        return 100 * sum(shares) / len(shares) if shares else None
    return value


RWND_LIMITED = limited_percent(lambda f: f.rwnd_limited_fraction)
SNDBUF_LIMITED = limited_percent(lambda f: f.sndbuf_limited_fraction)


def limits_figure(data: ExperimentData, points: list[Point]) -> FigureOut | None:
    """`<name>-limits`: the rwnd- and sndbuf-limited shares of busy time against loss (None when unrecorded)."""
    if not any(RWND_LIMITED(r) is not None for r in data.results):
        return None
    fig, (rwnd_ax, sndbuf_ax) = new_figure(2, 1, height=6.5, sharex=True)
    bars = plot_vs_loss(rwnd_ax, points, RWND_LIMITED, loss_direction=data.experiment.loss_direction,
                        ylabel="rwnd-limited (% of busy time)")
    plot_vs_loss(sndbuf_ax, points, SNDBUF_LIMITED, loss_direction=data.experiment.loss_direction,
                 ylabel="sndbuf-limited (% of busy time)")
    rwnd_ax.set_xlabel("")
    for ax in (rwnd_ax, sndbuf_ax):
        ax.set_ylim(0, 105)
    title = f"{data.title}: what limited the sender"
    fig.suptitle(title)
    return FigureOut(f"{data.name}-limits", title, fig,
                     "The share of each flow's busy time in which the receiver's window (top) or the sender's own "
                     "buffer (bottom) limited it, from tcp_info (rwnd_limited, sndbuf_limited over busy_time), mean "
                     "over the cell's flows. A flow below the goodput ideal with a high rwnd-limited share is held "
                     f"back by the receive buffer, not by loss (ReBBR's diagnosis of Linux's defaults). {bars}.")
