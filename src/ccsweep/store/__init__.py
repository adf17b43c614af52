"""Result stores by URL: `file://PATH` (or a plain path, the default) and `s3://BUCKET/PREFIX`."""

from __future__ import annotations

from pathlib import Path

from ccsweep.store.base import (
    REPORT_FILE,
    ResultStore,
    StoreError,
    StoreUnavailable,
    attempt_folders_text,
    sweep_file_key,
)
from ccsweep.store.file import FileStore
from ccsweep.storeurls import path_problem

DEFAULT_STORE = "results"

__all__ = ["REPORT_FILE", "ResultStore", "StoreError", "StoreUnavailable", "attempt_folders_text", "open_store",
           "sweep_file_key", "DEFAULT_STORE"]


def open_store(url: str) -> ResultStore:
    """A store for a URL; credentials for s3:// come from the environment, never from a spec. Its
    path is checked as every path checks it (storeurls): no '.', '..', '//' or '%'."""
    problem = path_problem(url)
    if problem is not None:
        raise StoreError(f"--store {url}: {problem}")
    if url.startswith("s3://"):
        from ccsweep.store.s3 import S3Store  # imported lazily: the minio client is only needed here

        return S3Store.from_url(url)
    if url.startswith("file://"):
        return FileStore(Path(url.removeprefix("file://")))
    if "://" in url:
        raise StoreError(f"--store {url}: unknown scheme (allowed: file://PATH, s3://BUCKET/PREFIX, or a path)")
    return FileStore(Path(url))
