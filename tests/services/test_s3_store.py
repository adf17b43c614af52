"""The s3:// store against a real MinIO: the same layout and rules as the folder store."""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path

import pytest

from ccsweep.cell import Cell, CellParams, DirectionParams, FlowParams
from ccsweep.manifest import SweepManifest
from ccsweep.result import CellResult, Environment, FlowSeries, TimeSeries
from ccsweep.store import StoreError, StoreUnavailable, open_store
from ccsweep.store.file import FileStore
from ccsweep.store.s3 import S3Store
from ccsweep.store.s3config import load_settings
from ccsweep.storedplan import put_manifest
from servers import Server, free_port


def result_of(seed: int, status: str = "ok") -> CellResult:
    params = CellParams(flows=(FlowParams(cc="cubic"),), uplink=DirectionParams(rate_mbps=20, delay_ms=10, loss=0.01),
                        downlink=DirectionParams(rate_mbps=20, delay_ms=10, loss=0), duration_s=6, warmup_s=1,
                        seed=seed)
    env = Environment(hostname="h", kernel="6.18", available_cc=["cubic"], ccsweep_version="0", python="3.11")
    return CellResult(cell=Cell.build("services", "s3", params), status=status, started_at="t0", finished_at="t1",
                      goodput_mbps=12.5, environment=env, error=None if status == "ok" else "boom")


def test_cell_round_trip_in_the_folder_layout(s3: dict[str, str], bucket_url: str, tmp_path: Path):
    store = open_store(bucket_url)
    assert isinstance(store, S3Store) and store.url == bucket_url
    result = result_of(1)
    log = tmp_path / "uplink.log.gz"
    log.write_bytes(b"\x1f\x8b mahimahi log")
    series = TimeSeries(cell_id=result.cell.id, flows=[FlowSeries(t=[0.1, 0.2], rtt_us=[20100, 20300])])

    assert store.put_cell(result, series, {"uplink.log.gz": log}) is True
    assert store.has_result(result.cell.id)
    assert store.get_result(result.cell.id).goodput_mbps == 12.5
    assert store.get_timeseries(result.cell.id).flows[0].rtt_us == [20100, 20300]
    assert store.get_cell_file(result.cell.id, "uplink.log.gz") == log.read_bytes()

    folder = FileStore(tmp_path / "folder")
    folder.put_cell(result, series, {"uplink.log.gz": log})
    assert store.list_keys("cells/") == folder.list_keys("cells/"), "same keys as the folder store"
    assert store.location("cells/x") == f"{bucket_url}/cells/x"


def test_exclusive_write_keeps_the_first_record(s3: dict[str, str], bucket_url: str):
    store = open_store(bucket_url)
    first, second = result_of(2), result_of(2).model_copy(update={"goodput_mbps": 1.0})
    assert store.put_cell(first) is True
    assert store.put_cell(second) is False
    assert store.get_result(first.cell.id).goodput_mbps == 12.5


def test_second_exclusive_write_is_refused_by_the_server(s3: dict[str, str], bucket_url: str):
    """The conditional PUT (minio's private _put_object with If-None-Match) really is conditional."""
    store = open_store(bucket_url)
    assert store.write_bytes("cells/once/result.json", b"first", exclusive=True) is True
    assert store.write_bytes("cells/once/result.json", b"second", exclusive=True) is False
    assert store.read_bytes("cells/once/result.json") == b"first"


def test_concurrent_writers_of_one_cell_store_one_consistent_attempt(s3: dict[str, str], bucket_url: str,
                                                                     tmp_path: Path):
    """Eight runners race to store one cell, each with its own time series and link log: exactly one
    record wins, and the files a reader finds beside it are that winner's, and only those."""
    store = open_store(bucket_url)
    outcomes: dict[int, bool] = {}
    barrier = threading.Barrier(8)

    def write(i: int) -> None:
        result = result_of(4).model_copy(update={"goodput_mbps": float(i)})
        series = TimeSeries(cell_id=result.cell.id, flows=[FlowSeries(t=[0.1], rtt_us=[i])])
        log = tmp_path / f"uplink-{i}.log.gz"
        log.write_bytes(f"log of writer {i}".encode())
        barrier.wait()
        outcomes[i] = store.put_cell(result, series, {"uplink.log.gz": log})

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [i for i, won in outcomes.items() if won]
    assert len(outcomes) == 8 and len(winners) == 1, outcomes
    cell_id = result_of(4).cell.id
    assert store.get_result(cell_id).goodput_mbps == winners[0]
    assert store.get_timeseries(cell_id).flows[0].rtt_us == [winners[0]]
    assert store.get_cell_file(cell_id, "uplink.log.gz") == f"log of writer {winners[0]}".encode()
    folders = {key.split("/")[2] for key in store.list_keys(f"cells/{cell_id}/") if key.count("/") == 3}
    assert len(folders) == 1, f"losers remove their files: {folders}"


def test_a_stream_above_the_part_size_is_stored_whole(s3: dict[str, str], bucket_url: str):
    """put_sweep_stream past minio's 5 MiB part size goes as a multipart upload: it reads back equal,
    as an HTML page, in place of the object before it, which is kept among the sweep's revisions."""
    store = open_store(bucket_url)
    store.put_sweep_file("s", "report.html", b"<html>old")
    body = b"<html>" + bytes(range(256)) * (6 * 4096)
    with tempfile.TemporaryFile() as source:
        source.write(body)
        source.seek(0)
        store.put_sweep_stream("s", "report.html", source)
    assert store.get_sweep_file("s", "report.html") == body
    stat = store._client.stat_object(store.bucket, store._object("sweeps/s/report.html"))
    assert stat.content_type.startswith("text/html") and stat.size == len(body)
    kept = store.list_keys("sweeps/s/revisions/files/report.html/")
    assert [store.read_bytes(key) for key in kept] == [b"<html>old", body]


