"""From the events a cell's processes printed to the result's flow records and time series.

Pure functions over the decoded JSON lines of ccsweep.runner.flow and ccsweep-link (the sender's
samples as typed records, ccsweep.runner.events), so they are tested on small synthetic runs.
Times are seconds since the flows' t0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ccsweep.cell import CellParams
from ccsweep.result import FlowResult, FlowSeries, LinkSeries
from ccsweep.runner.events import Event, SenderSample
from ccsweep.runner.measure import bytes_between, flow_goodput, limited_fraction, mbps, rtt_stats


@dataclass(frozen=True)
class ReceiverCurves:
    """Cumulative bytes per flow at the receiver, sampled at `t`."""

    t: list[float]
    bytes: list[list[int]]  # [flow][sample]

    def total(self) -> list[int]:
        return [sum(column) for column in zip(*self.bytes, strict=True)] if self.bytes else []


def receiver_curves(rx_events: Sequence[Event], flows: int) -> ReceiverCurves:
    t = [float(e["t"]) for e in rx_events]
    return ReceiverCurves(t=t, bytes=[[int(e["bytes"][i]) for e in rx_events] for i in range(flows)])


def samples_of(sender_events: Sequence[Event], index: int) -> list[SenderSample]:
    return [SenderSample.from_event(e) for e in sender_events if e.get("event") == "sample" and e.get("flow") == index]


def flow_result(index: int, params: CellParams, samples: Sequence[SenderSample], curves: ReceiverCurves) -> FlowResult:
    flow = params.flows[index]
    goodput = flow_goodput(curves.t, curves.bytes[index], flow.start_s, params.duration_s, params.warmup_s)
    last = samples[-1] if samples else SenderSample(t=0.0, flow=index)
    rtt = rtt_stats([s.rtt_us for s in samples])
    min_rtt = last.min_rtt_us
    return FlowResult(
        index=index,
        cc=flow.cc,
        start_s=flow.start_s,
        bytes_received=goodput.bytes_received,
        goodput_mbps=goodput.goodput_mbps,
        goodput_steady_mbps=goodput.goodput_steady_mbps,
        throughput_per_s_mbps=goodput.throughput_per_s_mbps,
        retransmits=last.total_retrans,
        rtt_mean_ms=rtt.mean_ms,
        rtt_p50_ms=rtt.p50_ms,
        rtt_p95_ms=rtt.p95_ms,
        min_rtt_ms=round(min_rtt / 1000, 3) if min_rtt else None,
        rwnd_limited_fraction=limited_fraction(last.rwnd_limited_us, last.busy_us),
        sndbuf_limited_fraction=limited_fraction(last.sndbuf_limited_us, last.busy_us),
        delivered_ce=last.delivered_ce,
    )


def cell_goodput(params: CellParams, curves: ReceiverCurves) -> tuple[float, float]:
    """(goodput, steady goodput) of all flows together over the cell's flow time, Mbit/s."""
    total = curves.total()
    whole = mbps(bytes_between(curves.t, total, 0.0, params.duration_s), params.duration_s)
    steady_s = params.duration_s - params.warmup_s
    steady = mbps(bytes_between(curves.t, total, params.warmup_s, params.duration_s), steady_s)
    return round(whole, 4), round(steady, 4)


def flow_series(samples: Sequence[SenderSample], receiver_t: list[float], receiver_bytes: list[int]) -> FlowSeries:
    """Sender samples (rates in bits/s) and the receiver's cumulative bytes of one flow."""
    bbr = [s.bbr for s in samples]
    has_bbr = any(b is not None for b in bbr)
    has_gains = any(b is not None and b.pacing_gain is not None for b in bbr)
    return FlowSeries(
        t=[s.t for s in samples],
        rtt_us=[s.rtt_us for s in samples],
        min_rtt_us=[s.min_rtt_us for s in samples],
        cwnd=[s.cwnd for s in samples],
        pacing_rate_bps=[s.pacing_rate * 8 for s in samples],
        delivery_rate_bps=[s.delivery_rate * 8 for s in samples],
        total_retrans=[s.total_retrans for s in samples],
        bytes_acked=[s.bytes_acked for s in samples],
        bbr_bw_bps=[b.bw * 8 if b else 0 for b in bbr] if has_bbr else None,
        bbr_min_rtt_us=[b.min_rtt_us if b else 0 for b in bbr] if has_bbr else None,
        bbr_pacing_gain=[b.pacing_gain if b and b.pacing_gain is not None else 0.0 for b in bbr] if has_gains else None,
        bbr_cwnd_gain=[b.cwnd_gain if b and b.cwnd_gain is not None else 0.0 for b in bbr] if has_gains else None,
        inflight=[s.inflight or 0 for s in samples] if any(s.inflight is not None for s in samples) else None,
        receiver_t=receiver_t,
        receiver_bytes=receiver_bytes,
    )


def link_series(stats: Sequence[Event], offset_s: float) -> LinkSeries | None:
    """The emulator's stats lines; `offset_s` is the flows' t0 on the emulator's clock."""
    if not stats:
        return None
    up = [s.get("uplink", {}) for s in stats]
    return LinkSeries(
        t=[round(float(s["t"]) - offset_s, 4) for s in stats],
        uplink_queue_bytes=[int(u.get("queue_bytes", 0)) for u in up],
        uplink_queue_packets=[int(u.get("queue_packets", 0)) for u in up],
        uplink_out_bytes=[int(u.get("out_bytes", 0)) for u in up],
        uplink_bottleneck_bytes=[int(u.get("bottleneck_bytes", 0)) for u in up],
        uplink_capacity_bytes=[int(u.get("capacity_bytes", 0)) for u in up],
        uplink_drops_loss=[int(u.get("drops_loss", 0)) for u in up],
        uplink_drops_queue=[int(u.get("drops_queue", 0)) for u in up],
        uplink_drops_aqm=[int(u.get("drops_aqm", 0)) for u in up],
        uplink_in_packets=[int(u.get("in_packets", 0)) for u in up],
        flows_start_s=round(offset_s, 4),
        lateness_p99_us=[float(s.get("lateness_us", {}).get("p99", 0.0)) for s in stats],
    )
