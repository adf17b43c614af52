"""While a cell's link runs, ask that idle CPUs wake within a bound: a PM QoS request.

On a virtual machine an idle CPU halts, and the hypervisor must run it again before a timer that
fires there is served: a link whose own CPU had gone idle between two releases wakes late, with
its run queue empty all along, and /proc/stat counts the wait as steal. The kernel's CPU-latency
QoS (/dev/cpu_dma_latency, held open with the bound written to it) makes the idle governor choose
only states that wake within the bound: 0 us keeps idle CPUs polling instead of halting (with the
haltpoll driver, its POLL state), for as long as the file is held. It costs the host the idle
time it polls (the guest still counts it as idle), and is released the moment the cell ends
(closing the file drops the request).

Measured (benchmarks/results/2026-11-29-idle-wake/): on a 2-vCPU guest whose kernel halts idle
vCPUs at once (haltpoll, guest_halt_poll_ns=0), 9 of 12 of the quick preset's cells came back
late with a median 11.1 % of a CPU stolen while halting, and none with 0.3 % while polling. So
every cell asks for 0
us by default. $CCSWEEP_IDLE_WAKE_US sets another bound, or `off` for none. The default is
skipped, and recorded as none, where the file cannot be opened (a pod without the device, no
root); a bound set by the variable that cannot be held is an error.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ccsweep.linkrules import LinkError

CPU_LATENCY_QOS = Path("/dev/cpu_dma_latency")
ENV = "CCSWEEP_IDLE_WAKE_US"
#: $CCSWEEP_IDLE_WAKE_US's word for no request.
OFF = "off"
#: The bound every cell asks for when $CCSWEEP_IDLE_WAKE_US is unset: idle CPUs poll.
DEFAULT_BOUND_US = 0
#: The largest bound worth asking for: idle states of a guest wake within a few hundred us.
MAX_BOUND_US = 10_000


@dataclass(frozen=True)
class WakeRequest:
    """The CPU-latency bound a cell asks for (None: none), and whether $CCSWEEP_IDLE_WAKE_US set it
    (then a machine that cannot hold it is an error; the default is skipped there)."""

    bound_us: int | None
    explicit: bool


def requested_bound() -> WakeRequest:
    """$CCSWEEP_IDLE_WAKE_US: a whole number of microseconds, `off`, or unset (DEFAULT_BOUND_US)."""
    text = os.environ.get(ENV)
    if text is None or text == "":
        return WakeRequest(DEFAULT_BOUND_US, explicit=False)
    if text == OFF:
        return WakeRequest(None, explicit=True)
    try:
        return WakeRequest(parse_bound_us(text), explicit=True)
    except ValueError as exc:
        raise LinkError(f"{ENV}={text!r}: {exc}, or {OFF}") from None


def parse_bound_us(text: str) -> int:
    """A bound written as text (the variable, the node setup's argument): a whole number of
    microseconds from 0 to MAX_BOUND_US, else ValueError saying so."""
    try:
        bound = int(text)
    except ValueError:
        bound = -1
    if not 0 <= bound <= MAX_BOUND_US:
        raise ValueError(f"give a whole number of microseconds from 0 to {MAX_BOUND_US}")
    return bound


@contextmanager
def idle_wake_bound(request: WakeRequest) -> Iterator[int | None]:
    """Hold `request`'s CPU-latency bound for the block; yields the bound in force (None: none)."""
    if request.bound_us is None:
        yield None
        return
    try:
        fd = os.open(CPU_LATENCY_QOS, os.O_WRONLY)
    except OSError as exc:
        if not request.explicit:
            yield None
            return
        raise LinkError(f"{ENV}: {CPU_LATENCY_QOS}: {exc.strerror}") from None
    try:
        os.write(fd, struct.pack("=i", request.bound_us))
        yield request.bound_us
    finally:
        os.close(fd)
