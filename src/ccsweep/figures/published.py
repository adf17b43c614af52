"""Published numbers beside measured ones: ReBBR's CSVs of its official figures as labelled series.

An experiment's `published:` names the sets to draw (the ReBBR presets name theirs; `[]` draws
none).  They get a figure of their own, `<experiment>-published`, on the quantity ReBBR published:
its "goodput" is the throughput out of the bottleneck (mm-throughput-graph of the uplink log, so
IP headers, retransmissions and packets dropped after the bottleneck count), which ccsweep records
per cell as `bottleneck_throughput_mbps`.  Beside ccsweep's receiver goodput it would look up to
1 / (1 - p) too good, so the measured series of this figure are that same quantity.  The
capacity-share kind divides both by the capacity, as ReBBR's bandwidth figure did.

The sets themselves, pinned by hash, are in results.published_sets (compare reads them too).  Only the
published series whose algorithm, RTT and bottleneck the experiment has are drawn; the caption
cites the source.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from importlib.resources.abc import Traversable

from ccsweep.cell import CellParams
from ccsweep.compare import QUANTITIES as COMPARED_QUANTITIES
from ccsweep.compare import SideRef, compare, csv_side, pooled, results_side, summary_line
from ccsweep.figures.lossplot import loss_axis, plot_vs_loss
from ccsweep.figures.section import FigureOut, Section
from ccsweep.figures.style import cc_marker, new_figure, series_colors
from ccsweep.result import CellResult
from ccsweep.results.data import ExperimentData
from ccsweep.results.points import cc_name, group_points, loss_series, rate_label
from ccsweep.results.published_sets import KERNEL, SETS, PublishedSet, load
from ccsweep.results.quantities import BOTTLENECK
from ccsweep.results.rebbr_csv import RebbrRow
from ccsweep.spec import Experiment

#: The series' label in every legend.
LABEL = "ReBBR 2017, published"


def _close(value: float, choices: list[float]) -> bool:
    return any(math.isclose(value, c, rel_tol=1e-9) for c in choices)


def matching(published: PublishedSet, rows: list[RebbrRow], experiment: Experiment) -> list[RebbrRow]:
    """The rows of the experiment's own settings: a single flow of one of its algorithms, one of its
    RTTs, and its bottleneck (one of its rates, or the trace the set's runs used)."""
    single = {mix[0].cc for mix in experiment.flow_mixes() if len(mix) == 1 and mix[0].count == 1}
    if published.trace_uplink is not None:
        if not any(t.uplink == published.trace_uplink for t in experiment.trace or []):
            return []
    elif experiment.bandwidth_mbps is None:
        return []
    return [row for row in rows if row.congestion_control in single and _close(row.rtt_ms, experiment.rtt_ms)
            and (published.trace_uplink is not None or _close(row.specified_bw_Mbps, experiment.bandwidth_mbps or []))]


SeriesKey = tuple[str, float, float | None]


def _key(cc: str, rtt_ms: float, rate_mbps: float | None) -> SeriesKey:
    """A series apart from loss, rounded so that the CSV's 0.01 and a cell's 0.01 meet."""
    return cc, round(rtt_ms, 6), None if rate_mbps is None else round(rate_mbps, 6)


def _key_of_params(params: CellParams) -> SeriesKey | None:
    if len(params.flows) != 1 or params.delay_scheduled:  # a published RTT is fixed
        return None
    return _key(params.flows[0].cc, params.rtt_ms, params.uplink.rate_mbps)


def _key_of_row(row: RebbrRow, published: PublishedSet) -> SeriesKey:
    return _key(row.congestion_control, row.rtt_ms, None if published.trace_uplink else row.specified_bw_Mbps)


@dataclass(frozen=True)
class Quantity:
    """What the figure's y axis is, for a measured cell and for a published row, and its ceiling."""

    ylabel: str
    measured: Callable[[CellResult], float | None]
    published: Callable[[RebbrRow], float]
    #: The most the quantity can be on a cell's link (None where the link has no rate).
    ceiling: Callable[[CellParams, float], float | None]
    ceiling_label: str


THROUGHPUT = Quantity(BOTTLENECK.axis, BOTTLENECK.of, lambda row: row.goodput_Mbps,
                      lambda params, _loss: params.bandwidth_mbps, "link rate (bottleneck throughput's ceiling)")


def _share(result: CellResult) -> float | None:
    capacity = result.capacity_mbps or result.cell.params.bandwidth_mbps
    if result.bottleneck_throughput_mbps is None or not capacity:
        return None
    return result.bottleneck_throughput_mbps / capacity


#: ReBBR's bandwidth figure: its "goodput" over the capacity offered (its normalized_goodput).
SHARE = Quantity(f"{BOTTLENECK.name} / capacity offered", _share,
                 lambda row: row.goodput_Mbps / row.bandwidth_Mbps, lambda _params, _loss: 1.0,
                 "the whole capacity (bottleneck throughput's ceiling)")

QUANTITIES: dict[str, Quantity] = {"goodput-vs-loss": THROUGHPUT, "cellular": THROUGHPUT,
                                   "capacity-share-vs-loss": SHARE}


def published_section(data: ExperimentData, folder: Traversable | None = None) -> Section:
    """The `<experiment>-published` figure (or a note saying why there is none) for an experiment
    whose spec names published sets."""
    experiment = data.experiment
    quantity = QUANTITIES[experiment.figure]
    sets = [SETS[name] for name in experiment.published]
    drawn = [(s, rows) for s in sets if (rows := matching(s, load(s, folder), experiment))]
    if not drawn:
        return Section(notes=[f"Published numbers ({', '.join(experiment.published)}): no series has this "
                              "experiment's algorithms, RTTs and bottleneck; none drawn."])
    fig, (ax,) = new_figure()
    points = group_points(data.results)
    bars = plot_vs_loss(ax, points, quantity.measured, loss_direction=experiment.loss_direction, ylabel=quantity.ylabel,
                        ideal=quantity.ceiling, ideal_label=lambda _params: quantity.ceiling_label)
    series = loss_series(points, experiment.loss_direction)
    colors = {_key_of_params(s[0].params): c for s, c in
              zip(series, series_colors([s[0].params for s in series]), strict=True)}
    for published, rows in drawn:
        by_series: dict[SeriesKey, list[RebbrRow]] = {}
        for row in rows:
            by_series.setdefault(_key_of_row(row, published), []).append(row)
        rtts = {key[1] for key in by_series}
        rates = {key[2] for key in by_series}
        for (cc, rtt, rate), members in by_series.items():
            facets = ([f"{rtt:g} ms"] if len(rtts) > 1 else []) + ([rate_label(rate)] if len(rates) > 1 and rate
                                                                    else [])
            label = f"{LABEL}: {cc_name(cc)}" + (f" ({', '.join(facets)})" if facets else "")
            members = sorted(members, key=lambda row: row.loss_rate)
            ax.plot([row.loss_rate * 100 for row in members], [quantity.published(row) for row in members],
                    color=colors.get((cc, rtt, rate), "0.3"), marker=cc_marker(cc), markersize=5,
                    markerfacecolor="none", linestyle="--", linewidth=1, label=label)
    # The published losses join the axis's ticks, and the limits take in the published values.
    losses = {p.params.loss for p in points} | {row.loss_rate for _, rows in drawn for row in rows}
    loss_axis(ax, sorted(losses))
    ax.relim()
    ax.autoscale_view()
    ax.set_ylim(bottom=0)
    ax.legend(loc="best")
    title = f"{data.title}: beside ReBBR's published numbers"
    ax.set_title(title)
    sources = "; ".join(f"{s.experiment}: {s.source}" for s, _ in drawn)
    caption = (f"Solid: measured here, the {BOTTLENECK.name} over the flow ({BOTTLENECK.meaning}). Dashed, hollow: "
               f"{LABEL}, numbers only, one run per point on {KERNEL} under Mahimahi, from {sources}. Dotted: the "
               f"{quantity.ceiling_label}; ReBBR compared this quantity with the paper's (1 − p) × link rate, which "
               "bounds the bytes that survive the loss, not the bytes leaving the bottleneck before it. Measured: "
               f"median over repetitions; {bars}.")
    return Section(figures=[FigureOut(f"{data.name}-published", title, fig, caption)],
                   notes=[comparison_note(data, published) for published, _ in drawn
                          if experiment.figure != "capacity-share-vs-loss"])


def comparison_note(data: ExperimentData, published: PublishedSet) -> str:
    """What `ccsweep compare` says of the experiment's cells against the published set, in one line."""
    quantity = COMPARED_QUANTITIES["bottleneck-throughput"]
    ours = results_side(data.name, data.results, quantity, ())
    result = compare(ours, csv_side(SideRef("published", published.name), quantity), quantity)
    overall = pooled(result)
    return (f"ccsweep compare {data.name} published:{published.name} (the {BOTTLENECK.name}): "
            f"{summary_line(result)}" + (f"; {overall}" if overall else "") + ".")
