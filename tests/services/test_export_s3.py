"""`ccsweep.load`, `load_timeseries` and `ccsweep export` on an s3:// store (real MinIO): the same tables as on file://."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from click.testing import CliRunner

import ccsweep
from ccsweep.cli import main
from ccsweep.store import open_store
from ccsweep.store.base import TIMESERIES, manifest_key, record_key
from ccsweep.store.file import FileStore

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "step-response"


def upload(bucket_url: str) -> str:
    """The recorded fixture sweep copied into the bucket through the store's own writes; its name."""
    source, target = FileStore(FIXTURE), open_store(bucket_url)
    (sweep,) = [p.name for p in (FIXTURE / "sweeps").iterdir()]
    target.write_bytes(manifest_key(sweep), (FIXTURE / manifest_key(sweep)).read_bytes())
    for cell in (FIXTURE / "cells").iterdir():
        record = source.read_bytes(record_key(cell.name))
        assert record is not None
        series = source.get_cell_file(cell.name, TIMESERIES)
        assert target.commit_cell(cell.name, record, {TIMESERIES: series} if series else {})
    return sweep


def test_load_and_export_read_s3_as_they_read_a_folder(s3: dict[str, str], bucket_url: str, tmp_path: Path):
    sweep = upload(bucket_url)
    from_s3 = ccsweep.load(bucket_url, sweep)
    from_folder = ccsweep.load(str(FIXTURE), sweep)
    assert len(from_s3) == len(list((FIXTURE / "cells").iterdir()))
    assert all(link == f"{bucket_url}/{record_key(cell)}" for link, cell in zip(from_s3["record"], from_s3["cell_id"],
                                                                                  strict=True))
    pd.testing.assert_frame_equal(from_s3.drop(columns="record"), from_folder.drop(columns="record"))
    series = ccsweep.load_timeseries(bucket_url, sweep)
    pd.testing.assert_frame_equal(series, ccsweep.load_timeseries(str(FIXTURE), sweep))

    done = CliRunner().invoke(main, ["export", "--store", bucket_url, "--sweep", sweep, "--out", str(tmp_path)])
    assert done.exit_code == 0, done.output
    pd.testing.assert_frame_equal(ccsweep.read_csv(tmp_path / f"{sweep}-cells.csv"), from_s3)
