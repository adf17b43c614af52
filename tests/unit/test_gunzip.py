"""Every gzip ccsweep reads back is unpacked within a bound: a stored time series or link log, and
a Workflow's compressedNodes (tests/operator/test_hostile_workflows.py) alike."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from ccsweep.gunzip import STEP_BYTES, NotGzip, TooLarge, gunzip
from ccsweep.result import CellResult, Environment
from ccsweep.results import linklog
from ccsweep.store import StoreError, open_store
from ccsweep.store.base import TIMESERIES, attempt_folder, record_key

#: 64 MiB of zeros, 64 KiB packed: what a hostile writer would store.
BOMB = gzip.compress(bytes(64 << 20), compresslevel=9)


def test_a_bomb_stops_at_its_bound_a_step_past_it_at_most():
    assert len(BOMB) < 128 << 10
    with pytest.raises(TooLarge, match="more than 1,048,576 bytes"):
        gunzip(BOMB, 1 << 20)
    assert STEP_BYTES <= 1 << 20  # what may be held beyond the bound before it is refused


def test_within_its_bound_the_data_comes_back_whole():
    data = bytes(range(256)) * 4096
    assert gunzip(gzip.compress(data), len(data)) == data


@pytest.mark.parametrize("blob", [b"plain text", gzip.compress(b"abc")[:-4], gzip.compress(b"a") + gzip.compress(b"b"),
                                  gzip.compress(b"abc") + b"trailing"], ids=["plain", "cut", "two streams", "trailing"])
def test_anything_but_one_whole_gzip_stream_is_refused(blob: bytes):
    with pytest.raises(NotGzip):
        gunzip(blob, 1 << 20)


def test_a_stored_time_series_that_unpacks_too_far_is_one_line_from_the_store(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch):
    from ccsweep.expand import expand
    from ccsweep.specload import parse_spec

    (cell,) = expand(parse_spec({"name": "t", "experiments": [{"name": "t", "cc": ["bbr"], "loss_percent": [0],
                                                              "rtt_ms": [20], "bandwidth_mbps": [10],
                                                              "duration_s": 3, "warmup_s": 1}]}))
    env = Environment(hostname="h", kernel="6.18", available_cc=["bbr"], ccsweep_version="0.1.0", python="3.11")
    store = open_store(f"file://{tmp_path}")
    result = CellResult(cell=cell, status="ok", started_at="2026-11-29T00:00:00Z",
                        finished_at="2026-11-29T00:00:03Z", goodput_mbps=9.0, environment=env)
    assert store.put_cell(result)
    record = store.read_bytes(record_key(cell.id))
    assert record is not None
    stored = tmp_path / attempt_folder(cell.id, record) / TIMESERIES  # as a hostile writer of the store would
    stored.parent.mkdir(parents=True, exist_ok=True)
    stored.write_bytes(BOMB)
    monkeypatch.setattr("ccsweep.store.base.MAX_TIMESERIES_BYTES", 1 << 20)
    with pytest.raises(StoreError, match=f"cell {cell.id}: its stored {TIMESERIES}: unpacks to more than"):
        store.get_timeseries(cell.id)


def test_a_link_log_past_its_bound_is_refused(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(linklog, "MAX_LINK_LOG_BYTES", 1 << 20)
    with pytest.raises(TooLarge):
        linklog.departure_delays(BOMB, 0, 1000)
