"""The three throughputs a cell records, each with one name used everywhere.

One cell has three numbers that could all be called "goodput" (BBR at 5 % loss: 64.3 over the
whole flow, 70.3 in steady state, 71.0 at the bottleneck).  Each gets its own name here, and the
figure axes, report columns, check texts and CSV headers take it from here: the CSV header is the
record's field, the label what a person reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from ccsweep.result import CellResult
from ccsweep.results.points import MSS_BYTES, PACKET_BYTES


@dataclass(frozen=True)
class Quantity:
    field: str
    name: str
    meaning: str

    @property
    def axis(self) -> str:
        return f"{self.name} (Mbit/s)"

    def of(self, result: CellResult) -> float | None:
        value = getattr(result, self.field)
        return None if value is None else float(value)


GOODPUT = Quantity("goodput_mbps", "goodput over the whole flow",
                   "application bytes delivered to the receiver over the flow time, start-up included")
STEADY_GOODPUT = Quantity("goodput_steady_mbps", "steady-state goodput",
                          "application bytes delivered to the receiver after the warm-up")
BOTTLENECK = Quantity("bottleneck_throughput_mbps", "bottleneck throughput",
                      "bytes leaving the bottleneck (IP and TCP headers, retransmissions and packets lost after the "
                      "bottleneck included): what ReBBR plotted as \"goodput\"")
CAPACITY = Quantity("capacity_mbps", "capacity offered", "the delivery opportunities the link offered in the flow time")

QUANTITIES = (GOODPUT, STEADY_GOODPUT, BOTTLENECK, CAPACITY)


#: Payload of a full-sized packet: 1448 of 1500 bytes (20 IP, 20 TCP, 12 of TCP timestamps).
PAYLOAD_SHARE = MSS_BYTES / PACKET_BYTES
#: The ideal line of every goodput figure, and what it bounds.
PAYLOAD_IDEAL_LABEL = "payload-rate ideal (1 − p) × link × 1448/1500"
PAYLOAD_IDEAL_MEANING = ("the payload-rate ideal, (1 − p) × link rate × 1448/1500: the most application bytes a link "
                         "can deliver in full-sized packets (1500 bytes, 52 of them IP and TCP headers with "
                         "timestamps) when a fraction p is lost; receiver goodput cannot reach (1 − p) × link rate")


def payload_ideal_mbps(rate_mbps: float, loss: float) -> float:
    """The most goodput a link of `rate_mbps` can deliver at loss fraction `loss` (PAYLOAD_IDEAL_MEANING)."""
    return (1 - loss) * rate_mbps * PAYLOAD_SHARE
