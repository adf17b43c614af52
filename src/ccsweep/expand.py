"""Expand a sweep spec into cells: the cartesian product of each experiment's axes.

Resolution happens here, once: percent to fractions, RTT to per-direction delays, BDP multiples
to byte limits, trace names to content hashes.  Runners receive cells that need no spec.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import ValidationError

from ccsweep.bpfcc import BpfObjectMissing, is_bpf, object_digest
from ccsweep.cell import (
    MAHIMAHI_OPPORTUNITY_BYTES,
    BpfProgramRef,
    BufferParams,
    Cell,
    CellParams,
    DelayStep,
    DirectionParams,
    FlowParams,
    GilbertElliottLoss,
    Jitter,
    LossModel,
    Policer,
    QueueParams,
    RateStep,
    Slot,
    TraceRef,
)
from ccsweep.linkdesc import LINKS, descriptor
from ccsweep.linkrules import cannot_express
from ccsweep.spec import (
    MIN_QUEUE_BYTES,
    PLAIN_NAME,
    Experiment,
    FlowGroup,
    JitterSetting,
    PolicerSetting,
    QueueSetting,
    ReversePath,
    SlotSetting,
    SpecError,
    SweepSpec,
    TraceSetting,
    one_line,
)
from ccsweep.specload import read_regular_file

#: The traces that ship with the package (Mahimahi's cellular traces; see traces/README.md).
PACKAGED_TRACES = Path(__file__).resolve().parent / "traces"
#: A trace larger than this is refused before it is read (Mahimahi's largest are a few MB).
MAX_TRACE_BYTES = 16 << 20
#: Timestamps are ms in a 32-bit signed range, as Mahimahi and ccsweep-link read them.
MAX_TRACE_MS = 2**31 - 1


def trace_search_path() -> list[Path]:
    """Trace directories: $CCSWEEP_TRACES (colon-separated) first, then the package's own, then the image's."""
    dirs = [Path(p) for p in os.environ.get("CCSWEEP_TRACES", "").split(":") if p]
    return dirs + [PACKAGED_TRACES, Path("/opt/ccsweep/traces")]


def find_trace(name: str) -> Path:
    """A trace file by plain name, inside the trace directories only (never a path).

    The first directory holding anything by that name wins; if that is not a regular file,
    reading it says so rather than looking further.
    """
    if not re.fullmatch(PLAIN_NAME, name):
        raise SpecError(f"trace {name[:64]!r}: not a trace name (a file name without folders, "
                        "letters, digits, '.', '_' and '-')")
    for directory in trace_search_path():
        if os.path.lexists(directory / name):
            return directory / name
    where = ", ".join(map(str, trace_search_path()))
    raise SpecError(f"trace {name}: not found (looked in {where}; CCSWEEP_TRACES adds folders)")


@dataclass(frozen=True)
class Trace:
    """A Mahimahi trace, checked: its content hash and what its mean rate needs."""

    ref: TraceRef
    opportunities: int
    period_ms: int

    @property
    def mean_mbps(self) -> float:
        """Mean capacity (1504-byte opportunities over the trace period)."""
        return self.opportunities * MAHIMAHI_OPPORTUNITY_BYTES * 8 / (self.period_ms * 1000)


def load_trace(name: str) -> Trace:
    """Find, read and check a trace; errors name the trace and the line, never echo its content."""
    path = find_trace(name)
    data = read_regular_file(path, MAX_TRACE_BYTES, f"trace {name}")
    opportunities, period_ms = _check_trace(data, name)
    return Trace(ref=TraceRef(name=name, sha256=hashlib.sha256(data).hexdigest()), opportunities=opportunities,
                 period_ms=period_ms)


def _check_trace(data: bytes, name: str) -> tuple[int, int]:
    """(opportunities, period in ms) of a well-formed trace: one integer per line, non-decreasing, last > 0."""
    import numpy as np  # only planning reads traces; cell processes never import this

    if not data.strip():
        raise SpecError(f"trace {name}: empty; a Mahimahi trace has one integer timestamp (ms) per line")
    lines = data.count(b"\n") + (not data.endswith(b"\n"))
    well_formed = (not data.translate(None, b"0123456789\n") and not data.startswith(b"\n")
                   and b"\n\n" not in data and not _LONG_NUMBER.search(data))
    stamps = np.fromstring(data, dtype=np.int64, sep="\n") if well_formed else np.empty(0, np.int64)
    if stamps.size != lines:
        raise SpecError(f"trace {name}: not a Mahimahi trace (line {_first_bad_line(data)} is not an integer of "
                        "at most 10 digits)")
    falls = np.flatnonzero(np.diff(stamps) < 0)
    if falls.size:
        raise SpecError(f"trace {name}: not a Mahimahi trace (line {int(falls[0]) + 2} goes back in time; "
                        "timestamps never decrease)")
    period = int(stamps[-1])
    if period <= 0:
        raise SpecError(f"trace {name}: period 0 (its last timestamp must be above 0 ms)")
    if period > MAX_TRACE_MS:
        raise SpecError(f"trace {name}: last timestamp above {MAX_TRACE_MS} ms")
    return int(stamps.size), period


_LONG_NUMBER = re.compile(rb"[0-9]{11}")


def _first_bad_line(data: bytes) -> int:
    for number, line in enumerate(data.split(b"\n"), 1):
        if not re.fullmatch(rb"[0-9]{1,10}", line):
            return number
    return 1


def expand(spec: SweepSpec) -> list[Cell]:
    """All cells of a sweep, in a stable order (experiment order, then the axes in spec order).

    The same parameters in two experiments give two entries with one id: executors run the id once.
    """
    return list(iter_cells(spec))


def iter_cells(spec: SweepSpec) -> Iterator[Cell]:
    """expand's cells one at a time, so planning a large sweep never holds all of them."""
    for experiment in spec.experiments:
        yield from expand_experiment(spec.name, experiment, time_scale=spec.time_scale)


