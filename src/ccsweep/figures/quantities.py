"""The three throughputs a cell records, each with one name used everywhere.

One cell has three numbers that could all be called "goodput" (BBR at 5 % loss: 64.3 over the
whole flow, 70.3 in steady state, 71.0 at the bottleneck).  Each gets its own name here, and the
figure axes, report columns, check texts and CSV headers take it from here: the CSV header is the
record's field, the label what a person reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from ccsweep.result import CellResult


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
