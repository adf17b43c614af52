"""Both links in one figure: cells run on ccsweep-link and on Mahimahi, compared as distributions.

A sweep whose cells were run on both links (experiments that differ only in `link`, as the
Mahimahi cross-check's) gets a section of its own in the report: a figure that overlays each
link's median goodput with its 95 % bootstrap interval against loss, each link's runs as dots,
and the `ccsweep compare` table of the same cells (tables/links-compare.csv): n on each side,
the medians, the difference with its interval, the rank test and the verdict.
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
from ccsweep.results.data import SweepData
from ccsweep.results.points import series_label, varying_facets
from ccsweep.stats import bars_caption, median_ci

LINKS = ("ccsweep-link", "mahimahi")
#: Each link's points sit this factor left or right of their loss on the log axis, so the bars do not overlap.
OFFSET = 1.06


def links_comparison(data: SweepData) -> Comparison | None:
    """The sweep's cells on ccsweep-link against the same cells on Mahimahi; None unless both have some."""
    results = data.distinct_results()
    run = data.links if data.links is not None else {r.cell.params.link for r in results}
    if not all(link in run for link in LINKS):  # no pass over the records, nor a point per setting held for it
        return None
    q = QUANTITIES["goodput"]
    sides = [results_side(link, results, q, ("link",), (("link", link),)) for link in LINKS]
    if not all(side.points for side in sides):
        return None
    result = compare(sides[0], sides[1], q, ("link",))
    return result if result.rows else None


def links_section(data: SweepData) -> Section | None:
    """The overlay figure and the comparison table, or None when the sweep has not run both links."""
    result = links_comparison(data)
    if result is None:
        return None
    rows = [r for r in result.rows if r.params is not None and len(r.params.flows) == 1]
    title = f"ccsweep-link against Mahimahi, cell by cell ({rule_text(result)})"
    section = Section(tables=[TableOut("links-compare", title, CSV_COLUMNS, csv_rows(result))])
    if rows:
        fig, (ax,) = new_figure()
        bars = _overlay(ax, rows)
        title = "Both links: median goodput with its interval, ccsweep-link and Mahimahi"
        ax.set_title(title)
        section.figures.append(FigureOut("links-overlay", title, fig,
                                         f"Filled markers, solid: ccsweep-link; hollow, dashed: Mahimahi, each set a "
                                         f"little apart on the loss axis. Line: median over runs; {bars}."))
    counts = result.counts()
    section.notes.append(f"{len(result.rows)} cells on both links: {counts['agree']} agree, {counts['differ']} differ, "
                         f"{counts['not settled']} not settled (ccsweep compare; {rule_text(result)}).")
    return section


def _overlay(ax: Axes, rows: Sequence[Row]) -> str:
    """Per series (the cell apart from its loss), one line a link; returns the caption of the bars."""
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
        for side, (link, factor, style) in enumerate((("ccsweep-link", 1 / OFFSET, "-"), ("mahimahi", OFFSET, "--"))):
            values = [r.a if side == 0 else r.b for r in members]
            stats = [median_ci(v) for v in values]
            intervals += stats
            xs = [r.params.loss * 100 * factor for r in members if r.params is not None]
            ys = [s.center for s in stats]
            ax.plot(xs, ys, linestyle=style, color=color, marker=cc_marker(cc), markersize=5,
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
