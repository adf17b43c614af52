"""ccsweep-link for one cell: its binary, its command line, its trace files and its summary.

The command line is built from the cell alone (a pure function, unit-tested), so what a result
says about its link is exactly what the emulator was told.  A step-response cell (a constant rate
with a rate_schedule) has no rate option to express it: it becomes a Mahimahi trace generated
into the workdir, with `lead_s` seconds of base rate in front so that the schedule's clock starts
with the flows rather than with the emulator.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ccsweep.cell import Cell, DirectionParams, RateStep
from ccsweep.result import DirectionCounters, LinkSummary, SelfCheck
from ccsweep.runner.runqueue import RunQueueSummary

#: Bits one opportunity of a generated trace stands for: ReBBR's R*1000/12 opportunities per
#: second at R Mbit/s, i.e. one 1500-byte IP packet (Mahimahi counts 1504 with its TUN header).
TRACE_OPPORTUNITY_BITS = 12_000
STATS_INTERVAL = "100ms"
DIRECTIONS = ("uplink", "downlink")


class LinkError(RuntimeError):
    """The emulator is missing or could not be configured for the cell."""


def find_link_binary(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The emulator: the argument, else $CCSWEEP_LINK, else <repo>/bin/ccsweep-link, else PATH."""
    if explicit is not None:
        candidates = [Path(explicit)]
    else:
        env = os.environ.get("CCSWEEP_LINK")
        on_path = shutil.which("ccsweep-link")
        candidates = [Path(env)] if env else []
        candidates.append(Path(__file__).resolve().parents[3] / "bin" / "ccsweep-link")
        candidates += [Path(on_path)] if on_path else []
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    tried = ", ".join(map(str, candidates)) + ("" if explicit is not None else ", PATH")
    raise LinkError(f"ccsweep-link not found (tried {tried}); build it with `make emulator` and put it on PATH "
                    "or name it in CCSWEEP_LINK")


def rate_schedule_trace(rate_mbps: float, schedule: tuple[RateStep, ...], lead_s: float,
                        length_s: float) -> Iterator[str]:
    """A Mahimahi trace of `length_s` seconds, as text one millisecond at a time: the base rate for
    `lead_s`, then the schedule.

    Opportunities are spread with an error accumulator (8, 8, 9, ... per ms at 100 Mbit/s), as
    ReBBR generated its constant-rate traces.  `at_s` of each step counts from the end of the lead.
    A trace has up to spec.MAX_SCHEDULE_OPPORTUNITIES lines (10^7, about 90 MB): written as it is
    made, never held whole in memory (a list of them would pass a cell pod's memory limit).
    """
    steps = sorted(schedule, key=lambda s: s.at_s)
    owed = 0.0
    total_ms = round(length_s * 1000)
    last = 0
    for ms in range(1, total_ms + 1):
        flow_t = ms / 1000 - lead_s
        factor = 1.0
        for step in steps:
            if flow_t > step.at_s:
                factor = step.factor
        owed += rate_mbps * factor * 1000 / TRACE_OPPORTUNITY_BITS
        whole = int(owed)
        owed -= whole
        if whole:
            last = ms
            yield f"{ms}\n" * whole
    if last != total_ms:
        yield f"{total_ms}\n"  # a trace must end at its period


#: Folder of a cell's workdir holding trace files fetched from the store, named by their sha256.
STAGED_TRACES = "traces"


def stage_trace(workdir: Path, sha256: str, data: bytes) -> Path:
    """Keep a trace fetched from the store where resolve_trace looks first."""
    path = workdir / STAGED_TRACES / sha256
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def resolve_trace(direction: DirectionParams, workdir: Path) -> Path:
    """The cell's trace file, checked against the hash pinned in the cell.

    The copy planning stored (staged in the workdir) comes first, so a planned cell runs the very
    trace it was planned with; a cell given as JSON without a plan uses the trace path.
    """
    from ccsweep.expand import find_trace

    assert direction.trace is not None
    staged = workdir / STAGED_TRACES / direction.trace.sha256
    path = staged if staged.is_file() else find_trace(direction.trace.name)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != direction.trace.sha256:
        raise LinkError(f"trace {path}: sha256 {digest[:12]}... differs from the cell's "
                        f"{direction.trace.sha256[:12]}...")
    return path


def link_files(workdir: Path) -> dict[str, Path]:
    return {f"{d}.log": workdir / f"{d}.log" for d in DIRECTIONS}


def prepare_traces(cell: Cell, workdir: Path, lead_s: float, length_s: float) -> dict[str, Path]:
    """Trace files per direction that needs one: the pinned trace, or a generated step schedule."""
    traces: dict[str, Path] = {}
    for name in DIRECTIONS:
        direction: DirectionParams = getattr(cell.params, name)
        if direction.trace is not None:
            traces[name] = resolve_trace(direction, workdir)
        elif direction.rate_schedule:
            assert direction.rate_mbps is not None
            path = workdir / f"{name}.schedule.trace"
            with path.open("w") as trace:
                trace.writelines(rate_schedule_trace(direction.rate_mbps, direction.rate_schedule, lead_s, length_s))
            traces[name] = path
    return traces


#: The SCHED_FIFO priority the emulator's packet loop asks for (0: none). The emulator is the one
#: timing-critical process of a cell; where the priority is refused it runs as before and says so.
DEFAULT_REALTIME_PRIORITY = 10


