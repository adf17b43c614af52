"""Servers taken away under a real sweep: MinIO between cells, the Pushgateway while cells run.

Each test starts its own server (own_minio, own_pushgateway) and stops and restarts it by the PID
it started; cells are a few seconds at 10 Mbit/s and run one or two at a time.
"""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ccsweep.store.s3 import S3Store
from ccsweep.store.s3config import load_settings
from ccsweep.store.spool import Spool
from servers import Server, s3_env
from support.bookkeeping import BOOKKEEPING_THRESHOLD
from sweeps import ccsweep, needs_root, start_ccsweep, stored_cells, summary_row, sweep_env, wait_until, write_spec

pytestmark = [pytest.mark.integration, needs_root]


def s3_store(minio: Server, url: str) -> S3Store:
    return S3Store.from_url(url, load_settings(s3_env(minio)))


def test_minio_down_between_cells_loses_nothing_once_it_is_back(own_minio: Server, tmp_path: Path):
    """Cell 1 stored; MinIO stops; cell 2 is spooled; MinIO returns while cell 3 runs; the run's last
    spool pass uploads cell 2, and the figures are built."""
    spec = write_spec(tmp_path / "spec.yaml", "outage-back", cc=["cubic"], loss_percent=[0.1, 0.5, 1], duration_s=3)
    store = s3_store(own_minio, "s3://outages/back")
    spool = Spool(tmp_path / "spool")
    # No retries inside the cell: a spooled result waits for the executor's last pass.
    env = sweep_env(s3_env(own_minio), spool.root, CCSWEEP_SPOOL_RETRIES="0")
    with start_ccsweep("run", str(spec), "--store", store.url, *BOOKKEEPING_THRESHOLD, "--jobs", "1", env=env) as run:
        first = wait_until("the first cell's result", lambda: stored_cells(store), run)
        own_minio.stop()
        spooled = wait_until("a result in the spool", lambda: spool.pending(store.url), run)
        own_minio.start()
        _, err = run.communicate(timeout=120)
    assert run.returncode == 0, err[-3000:]
    assert len(first) == 1 and spooled and spooled[0] not in first
    assert "ccsweep: warning: store unreachable" in err and f"cell {spooled[0]} kept in {spool.root}" in err
    assert re.search(rf"uploaded \d spooled cell result\(s\) to {re.escape(store.url)}$", err, re.MULTILINE), err
    assert len(stored_cells(store)) == 3 and all(store.get_timeseries(c) for c in stored_cells(store))
    assert spool.pending(store.url) == [] and spool.targets() == []
    assert summary_row(err, "outage-back")["spooled"] == "0", "uploaded at the end: nothing waits"
    assert store.exists("sweeps/outage-back/report.html")


def test_minio_still_down_at_the_end_keeps_the_status_and_the_spool_uploads_later(own_minio: Server,
                                                                                  tmp_path: Path):
    """MinIO stops after the first cell and stays down: the sweep still exits 0, says its figures
    wait and where the spooled result is; `ccsweep upload-spool` and `ccsweep figures` finish the job."""
    # 8 s cells: the second cell's result must not reach the store before the test has seen the
    # first one's and stopped MinIO, which a loaded machine once took longer than a 3 s cell to do.
    spec = write_spec(tmp_path / "spec.yaml", "outage-late", cc=["cubic"], loss_percent=[0.1, 1], duration_s=8)
    store = s3_store(own_minio, "s3://outages/late")
    spool = Spool(tmp_path / "spool")
    env = sweep_env(s3_env(own_minio), spool.root, CCSWEEP_SPOOL_RETRIES="1", CCSWEEP_SPOOL_BACKOFF_S="0.2")
    with start_ccsweep("run", str(spec), "--store", store.url, *BOOKKEEPING_THRESHOLD, "--jobs", "1", env=env) as run:
        wait_until("the first cell's result", lambda: stored_cells(store), run)
        own_minio.stop()
        _, err = run.communicate(timeout=120)
    assert run.returncode == 0, f"the sweep's status, not the figures': {err[-3000:]}"
    spooled = spool.pending(store.url)
    assert len(spooled) == 1
    assert "figures not built yet" in err and f"ccsweep figures --store {store.url} --sweep outage-late" in err
    assert f"1 cell result(s) stay in the spool {spool.root}" in err and "ccsweep upload-spool" in err
    assert summary_row(err, "outage-late")["spooled"] == "1" and summary_row(err, "outage-late")["ok"] == "2"

    own_minio.start()
    upload = ccsweep("upload-spool", "--store", store.url, env=env)
    assert upload.returncode == 0 and f"{store.url}: uploaded 1, 0 left" in upload.stderr, upload.stderr
    assert spool.pending(store.url) == [] and spool.targets() == []
    assert len(stored_cells(store)) == 2 and store.get_timeseries(spooled[0])
    figures = ccsweep("figures", "--store", store.url, "--sweep", "outage-late", env=env)
    assert figures.returncode == 0, figures.stderr[-3000:]
    assert store.exists("sweeps/outage-late/report.html")


def live_cells(gateway: Server, sweep: str) -> set[str]:
    """Cells of a sweep whose live samples the Pushgateway holds."""
    text = urllib.request.urlopen(gateway.url + "/metrics", timeout=5).read().decode()
    return {s.labels["cell"] for family in text_string_to_metric_families(text) for s in family.samples
            if s.name == "ccsweep_cell_elapsed_seconds" and s.labels.get("sweep") == sweep}


def test_pushgateway_stopped_while_cells_run(own_pushgateway: Server, minio: Server, tmp_path: Path):
    """Two cells push live samples; the Pushgateway stops under them.  Each cell warns once in its own
    log, finishes ok and is stored; the executor's console shows each distinct warning once."""
    spec = write_spec(tmp_path / "spec.yaml", "pushgateway-gone", cc=["bbr", "cubic"], loss_percent=[1],
                      duration_s=6)
    store = s3_store(minio, f"s3://ccsweep-tests/pushgateway-gone-{tmp_path.name}")
    workdir = tmp_path / "work"
    env = sweep_env(s3_env(minio), tmp_path / "spool")
    with start_ccsweep("run", str(spec), "--store", store.url, *BOOKKEEPING_THRESHOLD,
                       "--pushgateway", own_pushgateway.address, "--jobs", "2", "--workdir", str(workdir),
                       "--no-figures", env=env) as run:
        wait_until("live samples of both cells", lambda: len(live_cells(own_pushgateway, "pushgateway-gone")) == 2,
                   run)
        own_pushgateway.stop()
        _, err = run.communicate(timeout=120)
    assert run.returncode == 0, err[-3000:]
    assert summary_row(err, "pushgateway-gone")["ok"] == "2"
    assert len(stored_cells(store)) == 2
    cell_warnings = []
    for log in sorted(workdir.glob("*/attempt-*/cell.log")):
        lines = [line for line in log.read_text().splitlines() if "cannot push metrics" in line]
        assert len(lines) == 1, f"{log}: {lines}"
        cell_warnings += lines
    assert len(cell_warnings) == 2
    shown = [line for line in err.splitlines() if "cannot push metrics" in line]
    assert set(cell_warnings) <= set(shown) and len(shown) == len(set(shown)), shown
