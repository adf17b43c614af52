"""Measurements of a cell from what its processes recorded: pure functions, no I/O but log reading.

Two throughputs are kept apart on purpose (see docs/ and the ReBBR notes):
- goodput: application bytes the receiver got within the flow time, over the flow time;
- ReBBR's "bottleneck throughput": bytes leaving the bottleneck in the uplink link log (headers,
  retransmissions and packets lost after the bottleneck included), over the whole run.

Receiver counts arrive as cumulative bytes sampled every 100 ms; bytes within a window are read
off that curve by linear interpolation, so windows need not fall on sample instants.

numpy is imported inside the functions that use it: the runner imports this module before the
flows start, and in a CPU-limited cell pod numpy's import alone (75 ms of CPU here) delays the
first byte by a tenth of a second or more; the functions run after the flows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path


def mbps(nbytes: float, seconds: float) -> float:
    return nbytes * 8 / seconds / 1e6 if seconds > 0 else 0.0


def bytes_between(t: Sequence[float], cumulative: Sequence[int], start: float, end: float) -> float:
    """Bytes received in [start, end], from cumulative counts sampled at times t (ascending)."""
    if not t or end <= start:
        return 0.0
    import numpy as np  # here, not at the top: see the module docstring

    return float(np.interp(end, t, cumulative) - np.interp(start, t, cumulative))


def per_second_mbps(t: Sequence[float], cumulative: Sequence[int], start: float, end: float) -> list[float]:
    """Throughput in each whole second [start + k, start + k + 1) that fits before `end`."""
    seconds = math.floor(end - start + 1e-9)
    return [round(mbps(bytes_between(t, cumulative, start + k, start + k + 1), 1.0), 4) for k in range(seconds)]


@dataclass(frozen=True)
class FlowGoodput:
    bytes_received: int
    goodput_mbps: float
    goodput_steady_mbps: float
    throughput_per_s_mbps: list[float]


def flow_goodput(t: Sequence[float], cumulative: Sequence[int], start_s: float, duration_s: float,
                 warmup_s: float) -> FlowGoodput:
    """One flow, alive from its start_s to the cell's end; the steady part skips the cell's warm-up.

    The warm-up counts from the cell's start (not the flow's), so the steady windows of flows that
    start together or staggered cover the same seconds, which is what capacity shares compare.
    """
    received = bytes_between(t, cumulative, start_s, duration_s)
    steady_start = max(start_s, warmup_s)
    steady = (mbps(bytes_between(t, cumulative, steady_start, duration_s), duration_s - steady_start)
              if steady_start < duration_s else mbps(received, duration_s - start_s))
    return FlowGoodput(
        bytes_received=round(received),
        goodput_mbps=round(mbps(received, duration_s - start_s), 4),
        goodput_steady_mbps=round(steady, 4),
        throughput_per_s_mbps=per_second_mbps(t, cumulative, start_s, duration_s),
    )


@dataclass(frozen=True)
class LinkLogTotals:
    """Bytes of each kind of line of a Mahimahi link log within a window of log time."""

    window_ms: int
    arrival_bytes: int = 0
    departure_bytes: int = 0
    capacity_bytes: int = 0
    drop_bytes: int = 0
    arrival_packets: int = 0
    departure_packets: int = 0
    drop_packets: int = 0

    @property
    def bottleneck_throughput_mbps(self) -> float:
        return mbps(self.departure_bytes, self.window_ms / 1000)

    @property
    def capacity_mbps(self) -> float:
        return mbps(self.capacity_bytes, self.window_ms / 1000)


def link_log_totals(lines: Iterable[str], start_ms: int, end_ms: int) -> LinkLogTotals:
    """Sum the `+` (arrival), `-` (departure), `#` (opportunity) and `d` (drop) lines in [start, end).

    Lines are `t + bytes`, `t - bytes delay`, `t # bytes`, `t d packets bytes`; `#` lines starting
    a line are the header.  Mahimahi's mm-throughput-graph reads capacity from `#` and throughput
    from `-` lines the same way.
    """
    sums = {"+": 0, "-": 0, "#": 0, "d": 0}
    packets = {"+": 0, "-": 0, "#": 0, "d": 0}
    for line in lines:
        if not line or line[0] == "#":
            continue
        fields = line.split()
        if len(fields) < 3:
            continue
        t = int(fields[0])
        if start_ms <= t < end_ms and fields[1] in sums:
            sums[fields[1]] += int(fields[3] if fields[1] == "d" else fields[2])
            packets[fields[1]] += int(fields[2]) if fields[1] == "d" else 1
    return LinkLogTotals(window_ms=end_ms - start_ms, arrival_bytes=sums["+"], departure_bytes=sums["-"],
                         capacity_bytes=sums["#"], drop_bytes=sums["d"], arrival_packets=packets["+"],
                         departure_packets=packets["-"], drop_packets=packets["d"])


def read_link_log(path: Path, start_ms: int, end_ms: int) -> LinkLogTotals:
    with open(path, errors="replace") as lines:
        return link_log_totals(lines, start_ms, end_ms)


@dataclass(frozen=True)
class RttStats:
    mean_ms: float | None
    p50_ms: float | None
    p95_ms: float | None


def rtt_stats(rtt_us: Sequence[int]) -> RttStats:
    """Smoothed-RTT statistics over the samples (zeros, before the first ACK, are skipped)."""
    import numpy as np  # here, not at the top: see the module docstring

    values = np.array([v for v in rtt_us if v > 0], dtype=float) / 1000
    if values.size == 0:
        return RttStats(None, None, None)
    return RttStats(round(float(values.mean()), 3), round(float(np.percentile(values, 50)), 3),
                    round(float(np.percentile(values, 95)), 3))


def limited_fraction(limited_us: int | None, busy_us: int | None) -> float | None:
    """Share of the busy time a flow spent limited (by the receive window or the send buffer)."""
    if limited_us is None or not busy_us:
        return None
    return round(min(1.0, limited_us / busy_us), 4)
