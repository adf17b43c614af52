"""ReBBR-compatible CSV: one row per cell, the columns ReBBR's plotting scripts read.

Columns: congestion_control, loss_rate (a fraction, as ReBBR wrote it), goodput_Mbps, rtt_ms,
bandwidth_Mbps, specified_bw_Mbps.  The meanings follow ReBBR, not ccsweep: its "goodput" is
mm-throughput-graph's average throughput of the bottleneck's uplink log (headers and
retransmissions included), which ccsweep records as `bottleneck_throughput_mbps`; bandwidth_Mbps
is the capacity the link offered (its "capacity"); specified_bw_Mbps is the configured rate (the
measured capacity for a trace link, which has no single configured rate).  Cells without a
bottleneck measurement are left out rather than given a number that means something else.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from dataclasses import astuple, dataclass, fields
from typing import TextIO

from ccsweep.result import CellResult


@dataclass(frozen=True)
class RebbrRow:
    congestion_control: str
    loss_rate: float
    goodput_Mbps: float  # noqa: N815 - ReBBR's column names
    rtt_ms: float
    bandwidth_Mbps: float  # noqa: N815
    specified_bw_Mbps: float  # noqa: N815


COLUMNS = [f.name for f in fields(RebbrRow)]


def row_of(result: CellResult) -> RebbrRow | None:
    params = result.cell.params
    capacity = result.capacity_mbps if result.capacity_mbps is not None else params.bandwidth_mbps
    if result.status != "ok" or result.bottleneck_throughput_mbps is None or capacity is None:
        return None
    specified = params.bandwidth_mbps if params.bandwidth_mbps is not None else capacity
    return RebbrRow(params.cc_label, params.loss, result.bottleneck_throughput_mbps, params.rtt_ms, capacity, specified)


def each_row(results: Iterable[CellResult]) -> Iterator[RebbrRow]:
    """The rows of the cells that have one, a record at a time."""
    return (row for row in map(row_of, results) if row is not None)


def rows_of(results: Iterable[CellResult]) -> list[RebbrRow]:
    return list(each_row(results))


def write_rows(out: TextIO, rows: Iterable[RebbrRow]) -> None:
    """CSV with a header row, a row at a time; floats written with repr so they read back exactly."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow([repr(v) if isinstance(v, float) else v for v in astuple(row)])


def write_csv(rows: Iterable[RebbrRow]) -> str:
    """write_rows' text."""
    out = io.StringIO()
    write_rows(out, rows)
    return out.getvalue()


def read_csv(text: str) -> list[RebbrRow]:
    """Rows of a ReBBR-format CSV (ccsweep's or ReBBR's own); a wrong header is a one-line ValueError."""
    reader = csv.reader(io.StringIO(text), skipinitialspace=True)  # "a, b" as well as "a,b"
    header = next(reader, None)
    if header is None or [h.strip() for h in header] != COLUMNS:
        raise ValueError(f"not a ReBBR CSV: header {header!r}, expected {','.join(COLUMNS)}")
    rows = []
    for number, record in enumerate(reader, start=2):
        if not record:
            continue
        if len(record) != len(COLUMNS):
            raise ValueError(f"line {number}: {len(record)} fields, expected {len(COLUMNS)}")
        try:
            rows.append(RebbrRow(record[0], *map(float, record[1:])))
        except ValueError:
            raise ValueError(f"line {number}: not a number in {record[1:]!r}") from None
    return rows
