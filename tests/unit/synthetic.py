"""Synthetic result records for cells of a real expansion: for checks and figure logic no fixture reaches.

The cells come from `expand`, so their parameters are exactly what a sweep would run; only the
measurements are made up, to sit on a chosen side of a bound or to give a figure known input.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ccsweep.cell import Cell
from ccsweep.expand import expand
from ccsweep.result import CellResult, Environment, FlowResult, TimeSeries
from ccsweep.results.data import ExperimentData
from ccsweep.specload import parse_spec

ENV = Environment(hostname="h", kernel="k", available_cc=["bbr", "cubic", "reno"], ccsweep_version="0", python="3")
#: The BBR paper's path, 30 s flows.
PATH = {"rtt_ms": [100], "bandwidth_mbps": [100], "duration_s": 30, "warmup_s": 5}

Measure = Callable[[Cell], dict[str, Any]]


def flow(cell: Cell, goodput: float, **rtt: float) -> FlowResult:
    """The cell's first flow with `goodput` (whole and steady) and the given RTT statistics."""
    return FlowResult(index=0, cc=cell.params.flows[0].cc, start_s=0, bytes_received=0, goodput_mbps=goodput,
                      goodput_steady_mbps=goodput, throughput_per_s_mbps=[], retransmits=0, **rtt)


def goodput(value: Callable[[Cell], float], **rtt: float) -> Measure:
    """Measurements of a single-flow cell: goodput `value(cell)` for the cell and its flow."""
    return lambda c: {"goodput_mbps": value(c), "goodput_steady_mbps": value(c), "flows": [flow(c, value(c), **rtt)]}


def experiment(exp: dict[str, Any], measure: Measure, series: Callable[[Cell], TimeSeries] | None = None
               ) -> ExperimentData:
    """Experiment `e` (PATH unless `exp` overrides it) with `measure`'s numbers for each of its cells."""
    spec = parse_spec({"name": "s", "experiments": [{"name": "e", **PATH, **exp}]})
    cells = expand(spec)
    results = [CellResult(cell=c, status="ok", started_at="a", finished_at="b", environment=ENV, **measure(c))
               for c in cells]
    by_id = {c.id: c for c in cells}
    return ExperimentData(experiment=spec.experiments[0], results=results,
                          load_series=lambda i: series(by_id[i]) if series else None)
