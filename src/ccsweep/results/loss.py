"""A cell's loss on the data direction, from its record and its stored series.

Read by the shallow-buffers figure, which draws it, and by the claim checks, which judge it: here,
so that neither imports the other.
"""

from __future__ import annotations

import numpy as np

from ccsweep.result import CellResult, LinkSeries, TimeSeries


def loss_rate_percent(result: CellResult) -> float | None:
    """Packets dropped on the data direction (queue, AQM, policer and random loss) per packet offered,
    whole cell."""
    if result.link is None or not result.link.uplink.in_packets:
        return None
    up = result.link.uplink
    return 100 * (up.drops_queue + up.drops_aqm + up.drops_policer + up.drops_loss) / up.in_packets


def dropped(link: LinkSeries) -> np.ndarray:
    """Cumulative packets dropped on the data direction by the queue, the AQM and random loss."""
    return np.add.reduce([np.asarray(c, dtype=float) for c in
                          (link.uplink_drops_queue, link.uplink_drops_aqm, link.uplink_drops_loss)])


def steady_loss_percent(result: CellResult, series: TimeSeries | None) -> float | None:
    """Drops per packet offered between the end of the warm-up and the end of the flow.

    Start-up overshoots small and large buffers alike, so its losses say nothing of the steady
    state the study measured; None for a record whose series does not count offered packets.
    """
    link = series.link if series is not None else None
    if link is None or len(link.uplink_in_packets) != len(link.t) or len(link.t) < 2:
        return None
    p = result.cell.params
    window = np.array([p.warmup_s, p.duration_s])
    offered = np.diff(np.interp(window, link.t, link.uplink_in_packets))[0]
    lost = np.diff(np.interp(window, link.t, dropped(link)))[0]
    return float(100 * lost / offered) if offered > 0 else None
