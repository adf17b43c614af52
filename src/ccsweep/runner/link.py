"""ccsweep-link for one cell: its binary, its command line, its trace files and its summary.

The command line is built from the cell alone (a pure function, unit-tested), so what a result
says about its link is exactly what the emulator was told.  A step-response cell (a constant rate
with a rate_schedule) has no rate option to express it: it becomes a Mahimahi trace generated
into the workdir, with `lead_s` seconds of base rate in front so that the schedule's clock starts
with the flows rather than with the emulator. A delay schedule becomes a delay trace there the
same way, its steps `lead_s` later than the flows' clock says.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ccsweep.cell import DIRECTION_EFFECTS, Cell, DelayStep, DirectionParams, RateStep
from ccsweep.linkdesc import CCSWEEP_LINK
from ccsweep.linkrules import DIRECTIONS, LinkError
from ccsweep.result import DirectionCounters, LatenessEvidence, LinkSummary, SelfCheck
from ccsweep.runner.attempt import link_files
from ccsweep.runner.runqueue import RunQueueSummary

#: Bits one opportunity of a generated trace stands for: ReBBR's R*1000/12 opportunities per
#: second at R Mbit/s, i.e. one 1500-byte IP packet (Mahimahi counts 1504 with its TUN header).
TRACE_OPPORTUNITY_BITS = 12_000
STATS_INTERVAL = "100ms"


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


def delay_schedule_trace(schedule: tuple[DelayStep, ...], lead_s: float) -> str:
    """ccsweep-link's delay trace of a schedule: a line `T_MS DELAY_MS` per step, each at its
    `at_s` after the `lead_s` seconds the flows start after the emulator (whole ms of its clock).
    Made of the cell's numbers alone (floats, formatted), never of text from a spec."""
    return "".join(f"{round((lead_s + float(step.at_s)) * 1000)} {float(step.delay_ms)!r}\n" for step in schedule)


def prepare_delay_traces(cell: Cell, workdir: Path, lead_s: float) -> dict[str, Path]:
    """A delay trace file per direction with a delay schedule, written into the workdir."""
    traces: dict[str, Path] = {}
    for name in DIRECTIONS:
        direction: DirectionParams = getattr(cell.params, name)
        if direction.delay_schedule:
            path = workdir / f"{name}.delay.trace"
            path.write_text(delay_schedule_trace(direction.delay_schedule, lead_s))
            traces[name] = path
    return traces


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


#: The emulator's SCHED_DEADLINE reservation per 1 ms where SCHED_FIFO is refused (a pod's cgroup
#: without a real-time budget): its own default, and the least it takes (emulator/src/sched.rs).
DEFAULT_DEADLINE_RUNTIME_US = 300
MIN_DEADLINE_RUNTIME_US = 50


def deadline_runtime_us(cpu_milli: int | None) -> int | None:
    """The emulator's deadline reservation (us of every 1 ms) for a cell given `cpu_milli` of CPU,
    or None (the emulator's default) where nobody gave it a share.

    The kernel admits reservations while they sum to 95 % of the cores, and at the default 300 us
    a 2-core node admitted 6 loops: on a node packed by requests, the loops past the sixth fell
    back to nice -10, and in the full sweep through Argo 24 of their 27 attempts came back late,
    against 1 of 42 with a reservation. A cell's share of a core, its request, bounds its
    reservation, so a node's reservations never sum to more than its pods requested."""
    if cpu_milli is None:
        return None
    return max(MIN_DEADLINE_RUNTIME_US, min(DEFAULT_DEADLINE_RUNTIME_US, cpu_milli))


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
                 inject_lateness: str | None = None, release_window: float | None = None,
                 delay_traces: Mapping[str, Path] | None = None, deadline_runtime: int | None = None) -> list[str]:
    """ccsweep-link's argv for the cell; stats go to stdout every 100 ms, logs into workdir.
    `delay_traces` are the delay trace files of the directions with a delay schedule.

    `duration_s` is a safety net only: the runner stops the emulator with SIGTERM. `release_window`
    (us) is the emulator's --release-window; None leaves the emulator's own default (100 us);
    `deadline_runtime` (us) its --deadline-runtime, None its default.
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
        loss_option, *loss_values = direction.loss_model.emulator_spec()
        argv += [f"--{name}-delay", f"{direction.delay_ms:g}ms", f"--{name}-{loss_option}", *loss_values,
                 f"--{name}-queue", direction.queue.emulator_spec(), f"--{name}-log", str(logs[f"{name}.log"])]
        if delay_traces and name in delay_traces:
            argv += [f"--{name}-delay-trace", str(delay_traces[name])]
        for field in DIRECTION_EFFECTS:
            if (effect := getattr(direction, field)) is not None:
                option, *values = effect.emulator_spec()
                argv += [f"--{name}-{option}", *values]
    argv += ["--loss-position", p.loss_position, "--offload", p.link_offload, "--seed", str(p.seed), "--stats", "-",
             "--stats-interval", STATS_INTERVAL, "--duration", f"{duration_s:g}s"]
    if release_window is not None:
        argv += ["--release-window", f"{release_window:g}us"]
    if priority:
        argv += ["--realtime-priority", str(priority)]
        if deadline_runtime is not None:
            argv += ["--deadline-runtime", f"{deadline_runtime}us"]
    if inject_lateness:
        argv += ["--inject-lateness", inject_lateness]
    return argv


def _release_window_us(config: dict[str, Any]) -> float | None:
    """The window the emulator's summary echoes: `release_window_us`, or `coalesce_us` from a binary
    built before the option took the name the rest of ccsweep gives it."""
    value = config.get("release_window_us", config.get("coalesce_us"))
    return None if value is None else float(value)


def _timing_evidence(timing: dict[str, Any] | None) -> LatenessEvidence | None:
    """The emulator's own timing (its summary's `timing`: sleeps' overshoot, device writes and
    reads, the loop's work between waits) as LatenessEvidence; None from an emulator too old to write it."""
    if not timing:
        return None
    overshoot, write, read, work = (timing.get(k) or {} for k in ("overshoot_us", "write_us", "read_us", "work_us"))
    return LatenessEvidence(
        overshoot_p99_us=overshoot.get("p99"), overshoot_max_us=overshoot.get("max"),
        write_p99_us=write.get("p99"), write_max_us=write.get("max"), write_total_s=write.get("total_s"),
        read_p99_us=read.get("p99"), read_max_us=read.get("max"),
        work_p99_us=work.get("p99"), work_max_us=work.get("max"))


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
        version=str(summary.get(CCSWEEP_LINK.version.key, "unknown")),
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
            release_window_us=_release_window_us(summary.get("config") or {}),
            lateness_from="packets",
            runqueue_p99_us=waited,
            evidence=_timing_evidence(summary.get("timing")),
        ),
        offload=(summary.get("config") or {}).get("offload"),
    )

