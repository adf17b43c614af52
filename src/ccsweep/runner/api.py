"""What the cell runner promises its callers (the local executor, `ccsweep cell` in a pod).

Kept apart from the implementation so executors, metrics and tests depend on a small surface.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ccsweep.cell import Cell
from ccsweep.result import CellResult, TimeSeries


class CellUnavailable(RuntimeError):
    """This machine cannot run the cell (an algorithm, or the kernel it asks for); nothing was set up."""


class CongestionControlUnavailable(CellUnavailable):
    """The kernel lacks an algorithm the cell asks for; raised before anything is set up."""

    def __init__(self, cc: str, available: list[str]):
        self.cc = cc
        self.available = available
        super().__init__(f"congestion control {cc!r} is not available in this kernel "
                         f"(available: {' '.join(available)})")


class KernelUnavailable(CellUnavailable):
    """The cell is pinned to another kernel release (a `kernels` axis) than this machine runs."""

    def __init__(self, wanted: str, running: str):
        super().__init__(f"the cell asks for kernel {wanted}; this machine runs {running}")


@dataclass(frozen=True)
class FlowSample:
    """One flow at one instant, from the sender's tcp_info (and TCP_CC_INFO for BBR)."""

    index: int
    cc: str
    rtt_ms: float
    cwnd: int
    pacing_rate_bps: float
    delivery_rate_bps: float
    retransmits: int
    goodput_mbps: float  # receiver bytes over the last sample period
    bbr_bw_bps: float | None = None


@dataclass(frozen=True)
class LiveSample:
    """A cell's state about once a second, for live metrics (never needed for the result)."""

    t: float  # seconds since flow start
    goodput_mbps: float  # all flows, last period
    flows: list[FlowSample]
    queue_bytes: int
    queue_packets: int
    drops_loss: int
    drops_queue: int
    drops_aqm: int
    lateness_p99_us: float


class CellObserver(Protocol):
    """Receives live samples while a cell runs (metrics push, progress bars)."""

    def on_sample(self, cell: Cell, sample: LiveSample) -> None: ...


@dataclass
class CellOutput:
    """A finished cell: its record, its time series and extra files (e.g. compressed link logs)."""

    result: CellResult
    timeseries: TimeSeries | None
    files: dict[str, Path] = field(default_factory=dict)