#: The shortest flow a time-scaled cell may have: below it, start-up is the whole measurement.
MIN_SCALED_DURATION_S = 1.0


def expand_experiment(sweep: str, exp: Experiment, time_scale: float = 1.0) -> Iterator[Cell]:
    """The cells of one experiment; with `time_scale` < 1 every flow time is shortened by it.

    Scaling touches only time (duration, warm-up, flow starts, rate and delay steps), so a scaled cell tests
    the same path in less time; its parameters record the scale, so it is another cell than the
    full-length one and can never stand in for it.
    """
    def scaled(seconds: float) -> float:
        return round(seconds * time_scale, 6)

    _refuse_what_the_link_lacks(exp)
    if time_scale < 1 and scaled(exp.duration_s) < MIN_SCALED_DURATION_S:
        raise SpecError(f"time_scale {time_scale:g} makes experiments[{exp.name}].duration_s "
                        f"{scaled(exp.duration_s):g} s, below {MIN_SCALED_DURATION_S:g} s: raise time_scale")
    links = _bottlenecks(exp)
    schedule = tuple(RateStep(at_s=scaled(step.at_s), factor=step.factor) for step in exp.rate_schedule)
    delays = exp.delay_schedule
    delay_steps = tuple(DelayStep(at_s=scaled(s.at_s), delay_ms=s.delay_ms) for s in delays.steps) if delays else ()
    up_delays, down_delays = _on_directions(delay_steps, delays.direction) if delays else ((), ())
    buffers = BufferParams(tcp_rmem=exp.buffers.tcp_rmem, tcp_wmem=exp.buffers.tcp_wmem)
    reverses: list[ReversePath | None] = list(exp.reverse) if exp.reverse else [None]
    kernels: list[str | None] = list(exp.kernels) if exp.kernels else [None]
    policers: list[PolicerSetting | None] = list(exp.policer) if exp.policer else [None]
    jitters: list[JitterSetting | None] = list(exp.jitter) if exp.jitter else [None]
    slots: list[SlotSetting | None] = list(exp.slot) if exp.slot else [None]
    effects = list(itertools.product(policers, jitters, slots))  # the per-direction axes, in this order
    axes = itertools.product(exp.flow_mixes(), exp.loss_models(), exp.rtt_ms, links, enumerate(exp.queue), reverses,
                             kernels, effects, range(exp.max_runs))
    bpf_programs = _bpf_programs(exp)
    for mix, loss, rtt, (rate, trace, down_rate, down_trace, mean_mbps), (qi, queue), reverse, kernel, \
            (policer, jitter, slot), rep in axes:
        up_policer, down_policer = _on_directions(policer.resolved(), policer.direction) if policer else (None, None)
        up_jitter, down_jitter = _on_directions(jitter.resolved(), jitter.direction) if jitter else (None, None)
        up_slot, down_slot = _on_directions(slot.resolved(), slot.direction) if slot else (None, None)
        flows = tuple(FlowParams(cc=f.cc, start_s=scaled(f.start_s)) for f in _flows(mix))
        up_loss, up_bursts = _loss_fields(loss if exp.loss_direction in ("uplink", "both") else None)
        down_loss, down_bursts = _loss_fields(loss if exp.loss_direction in ("downlink", "both") else None)
        down_delay = rtt / 2
        if reverse is not None:
            down_delay = reverse.delay_ms if reverse.delay_ms is not None else down_delay
            # Rounded as the forward loss is (Experiment.loss_fractions): one physical cell, one id.
            if reverse.loss_percent is not None:
                down_loss, down_bursts = round(reverse.loss_percent / 100, 12), None
        params = CellParams(
            flows=flows,
            uplink=DirectionParams(rate_mbps=rate, trace=trace, rate_schedule=schedule if rate else (),
                                   delay_ms=rtt / 2, loss=up_loss, gilbert_elliott=up_bursts, policer=up_policer,
                                   jitter=up_jitter, slot=up_slot, delay_schedule=up_delays or (),
                                   queue=_queue(queue, mean_mbps, rtt, where=f"experiments[{exp.name}].queue[{qi}]")),
            downlink=DirectionParams(rate_mbps=down_rate, trace=down_trace, delay_ms=down_delay, loss=down_loss,
                                     gilbert_elliott=down_bursts, policer=down_policer, jitter=down_jitter,
                                     slot=down_slot, delay_schedule=down_delays or ()),
            duration_s=scaled(exp.duration_s),
            warmup_s=scaled(exp.effective_warmup_s),
            loss_position=exp.loss_position,
            buffers=buffers,
            message_bytes=exp.message_bytes,
            seed=exp.seed + rep,
            repetition=rep,
            link=exp.link,
            kernel=kernel,
            time_scale=time_scale,
            link_offload=exp.link_offload,
            bpf_programs=tuple(bpf_programs[cc] for cc in dict.fromkeys(f.cc for f in flows) if cc in bpf_programs),
            tcp_ecn=None if exp.tcp_ecn == "accept" else exp.tcp_ecn,  # the kernel's default: one cell, one id
        )
        if reason := cannot_express(params):
            raise SpecError(f"experiments[{exp.name}].link: {exp.link} cannot {reason}")
        yield Cell.build(sweep, exp.name, params)


