"""The file store: write-once records, manifests never silently replaced, atomic files."""

import gzip
import tempfile
from pathlib import Path

import pytest

from ccsweep.cell import Cell, CellParams, DirectionParams, FlowParams
from ccsweep.manifest import SweepManifest
from ccsweep.result import CellResult, Environment, FlowSeries, TimeSeries
from ccsweep.store import StoreError, open_store
from ccsweep.store.base import attempt_folder
from ccsweep.storedplan import get_manifest, put_manifest


def make_result(status="ok", goodput=90.0, seed=1) -> CellResult:
    params = CellParams(flows=(FlowParams(cc="bbr"),), uplink=DirectionParams(rate_mbps=10, delay_ms=5, loss=0),
                        downlink=DirectionParams(rate_mbps=10, delay_ms=5, loss=0), duration_s=5, warmup_s=1, seed=seed)
    env = Environment(hostname="h", kernel="6.18", available_cc=["bbr"], ccsweep_version="0", python="3.11")
    return CellResult(cell=Cell.build("s", "e", params), status=status, started_at="t0", finished_at="t1",
                      goodput_mbps=goodput, environment=env, error=None if status == "ok" else "boom")


def test_plain_path_and_file_url_are_the_same_store(tmp_path: Path):
    assert open_store(str(tmp_path)).url == open_store(f"file://{tmp_path}").url


def test_unknown_scheme_is_one_line():
    with pytest.raises(StoreError, match=r"--store ftp://x: unknown scheme \(allowed: file://PATH, s3://"):
        open_store("ftp://x")


def test_record_is_written_once_and_never_overwritten(tmp_path: Path):
    store = open_store(str(tmp_path))
    first = make_result(goodput=90.0)
    log = tmp_path / "uplink.log.gz"
    log.write_bytes(b"log")
    series = TimeSeries(cell_id=first.cell.id, flows=[FlowSeries(t=[0.1], rtt_us=[100])])
    assert store.put_cell(first, series, {"uplink.log.gz": log}) is True
    assert store.put_cell(make_result(goodput=1.0)) is False
    stored = store.get_result(first.cell.id)
    assert stored.goodput_mbps == 90.0
    assert stored.artifacts == ["timeseries.json.gz", "uplink.log.gz"]
    assert store.get_timeseries(first.cell.id).flows[0].rtt_us == [100]
    assert store.get_cell_file(first.cell.id, "uplink.log.gz") == b"log"
    assert not [p for p in tmp_path.rglob(".*") if p.is_file()], "no temporary file is left behind"


def test_failed_result_is_kept_but_does_not_mark_the_cell_done(tmp_path: Path):
    store = open_store(str(tmp_path))
    failed = make_result(status="failed")
    store.put_cell(failed)
    assert not store.has_result(failed.cell.id)
    assert store.list_keys(f"cells/{failed.cell.id}/failed/")


def test_a_failed_attempt_keeps_its_time_series_and_link_logs_and_the_spool_uploads_them(tmp_path: Path):
    """What a failed attempt measured is stored beside its record, in a folder named by the record."""
    from ccsweep.store.spool import Spool

    failed = make_result(status="failed")
    log = tmp_path / "uplink.log.gz"
    log.write_bytes(b"log lines")
    series = TimeSeries(cell_id=failed.cell.id, flows=[FlowSeries(t=[0.1, 0.2], rtt_us=[100, 120])])
    spool = Spool(tmp_path / "spool")
    store = open_store(str(tmp_path / "store"))
    spool.keep(store.url, failed, series, {"uplink.log.gz": log})
    assert spool.flush(store).uploaded == [failed.cell.id]
    (key,) = store.list_keys(f"cells/{failed.cell.id}/failed/")
    record = CellResult.model_validate_json(store.read_bytes(key))
    assert record.artifacts == ["timeseries.json.gz", "uplink.log.gz"]
    files = store.attempt_files(key)
    assert files["uplink.log.gz"] == b"log lines"
    assert TimeSeries.model_validate_json(gzip.decompress(files["timeseries.json.gz"])).flows[0].rtt_us == [100, 120]
    assert not store.has_result(failed.cell.id)


def test_manifest_with_another_spec_is_refused(tmp_path: Path):
    store = open_store(str(tmp_path))
    manifest = SweepManifest(name="s", spec={"a": 1}, cells=[], created_at="t", ccsweep_version="0")
    put_manifest(store, manifest)
    put_manifest(store, manifest)  # the same spec again is fine (a resumed run)
    with pytest.raises(StoreError, match="already stored .* with a different spec"):
        put_manifest(store, manifest.model_copy(update={"spec": {"a": 2}}))
    assert get_manifest(store, "s").spec == {"a": 1}
    assert store.list_sweeps() == ["s"]


