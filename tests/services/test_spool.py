"""The spool keeps a finished cell while MinIO is down and uploads it, whole, when it is back."""

from __future__ import annotations

import io
import threading
from pathlib import Path

import pytest

from ccsweep.result import FlowSeries, TimeSeries
from ccsweep.store import open_store
from ccsweep.store.spool import Spool, store_cell
from servers import Server, s3_env
from test_s3_store import result_of


@pytest.fixture
def down_store(own_minio: Server, monkeypatch: pytest.MonkeyPatch):
    for name, value in s3_env(own_minio).items():
        monkeypatch.setenv(name, value)
    own_minio.stop()
    return open_store("s3://spooled/run")


def test_cell_is_spooled_then_uploaded_by_a_retry_when_minio_returns(down_store, own_minio: Server, tmp_path: Path):
    spool = Spool(tmp_path / "spool")
    result = result_of(10)
    log = tmp_path / "uplink.log.gz"
    log.write_bytes(b"link log bytes")
    series = TimeSeries(cell_id=result.cell.id, flows=[FlowSeries(t=[0.1], rtt_us=[20000])])
    err = io.StringIO()
    restart = threading.Timer(1.0, own_minio.start)  # back during the retries (0.5 + 1 + 2 s)
    restart.start()
    try:
        outcome = store_cell(down_store, result, series, {"uplink.log.gz": log}, spool=spool, retries=3,
                             backoff_s=0.5, err=err)
    finally:
        restart.join()
    lines = err.getvalue().splitlines()
    assert outcome.stored and outcome.spooled is None, lines
    assert "store unreachable" in lines[0] and "connection refused" in lines[0] and str(spool.root) in lines[0]
    assert "uploaded" in lines[-1]
    store = open_store("s3://spooled/run")
    assert store.get_result(result.cell.id).goodput_mbps == 12.5
    assert store.get_timeseries(result.cell.id).flows[0].rtt_us == [20000]
    assert store.get_cell_file(result.cell.id, "uplink.log.gz") == b"link log bytes"
    assert spool.pending(store.url) == [] and spool.targets() == []


def test_cells_left_in_the_spool_are_flushed_later_and_nothing_is_lost(down_store, own_minio: Server,
                                                                        tmp_path: Path):
    spool = Spool(tmp_path / "spool")
    results = [result_of(20 + i) for i in range(3)] + [result_of(30, status="failed")]
    err = io.StringIO()
    for result in results:
        outcome = store_cell(down_store, result, None, {}, spool=spool, retries=1, backoff_s=0.05, err=err)
        assert not outcome.stored and outcome.spooled is not None
    assert "upload-spool" in err.getvalue().splitlines()[-1]
    assert spool.targets() == [down_store.url]
    assert len(spool.pending(down_store.url)) == 4

    assert spool.flush(down_store).error is not None, "still down: nothing uploaded, nothing dropped"
    assert len(spool.pending(down_store.url)) == 4

    own_minio.start()
    report = spool.flush(open_store(down_store.url))
    assert sorted(report.uploaded) == sorted(r.cell.id for r in results) and report.remaining == []
    store = open_store(down_store.url)
    assert all(store.has_result(r.cell.id) for r in results[:3])
    assert not store.has_result(results[3].cell.id) and store.list_keys(f"cells/{results[3].cell.id}/failed/")


def test_a_spooled_cell_already_stored_elsewhere_keeps_the_stored_record(down_store, own_minio: Server,
                                                                          tmp_path: Path):
    spool = Spool(tmp_path / "spool")
    spooled = result_of(40).model_copy(update={"goodput_mbps": 1.0})
    series = {rtt: TimeSeries(cell_id=spooled.cell.id, flows=[FlowSeries(t=[0.1], rtt_us=[rtt])]) for rtt in (1, 2)}
    store_cell(down_store, spooled, series[1], {}, spool=spool, retries=0, err=io.StringIO())
    own_minio.start()
    store = open_store(down_store.url)
    store.put_cell(result_of(40), series[2])  # another runner stored the same cell meanwhile
    assert spool.flush(store).uploaded == [spooled.cell.id]
    assert store.get_result(spooled.cell.id).goodput_mbps == 12.5, "write-once: the first record stays"
    assert store.get_timeseries(spooled.cell.id).flows[0].rtt_us == [2], "...with its own time series"
    assert len(store.list_keys(f"cells/{spooled.cell.id}/")) == 2, "the spooled attempt's files are not uploaded"
    assert spool.pending(store.url) == []
