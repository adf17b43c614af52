"""A sweep's results as pandas DataFrames: `ccsweep.load`, `ccsweep.load_timeseries`, `ccsweep.read_csv`.

The tables are `results.tidy`'s (one row per stored cell, or per flow), typed by column name:
ints as pandas' nullable Int64 (a trace link has no queue limit), floats as float64 with NaN,
flags as nullable boolean (`emulator_late` is empty where lateness was not measured), text as
string.  `read_csv` applies the same types, so a CSV written by `ccsweep export` reads back equal
to `load`.  pandas and pyarrow come with the `data` extra (`pip install 'ccsweep[data]'`); nothing
else in ccsweep imports this module.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Literal

from ccsweep.cell import Cell
from ccsweep.result import TimeSeries
from ccsweep.results.data import load_sweep
from ccsweep.results.tidy import ColumnType, Row, column_type, experiments_by_cell, tables
from ccsweep.store import ResultStore, open_store

try:
    import pandas as pd
except ImportError as exc:  # one line naming the extra, not a traceback into pandas' absence
    raise ImportError("ccsweep's DataFrame API needs pandas: pip install 'ccsweep[data]'") from exc

Table = Literal["cells", "flows"]
SeriesKind = Literal["sender", "receiver", "link"]
DTYPES: dict[ColumnType, str] = {"int": "Int64", "float": "float64", "bool": "boolean", "str": "string"}


def _store(store: ResultStore | str) -> ResultStore:
    return open_store(store) if isinstance(store, str) else store


def frame(rows: list[Row]) -> pd.DataFrame:
    """Rows of a tidy table as a DataFrame with one dtype per column."""
    columns = list(rows[0]) if rows else []
    df = pd.DataFrame.from_records(rows, columns=columns)
    return df.astype({name: DTYPES[column_type(name)] for name in columns})


def sweep_tables(store: ResultStore | str, sweep: str) -> tuple[list[Row], list[Row]]:
    """(cells, flows) rows of a stored sweep, each cell's record named by its store location."""
    opened = _store(store)
    return tables(load_sweep(opened, sweep), opened.location)


def load(store: ResultStore | str, sweep: str, table: Table = "cells") -> pd.DataFrame:
    """One row per stored cell (or, with table="flows", per flow) of `sweep` in `store`.

    `store` is anything `--store` takes (a folder, file://PATH, s3://BUCKET/PREFIX with the
    credentials from the environment) or an open ResultStore.
    """
    cells, flows = sweep_tables(store, sweep)
    return frame(cells if table == "cells" else flows)


def read_csv(path: str | Path) -> pd.DataFrame:
    """A CSV written by `ccsweep export` (or the report's cells.csv / flows.csv), with `load`'s dtypes."""
    text = pd.read_csv(path, dtype="string", keep_default_na=False, na_values=[""])
    out = {}
    for name in text.columns:
        kind, column = column_type(name), text[name]
        if kind == "bool":
            out[name] = column.map({"true": True, "false": False}, na_action="ignore").astype("boolean")
        elif kind == "int":
            out[name] = column.astype("Int64")
        else:
            out[name] = column.astype(DTYPES[kind])
    return pd.DataFrame(out)


def load_timeseries(store: ResultStore | str, sweep: str, cells: Iterable[str] | None = None,
                    kind: SeriesKind = "sender") -> pd.DataFrame:
    """The 100 ms series of a sweep's stored cells (or only `cells`, by id), long form: one row per sample.

    kind="sender": per flow, tcp_info (srtt_ms, the smoothed RTT; min_rtt_ms; cwnd in packets, pacing and delivery
    rate in Mbit/s, total_retrans, bytes_acked) and BBR's TCP_CC_INFO (bbr_bw_mbps,
    bbr_min_rtt_ms; empty for other algorithms); "receiver": per flow, cumulative bytes received
    on the receiver's own clock; "link": the emulator's counters as it wrote them.  `t` is seconds
    since the flows' start.  Every row carries the cell's id, experiment, cc label, loss, base RTT
    (rtt_ms, as in `load`'s table) and repetition, so a plot can split by them directly.
    """
    opened = _store(store)
    wanted = set(cells) if cells is not None else None
    frames = []
    for cell, experiment, series in _stored_series(opened, sweep, wanted):
        columns = series_columns(series, kind)
        if columns:
            p = cell.params
            keys = {"cell_id": cell.id, "experiment": experiment, "cc": p.cc_label, "loss": p.loss,
                    "rtt_ms": p.rtt_ms, "repetition": p.repetition}
            frames.append(pd.DataFrame({**keys, **columns}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _stored_series(store: ResultStore, sweep: str, wanted: set[str] | None) -> Iterator[tuple[Cell, str, TimeSeries]]:
    data = load_sweep(store, sweep)
    experiments = experiments_by_cell(data)
    for result in data.distinct_results():
        cell = result.cell
        if wanted is not None and cell.id not in wanted:
            continue
        series = store.get_timeseries(cell.id)
        if series is not None:
            yield cell, experiments[cell.id][0], series


def series_columns(series: TimeSeries, kind: SeriesKind) -> dict[str, list[object]]:
    """One kind of a cell's series as equal-length columns (empty when the cell has none of that kind)."""
    columns: dict[str, list[object]] = {}
    if kind == "link":
        if series.link is None:
            return columns
        n = len(series.link.t)
        for name, values in series.link.model_dump(exclude={"flows_start_s"}).items():
            if len(values) == n:  # older records lack uplink_in_packets: left out, not misaligned
                columns[name] = values
        return columns
    for index, flow in enumerate(series.flows):
        if kind == "receiver":
            part: dict[str, list[object]] = {"flow": [index] * len(flow.receiver_t), "t": list(flow.receiver_t),
                                              "bytes_received": list(flow.receiver_bytes)}
        else:
            n = len(flow.t)
            part = {"flow": [index] * n, "t": list(flow.t),
                    "srtt_ms": _scaled(flow.rtt_us, n, 1e-3), "min_rtt_ms": _scaled(flow.min_rtt_us, n, 1e-3),
                    "cwnd": _scaled(flow.cwnd, n, 1), "pacing_rate_mbps": _scaled(flow.pacing_rate_bps, n, 1e-6),
                    "delivery_rate_mbps": _scaled(flow.delivery_rate_bps, n, 1e-6),
                    "total_retrans": _scaled(flow.total_retrans, n, 1), "bytes_acked": _scaled(flow.bytes_acked, n, 1),
                    "bbr_bw_mbps": _scaled(flow.bbr_bw_bps, n, 1e-6),
                    "bbr_min_rtt_ms": _scaled(flow.bbr_min_rtt_us, n, 1e-3),
                    "bbr_pacing_gain": _scaled(flow.bbr_pacing_gain, n, 1.0),
                    "bbr_cwnd_gain": _scaled(flow.bbr_cwnd_gain, n, 1.0),
                    "inflight": _scaled(flow.inflight, n, 1.0)}
        for name, values in part.items():
            columns.setdefault(name, []).extend(values)
    return columns


def _scaled(values: list[int] | list[float] | None, n: int, factor: float) -> list[object]:
    """A series in its column's unit, or NaN where the flow did not record it (BBR's fields for CUBIC)."""
    if not values or len(values) != n:
        return [float("nan")] * n
    return [v * factor for v in values]
