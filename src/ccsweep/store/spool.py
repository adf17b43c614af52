"""The spool: a cell's result kept on local disk while its store cannot be reached.

A cell that ran for minutes must not be lost because MinIO restarted at the wrong moment.  When
storing fails with StoreUnavailable, the cell's record and files go to a folder store under the
spool (same layout), one line on stderr says so, and uploads are retried a few times with
exponential backoff.  Whatever is still spooled is uploaded by the next `ccsweep run` against that
store, or by `ccsweep upload-spool`.

Layout: `<spool>/<target slug>/target` holds the store URL, `<spool>/<slug>/cells/<id>/...` the
cell as the store would hold it.  One lock file per target serialises keeping and uploading, so
several cell processes and a flushing executor never see a half-written or half-deleted cell.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from ccsweep.result import CellResult, TimeSeries
from ccsweep.store.base import (
    ATTEMPT_STATUSES,
    ResultStore,
    StoreUnavailable,
    attempt_folder,
    content_type_of,
    record_key,
)
from ccsweep.store.file import FileStore

#: Uploads tried after a cell is spooled: 1, 2, 4, 8, 16 s apart (about half a minute in all).
DEFAULT_RETRIES = 5
DEFAULT_BACKOFF_S = 1.0


def default_spool_dir() -> Path:
    """$CCSWEEP_SPOOL, else $CCSWEEP_CACHE/spool, else ~/.cache/ccsweep/spool."""
    if os.environ.get("CCSWEEP_SPOOL"):
        return Path(os.environ["CCSWEEP_SPOOL"])
    cache = Path(os.environ.get("CCSWEEP_CACHE") or Path.home() / ".cache" / "ccsweep")
    return cache / "spool"


@dataclass
class FlushReport:
    """What one upload pass did for one store."""

    url: str
    uploaded: list[str] = field(default_factory=list)
    remaining: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass
class StoreOutcome:
    """Where a finished cell ended up: `stored` as put_cell says, or kept in the spool."""

    stored: bool
    spooled: Path | None = None


class Spool:
    def __init__(self, root: Path | None = None):
        self.root = root or default_spool_dir()

    def _target(self, url: str) -> Path:
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", url.split("://", 1)[-1]).strip("_")[:60]
        return self.root / f"{slug}-{hashlib.sha256(url.encode()).hexdigest()[:8]}"

    @contextmanager
    def _locked(self, url: str) -> Iterator[FileStore]:
        target = self._target(url)
        target.mkdir(parents=True, exist_ok=True)
        (target / "target").write_text(url + "\n")
        with open(target / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield FileStore(target)

    def keep(self, url: str, result: CellResult, timeseries: TimeSeries | None,
             files: dict[str, Path] | None) -> Path:
        """Spool a cell for the store at `url`; returns its folder."""
        with self._locked(url) as local:
            local.put_cell(result, timeseries, files)
            return local.root / "cells" / result.cell.id

    def targets(self) -> list[str]:
        """Store URLs with spooled cells."""
        if not self.root.is_dir():
            return []
        urls = []
        for target in sorted(self.root.iterdir()):
            if (target / "target").is_file() and any((target / "cells").glob("*")):
                urls.append((target / "target").read_text().strip())
        return urls

    def pending(self, url: str) -> list[str]:
        cells = self._target(url) / "cells"
        return sorted(p.name for p in cells.iterdir()) if cells.is_dir() else []

    def flush(self, store: ResultStore) -> FlushReport:
        """Upload every cell spooled for `store` (files first, the record last and only once).

        A cell leaves the spool only once it is uploaded; the first unreachable upload ends the
        pass, so nothing is dropped while the store is down.
        """
        report = FlushReport(store.url)
        if not self.pending(store.url):
            return report
        with self._locked(store.url) as local:
            for cell_id in self.pending(store.url):
                try:
                    _upload_cell(local, store, cell_id)
                except StoreUnavailable as exc:
                    report.error = str(exc)
                    break
                shutil.rmtree(local.root / "cells" / cell_id)
                report.uploaded.append(cell_id)
        report.remaining = self.pending(store.url)
        return report


def _upload_cell(local: FileStore, store: ResultStore, cell_id: str) -> None:
    """Failed and late attempts as they are; the record with its attempt's files through commit_cell (write once)."""
    for status in ATTEMPT_STATUSES:
        for key in local.list_keys(f"cells/{cell_id}/{status}/"):
            store.write_bytes(key, local.read_bytes(key) or b"", content_type=content_type_of(key))
    record = local.read_bytes(record_key(cell_id))
    if record is None or store.has_result(cell_id):
        return  # nothing to upload, or another runner stored the cell: its record stays
    folder = attempt_folder(cell_id, record) + "/"
    files = {key.removeprefix(folder): local.read_bytes(key) or b"" for key in local.list_keys(folder)}
    store.commit_cell(cell_id, record, files)


def store_cell(store: ResultStore, result: CellResult, timeseries: TimeSeries | None, files: dict[str, Path],
               *, spool: Spool | None = None, retries: int | None = None, backoff_s: float | None = None,
               err: TextIO = sys.stderr) -> StoreOutcome:
    """put_cell, or, while the store is unreachable, spool the cell and retry with backoff.

    Retries and the first delay can be set with CCSWEEP_SPOOL_RETRIES and CCSWEEP_SPOOL_BACKOFF_S.
    """
    try:
        return StoreOutcome(stored=store.put_cell(result, timeseries, files))
    except StoreUnavailable as exc:
        reason = str(exc)
    spool = spool or Spool()
    retries = int(os.environ.get("CCSWEEP_SPOOL_RETRIES", DEFAULT_RETRIES)) if retries is None else retries
    backoff_s = float(os.environ.get("CCSWEEP_SPOOL_BACKOFF_S", DEFAULT_BACKOFF_S)) if backoff_s is None else backoff_s
    where = spool.keep(store.url, result, timeseries, files)
    print(f"ccsweep: warning: store unreachable ({reason}); cell {result.cell.id} kept in {where}, "
          f"retrying {retries} times over {backoff_s * (2**retries - 1):g} s", file=err, flush=True)
    for attempt in range(retries):
        time.sleep(backoff_s * 2**attempt)
        report = spool.flush(store)
        if result.cell.id not in report.remaining and result.cell.id not in spool.pending(store.url):
            print(f"ccsweep: cell {result.cell.id} uploaded to {store.url} from the spool", file=err, flush=True)
            return StoreOutcome(stored=True)
    print(f"ccsweep: cell {result.cell.id} stays in the spool {where}; `ccsweep upload-spool` or the next "
          "`ccsweep run` uploads it", file=err, flush=True)
    return StoreOutcome(stored=False, spooled=where)
