"""A sweep's results as tidy tables: one row per stored cell, and one per flow, every value a column.

What `ccsweep export`, `ccsweep.load` and the report's `cells.csv` / `flows.csv` are made of, so
the three can never disagree.  Plain Python (no pandas): the figures step writes the CSVs in the
cell image, which carries no data-frame library.  Each column has one type (COLUMN_TYPES), which
`ccsweep.analysis` turns into pandas dtypes, so a CSV read back with them equals the DataFrame.

Rows are the results figures draw: stored on-time records (`sweep_status.counts`).  Late and
failed attempts are listed in the report, not here, so a mean over a column is a mean over cells
that count.  Parameters are flattened with `_` between levels (`uplink_queue_bytes`), the socket
buffers' (min, default, max) triples become three columns each, and a few derived axes (loss,
rtt_ms, bandwidth_mbps, buffer_bdp) sit beside them so a plot needs no arithmetic.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Literal, TextIO

from ccsweep.cell import DIRECTION_EFFECTS, CellParams, DirectionParams, Frozen
from ccsweep.result import CellResult, DirectionCounters, SelfCheck
from ccsweep.results.data import SweepData
from ccsweep.results.points import buffer_bdp, flows_label
from ccsweep.store.base import record_key

ColumnType = Literal["str", "int", "float", "bool"]
Row = dict[str, Any]

#: The cell record's measurements, by the name each has everywhere (record, CSV header, report).
CELL_METRICS: tuple[str, ...] = ("goodput_mbps", "goodput_steady_mbps", "bottleneck_throughput_mbps", "capacity_mbps")
FLOW_METRICS: tuple[str, ...] = ("bytes_received", "goodput_mbps", "goodput_steady_mbps", "retransmits",
                                 "rtt_mean_ms", "rtt_p50_ms", "rtt_p95_ms", "min_rtt_ms", "rwnd_limited_fraction",
                                 "sndbuf_limited_fraction", "delivered_ce")
COUNTERS: tuple[str, ...] = ("in_packets", "in_bytes", "out_packets", "out_bytes", "bottleneck_packets",
                             "bottleneck_bytes", "capacity_bytes", "drops_loss", "drops_queue", "drops_aqm",
                             "drops_policer", "marks_aqm", "marks_step", "queue_bytes_max")
QUEUE_FIELDS: tuple[str, ...] = ("kind", "packets", "bytes", "target_ms", "interval_ms", "qdelay_ref_ms",
                                 "max_burst_ms", "ecn", "l4s_step_us")
TRIPLE = ("min", "default", "max")


def _steps_json(steps: tuple[Frozen, ...]) -> str | None:
    """A schedule's steps as JSON (a list of their fields), None for none."""
    return json.dumps([step.model_dump() for step in steps]) if steps else None


def _direction(prefix: str, direction: DirectionParams) -> Row:
    row: Row = {
        f"{prefix}_rate_mbps": direction.rate_mbps,
        f"{prefix}_trace": direction.trace.name if direction.trace else None,
        f"{prefix}_trace_sha256": direction.trace.sha256 if direction.trace else None,
        f"{prefix}_rate_schedule": _steps_json(direction.rate_schedule),
        f"{prefix}_delay_ms": direction.delay_ms,
        f"{prefix}_delay_schedule": _steps_json(direction.delay_schedule),
        f"{prefix}_loss": direction.loss_model.mean_loss_rate,
        f"{prefix}_gilbert_elliott": direction.gilbert_elliott.model_dump_json() if direction.gilbert_elliott else None,
        **{f"{prefix}_{name}": effect.model_dump_json() if (effect := getattr(direction, name)) else None
           for name in DIRECTION_EFFECTS},
    }
    row.update({f"{prefix}_queue_{name}": getattr(direction.queue, name) for name in QUEUE_FIELDS})
    return row


def params_row(params: CellParams) -> Row:
    """Every parameter of a cell as a flat column, with the derived axes figures use."""
    row: Row = {
        "cc": params.cc_label,
        "flows": flows_label(params),
        "n_flows": len(params.flows),
        "loss": params.loss,
        "rtt_ms": params.rtt_ms,
        "bandwidth_mbps": params.bandwidth_mbps,
        "buffer_bdp": buffer_bdp(params),
        "duration_s": params.duration_s,
        "warmup_s": params.warmup_s,
        "loss_position": params.loss_position,
        "message_bytes": params.message_bytes,
        "link_backend": params.link,
        "link_offload": params.link_offload,
        "kernel_required": params.kernel,
        "time_scale": params.time_scale,
        "tcp_ecn": params.tcp_ecn,
        "seed": params.seed,
        "repetition": params.repetition,
    }
    row.update(_direction("uplink", params.uplink))
    row.update(_direction("downlink", params.downlink))
    for name in ("tcp_rmem", "tcp_wmem"):
        row.update({f"{name}_{part}": value for part, value in zip(TRIPLE, getattr(params.buffers, name), strict=True)})
    return row