def _refuse_what_the_link_lacks(exp: Experiment) -> None:
    """Refuse, naming the experiment's field, a loss model or offloads its link's descriptor says
    it cannot run, before any cell is built (each cell would be refused the same)."""
    link = descriptor(exp.link)
    if link.cannot.gilbert_elliott and exp.gilbert_elliott is not None:
        able = next(d.name for d in LINKS.values() if not d.cannot.gilbert_elliott)
        raise SpecError(f"experiments[{exp.name}].gilbert_elliott: needs link {able}; {exp.link}'s "
                        f"{link.cannot.gilbert_elliott} (give loss or loss_percent)")
    if exp.link_offload is not None and exp.link_offload not in link.offloads:
        able = next(d.name for d in LINKS.values() if exp.link_offload in d.offloads)
        raise SpecError(f"experiments[{exp.name}].link_offload: {exp.link_offload} needs link {able}; {exp.link} "
                        f"{link.offload_limit} (give {' or '.join(link.offloads)}, or leave it unset)")


#: What a per-direction setting (policer, jitter, slot, delay schedule) places on a cell's directions.
DirectionEffect = TypeVar("DirectionEffect", Policer, Jitter, Slot, tuple[DelayStep, ...])


def _on_directions(effect: DirectionEffect, direction: str) -> tuple[DirectionEffect | None, DirectionEffect | None]:
    """The (uplink, downlink) share of one value of a per-direction axis: `effect` on the
    directions `direction` names (uplink, downlink or both), None on the other."""
    return (effect if direction in ("uplink", "both") else None,
            effect if direction in ("downlink", "both") else None)


