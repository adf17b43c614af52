"""What the cell runner promises its callers (the local executor, `ccsweep cell` in a pod).

Kept apart from the implementation so executors, metrics and tests depend on a small surface.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ccsweep.bpfregister import registered_digests
from ccsweep.cell import Cell
from ccsweep.result import CellResult, TimeSeries


class CellUnavailable(RuntimeError):
    """This machine cannot run the cell (an algorithm, or the kernel it asks for); nothing was set up."""


class CongestionControlUnavailable(CellUnavailable):
    """The kernel lacks algorithms the cell asks for; raised before anything is set up."""

    def __init__(self, ccs: list[str], available: list[str]):
        self.ccs = ccs
        self.available = available
        names = ", ".join(repr(cc) for cc in ccs)
        verb = "is" if len(ccs) == 1 else "are"
        super().__init__(f"congestion control {names} {verb} not available in this kernel "
                         f"(available: {' '.join(available)})")


class BpfProgramUnregistered(CellUnavailable):
    """A BPF congestion control the cell is pinned to is not registered here from that very object."""

    def __init__(self, name: str, wanted: str, registered: str | None):
        self.name = name
        where = ("is not registered by ccsweep on this machine (`ccsweep run` registers what a sweep needs)"
                 if registered is None else f"is registered from another object (sha256 {registered[:16]})")
        super().__init__(f"congestion control {name!r} {where}; the cell is pinned to sha256 {wanted[:16]}")


class KernelUnavailable(CellUnavailable):
    """The cell is pinned to another kernel release (a `kernels` axis) than this machine runs."""

    def __init__(self, wanted: str, running: str):
        super().__init__(f"the cell asks for kernel {wanted}; this machine runs {running}")


def check_runnable(cell: Cell, available: list[str] | None = None,
                   bpf_registered: dict[str, str] | None = None) -> None:
    """Raise CellUnavailable when this machine cannot run `cell`: it is pinned to another kernel
    release, asks for algorithms a socket here refuses, or for a BPF one not registered by ccsweep
    from the object its id is pinned to (so a record says what ran). The one check the runner makes
    before setting anything up and the local executor makes before starting a cell's process.
    `available`, `bpf_registered`: the kernel's algorithms and bpfregister.registered_digests, when
    the caller has read them already."""
    from ccsweep.runner.tcpinfo import available_congestion_controls, unavailable_congestion_controls

    running = platform.release()
    if cell.params.kernel is not None and cell.params.kernel != running:
        raise KernelUnavailable(cell.params.kernel, running)
    refused = unavailable_congestion_controls(f.cc for f in cell.params.flows)
    if refused:
        raise CongestionControlUnavailable(refused, available_congestion_controls() if available is None else available)
    if cell.params.bpf_programs:
        digests = registered_digests() if bpf_registered is None else bpf_registered
        for program in cell.params.bpf_programs:
            if digests.get(program.name) != program.sha256:
                raise BpfProgramUnregistered(program.name, program.sha256, digests.get(program.name))


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
