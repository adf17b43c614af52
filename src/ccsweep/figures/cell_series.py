"""Small multiples of one cell's 100 ms series: what each flow's sender saw, beside the cell's row in the report.

A goodput-vs-loss figure gives one number per cell; the series stored with it (tcp_info every
100 ms and BBR's TCP_CC_INFO) show how the number came about: a flow stuck in start-up, BBR's
ProbeRTT dips every 10 s, CUBIC's saw-tooth, a receive window that caps the congestion window.
Panels: congestion window, smoothed RTT, delivery rate, and BBR's bandwidth estimate and pacing
gain where a flow is BBR (the gain shows start-up, drain and ProbeBW's 1.25/0.75 cycle; ProbeRTT is
the cwnd's dip to 4 packets every 10 s).  One small PNG per stored cell with a series, stored as
cells/<id>.png beside the report and linked from its row; PNG only, at a low resolution, so
hundreds of cells stay cheap.
"""

from __future__ import annotations

import io

import numpy as np

from ccsweep.figures.style import cc_color, context, new_figure
from ccsweep.result import CellResult, TimeSeries
from ccsweep.results.points import cc_name, cell_summary

DPI = 72
#: (panel label, field of FlowSeries, scale to the label's unit)
PANELS = (("cwnd (packets)", "cwnd", 1.0), ("smoothed RTT (ms)", "rtt_us", 1e-3),
          ("delivery rate (Mbit/s)", "delivery_rate_bps", 1e-6),
          ("BBR bandwidth estimate (Mbit/s)", "bbr_bw_bps", 1e-6), ("BBR pacing gain", "bbr_pacing_gain", 1.0))


def image_name(cell_id: str) -> str:
    return f"cells/{cell_id}.png"


def cell_png(result: CellResult, series: TimeSeries) -> bytes | None:
    """The cell's small multiples as PNG bytes; None when its series hold no sender samples."""
    flows = [f for f in series.flows if f.t]
    if not flows:
        return None
    panels = [p for p in PANELS if any(getattr(f, p[1]) for f in flows)]
    with context():
        fig, axes = new_figure(len(panels), 1, width=6.0, height=1.3 * len(panels) + 0.6, sharex=True)
        ccs = [f.cc for f in result.cell.params.flows]
        for ax, (label, field, scale) in zip(axes, panels, strict=True):
            for index, flow in enumerate(flows):
                values = getattr(flow, field)
                if not values or len(values) != len(flow.t):
                    continue
                cc = ccs[index] if index < len(ccs) else "?"
                shade = ccs[:index].count(cc)
                ax.plot(flow.t, np.asarray(values, dtype=float) * scale, linewidth=0.8,
                        color=cc_color(cc, shade, max(ccs.count(cc), 1)),
                        label=f"flow {index + 1} ({cc_name(cc)})")
            ax.set_ylabel(label, fontsize=7)
            ax.tick_params(labelsize=7)
            ax.set_ylim(bottom=0)
        axes[0].legend(fontsize=6, loc="upper right", ncols=min(len(flows), 4))
        axes[-1].set_xlabel("time since flow start (s)", fontsize=7)
        fig.suptitle(cell_summary(result.cell.params), fontsize=8)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()
