"""Expand a sweep spec into cells: the cartesian product of each experiment's axes.

Resolution happens here, once: percent to fractions, RTT to per-direction delays, BDP multiples
to byte limits, trace names to content hashes.  Runners receive cells that need no spec.
"""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from ccsweep.cell import (
    MAHIMAHI_OPPORTUNITY_BYTES,
    Cell,
    CellParams,
    DirectionParams,
    FlowParams,
    QueueParams,
    TraceRef,
)
from ccsweep.spec import Experiment, FlowGroup, QueueSetting, ReversePath, SpecError, SweepSpec, TraceSetting, one_line


def trace_search_path() -> list[Path]:
    """Trace directories: $CCSWEEP_TRACES (colon-separated), then the image's /opt/ccsweep/traces."""
    dirs = [Path(p) for p in os.environ.get("CCSWEEP_TRACES", "").split(":") if p]
    return dirs + [Path("/opt/ccsweep/traces")]


def find_trace(name: str) -> Path:
    """A trace file by name (or path), on the trace search path."""
    path = Path(name)
    if path.is_absolute() or os.sep in name:
        if path.is_file():
            return path
        raise SpecError(f"trace {name}: no such file")
    for directory in trace_search_path():
        if (directory / name).is_file():
            return directory / name
    where = ", ".join(map(str, trace_search_path()))
    raise SpecError(f"trace {name}: not found (looked in {where}; set CCSWEEP_TRACES)")


def trace_ref(name: str) -> TraceRef:
    path = find_trace(name)
    return TraceRef(name=path.name, sha256=hashlib.sha256(path.read_bytes()).hexdigest())


def trace_mean_mbps(name: str) -> float:
    """Mean capacity of a Mahimahi trace (1504-byte opportunities over the trace period)."""
    stamps = find_trace(name).read_text().split()
    period_ms = int(stamps[-1])
    return len(stamps) * MAHIMAHI_OPPORTUNITY_BYTES * 8 / (period_ms * 1000)


def expand(spec: SweepSpec) -> list[Cell]:
    """All cells of a sweep, in a stable order (experiment order, then the axes in spec order).

    The same parameters in two experiments give two entries with one id: executors run the id once.
    """
    return [cell for experiment in spec.experiments for cell in expand_experiment(spec.name, experiment)]


def expand_experiment(sweep: str, exp: Experiment) -> Iterator[Cell]:
    links = _bottlenecks(exp)
    reverses: list[ReversePath | None] = list(exp.reverse) if exp.reverse else [None]
    axes = itertools.product(exp.flow_mixes(), exp.loss_fractions, exp.rtt_ms, links, enumerate(exp.queue), reverses,
                             range(exp.repetitions))
    for mix, loss, rtt, (rate, trace, down_rate, down_trace, mean_mbps), (qi, queue), reverse, rep in axes:
        up_loss = loss if exp.loss_direction in ("uplink", "both") else 0.0
        down_loss = loss if exp.loss_direction in ("downlink", "both") else 0.0
        down_delay = rtt / 2
        if reverse is not None:
            down_delay = reverse.delay_ms if reverse.delay_ms is not None else down_delay
            down_loss = reverse.loss_percent / 100 if reverse.loss_percent is not None else down_loss
        params = CellParams(
            flows=tuple(_flows(mix)),
            uplink=DirectionParams(rate_mbps=rate, trace=trace, rate_schedule=tuple(exp.rate_schedule) if rate else (),
                                   delay_ms=rtt / 2, loss=up_loss,
                                   queue=_queue(queue, mean_mbps, rtt, where=f"experiments[{exp.name}].queue[{qi}]")),
            downlink=DirectionParams(rate_mbps=down_rate, trace=down_trace, delay_ms=down_delay, loss=down_loss),
            duration_s=exp.duration_s,
            warmup_s=exp.effective_warmup_s,
            loss_position=exp.loss_position,
            buffers=exp.buffers,
            message_bytes=exp.message_bytes,
            seed=exp.seed + rep,
            repetition=rep,
        )
        yield Cell.build(sweep, exp.name, params)


def _bottlenecks(exp: Experiment) -> list[tuple[float | None, TraceRef | None, float | None, TraceRef | None, float]]:
    """(uplink rate, uplink trace, downlink rate, downlink trace, mean data rate) per bottleneck value."""
    if exp.bandwidth_mbps is not None:
        return [(bw, None, bw, None, bw) for bw in exp.bandwidth_mbps]
    traces: list[TraceSetting] = exp.trace or []
    return [(None, trace_ref(t.uplink), None, trace_ref(t.downlink), trace_mean_mbps(t.uplink)) for t in traces]


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
    try:
        return QueueParams(kind=setting.kind, packets=setting.packets, bytes=limit_bytes, target_ms=setting.target_ms,
                           interval_ms=setting.interval_ms, qdelay_ref_ms=setting.qdelay_ref_ms,
                           max_burst_ms=setting.max_burst_ms)
    except ValidationError as exc:
        context = (f" (bdp {setting.bdp:g} of a {bdp_bytes:.0f}-byte BDP at {rate_mbps:g} Mbit/s and {rtt_ms:g} ms "
                   f"RTT is {limit_bytes} bytes; set min_bytes)" if setting.bdp is not None else "")
        raise SpecError(f"{where}: {one_line(exc)}{context}") from None
