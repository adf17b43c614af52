"""The spool: a cell's result kept on local disk while its store cannot be reached.

A cell that ran for minutes must not be lost because MinIO restarted at the wrong moment.  When
storing fails, for whatever reason, the cell's record and files go to a folder store under the
spool (same layout) and one line on stderr says so; when the store was unreachable, uploads are
retried a few times with exponential backoff, and a retry the store answers otherwise (a
timeout, 403, 507 while it recovers) is one more warning line, never an error that leaves the
result behind.  Whatever is still spooled is uploaded by the next `ccsweep run` against that
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
    StoreError,
    StoreUnavailable,
    attempt_folder,
    attempt_prefix,
    record_key,
)
from ccsweep.store.file import FileStore

#: Uploads tried after a cell is spooled: 1, 2, 4, 8, 16 s apart (about half a minute in all),
#: and none started once STORE_DEADLINE_S has passed since the cell began storing, so a hanging
#: store cannot hold a cell (or a pod, whose deadline counts this in) for longer than that.
DEFAULT_RETRIES = 5
DEFAULT_BACKOFF_S = 1.0
STORE_DEADLINE_S = 120.0


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
    """Where a finished cell ended up: `stored` as put_cell says, or kept in the spool.

    `kept_in` is the last resort: the spool itself could not be written (the same full disk,
    say), so the cell's scratch folder, with the record written into it, is left in place.
    `reason` says why the store did not take the result.
    """

    stored: bool
    spooled: Path | None = None
    kept_in: Path | None = None
    reason: str | None = None


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

        A cell leaves the spool only once it is uploaded; the first upload the store does not
        take ends the pass, whatever the store answered (unreachable, a timeout, 403, 507: a
        store changes its answer while it recovers), so nothing is dropped and no answer
        escapes as an error past a result that is still only here.
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
                except (StoreError, OSError) as exc:
                    report.error = _one_line(exc)
                    break
                shutil.rmtree(local.root / "cells" / cell_id)
                report.uploaded.append(cell_id)
        report.remaining = self.pending(store.url)
        return report


def _upload_cell(local: FileStore, store: ResultStore, cell_id: str) -> None:
    """Attempts that do not count, with their files; the record with its files through commit_cell (write once)."""
    for status in ATTEMPT_STATUSES:
        for key in local.list_keys(attempt_prefix(cell_id, status)):
            store.put_attempt(key, local.read_bytes(key) or b"", local.attempt_files(key))
    record = local.read_bytes(record_key(cell_id))
    if record is None or store.has_result(cell_id):
        return  # nothing to upload, or another runner stored the cell: its record stays
    folder = attempt_folder(cell_id, record) + "/"
    files = {key.removeprefix(folder): local.read_bytes(key) or b"" for key in local.list_keys(folder)}
    store.commit_cell(cell_id, record, files)


def store_cell(store: ResultStore, result: CellResult, timeseries: TimeSeries | None, files: dict[str, Path],
               *, spool: Spool | None = None, retries: int | None = None, backoff_s: float | None = None,
               scratch: Path | None = None, err: TextIO = sys.stderr) -> StoreOutcome:
    """put_cell; when the store does not take the result, keep it durably and say where.

    Every failure of the store keeps the result: an unreachable store (StoreUnavailable) is
    retried with backoff from the spool, and whatever a retry meets (the store refusing now, or
    timing out) only ends that retry; a store that refuses (permission, quota, a full disk,
    a clock the server rejects: StoreError or OSError) is not retried now, but the result waits
    in the spool all the same for `ccsweep upload-spool` or the next run. If even the spool
    cannot be written, the record goes into `scratch` (the cell's folder), which the caller
    must then leave in place. Retries and the first delay can be set with CCSWEEP_SPOOL_RETRIES
    and CCSWEEP_SPOOL_BACKOFF_S.
    """
    deadline = time.monotonic() + STORE_DEADLINE_S
    try:
        return StoreOutcome(stored=store.put_cell(result, timeseries, files))
    except StoreUnavailable as exc:
        reason, transient = str(exc), True
    except (StoreError, OSError) as exc:
        reason, transient = _one_line(exc), False
    spool = spool or Spool()
    try:
        where = spool.keep(store.url, result, timeseries, files)
    except OSError as exc:
        return _keep_in_scratch(result, scratch, f"{reason}; the spool {spool.root} too: {_one_line(exc)}", err)
    if not transient:
        print(f"ccsweep: warning: the store refused cell {result.cell.id} ({reason}); kept in {where}; "
              f"`ccsweep upload-spool --store {store.url}` uploads it once the store accepts it", file=err, flush=True)
        return StoreOutcome(stored=False, spooled=where, reason=reason)
    retries = int(os.environ.get("CCSWEEP_SPOOL_RETRIES", DEFAULT_RETRIES)) if retries is None else retries
    backoff_s = float(os.environ.get("CCSWEEP_SPOOL_BACKOFF_S", DEFAULT_BACKOFF_S)) if backoff_s is None else backoff_s
    print(f"ccsweep: warning: store unreachable ({reason}); cell {result.cell.id} kept in {where}, "
          f"retrying {retries} times over {backoff_s * (2**retries - 1):g} s", file=err, flush=True)
    for attempt in range(retries):
        if time.monotonic() + backoff_s * 2**attempt > deadline:
            break
        time.sleep(backoff_s * 2**attempt)
        try:
            report = spool.flush(store)
            uploaded = result.cell.id not in report.remaining and result.cell.id not in spool.pending(store.url)
        except OSError as exc:  # the spool's own folder (its lock, a listing): the cell stays where it is
            report, uploaded = FlushReport(store.url, error=_one_line(exc)), False
        if uploaded:
            print(f"ccsweep: cell {result.cell.id} uploaded to {store.url} from the spool", file=err, flush=True)
            return StoreOutcome(stored=True)
        if report.error is not None:
            reason = report.error
            print(f"ccsweep: warning: retry {attempt + 1}: {reason}", file=err, flush=True)
    print(f"ccsweep: cell {result.cell.id} stays in the spool {where}; `ccsweep upload-spool` or the next "
          "`ccsweep run` uploads it", file=err, flush=True)
    return StoreOutcome(stored=False, spooled=where, reason=reason)


def _keep_in_scratch(result: CellResult, scratch: Path | None, reason: str, err: TextIO) -> StoreOutcome:
    """The last resort: the record beside the cell's own files, in a folder the caller keeps."""
    if scratch is not None:
        try:
            (scratch / "result.json").write_text(result.model_dump_json(indent=1))
        except OSError as exc:
            reason = f"{reason}; {scratch} too: {_one_line(exc)}"
            scratch = None
    if scratch is None:  # nowhere on disk: the record itself on stderr, the one place left
        print(f"ccsweep: error: cell {result.cell.id} could not be kept anywhere ({reason}); its record follows",
              file=err, flush=True)
        print(result.model_dump_json(), file=err, flush=True)
        return StoreOutcome(stored=False, reason=reason)
    print(f"ccsweep: error: cell {result.cell.id} not stored and not spooled ({reason}); its record and files "
          f"stay in {scratch}", file=err, flush=True)
    return StoreOutcome(stored=False, kept_in=scratch, reason=reason)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