def test_list_keys_and_missing_objects(s3: dict[str, str], bucket_url: str):
    store = open_store(bucket_url)
    assert store.read_bytes("nothing") is None and not store.exists("nothing") and store.list_keys("") == []
    for key in ["sweeps/b/figures/a.png", "sweeps/a/manifest.json", "sweeps/ab/x.csv", "cells/1/result.json"]:
        store.write_bytes(key, b"x")
    assert store.list_keys("sweeps/a") == ["sweeps/a/manifest.json", "sweeps/ab/x.csv"]
    assert store.list_keys("sweeps/a/") == ["sweeps/a/manifest.json"]
    assert store.list_keys("") == sorted(["sweeps/b/figures/a.png", "sweeps/a/manifest.json", "sweeps/ab/x.csv",
                                          "cells/1/result.json"])
    other = open_store(bucket_url + "-other")
    assert other.list_keys("") == [], "a prefix only sees its own keys"


def test_failed_attempts_and_manifests_follow_the_store_rules(s3: dict[str, str], bucket_url: str):
    store = open_store(bucket_url)
    failed = result_of(3, status="failed")
    store.put_cell(failed)
    assert not store.has_result(failed.cell.id)
    assert len(store.list_keys(f"cells/{failed.cell.id}/failed/")) == 1
    manifest = SweepManifest(name="m", spec={"a": 1}, cells=[], created_at="t", ccsweep_version="0")
    put_manifest(store, manifest)
    with pytest.raises(StoreError, match="different spec"):
        put_manifest(store, manifest.model_copy(update={"spec": {"a": 2}}))
    assert store.list_sweeps() == ["m"]


def test_missing_bucket_is_created_on_first_write_only(s3: dict[str, str], minio: Server):
    url = f"s3://fresh-{free_port()}/p"
    store = open_store(url)
    assert store.list_keys("") == [] and store.get_result("x") is None  # reading creates nothing
    assert not store._client.bucket_exists(store.bucket)
    store.write_bytes("k", b"v")
    assert open_store(url).read_bytes("k") == b"v"


def test_wrong_secret_is_one_line_naming_the_settings(s3: dict[str, str], bucket_url: str,
                                                      monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CCSWEEP_S3_SECRET_KEY", "wrong-secret")
    with pytest.raises(StoreError) as caught:
        open_store(bucket_url).write_bytes("k", b"v")
    message = str(caught.value)
    assert "\n" not in message and "CCSWEEP_S3_SECRET_KEY" in message
    assert "AccessDenied" in message or "SignatureDoesNotMatch" in message
    assert not isinstance(caught.value, StoreUnavailable), "bad keys are not an outage: retrying cannot help"


def test_unreachable_endpoint_is_store_unavailable(s3: dict[str, str], monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CCSWEEP_S3_ENDPOINT", f"127.0.0.1:{free_port()}")
    with pytest.raises(StoreUnavailable, match="connection refused"):
        open_store("s3://unreachable/p").has_result("x")


def test_endpoint_url_and_aws_names_reach_the_same_server(minio: Server, monkeypatch: pytest.MonkeyPatch):
    """What other S3 tools set (AWS_*) works too; a URL's scheme decides TLS."""
    env = {"AWS_ENDPOINT_URL": minio.url, "AWS_ACCESS_KEY_ID": "ccsweep-test",
           "AWS_SECRET_ACCESS_KEY": "ccsweep-test-secret", "AWS_REGION": "us-east-1", "CCSWEEP_S3_PATH_STYLE": "true"}
    settings = load_settings(env)
    assert settings.endpoint == minio.address and settings.secure is False and settings.path_style is True
    store = S3Store.from_url("s3://aws-names/p", settings)
    store.write_bytes("k", b"v")
    assert store.read_bytes("k") == b"v"


def test_without_static_keys_the_provider_chain_supplies_them(minio: Server, monkeypatch: pytest.MonkeyPatch):
    """No keys in the settings: the minio client's own provider chain is asked, here its first link
    (MINIO_ACCESS_KEY / MINIO_SECRET_KEY) against the real server. Its IAM links (web identity, the
    container and instance endpoints) need AWS and are not exercised here."""
    for name in ("MINIO_ACCESS_KEY", "MINIO_SECRET_KEY", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(name, raising=False)
    settings = load_settings({"CCSWEEP_S3_ENDPOINT": minio.url})
    assert settings.access_key is None and settings.secret_key is None
    monkeypatch.setenv("MINIO_ACCESS_KEY", "ccsweep-test")
    monkeypatch.setenv("MINIO_SECRET_KEY", "ccsweep-test-secret")
    store = S3Store.from_url("s3://provider-chain/p", settings)
    store.write_bytes("k", b"from the chain")
    assert store.read_bytes("k") == b"from the chain"
    # Wrong keys from the chain are the server's refusal, in one line, like wrong static keys.
    monkeypatch.setenv("MINIO_SECRET_KEY", "not-the-secret")
    with pytest.raises(StoreError, match="SignatureDoesNotMatch"):
        S3Store.from_url("s3://provider-chain/p", settings).read_bytes("k")