def realtime_priority() -> int:
    """$CCSWEEP_LINK_RT_PRIORITY (0 turns it off), else DEFAULT_REALTIME_PRIORITY."""
    text = os.environ.get("CCSWEEP_LINK_RT_PRIORITY", str(DEFAULT_REALTIME_PRIORITY))
    try:
        priority = int(text)
    except ValueError:
        raise LinkError(f"CCSWEEP_LINK_RT_PRIORITY={text!r}: give a whole number from 0 (off) to 99") from None
    if not 0 <= priority <= 99:
        raise LinkError(f"CCSWEEP_LINK_RT_PRIORITY={priority}: give a whole number from 0 (off) to 99")
    return priority


def injected_lateness(attempt: int) -> str | None:
    """A debug distribution of release delays for this attempt, or None (the normal case).

    $CCSWEEP_DEBUG_INJECT_LATENESS (ccsweep-link's --inject-lateness grammar, e.g. `fixed:5ms,p=0.05`)
    makes cells late on purpose, to test what happens to late cells; $CCSWEEP_DEBUG_INJECT_ATTEMPTS
    (e.g. `1` or `1,2`) limits it to those attempts. The value goes to the emulator as one argv
    element and is validated there.
    """
    spec = os.environ.get("CCSWEEP_DEBUG_INJECT_LATENESS")
    if not spec:
        return None
    attempts = os.environ.get("CCSWEEP_DEBUG_INJECT_ATTEMPTS", "")
    if attempts and str(attempt) not in [a.strip() for a in attempts.split(",")]:
        return None
    return spec


def link_command(cell: Cell, binary: Path, sender_netns: str, receiver_netns: str, workdir: Path,
                 traces: dict[str, Path], duration_s: float, *, priority: int = 0,
                 inject_lateness: str | None = None, release_window: float | None = None) -> list[str]:
    """ccsweep-link's argv for the cell; stats go to stdout every 100 ms, logs into workdir.

    `duration_s` is a safety net only: the runner stops the emulator with SIGTERM. `release_window`
    (us) is the emulator's --coalesce; None leaves the emulator's own default (100 us).
    """
    p = cell.params
    argv = [str(binary), "--sender-netns", sender_netns, "--receiver-netns", receiver_netns]
    logs = link_files(workdir)
    for name in DIRECTIONS:
        direction: DirectionParams = getattr(p, name)
        if name in traces:
            argv += [f"--{name}-trace", str(traces[name])]
        else:
            argv += [f"--{name}-rate", f"{direction.rate_mbps:g}mbit"]
        argv += [f"--{name}-delay", f"{direction.delay_ms:g}ms", f"--{name}-loss", f"{direction.loss:g}",
                 f"--{name}-queue", direction.queue.emulator_spec(), f"--{name}-log", str(logs[f"{name}.log"])]
    argv += ["--loss-position", p.loss_position, "--seed", str(p.seed), "--stats", "-",
             "--stats-interval", STATS_INTERVAL, "--duration", f"{duration_s:g}s"]
    if release_window is not None:
        argv += ["--coalesce", f"{release_window:g}us"]
    if priority:
        argv += ["--realtime-priority", str(priority)]
    if inject_lateness:
        argv += ["--inject-lateness", inject_lateness]
    return argv


#: The lateness a cell tolerates, as p99 of its packets (see lateness_threshold_us).
LATENESS_RTT_SHARE = 0.01
LATENESS_FLOOR_US = 400.0
LATENESS_CEILING_US = 1000.0


def lateness_threshold_us(cell: Cell) -> float:
    """The p99 lateness above which a cell's result is flagged `late`: 1% of its base RTT, 400 us-1 ms.

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
    share = LATENESS_RTT_SHARE * cell.params.rtt_ms * 1000
    return min(LATENESS_CEILING_US, max(LATENESS_FLOOR_US, share))


#: The emulator's release window (`--coalesce`) per cell, see release_window_us.
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

    Precision follows what the path can notice: 0.25% of the base RTT, from 100 us (the emulator's
    default, what every cell had before) to 250 us. The window is not a separate budget: the
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
    share = RELEASE_WINDOW_RTT_SHARE * cell.params.rtt_ms * 1000
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


def link_summary(summary: dict[str, Any], threshold_us: float, run_queue: RunQueueSummary | None = None) -> LinkSummary:
    """The emulator's summary line as the result's LinkSummary, with the `late` verdict.

    Late when the packets' p99 lateness exceeds the threshold, or the emulator's own run-queue
    delay does (`run_queue`, sampled by the runner as for Mahimahi): a cell frozen whole, sender
    included, holds back only the packets in flight, too few to move the packets' p99, while
    the emulator's wait over that time shows in the run-queue delay.
    """
    lateness = summary.get("lateness_us", {})
    p99 = float(lateness.get("p99", 0.0))
    waited = run_queue.p99_us if run_queue is not None else None
    return LinkSummary(
        version=str(summary.get("version", "unknown")),
        order=str(summary.get("order", "unknown")),
        uplink=DirectionCounters.model_validate(summary.get("uplink", {})),
        downlink=DirectionCounters.model_validate(summary.get("downlink", {})),
        selfcheck=SelfCheck(
            lateness_p50_us=float(lateness.get("p50", 0.0)),
            lateness_p99_us=p99,
            lateness_max_us=float(lateness.get("max", 0.0)),
            cpu_share=float(summary.get("cpu_share", 0.0)),
            late=p99 > threshold_us or (waited is not None and waited > threshold_us),
            threshold_us=threshold_us,
            sched=summary.get("sched"),
            injected_lateness=(summary.get("config") or {}).get("inject_lateness"),
            release_window_us=(summary.get("config") or {}).get("coalesce_us"),
            lateness_from="packets",
            runqueue_p99_us=waited,
        ),
    )

