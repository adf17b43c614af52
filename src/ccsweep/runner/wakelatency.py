"""While a cell's link runs, ask that idle CPUs wake within a bound: a PM QoS request.

On a virtual machine an idle CPU halts, and the hypervisor must run it again before a timer that
fires there is served: a link whose own CPU had gone idle between two releases wakes late, with
its run queue empty all along (the record's `timer` cause). The kernel's CPU-latency QoS
(/dev/cpu_dma_latency, held open with the bound written to it) makes the idle governor choose
only states that wake within the bound: 0 us keeps idle CPUs polling instead of halting (with the
haltpoll driver, its POLL state), for as long as the file is held. It costs the host the idle
time it polls, and is released the moment the cell ends (closing the file drops the request).

$CCSWEEP_IDLE_WAKE_US sets the bound (unset: no request). Needs root (the file is mode 600).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ccsweep.linkrules import LinkError

CPU_LATENCY_QOS = Path("/dev/cpu_dma_latency")
ENV = "CCSWEEP_IDLE_WAKE_US"
#: The largest bound worth asking for: idle states of a guest wake within a few hundred us.
MAX_BOUND_US = 10_000


def requested_bound() -> int | None:
    """$CCSWEEP_IDLE_WAKE_US as a whole number of microseconds, or None when unset."""
    text = os.environ.get(ENV)
    if text is None or text == "":
        return None
    try:
        bound = int(text)
    except ValueError:
        raise LinkError(f"{ENV}={text!r}: give a whole number of microseconds from 0 to {MAX_BOUND_US}") from None
    if not 0 <= bound <= MAX_BOUND_US:
        raise LinkError(f"{ENV}={bound}: give a whole number of microseconds from 0 to {MAX_BOUND_US}")
    return bound


@contextmanager
def idle_wake_bound(bound_us: int | None) -> Iterator[int | None]:
    """Hold a CPU-latency request of `bound_us` for the block; yields the bound in force (None: none)."""
    if bound_us is None:
        yield None
        return
    try:
        fd = os.open(CPU_LATENCY_QOS, os.O_WRONLY)
    except OSError as exc:
        raise LinkError(f"{ENV}: {CPU_LATENCY_QOS}: {exc.strerror}") from None
    try:
        os.write(fd, struct.pack("=i", bound_us))
        yield bound_us
    finally:
        os.close(fd)
