"""Rules about a cell's link that planning, admission and the runner all apply: the lateness a
cell tolerates, the release window its emulator serves packets in, and what its link can express.

They are properties of a cell, not of running one: expansion refuses a cell its link cannot
express (the link's descriptor says what that is, linkdesc.Inexpressible), admission sizes a
cell's cost by its release window, and the runner tells the emulator the window and judges the
result by the threshold. So they stand beside cell.py and import
nothing above it (tests/unit/test_layering.py holds that).
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Iterable
from fractions import Fraction

from ccsweep.cell import Cell, CellParams, DirectionParams
from ccsweep.linkdesc import DEFAULT_LINK, descriptor

DIRECTIONS = ("uplink", "downlink")


class LinkError(RuntimeError):
    """The emulator is missing or could not be configured for the cell."""


#: The lateness a cell tolerates, as p99 of its packets (see lateness_threshold_us).
LATENESS_RTT_SHARE = 0.01
LATENESS_FLOOR_US = 400.0
LATENESS_CEILING_US = 1000.0


def lateness_threshold_us(cell: Cell) -> float:
    """The p99 lateness above which a cell's result is flagged `late`: 1% of its base RTT, 400 us-1 ms
    (the shortest base RTT where a delay schedule moves it: the path is held to what it notices there).

    Measured, not assumed (`make bench-threshold`, docs/emulator.md "Why this lateness threshold"):
    lateness holds packets back and releases them in bursts, and BBR reads the bursts as bandwidth,
    so the first thing it moves is BBR's mean RTT (a standing queue), long before goodput. A p99
    near 200 us moved nothing beyond the run-to-run spread at 10, 50 or 100 ms; near 600 us it
    moved BBR's mean RTT at 10 and 50 ms but not at 100 ms; near 3 ms it moved it at every RTT.
    1% of the RTT falls between the last on-time and the first moved point at each RTT measured.
    The floor sits above what a VM's emulator shows on its own (p99 110-370 us in the density
    bench and the test suite; a 200 us floor sent cells of a full test run back as late) and
    below the ~600 us that first moved anything (at 10 ms nothing moved up to about 500 us); the
    ceiling keeps long paths below the ~3 ms that moved
    every RTT measured.
    """
    share = LATENESS_RTT_SHARE * cell.params.shortest_rtt_ms * 1000
    return min(LATENESS_CEILING_US, max(LATENESS_FLOOR_US, share))


#: The emulator's release window (`--release-window`) per cell, see release_window_us.
RELEASE_WINDOW_RTT_SHARE = 0.0025
RELEASE_WINDOW_FLOOR_US = 100.0
RELEASE_WINDOW_CEILING_US = 250.0
#: Lateness the machine adds on top of the window, kept free under the lateness threshold: on the
#: 2-vCPU VM the emulator's p99 reached 370 us at a 100 us window (density bench, test suite).
MACHINE_LATENESS_ROOM_US = 300.0
#: A fixed window for every cell (us), for benchmarks that compare windows; unset: per cell.
RELEASE_WINDOW_ENV = "CCSWEEP_LINK_RELEASE_WINDOW_US"


def release_window_us(cell: Cell, threshold_us: float | None = None) -> float:
    """How long the emulator may hold a due packet to serve later ones in the same wake-up (us).

    Precision follows what the path can notice: 0.25% of the base RTT (its shortest, where a delay
    schedule moves it), from 100 us (the emulator's default, what every cell had before) to
    250 us. The window is not a separate budget: the
    emulator measures lateness against each packet's own due time, so a packet held by the window
    counts as late by what it waited (docs/emulator.md, "The release window per cell"). It must
    therefore leave room under the cell's lateness threshold (`threshold_us`, default the cell's
    own) for what the machine adds: never closer to it than MACHINE_LATENESS_ROOM_US. The share
    is measured, not assumed (`make bench-window` on the Figure 8 grid): 250 us at 100 ms left
    goodput and mean RTT within the run-to-run variance, 500 us (0.5%) did not (BBR's mean RTT
    +1%, CUBIC's at 2-5% loss -2 to -4%). Up to 40 ms it stays 100 us.
    """
    if threshold_us is None:
        threshold_us = lateness_threshold_us(cell)
    share = RELEASE_WINDOW_RTT_SHARE * cell.params.shortest_rtt_ms * 1000
    window = min(share, threshold_us - MACHINE_LATENESS_ROOM_US, RELEASE_WINDOW_CEILING_US)
    return float(round(max(RELEASE_WINDOW_FLOOR_US, window)))


def release_window_for(cell: Cell, threshold_us: float | None = None) -> float:
    """The window this run uses: $CCSWEEP_LINK_RELEASE_WINDOW_US when set (us), else the cell's own."""
    text = os.environ.get(RELEASE_WINDOW_ENV)
    if not text:
        return release_window_us(cell, threshold_us)
    try:
        window = float(text)
    except ValueError:
        window = -1.0
    if not 1 <= window <= 100_000:
        raise LinkError(f"{RELEASE_WINDOW_ENV}={text!r}: give the release window in microseconds, 1 to 100000")
    return window


#: What an opportunity of a constant-rate trace stands for: R*1000/12 opportunities a second at
#: R Mbit/s (ReBBR's traces; Mahimahi carries 1504 bytes in each, its TUN header included).
OPPORTUNITY_BITS = 12_000
#: A constant rate's trace repeats after at most this many ms (12 s: exact for 3 decimals of Mbit/s).
MAX_PERIOD_MS = 12_000
#: The queue arguments mm-link parses, each a whole number (ms for the AQM ones).
QUEUE_ARGS = ("packets", "bytes", "target_ms", "interval_ms", "qdelay_ref_ms", "max_burst_ms")


def cannot_express(p: CellParams) -> str | None:
    """Why the cell's link cannot run these parameters (completing "LINK cannot ..."), or None:
    the first of what its descriptor says it cannot do (linkdesc.Inexpressible) that they ask for."""
    cannot = descriptor(p.link).cannot
    if cannot.asymmetric_delay and p.uplink.delay_ms != p.downlink.delay_ms:
        return (f"delay the ACK direction ({p.downlink.delay_ms:g} ms) unlike the data direction "
                f"({p.uplink.delay_ms:g} ms): {cannot.asymmetric_delay}")
    if cannot.fractional_delay_ms and p.uplink.delay_ms != int(p.uplink.delay_ms):
        return f"delay by {p.uplink.delay_ms:g} ms: {cannot.fractional_delay_ms}"
    for name in DIRECTIONS:
        direction: DirectionParams = getattr(p, name)
        if cannot.gilbert_elliott and direction.gilbert_elliott is not None:
            return (f"draw {name} loss from a Gilbert-Elliott model (gilbert_elliott): {cannot.gilbert_elliott} "
                    f"(give loss or loss_percent, or link {DEFAULT_LINK})")
        if cannot.policer and direction.policer is not None:
            return f"police {name} packets (policer): {cannot.policer} (drop the policer, or use link {DEFAULT_LINK})"
        if cannot.jitter and direction.jitter is not None:
            return f"vary the {name} delay (jitter): {cannot.jitter} (drop the jitter, or use link {DEFAULT_LINK})"
        if cannot.delay_schedule and direction.delay_schedule:
            return (f"step the {name} delay (delay_schedule): {cannot.delay_schedule} (drop the delay_schedule, or "
                    f"use link {DEFAULT_LINK})")
        if cannot.slot and direction.slot is not None:
            return (f"release {name} packets in slots (slot): {cannot.slot} (drop the slot, or use link "
                    f"{DEFAULT_LINK})")
        if cannot.ecn_marking and (direction.queue.ecn or direction.queue.l4s_step_us is not None):
            return (f"mark {name} packets CE (queue.ecn, queue.l4s_step_us): {cannot.ecn_marking} (drop them, or use "
                    f"link {DEFAULT_LINK})")
        if cannot.rate_schedule and direction.rate_schedule:
            return f"play a rate_schedule: {cannot.rate_schedule}"
        fractional = [arg for arg in QUEUE_ARGS if _fractional(getattr(direction.queue, arg))]
        if cannot.fractional_queue_args and fractional:
            value = getattr(direction.queue, fractional[0])
            return f"take {name} queue.{fractional[0]} {value:g}: {cannot.fractional_queue_args}"
        if (cannot.constant_rate_as_trace and direction.rate_mbps is not None
                and rate_period_ms(direction.rate_mbps) is None):
            return (f"run a constant {direction.rate_mbps:g} Mbit/s: as a trace it would not repeat within "
                    f"{MAX_PERIOD_MS} ms (give at most 3 decimals)")
    return None


def _fractional(value: float | int | None) -> bool:
    return value is not None and value != int(value)


def rate_period_ms(rate_mbps: float) -> int | None:
    """The shortest whole number of ms in which a constant rate has a whole number of opportunities."""
    per_ms = Fraction(rate_mbps).limit_denominator(1000) * 1000 / OPPORTUNITY_BITS
    if not math.isclose(float(per_ms), rate_mbps * 1000 / OPPORTUNITY_BITS, rel_tol=1e-9):
        return None
    return per_ms.denominator if per_ms.denominator <= MAX_PERIOD_MS else None


#: From this bottleneck rate a sender writing small messages can set a flow's rate itself.
SMALL_WRITES_MBPS = 200.0
#: The write size from which the cell's sender stays ahead of such a link.
BULK_MESSAGE_BYTES = 65_536


def small_writes_rates(cells: Iterable[Cell]) -> Counter[float]:
    """How many of `cells` at each bottleneck rate may have their rate set by their sender.

    The cell's sender is a Python loop writing `message_bytes` at a time, as ReBBR's was. When the
    receive window stops holding a fast flow back, each small write leaves at once as a packet of
    its own, and the loop cannot keep up: at 400 Mbit/s with 1 KB writes BBR then reads about
    240 Mbit/s where Mahimahi reads 303, and nothing in tcp_info marks it
    (benchmarks/results/2026-11-26-link-cost-by-rate.md, section 4). Counted per rate, so a
    sweep's plan can be read a chunk at a time (plan.survey) and keep one number per rate."""
    return Counter(rate for c in cells
                   if (rate := c.params.uplink.rate_mbps or 0.0) >= SMALL_WRITES_MBPS
                   and c.params.message_bytes < BULK_MESSAGE_BYTES)


def small_writes_note(rates: Counter[float]) -> str | None:
    """One line on the cells small_writes_rates counted, or None when there are none.

    A note, not a refusal: the flow may settle in the fast state too, and the spec may mean the
    small writes."""
    if not rates:
        return None
    listed = ", ".join(f"{r:g}" for r in sorted(rates))
    return (f"note: {rates.total()} cell(s) at {listed} Mbit/s write messages of under "
            f"{BULK_MESSAGE_BYTES} bytes: their sender may set their rate rather than the link "
            f"(docs/spec.md, message_bytes); set message_bytes: {BULK_MESSAGE_BYTES} unless small writes are "
            "the point")