def _loss_fields(model: LossModel | None) -> tuple[float, GilbertElliottLoss | None]:
    """A direction's (loss, gilbert_elliott) for its model (None: no loss): Bernoulli as the `loss`
    fraction every cell has held since schema 1, Gilbert-Elliott beside a `loss` of 0."""
    if isinstance(model, GilbertElliottLoss):
        return 0.0, model
    return (model.p if model is not None else 0.0), None


def _bpf_programs(exp: Experiment) -> dict[str, BpfProgramRef]:
    """The BPF congestion controls the experiment names, each pinned by its object's digest as
    built now (as a trace is pinned by its content): planning needs the objects (`make bpf`)."""
    names = dict.fromkeys(group.cc for mix in exp.flow_mixes() for group in mix if is_bpf(group.cc))
    try:
        return {name: BpfProgramRef(name=name, sha256=object_digest(name)) for name in names}
    except BpfObjectMissing as exc:
        raise SpecError(f"experiments[{exp.name}].cc: {exc}") from None


#: (uplink rate, uplink trace, downlink rate, downlink trace, mean data rate) of one bottleneck value.
Bottleneck = tuple[float | None, TraceRef | None, float | None, TraceRef | None, float]


def _bottlenecks(exp: Experiment) -> list[Bottleneck]:
    """The bottleneck axis: one entry per bandwidth or per trace pair."""
    if exp.bandwidth_mbps is not None:
        return [(bw, None, bw, None, bw) for bw in exp.bandwidth_mbps]
    traces: list[TraceSetting] = exp.trace or []
    links: list[Bottleneck] = []
    for t in traces:
        up, down = load_trace(t.uplink), load_trace(t.downlink)
        links.append((None, up.ref, None, down.ref, up.mean_mbps))
    return links


def _flows(mix: list[FlowGroup]) -> Iterator[FlowParams]:
    for group in mix:
        for i in range(group.count):
            yield FlowParams(cc=group.cc, start_s=group.start_s + i * group.stagger_s)


def _queue(setting: QueueSetting, rate_mbps: float, rtt_ms: float, where: str) -> QueueParams:
    """The resolved queue of a path; a limit the path makes invalid is a SpecError naming `where`.

    The spec validates each queue on its own; only here, with the path's rate and RTT, does a BDP
    multiple become bytes (0 bytes at rtt_ms 0, say), so this is where such a mistake shows.
    """
    limit_bytes = setting.bytes
    bdp_bytes = rate_mbps * 1e6 / 8 * rtt_ms / 1000
    if setting.bdp is not None:
        limit_bytes = max(setting.min_bytes, round(setting.bdp * bdp_bytes))
        if limit_bytes < MIN_QUEUE_BYTES and setting.packets is None:
            raise SpecError(f"{where}: bdp {setting.bdp:g} of a {bdp_bytes:.0f}-byte BDP at {rate_mbps:g} Mbit/s and "
                            f"{rtt_ms:g} ms RTT is {limit_bytes} bytes, less than one full-size packet "
                            f"({MIN_QUEUE_BYTES}); set min_bytes")
    try:
        return QueueParams(kind=setting.kind, packets=setting.packets, bytes=limit_bytes, target_ms=setting.target_ms,
                           interval_ms=setting.interval_ms, qdelay_ref_ms=setting.qdelay_ref_ms,
                           max_burst_ms=setting.max_burst_ms, ecn=setting.ecn, l4s_step_us=setting.l4s_step_us)
    except ValidationError as exc:
        context = (f" (bdp {setting.bdp:g} of a {bdp_bytes:.0f}-byte BDP at {rate_mbps:g} Mbit/s and {rtt_ms:g} ms "
                   f"RTT is {limit_bytes} bytes; set min_bytes)" if setting.bdp is not None else "")
        raise SpecError(f"{where}: {one_line(exc)}{context}") from None
