"""The sender's `sample` lines (ccsweep.runner.flow) as one typed record, decoded in one place.

The sender prints what the kernel's struct tcp_info gave (a field an older kernel lacks is absent)
and, for BBR, its own estimate. The result record (collect.py) and the live feed (live.py) read
the same fields, so they read them from this record and agree on defaults and units.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: One decoded JSON line of an endpoint or the emulator, before it is read as a record.
Event = dict[str, Any]


@dataclass(frozen=True)
class BbrEstimate:
    """BBR's own view (TCP_CC_INFO): bandwidth estimate in bytes/s, min RTT in us, and its pacing and
    cwnd gains, which show its state machine (start-up 2.89, drain 0.35, ProbeBW's 1.25/0.75/1 cycle);
    None where a sample did not carry them."""

    bw: int
    min_rtt_us: int
    pacing_gain: float | None = None
    cwnd_gain: float | None = None


@dataclass(frozen=True)
class SenderSample:
    """One flow at one instant, `t` seconds after t0. Rates are bytes/s as the kernel gives them;
    the *_us counters are None where the kernel does not report them."""

    t: float
    flow: int
    rtt_us: int = 0
    min_rtt_us: int = 0
    cwnd: int = 0
    pacing_rate: int = 0
    delivery_rate: int = 0
    total_retrans: int = 0
    bytes_acked: int = 0
    busy_us: int | None = None
    rwnd_limited_us: int | None = None
    sndbuf_limited_us: int | None = None
    delivered_ce: int | None = None
    bbr: BbrEstimate | None = None
    #: Packets in flight as the kernel counts them (tcp_packets_in_flight: unacked - sacked - lost +
    #: retrans); None from a sampler that did not read those counters.
    inflight: int | None = None

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> SenderSample:
        """The record of one decoded JSON line (`{"event": "sample", ...}`)."""
        def counter(name: str) -> int | None:
            value = event.get(name)
            return None if value is None else int(value)

        bbr = event.get("bbr")
        return cls(
            t=float(event["t"]), flow=int(event["flow"]),
            rtt_us=int(event.get("rtt_us", 0)), min_rtt_us=int(event.get("min_rtt_us", 0)),
            cwnd=int(event.get("cwnd", 0)), pacing_rate=int(event.get("pacing_rate", 0)),
            delivery_rate=int(event.get("delivery_rate", 0)), total_retrans=int(event.get("total_retrans", 0)),
            bytes_acked=int(event.get("bytes_acked", 0)), busy_us=counter("busy_us"),
            rwnd_limited_us=counter("rwnd_limited_us"), sndbuf_limited_us=counter("sndbuf_limited_us"),
            delivered_ce=counter("delivered_ce"), inflight=_inflight(event),
            bbr=BbrEstimate(bw=int(bbr["bw"]), min_rtt_us=int(bbr["min_rtt_us"]), pacing_gain=_gain(bbr, "pacing_gain"),
                            cwnd_gain=_gain(bbr, "cwnd_gain")) if bbr else None,
        )


def _gain(bbr: Mapping[str, Any], name: str) -> float | None:
    value = bbr.get(name)
    return None if value is None else float(value)


def _inflight(event: Mapping[str, Any]) -> int | None:
    counters = [event.get(name) for name in ("unacked", "sacked", "lost", "retrans")]
    if any(value is None for value in counters):
        return None
    unacked, sacked, lost, retrans = (int(v) for v in counters)  # type: ignore[arg-type]
    return max(0, unacked - sacked - lost + retrans)
