"""One look for every figure, and rendering to PNG and SVG bytes.

Figures are plain `matplotlib.figure.Figure` objects on the Agg canvas, never pyplot: no global
state, nothing to close, safe in a long-running operator.  Output is made reproducible (no dates
in the SVG, a fixed id salt), so rebuilding figures from the same results gives the same bytes.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PathCollection
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.text import Text

from ccsweep.cell import CellParams

matplotlib.use("Agg")

#: Fixed colours per algorithm (ReBBR's: BBR red, CUBIC blue), so every figure agrees.
CC_COLORS = {"bbr": "#d62728", "cubic": "#1f77b4", "reno": "#2ca02c", "bic": "#9467bd", "vegas": "#8c564b",
             "westwood": "#e377c2"}
OTHER_COLORS = ["#17becf", "#bcbd22", "#ff7f0e", "#7f7f7f"]
CC_MARKERS = {"bbr": "x", "cubic": "o", "reno": "s", "bic": "^", "vegas": "v", "westwood": "D"}
IDEAL_STYLE: dict[str, Any] = {"color": "black", "linestyle": ":", "linewidth": 1.5}
# Keys typed Any: matplotlib's stubs accept only a literal union of every rc key.
RC: dict[Any, Any] = {"font.size": 10, "axes.grid": True, "grid.alpha": 0.3, "legend.fontsize": 8,
                      "svg.hashsalt": "ccsweep", "svg.fonttype": "path"}


def cc_color(cc: str, shade: int = 0, shades: int = 1) -> tuple[float, float, float]:
    """The algorithm's colour; with several series of one algorithm, lighter to darker shades of it."""
    base = CC_COLORS.get(cc) or OTHER_COLORS[sum(map(ord, cc)) % len(OTHER_COLORS)]
    rgb = to_rgb(base)
    if shades <= 1:
        return rgb
    strength = 0.35 + 0.65 * shade / (shades - 1)
    return tuple(1 - strength * (1 - c) for c in rgb)  # type: ignore[return-value]


def series_colors(params: Sequence[CellParams]) -> list[tuple[float, float, float]]:
    """A colour per series: its first flow's algorithm, in shades when one algorithm has several series."""
    ccs = [p.flows[0].cc for p in params]
    totals = Counter(ccs)
    seen: Counter[str] = Counter()
    colors = []
    for cc in ccs:
        colors.append(cc_color(cc, seen[cc], totals[cc]))
        seen[cc] += 1
    return colors


def cc_marker(cc: str) -> str:
    return CC_MARKERS.get(cc, ".")


#: Runs drawn as dots on one plot above which the dots are one image in the SVG, not a shape each.
#: A dot is some 150 bytes of SVG: a sweep of 40,000 cells drew 40,000 on a plot, 5-10 MiB figures
#: whose writing and embedding grew the figures step by some 40 MiB. Above 2,000 the dots are a
#: cloud at the figure's size anyway; the lines, bars and markers stay vector, and the PNG is the same.
DENSE_DOTS = 2000


def rasterize_dense(dots: Sequence[PathCollection]) -> str:
    """Draw a plot's per-run dots as an image in the SVG when there are more than DENSE_DOTS of them;
    returns what the caption adds to say so ("" when they stay shapes)."""
    count = sum(np.shape(collection.get_offsets())[0] for collection in dots)
    if count <= DENSE_DOTS:
        return ""
    for collection in dots:
        collection.set_rasterized(True)
    return f" (the {count:,} dots are drawn as an image in the SVG: more than {DENSE_DOTS:,} on one plot)"


def context() -> AbstractContextManager[None]:
    """The style, for building and for rendering (rc settings apply when artists are made and saved)."""
    return matplotlib.rc_context(RC)


def new_figure(rows: int = 1, cols: int = 1, *, width: float = 7.5, height: float = 4.5, sharex: bool = False,
               sharey: bool = False) -> tuple[Figure, list[Axes]]:
    """A figure with its axes as a flat list (one per panel)."""
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, sharex=sharex, sharey=sharey, squeeze=False)
    return fig, [ax for row in axes for ax in row]


def render(fig: Figure) -> dict[str, bytes]:
    """PNG (150 dpi) and SVG bytes of a figure.

    Titles wrap at the figure's edges: an experiment's title is free text from its spec, and a
    long one centred over the figure was cut off at both ends.
    """
    for title in [*(ax.title for ax in fig.axes), *(a for a in fig.get_children() if isinstance(a, Text))]:
        title.set_wrap(True)
    out = {}
    with context():
        # No software version or date in the files: a figure rebuilt from the same results is the same file.
        formats = (("png", {"dpi": 150, "metadata": {"Software": None}}), ("svg", {"metadata": {"Date": None}}))
        for fmt, extra in formats:
            buffer = io.BytesIO()
            fig.savefig(buffer, format=fmt, **extra)
            out[fmt] = buffer.getvalue()
    return out
