"""The default store: a local folder (file://PATH or a plain path)."""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import BinaryIO

from ccsweep.store.base import ResultStore


class FileStore(ResultStore):
    """Objects are files; writes go to a temporary file renamed (or hard-linked) into place.

    Files are created with mode 0666 and folders 0777, less the user's umask (the usual 0644/0755),
    as any tool that writes results, figures and reports for others to read: tempfile.mkstemp's
    0600 would survive the rename and leave a report only its writer can read.
    """

    def __init__(self, root: Path):
        self.root = root.resolve()
        self.url = f"file://{self.root}"

    def _path(self, key: str) -> Path:
        return self.root / key

    def read_bytes(self, key: str) -> bytes | None:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            return None

    def write_bytes(self, key: str, data: bytes, *, content_type: str = "application/octet-stream",
                    exclusive: bool = False) -> bool:
        return self._write(key, lambda handle: handle.write(data), exclusive=exclusive)

    def write_stream(self, key: str, source: BinaryIO, *, content_type: str = "application/octet-stream") -> None:
        self._write(key, lambda handle: shutil.copyfileobj(source, handle), exclusive=False)

    def _write(self, key: str, fill: Callable[[BinaryIO], object], *, exclusive: bool) -> bool:
        """A temporary file filled by `fill`, synced, then renamed (or with `exclusive`, hard-linked) into place."""
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f".{path.name}.{secrets.token_hex(8)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        try:
            with os.fdopen(fd, "wb") as handle:
                fill(handle)
                handle.flush()
                os.fsync(handle.fileno())
            if exclusive:
                try:
                    os.link(tmp, path)  # fails if the file exists: never replaces a stored object
                except FileExistsError:
                    return False
            else:
                os.replace(tmp, path)
            _fsync_dir(path.parent)  # the new name survives a crash, not only the bytes
            return True
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def delete(self, key: str) -> None:
        path = self._path(key)
        path.unlink(missing_ok=True)
        with suppress(OSError):  # its folder too once empty: keys, not folders, are the objects
            path.parent.rmdir()

    def list_keys(self, prefix: str) -> list[str]:
        base = self._path(prefix)
        start = base if base.is_dir() else base.parent
        if not start.is_dir():
            return []
        keys = (p.relative_to(self.root).as_posix() for p in start.rglob("*")
                if p.is_file() and not p.name.startswith("."))
        return sorted(k for k in keys if k.startswith(prefix))

    def location(self, key: str) -> str:
        return str(self._path(key))


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
