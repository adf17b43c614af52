"""The result store: one key layout and one set of rules, whatever the backend.

Layout (relative to the store's root or prefix):

    cells/<cell id>/result.json                      the CellResult, written last and once: "done"
    cells/<cell id>/attempt-<hash>/timeseries.json.gz  100 ms time series (TimeSeries)
    cells/<cell id>/attempt-<hash>/<file>            extra files such as uplink.log.gz
    cells/<cell id>/failed/<utc>.json                records of failed attempts (never count as done)
    cells/<cell id>/late/<utc>.json                  records of attempts whose emulator ran late (never count)
    cells/<cell id>/starved/<utc>.json               records of attempts the machine starved (never count)

An attempt record's files (what it measured before it failed, or while late) sit in the same kind
of folder as a result's, attempt-<hash of that record>, and the record lists them in `artifacts`.
    sweeps/<sweep>/manifest.json, plan-<sha256>/, revisions/, unplaceable.json   a stored plan (storedplan.py)
    traces/<sha256>                                  the trace files the planned cells name, by content
    sweeps/<sweep>/<file>                            figures/*.png|svg, report.html, rebbr.csv: the newest
    sweeps/<sweep>/revisions/files/<file>/<utc>-<sha256>.<ext>  every version of each, kept once

Cells are stored by content-addressed id, not under a sweep, so a cell shared by two sweeps
(figure8 inside full-sweep) runs once.  A cell's files sit in a folder named by the hash of its
record's bytes, so two runners racing on one cell (an Argo retry beside a slow first pod) never
mix: each writes its own folder, exactly one record wins, and the record names its folder.
Backends implement byte-level primitives; the rules (write once, record last) live here only.
The store keeps bytes by key and knows no plan: a sweep's plan is laid out, written and read by
storedplan.py, whose models (manifest.py) are planning's.  docs/services.md describes the layout
for users.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import ValidationError

from ccsweep.gunzip import gunzip
from ccsweep.result import CellResult, TimeSeries
from ccsweep.spec import SLUG


class StoreError(RuntimeError):
    """A store operation that cannot be done as asked; str() is one line."""


class StoreUnavailable(StoreError):
    """The store cannot be reached right now (server down, network); trying later may work."""


class ResultStore(ABC):
    """Results of cells and the files of sweeps, behind a URL (file://, s3://)."""

    url: str

    # Byte-level primitives each backend provides.
    @abstractmethod
    def read_bytes(self, key: str) -> bytes | None:
        """The object's bytes, or None if there is none."""

    @abstractmethod
    def write_bytes(self, key: str, data: bytes, *, content_type: str = "application/octet-stream",
                    exclusive: bool = False) -> bool:
        """Write a whole object atomically (readers never see a part of it).

        With exclusive=True an existing object is left untouched and False is returned.
        """

    @abstractmethod
    def exists(self, key: str) -> bool: ...

    @abstractmethod
    def list_keys(self, prefix: str) -> list[str]:
        """Keys below a prefix, sorted."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove an object if it exists (only a losing attempt's own files are ever removed)."""

    # Cells.
    def has_result(self, cell_id: str) -> bool:
        return self.exists(record_key(cell_id))

    def put_cell(self, result: CellResult, timeseries: TimeSeries | None = None,
                 files: dict[str, Path] | None = None) -> bool:
        """Store a finished cell: files first, the record last and only once.

        Returns False (and leaves the stored cell as it was) when a record for this cell is
        already stored.  A failed or late result is kept as an attempt record (failed/, late/)
        with its files, for diagnosis and for the report, and never marks the cell done.
        """
        cell_id = result.cell.id
        blobs: dict[str, bytes] = {}
        if timeseries is not None:
            blobs[TIMESERIES] = gzip.compress(timeseries.model_dump_json().encode())
        for name, path in (files or {}).items():
            blobs[name] = path.read_bytes()
        record = result.model_copy(update={"artifacts": list(blobs)}).model_dump_json(indent=1).encode()
        if result.status != "ok":
            self.put_attempt(attempt_record_key(cell_id, result.status, utc_stamp()), record, blobs)
            return True
        if self.has_result(cell_id):
            return False
        return self.commit_cell(cell_id, record, blobs)

    def put_attempt(self, key: str, record: bytes, files: dict[str, bytes]) -> None:
        """Write an attempt that does not count (ATTEMPT_STATUSES): its files in its own folder, then its record."""
        cell_id = key.split("/")[1]
        folder = attempt_folder(cell_id, record)
        for name, data in files.items():
            self.write_bytes(f"{folder}/{name}", data, content_type=content_type_of(name))
        self.write_bytes(key, record, content_type="application/json")

    def attempt_files(self, key: str) -> dict[str, bytes]:
        """The files stored with an attempt record (its `artifacts`), by name; {} without a record."""
        record = self.read_bytes(key)
        if record is None:
            return {}
        folder = attempt_folder(key.split("/")[1], record)
        names = json.loads(record).get("artifacts") or []  # read as it is: its files are wanted even so
        return {name: data for name in names if (data := self.read_bytes(f"{folder}/{name}")) is not None}

    def commit_cell(self, cell_id: str, record: bytes, files: dict[str, bytes]) -> bool:
        """Write one attempt of a cell: its files in the record's own folder, then the record, once.

        When another attempt's record is already there, this attempt's files are removed again
        and False is returned: a reader only ever finds the files of the record it read.
        """
        folder = attempt_folder(cell_id, record)
        for name, data in files.items():
            self.write_bytes(f"{folder}/{name}", data, content_type=content_type_of(name))
        if self.write_bytes(record_key(cell_id), record, content_type="application/json", exclusive=True):
            return True
        if self.read_bytes(record_key(cell_id)) != record:  # identical bytes would share the folder
            for name in files:
                self.delete(f"{folder}/{name}")
        return False

    def has_attempt(self, cell_id: str, status: str) -> bool:
        """Whether any attempt of a kind (ATTEMPT_STATUSES) is kept, readable or not."""
        return bool(self.list_keys(attempt_prefix(cell_id, status)))

    def latest_attempt(self, cell_id: str, status: str) -> CellResult | None:
        """The newest attempt record of a kind (ATTEMPT_STATUSES); None when there is none or it is unreadable."""
        keys = self.list_keys(attempt_prefix(cell_id, status))
        return self._read_attempt(keys[-1]) if keys else None

    def attempts(self, cell_id: str, status: str) -> list[CellResult]:
        """Every readable attempt record of a kind, oldest first: what running a cell cost beyond its result."""
        found = (self._read_attempt(key) for key in self.list_keys(attempt_prefix(cell_id, status)))
        return [attempt for attempt in found if attempt is not None]

    def _read_attempt(self, key: str) -> CellResult | None:
        data = self.read_bytes(key)
        try:
            return CellResult.model_validate_json(data) if data is not None else None
        except ValidationError:
            return None

    def get_result(self, cell_id: str) -> CellResult | None:
        data = self.read_bytes(record_key(cell_id))
        return CellResult.model_validate_json(data) if data is not None else None

    def get_timeseries(self, cell_id: str) -> TimeSeries | None:
        """The cell's stored time series (None without one), unpacked to at most
        MAX_TIMESERIES_BYTES; past that, or not a gzip'd time series, a one-line StoreError."""
        data = self.get_cell_file(cell_id, TIMESERIES)
        if data is None:
            return None
        try:
            return TimeSeries.model_validate_json(gunzip(data, MAX_TIMESERIES_BYTES))
        except ValueError as exc:  # TooLarge, NotGzip, or a ValidationError
            raise StoreError(f"cell {cell_id}: its stored {TIMESERIES}: {' '.join(str(exc).split())[:200]}") from None

    def get_cell_file(self, cell_id: str, name: str) -> bytes | None:
        """A file stored with the cell's record (None without a record or without that file)."""
        record = self.read_bytes(record_key(cell_id))
        if record is None:
            return None
        return self.read_bytes(f"{attempt_folder(cell_id, record)}/{name}")

    # Traces, by content: planning stores the ones its cells name, so cells run without the files.
    def put_trace(self, sha256: str, data: bytes) -> None:
        if hashlib.sha256(data).hexdigest() != sha256:
            raise StoreError(f"trace {sha256[:12]}...: content does not match its hash")
        if not self.exists(trace_key(sha256)):
            self.write_bytes(trace_key(sha256), data, content_type="text/plain", exclusive=True)

    def get_trace(self, sha256: str) -> bytes | None:
        """A stored trace's bytes, checked against its hash (None when it is not stored)."""
        data = self.read_bytes(trace_key(sha256))
        if data is not None and hashlib.sha256(data).hexdigest() != sha256:
            raise StoreError(f"{self.location(trace_key(sha256))}: content does not match its hash")
        return data

    def list_sweeps(self) -> list[str]:
        return sorted({k.split("/")[1] for k in self.list_keys("sweeps/") if k.endswith("/manifest.json")})

    def put_sweep_file(self, sweep: str, name: str, data: bytes) -> str:
        """Write a figure, report or record of a sweep. They are rebuilt, so `name` holds the newest,
        and every version is kept under revisions/files/<name>/ as well: a rebuild replaces none."""
        key = sweep_file_key(sweep, name)
        digest = hashlib.sha256(data).hexdigest()
        self._keep_revision(sweep, name, digest,
                            lambda at: self.write_bytes(at, data, content_type=content_type_of(name)))
        self.write_bytes(key, data, content_type=content_type_of(name))
        return self.location(key)

    def put_sweep_stream(self, sweep: str, name: str, source: BinaryIO) -> str:
        """put_sweep_file from a seekable file open at its start: the report of a large sweep is written
        to a temporary file as it is rendered and sent from there, never held whole in memory."""
        key = sweep_file_key(sweep, name)
        digest = hashlib.sha256()
        for block in iter(lambda: source.read(1 << 20), b""):
            digest.update(block)

        def write(at: str) -> None:
            source.seek(0)
            self.write_stream(at, source, content_type=content_type_of(name))

        self._keep_revision(sweep, name, digest.hexdigest(), write)
        write(key)
        return self.location(key)

    def _keep_revision(self, sweep: str, name: str, digest: str, write: Callable[[str], object]) -> None:
        """Keep the version of a sweep file whose bytes have `digest` under its revisions, once (its
        time of writing, then its digest: they list oldest first). A store written before revisions were
        kept has none for `name` yet: the version there now is kept first, read whole this once."""
        folder = sweep_revision_folder(sweep, name)
        kept = [key for key in self.list_keys(folder) if "/" not in key[len(folder):]]
        if any(key.endswith(f"-{digest[:16]}{Path(name).suffix}") for key in kept):
            return
        if not kept and (current := self.read_bytes(sweep_file_key(sweep, name))) is not None:
            earlier = hashlib.sha256(current).hexdigest()
            if earlier != digest:
                self.write_bytes(sweep_revision_key(sweep, name, earlier, stamp=BEFORE_REVISIONS), current,
                                 content_type=content_type_of(name))
        write(sweep_revision_key(sweep, name, digest, stamp=utc_stamp()))

    def write_stream(self, key: str, source: BinaryIO, *, content_type: str = "application/octet-stream") -> None:
        """Write (replace) an object from a file open at its start, as atomically as write_bytes.

        This reads the file whole; a backend that can send it in parts overrides it.
        """
        self.write_bytes(key, source.read(), content_type=content_type)

    def sweep_file_names(self, sweep: str) -> list[str]:
        """The names of a sweep's figures, report and exports (its manifest and revisions are not files)."""
        prefix = f"{sweep_prefix(sweep)}/"
        return [key[len(prefix):] for key in self.list_keys(prefix)
                if key != manifest_key(sweep) and not re.match(r"revisions/|plan-[0-9a-f]{16}/", key[len(prefix):])]

    def get_sweep_file(self, sweep: str, name: str) -> bytes | None:
        return self.read_bytes(sweep_file_key(sweep, name))

    def has_sweep_file(self, sweep: str, name: str) -> bool:
        return self.exists(sweep_file_key(sweep, name))

    def sweep_file_location(self, sweep: str, name: str) -> str:
        """Where a sweep's figure, report or export is (or will be), for a person."""
        return self.location(sweep_file_key(sweep, name))

    def location(self, key: str) -> str:
        """Where a key can be found by a person (a path or an s3:// URL)."""
        return f"{self.url.rstrip('/')}/{key}"


TIMESERIES = "timeseries.json.gz"
#: The most a stored time series may unpack to: a 1-hour cell's 36,000 samples take about 6 MB per
#: flow (170 bytes a sample), so 256 MiB holds 40 flows of the longest cell a spec allows.
MAX_TIMESERIES_BYTES = 256 << 20
#: A sweep's HTML report among its files: figures write it, the operator links a finished Sweep to it.
REPORT_FILE = "report.html"


def record_key(cell_id: str) -> str:
    return f"cells/{cell_id}/result.json"


def utc_stamp() -> str:
    """Now, as the store names what it keeps by time (attempt records, file revisions): sortable, to the us."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")


#: The stamp of a file version found from before revisions were kept: it sorts before every utc_stamp().
BEFORE_REVISIONS = "00000000T000000.000000Z"


#: Attempts that never count as the cell's result, each kept under cells/<id>/<status>/.
ATTEMPT_STATUSES = ("failed", "late", "starved")


def attempt_prefix(cell_id: str, status: str) -> str:
    assert status in ATTEMPT_STATUSES, status
    return f"cells/{cell_id}/{status}/"


def attempt_record_key(cell_id: str, status: str, stamp: str) -> str:
    return f"{attempt_prefix(cell_id, status)}{stamp}.json"


def attempt_folders_text() -> str:
    """Where a cell's attempts are kept, in words for a message: cells/<id>/failed/, late/ and starved/."""
    first, *others, last = ATTEMPT_STATUSES
    return f"{attempt_prefix('<id>', first)}, {', '.join(f'{s}/' for s in others)} and {last}/"


def manifest_key(sweep: str) -> str:
    return f"{sweep_prefix(sweep)}/manifest.json"


def revision_key(sweep: str, digest: str) -> str:
    """An earlier plan of a sweep that a deliberate spec change replaced, named by its bytes' digest."""
    return f"{sweep_prefix(sweep)}/revisions/{digest}.json"


def plan_folder(spec: dict[str, Any]) -> str:
    """The folder of a plan's chunks, named by its spec: a revised plan never writes over a revision's."""
    return f"plan-{hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]}"


def plan_chunk_key(sweep: str, folder: str, index: int) -> str:
    return f"{sweep_prefix(sweep)}/{folder}/chunk-{index:05d}.json"


def plan_index_key(sweep: str, folder: str, bucket: str) -> str:
    return f"{sweep_prefix(sweep)}/{folder}/index-{bucket}.json"


#: The sweep file naming the cells no node could run when planned (a sweep file: kept with revisions).
UNPLACEABLE = "unplaceable.json"


def unplaceable_key(sweep: str) -> str:
    return sweep_file_key(sweep, UNPLACEABLE)


def sweep_prefix(sweep: str) -> str:
    """Where a sweep's files live; a name that is not a slug could leave it (`..`), so it is refused here too."""
    if not re.fullmatch(SLUG, sweep):
        raise StoreError(f"sweep name {sweep[:64]!r}: not a sweep name (lowercase letters, digits and '-')")
    return f"sweeps/{sweep}"


def sweep_file_key(sweep: str, name: str) -> str:
    """A sweep's figure, report or export: `name` is relative to the sweep's folder (e.g. figures/x.png)."""
    return f"{sweep_prefix(sweep)}/{name}"


def sweep_revision_folder(sweep: str, name: str) -> str:
    """Where every version of a sweep's file is kept."""
    return f"{sweep_prefix(sweep)}/revisions/files/{name}/"


def sweep_revision_key(sweep: str, name: str, digest: str, *, stamp: str) -> str:
    """One version of a sweep's file: when it was written (a version found from before revisions were
    kept: all zeros, so it lists first), then its bytes' digest, then the file's own suffix."""
    return f"{sweep_revision_folder(sweep, name)}{stamp}-{digest[:16]}{Path(name).suffix}"


def trace_key(sha256: str) -> str:
    return f"traces/{sha256}"


def attempt_folder(cell_id: str, record: bytes) -> str:
    """Where the files of the attempt that wrote `record` live: named by the record's SHA-256.

    Every attempt's record differs (start time, host, measurements), so attempts never share a
    folder; re-uploading the same attempt (from the spool) lands in the same one.
    """
    return f"cells/{cell_id}/attempt-{hashlib.sha256(record).hexdigest()[:16]}"


def content_type_of(name: str) -> str:
    """The Content-Type stored with an object (an S3 server hands it to browsers)."""
    types = {".json": "application/json", ".gz": "application/gzip", ".png": "image/png", ".svg": "image/svg+xml",
             ".html": "text/html", ".csv": "text/csv", ".yaml": "application/yaml", ".md": "text/markdown"}
    return types.get(Path(name).suffix, "application/octet-stream")