def test_a_runner_that_loses_the_race_never_leaves_its_files_beside_the_record(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch):
    """The interleaving of an Argo retry: B checked before A's record existed, so B writes its files
    after A stored the cell.  A's record keeps A's files; B's are removed again."""
    store = open_store(str(tmp_path))
    first, second = make_result(goodput=90.0), make_result(goodput=1.0)
    assert store.put_cell(first, TimeSeries(cell_id=first.cell.id, flows=[FlowSeries(t=[0.1], rtt_us=[100])]))
    monkeypatch.setattr(store, "has_result", lambda cell_id: False)  # B's look happened before A's record
    series = TimeSeries(cell_id=second.cell.id, flows=[FlowSeries(t=[0.1], rtt_us=[999])])
    assert store.put_cell(second, series) is False
    assert store.get_result(first.cell.id).goodput_mbps == 90.0
    assert store.get_timeseries(first.cell.id).flows[0].rtt_us == [100]
    record = store.read_bytes(f"cells/{first.cell.id}/result.json")
    assert store.list_keys(f"cells/{first.cell.id}/") == sorted([
        f"cells/{first.cell.id}/result.json", f"{attempt_folder(first.cell.id, record)}/timeseries.json.gz"])
    assert len(list((tmp_path / "cells" / first.cell.id).iterdir())) == 2, "B's empty folder is gone too"


def test_sweep_files_are_listed_without_the_manifest_or_revisions(tmp_path: Path):
    store = open_store(str(tmp_path))
    manifest = SweepManifest(name="s", spec={"name": "s"}, cells=[], created_at="t0", ccsweep_version="0")
    put_manifest(store, manifest)
    put_manifest(store, manifest.model_copy(update={"spec": {"name": "s", "description": "changed"}}), revise=True)
    store.put_sweep_file("s", "figures/a.png", b"png")
    store.put_sweep_file("s", "report.html", b"<html>")
    assert store.sweep_file_names("s") == ["figures/a.png", "report.html"]
    assert store.get_sweep_file("s", "figures/a.png") == b"png"
    assert store.get_sweep_file("s", "missing.png") is None


def test_a_sweep_file_written_from_a_stream_replaces_the_old_one_whole(tmp_path: Path):
    """put_sweep_stream (the report, written as rendered) reads back byte for byte, replaces what was
    there, and leaves no temporary file beside it."""
    store = open_store(str(tmp_path))
    store.put_sweep_file("s", "report.html", b"<html>old")
    body = b"<html>" + bytes(range(256)) * 4096
    with tempfile.TemporaryFile() as source:
        source.write(body)
        source.seek(0)
        assert store.put_sweep_stream("s", "report.html", source) == store.location("sweeps/s/report.html")
    assert store.get_sweep_file("s", "report.html") == body
    assert sorted(p.name for p in (tmp_path / "sweeps" / "s").iterdir()) == ["report.html", "revisions"]
    kept = store.list_keys("sweeps/s/revisions/files/report.html/")
    assert [store.read_bytes(key) for key in kept] == [b"<html>old", body], "both versions, oldest first, whole"


def test_a_rebuilt_sweep_file_replaces_no_earlier_version(tmp_path: Path):
    """Figures, the report and unplaceable.json are rebuilt: the name reads the newest, and every
    version is kept once among the sweep's revisions (a rebuild to the same bytes adds none)."""
    store = open_store(str(tmp_path))
    for body in (b"png one", b"png two", b"png one"):
        store.put_sweep_file("s", "figures/a.png", body)
    assert store.get_sweep_file("s", "figures/a.png") == b"png one"
    kept = store.list_keys("sweeps/s/revisions/files/figures/a.png/")
    assert [store.read_bytes(key) for key in kept] == [b"png one", b"png two"]
    assert all(key.endswith(".png") for key in kept)
    assert store.sweep_file_names("s") == ["figures/a.png"], "revisions are not the sweep's files"


def test_a_sweep_file_from_before_revisions_is_kept_before_it_is_replaced(tmp_path: Path):
    store = open_store(str(tmp_path))
    (tmp_path / "sweeps" / "s").mkdir(parents=True)
    (tmp_path / "sweeps" / "s" / "report.html").write_bytes(b"<html>written by an earlier ccsweep")
    store.put_sweep_file("s", "report.html", b"<html>new")
    kept = store.list_keys("sweeps/s/revisions/files/report.html/")
    assert [store.read_bytes(key) for key in kept] == [b"<html>written by an earlier ccsweep", b"<html>new"]
    assert kept[0].rsplit("/", 1)[1].startswith("00000000T000000")


def test_each_node_check_of_unplaceable_cells_is_kept(tmp_path: Path):
    from ccsweep.manifest import UnplaceableCells
    from ccsweep.storedplan import get_unplaceable, put_unplaceable

    store = open_store(str(tmp_path))
    put_unplaceable(store, UnplaceableCells(sweep="s", checked_at="t0", cells={"a" * 16: "no node has 16 cores"}))
    put_unplaceable(store, UnplaceableCells(sweep="s", checked_at="t1", cells={}))
    assert get_unplaceable(store, "s") == {}
    kept = store.list_keys("sweeps/s/revisions/files/unplaceable.json/")
    assert [UnplaceableCells.model_validate_json(store.read_bytes(key) or b"").checked_at for key in kept] == [
        "t0", "t1"]


def test_every_attempt_of_a_kind_is_read_oldest_first(tmp_path: Path):
    store = open_store(str(tmp_path))
    first, second = make_result(status="late", goodput=1.0), make_result(status="late", goodput=2.0)
    store.put_cell(first)
    store.put_cell(second)
    cell_id = first.cell.id
    assert [a.goodput_mbps for a in store.attempts(cell_id, "late")] == [1.0, 2.0]
    assert store.latest_attempt(cell_id, "late").goodput_mbps == 2.0
    assert store.attempts(cell_id, "failed") == []
    assert store.has_attempt(cell_id, "late") and not store.has_attempt(cell_id, "failed")