def _counters(prefix: str, counters: DirectionCounters | None) -> Row:
    return {f"{prefix}_{name}": getattr(counters, name) if counters else None for name in COUNTERS}


def _selfcheck(check: SelfCheck | None, late: bool | None) -> Row:
    names = ("lateness_p50_us", "lateness_p99_us", "lateness_max_us", "cpu_share", "threshold_us", "sched",
             "release_window_us")
    row: Row = {f"emulator_{name}": getattr(check, name) if check else None for name in names}
    row["emulator_late"] = late
    return row


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _total(values: Iterable[int | None]) -> int | None:
    """The sum, or None if any value is missing (a flow whose kernel did not report it)."""
    present = list(values)
    return None if any(v is None for v in present) else sum(v for v in present if v is not None)


def cell_row(result: CellResult, sweep: str, experiments: list[str], record: str) -> Row:
    """One stored cell: where it belongs, its parameters, measurements, link counters and environment."""
    flows, link, env = result.flows, result.link, result.environment
    row: Row = {"sweep": sweep, "experiment": experiments[0], "experiments": ";".join(experiments),
                "cell_id": result.cell.id}
    row.update(params_row(result.cell.params))
    row.update({"status": result.status, "attempt": result.attempt, "started_at": result.started_at,
                "finished_at": result.finished_at, "flows_started_at": result.flows_started_at})
    row.update({name: getattr(result, name) for name in CELL_METRICS})
    row.update({
        "retransmits": sum(f.retransmits for f in flows),
        "rtt_mean_ms": _mean(f.rtt_mean_ms for f in flows),
        "min_rtt_ms": min((f.min_rtt_ms for f in flows if f.min_rtt_ms is not None), default=None),
        "rwnd_limited_fraction": _mean(f.rwnd_limited_fraction for f in flows),
        "sndbuf_limited_fraction": _mean(f.sndbuf_limited_fraction for f in flows),
        "delivered_ce": _total(f.delivered_ce for f in flows),
    })
    row.update(_counters("uplink", link.uplink if link else None))
    row.update(_counters("downlink", link.downlink if link else None))
    row.update(_selfcheck(link.selfcheck if link else None, result.late))
    row.update({
        "link_version": link.version if link else None,
        "link_offload_ran": link.offload if link else None,
        "link_order": link.order if link else None,
        "link_not_measured": ";".join(link.not_measured) or None if link else None,
        "kernel": env.kernel,
        "hostname": env.hostname,
        "ccsweep_version": env.ccsweep_version,
        "python": env.python,
        "executor": env.executor,
        "available_cc": ";".join(env.available_cc) or None,
        "env_tcp_rmem": " ".join(map(str, env.tcp_rmem)) if env.tcp_rmem else None,
        "env_tcp_wmem": " ".join(map(str, env.tcp_wmem)) if env.tcp_wmem else None,
        "record": record,
    })
    return row


def flow_rows(result: CellResult, cell: Row) -> list[Row]:
    """One row per flow: the cell's identity and parameters, then the flow's own measurements."""
    keep = {k: cell[k] for k in ("sweep", "experiment", "experiments", "cell_id")}
    keep.update(params_row(result.cell.params))
    keep.update({k: cell[k] for k in ("kernel", "ccsweep_version", "record")})
    return [{**keep, "flow": flow.index, "flow_cc": flow.cc, "flow_start_s": flow.start_s,
             **{name: getattr(flow, name) for name in FLOW_METRICS}} for flow in result.flows]


def experiments_by_cell(sweep: SweepData) -> dict[str, list[str]]:
    """Each planned cell's experiments, in manifest order (a cell can serve several)."""
    names: dict[str, list[str]] = {}
    for cell_id, experiment in sweep.plan:
        names.setdefault(cell_id, [])
        if experiment not in names[cell_id]:
            names[cell_id].append(experiment)
    return names


