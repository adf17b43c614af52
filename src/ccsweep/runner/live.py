"""Live samples for an observer (metrics push, progress): once per second of flow time.

Events arrive on the children's reader threads and only update the latest state here; the
runner's main thread calls `tick()` to hand finished seconds to the observer, so a slow or
failing observer never stalls a reader (and never fails the cell: live metrics are a side view).
"""

from __future__ import annotations

import sys
import threading

from ccsweep.cell import Cell
from ccsweep.runner.api import CellObserver, FlowSample, LiveSample
from ccsweep.runner.events import Event, SenderSample
from ccsweep.runner.measure import mbps

PERIOD_S = 1.0


class LiveFeed:
    def __init__(self, cell: Cell, observer: CellObserver | None):
        self.cell = cell
        self.observer = observer
        self._lock = threading.Lock()
        self._rx: list[tuple[float, list[int]]] = []  # (t, cumulative bytes per flow)
        self._samples: dict[int, SenderSample] = {}
        self._stats: Event = {}
        self._next_t = PERIOD_S
        self._warned = False

    def on_receiver(self, event: Event) -> None:
        if event.get("event") == "rx":
            with self._lock:
                self._rx.append((float(event["t"]), list(event["bytes"])))

    def on_sender(self, event: Event) -> None:
        if event.get("event") == "sample":
            sample = SenderSample.from_event(event)
            with self._lock:
                self._samples[sample.flow] = sample

    def on_link(self, event: Event) -> None:
        if event.get("event") == "stats":
            with self._lock:
                self._stats = event

    def tick(self) -> None:
        """Give the observer every whole second of flow time the receiver has counted."""
        if self.observer is None:
            return
        while True:
            with self._lock:
                sample = self._sample_at(self._next_t)
            if sample is None:
                return
            self._next_t += PERIOD_S
            try:
                self.observer.on_sample(self.cell, sample)
            except Exception as exc:  # noqa: BLE001 - a side view must not fail the cell
                if not self._warned:
                    print(f"ccsweep: warning: live metrics: {exc}", file=sys.stderr)
                    self._warned = True

    def _sample_at(self, t: float) -> LiveSample | None:
        now = next((r for r in reversed(self._rx) if r[0] <= t + 1e-9), None)
        if now is None or now[0] < t - 1e-9:
            return None
        before = next((r for r in reversed(self._rx) if r[0] <= t - PERIOD_S + 1e-9), (0.0, [0] * len(now[1])))
        period = now[0] - before[0] or PERIOD_S
        per_flow = [mbps(b - a, period) for a, b in zip(before[1], now[1], strict=True)]
        flows = []
        for index, s in sorted(self._samples.items()):
            flows.append(FlowSample(
                index=index,
                cc=self.cell.params.flows[index].cc,
                rtt_ms=s.rtt_us / 1000,
                cwnd=s.cwnd,
                pacing_rate_bps=float(s.pacing_rate * 8),
                delivery_rate_bps=float(s.delivery_rate * 8),
                retransmits=s.total_retrans,
                goodput_mbps=per_flow[index] if index < len(per_flow) else 0.0,
                bbr_bw_bps=float(s.bbr.bw * 8) if s.bbr else None,
            ))
        up = self._stats.get("uplink", {})
        return LiveSample(
            t=now[0],
            goodput_mbps=sum(per_flow),
            flows=flows,
            queue_bytes=int(up.get("queue_bytes", 0)),
            queue_packets=int(up.get("queue_packets", 0)),
            drops_loss=int(up.get("drops_loss", 0)),
            drops_queue=int(up.get("drops_queue", 0)),
            drops_aqm=int(up.get("drops_aqm", 0)),
            lateness_p99_us=float(self._stats.get("lateness_us", {}).get("p99", 0.0)),
        )
