"""Every link in one figure: the same cells run on ccsweep-link, on Mahimahi (on any link
registered in linkdesc.LINKS), compared as distributions.

A sweep whose cells were run on two links or more (experiments that differ only in `link`, as the
Mahimahi cross-check's) gets a section of its own in the report: a figure that overlays each
link's median goodput with its 95 % bootstrap interval against loss, each link's runs as dots,
and the `ccsweep compare` table of the first link's cells (registry order) against each other
link's (tables/links-compare.csv for two links, links-compare-LINK.csv per other link beyond): n
on each side, the medians, the difference with its interval, the rank test and the verdict.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import PathCollection

from ccsweep.compare import CSV_COLUMNS, QUANTITIES, Comparison, Row, compare, csv_rows, results_side, rule_text
from ccsweep.figures.lossplot import loss_axis
from ccsweep.figures.section import FigureOut, Section, TableOut
from ccsweep.figures.style import cc_marker, new_figure, rasterize_dense, series_colors
from ccsweep.linkdesc import LINKS
from ccsweep.results.data import SweepData
from ccsweep.results.points import series_label, varying_facets
from ccsweep.stats import bars_caption, median_ci

#: Each link's points sit this factor apart from the next link's on the log axis, so the bars do not overlap.
OFFSET = 1.06
#: The line style of each link in registry order (round again past the fourth), and its name in the caption.
LINE_STYLES = (("-", "solid"), ("--", "dashed"), (":", "dotted"), ("-.", "dash-dotted"))


def present_links(data: SweepData) -> tuple[str, ...]:
    """The links the sweep's cells ran on, in registry order (linkdesc.LINKS), from what
    `load_sweep` found without a pass over the records when it can."""
    run = data.links if data.links is not None else {r.cell.params.link for r in data.distinct_results()}
    return tuple(name for name in LINKS if name in run)


def links_heading(links: Sequence[str], what: str = "") -> str:
    """The report section's heading, "Both links: ccsweep-link and Mahimahi" for two links ("All
    links: ..." for more), with `what` after the colon."""
    titles = [LINKS[name].title for name in links]
    listed = " and ".join(titles) if len(titles) < 3 else f"{', '.join(titles[:-1])} and {titles[-1]}"
    return f"{'Both links' if len(titles) == 2 else 'All links'}: {what}{listed}"


def links_comparisons(data: SweepData) -> list[Comparison]:
    """The sweep's cells on its first link (registry order) against the same cells on each other
    link it ran; [] unless two links or more have some (no pass over the records to find out)."""
    links = present_links(data)
    if len(links) < 2:
        return []
    q = QUANTITIES["goodput"]
    results = data.distinct_results()
    sides = [results_side(link, results, q, ("link",), (("link", link),)) for link in links]
    if not all(side.points for side in sides):
        return []
    return [result for side in sides[1:] if (result := compare(sides[0], side, q, ("link",))).rows]


def links_section(data: SweepData) -> Section | None:
    """The overlay figure and a comparison table per link beside the first, or None when the sweep
    has not run two links."""
    comparisons = links_comparisons(data)
    if not comparisons:
        return None
    first, others = comparisons[0].a.label, [c.b.label for c in comparisons]
    section = Section(tables=[TableOut("links-compare" if len(comparisons) == 1 else f"links-compare-{c.b.label}",
                                       f"{LINKS[first].title} against {LINKS[c.b.label].title}, cell by cell "
                                       f"({rule_text(c)})", CSV_COLUMNS, csv_rows(c)) for c in comparisons])
    rows = [r for r in comparisons[0].rows if r.params is not None and len(r.params.flows) == 1]
    if rows:
        fig, (ax,) = new_figure()
        bars = _overlay(ax, rows, comparisons)
        links = [first, *others]
        title = links_heading(links, "median goodput with its interval, ")
        ax.set_title(title)
        styles = "; ".join(f"{'Filled markers' if i == 0 else 'hollow'}, {_style(i)[1]}: {LINKS[link].title}"
                           for i, link in enumerate(links))
        section.figures.append(FigureOut("links-overlay", title, fig,
                                         f"{styles}, each set a little apart on the loss axis. Line: median over "
                                         f"runs; {bars}."))
    for c in comparisons:
        pair = "both links" if len(comparisons) == 1 else f"{LINKS[first].title} and {LINKS[c.b.label].title}"
        counts = c.counts()
        section.notes.append(f"{len(c.rows)} cells on {pair}: {counts['agree']} agree, {counts['differ']} differ, "
                             f"{counts['not settled']} not settled (ccsweep compare; {rule_text(c)}).")
    return section


def _style(index: int) -> tuple[str, str]:
    """The line style of the link at `index` in registry order, and its name."""
    return LINE_STYLES[index % len(LINE_STYLES)]


def _offset(index: int, links: int) -> float:
    """The factor on the loss axis of the link at `index` of `links`: the links spread evenly around
    the point, each OFFSET from the next (1/OFFSET and OFFSET for two)."""
    steps = 2 * index - (links - 1)
    return OFFSET**steps if steps >= 0 else 1 / OFFSET**-steps


def _overlay(ax: Axes, rows: Sequence[Row], comparisons: Sequence[Comparison]) -> str:
    """Per series (the cell apart from its loss), one line a link: the first link's runs from `rows`
    (those of comparisons[0]), each other's from its comparison's row of the same cell; returns
    the caption of the bars."""
    links = [comparisons[0].a.label, *(c.b.label for c in comparisons)]
    others = [{row.summary: row.b for row in c.rows} for c in comparisons]
    series: dict[str, list[Row]] = {}
    for row in rows:
        assert row.params is not None
        key = row.params.model_copy(update={"uplink": row.params.uplink.model_copy(update={"loss": 0.0})})
        series.setdefault(key.model_dump_json(), []).append(row)
    groups = list(series.values())
    params = [g[0].params for g in groups if g[0].params is not None]
    facets = varying_facets(params, skip=("loss",))
    intervals = []
    dots: list[PathCollection] = []
    for members, color, first in zip(groups, series_colors(params), params, strict=True):
        members = sorted(members, key=lambda r: r.params.loss if r.params else 0.0)
        cc = first.flows[0].cc
        for side, link in enumerate(links):
            shown = [(r, r.a if side == 0 else others[side - 1][r.summary]) for r in members
                     if side == 0 or r.summary in others[side - 1]]
            values = [v for _, v in shown]
            stats = [median_ci(v) for v in values]
            intervals += stats
            factor = _offset(side, len(links))
            xs = [r.params.loss * 100 * factor for r, _ in shown if r.params is not None]
            ys = [s.center for s in stats]
            ax.plot(xs, ys, linestyle=_style(side)[0], color=color, marker=cc_marker(cc), markersize=5,
                    markerfacecolor=color if side == 0 else "none", label=f"{series_label(first, facets)}, {link}")
            ax.errorbar(xs, ys, yerr=np.array([s.errorbar() for s in stats]).T, fmt="none", ecolor=color, capsize=3,
                        label="_ci")
            dots.append(ax.scatter([x for x, v in zip(xs, values, strict=True) for _ in v],
                                   [y for v in values for y in v], s=8, color=color, alpha=0.3, linewidths=0,
                                   label="_runs"))
    loss_axis(ax, sorted({r.params.loss for r in rows if r.params is not None}))
    ax.set_ylabel("goodput (Mbit/s)")
    ax.set_ylim(bottom=0)
    ax.legend(loc="best", fontsize=7)
    return bars_caption(intervals) + rasterize_dense(dots)