def tables(sweep: SweepData, location: Callable[[str], str] = lambda key: key) -> tuple[list[Row], list[Row]]:
    """(cells, flows) of a sweep; `location` turns a store key into the link given in `record`."""
    cells, flows = [], []
    for row, rows_of_flows in _rows(sweep, location):
        cells.append(row)
        flows += rows_of_flows
    return cells, flows


def _rows(sweep: SweepData, location: Callable[[str], str]) -> Iterator[tuple[Row, list[Row]]]:
    """Each stored cell's row and its flows' rows, one cell at a time."""
    experiments = experiments_by_cell(sweep)
    for result in sweep.distinct_results():
        row = cell_row(result, sweep.name, experiments[result.cell.id], location(record_key(result.cell.id)))
        yield row, flow_rows(result, row)


def tables_csv(sweep: SweepData, location: Callable[[str], str] = lambda key: key,
               cells: CsvText | None = None, flows: CsvText | None = None) -> tuple[CsvText, CsvText]:
    """The cells and flows tables as CSV (as write_csv writes them), built a cell at a time: the
    figures step never holds a dict per cell and per flow (some 9 KiB a cell), and with CsvTexts
    writing to files, not even the text."""
    cells, flows = cells or CsvText(), flows or CsvText()
    for row, rows_of_flows in _rows(sweep, location):
        cells.add(row)
        for flow in rows_of_flows:
            flows.add(flow)
    return cells, flows


class CsvText:
    """CSV written a row at a time, byte for byte as write_csv writes the same rows at once."""

    def __init__(self, out: TextIO | None = None) -> None:
        """`out`: where the text goes (a file the figures step sends as it is); else kept for text()."""
        self._out = out or io.StringIO()
        self._writer = csv.writer(self._out, lineterminator="\n")
        self._header: list[str] | None = None
        self.rows = 0

    def add(self, row: Row) -> None:
        if self._header is None:
            self._header = list(row)
            self._writer.writerow(self._header)
        self._writer.writerow([_cell_text(row[name]) for name in self._header])
        self.rows += 1

    def text(self) -> str:
        assert isinstance(self._out, io.StringIO), "a CsvText writing to a file keeps no text"
        return self._out.getvalue()


_DIRECTION_FLOATS = ("rate_mbps", "delay_ms", "loss", "queue_target_ms", "queue_interval_ms", "queue_qdelay_ref_ms",
                     "queue_max_burst_ms")
_SELFCHECK_FLOATS = ("lateness_p50_us", "lateness_p99_us", "lateness_max_us", "cpu_share", "threshold_us",
                     "release_window_us")
#: Every numeric or flag column by its one type; any other column is text.  Fixed by name, not
#: read from values, so a column whose values are all missing (a trace link's rate, Mahimahi's
#: lateness) has the same type in every sweep, and a CSV reads back without guessing.
_INTS = {"n_flows", "message_bytes", "seed", "repetition", "attempt", "retransmits", "flow", "bytes_received",
         "delivered_ce",
         *(f"{d}_queue_{n}" for d in ("uplink", "downlink") for n in ("packets", "bytes", "l4s_step_us")),
         *(f"{b}_{part}" for b in ("tcp_rmem", "tcp_wmem") for part in TRIPLE),
         *(f"{d}_{c}" for d in ("uplink", "downlink") for c in COUNTERS)}
_FLOATS = {"loss", "rtt_ms", "bandwidth_mbps", "buffer_bdp", "duration_s", "warmup_s", "time_scale", "flow_start_s",
           *CELL_METRICS, *(m for m in FLOW_METRICS if m not in _INTS),
           *(f"{d}_{n}" for d in ("uplink", "downlink") for n in _DIRECTION_FLOATS),
           *(f"emulator_{n}" for n in _SELFCHECK_FLOATS)}
_BOOLS = {"emulator_late", "uplink_queue_ecn", "downlink_queue_ecn"}


def column_type(name: str) -> ColumnType:
    """A column's one type: what `ccsweep.analysis` makes a pandas dtype of, for a table and its CSV alike."""
    if name in _INTS:
        return "int"
    if name in _FLOATS:
        return "float"
    return "bool" if name in _BOOLS else "str"


def _cell_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def write_csv(rows: list[Row]) -> str:
    """CSV with a header; floats written with repr so they read back exactly, None as an empty field."""
    out = CsvText()
    for row in rows:
        out.add(row)
    return out.text()

