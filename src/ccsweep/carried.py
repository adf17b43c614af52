"""What a cell's link is expected to carry, before it runs: the rate its cost follows.

A cell's CPU follows the packets its link carries, not the link's rate: in the full study through
Argo (benchmarks/results/2026-11-30-argo-full) a 100 Mbit/s CUBIC cell at 1 % loss carried
1.5 Mbit/s and its emulator used 0.008 cores, against 0.09 for the same cell at 0.001 %. Pricing
every cell at its link's rate asked as much for the one as for the other. So a cell is priced at
what its flows can carry:

- a loss-based algorithm (LOSS_BASED) is held to its response function at the data direction's
  loss-event rate: the larger of Reno's (Mathis et al., 1997) and CUBIC's (RFC 9438, section 5.1)
  average window per round trip, times LOSS_BASED_MARGIN;
- any other algorithm (BBR and the BPF ones built on it, which keep their rate through loss until a
  cliff that this kernel and ReBBR's place differently, and any algorithm not listed) at the link's
  rate: pricing a cell too high costs packing, too low costs late cells.

Flows share the bottleneck, so the cell carries the sum of its flows, at most the link's rate.
"""

from __future__ import annotations

import math
from typing import Final

from ccsweep.cell import Cell

#: Algorithms that cut their window on every loss event, so that random loss bounds their rate.
LOSS_BASED: Final = frozenset({"reno", "cubic", "bic"})
#: Bytes of payload per segment (a 1500-byte MTU's TCP segment with timestamps).
MSS_BYTES: Final = 1448
#: What the response functions under-state at these flow lengths: a flow's slow start before its
#: first loss carries more than the steady state. In the study through Argo the loss-based cells
#: that the bound held below their link's rate carried at most 3.03 times it (Reno at 0.01 %,
#: 60 s; 114 cells, median 0.70), so 4 prices every one of them at or above what it carried.
LOSS_BASED_MARGIN: Final = 4.0
#: CUBIC's average window is CUBIC_WINDOW_FACTOR * (RTT^3 / p^3)^(1/4) segments with its constants
#: C = 0.4 and beta = 0.7: (C * (3 + beta) / (4 * (1 - beta)))^(1/4).
CUBIC_WINDOW_FACTOR: Final = (0.4 * 3.7 / (4 * 0.3)) ** 0.25


def expected_carried_mbps(cell: Cell, rate_mbps: float) -> float:
    """Mbit/s the cell's flows are expected to carry through a link of `rate_mbps` (at most it)."""
    events = cell.params.uplink.loss_model.loss_event_rate
    rtt_s = cell.params.rtt_ms / 1000
    if events <= 0 or rtt_s <= 0:
        return rate_mbps
    flows = sum(_loss_based_mbps(events, rtt_s) if f.cc in LOSS_BASED else rate_mbps for f in cell.params.flows)
    return min(rate_mbps, flows)


def _loss_based_mbps(events: float, rtt_s: float) -> float:
    """A loss-based flow's rate at `events` loss events per packet and a round trip of `rtt_s`."""
    reno = math.sqrt(1.5 / events)
    cubic = CUBIC_WINDOW_FACTOR * (rtt_s / events) ** 0.75
    return LOSS_BASED_MARGIN * max(reno, cubic) * MSS_BYTES * 8 / rtt_s / 1e6
