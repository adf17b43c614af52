"""No finished result is lost, whatever the store answers: refusals, a full disk, a hanging server.

MinIO cannot be made to answer AccessDenied, XMinioStorageFull (507) or RequestTimeTooSkewed on
demand, so for those (and for a store that refuses one request and then accepts) a small HTTP
server on 127.0.0.1 answers every request the way S3 does (status and XML error body): the real
minio client talks to a real socket, only the server's answer is chosen. The full disk is real:
a 1 MiB tmpfs under the file store (root).
"""

from __future__ import annotations

import http.client
import io
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ccsweep.store import ResultStore, open_store
from ccsweep.store.file import FileStore
from ccsweep.store.s3 import CALL_ATTEMPTS, CONNECT_TIMEOUT_S, READ_TIMEOUT_S
from ccsweep.store.spool import FlushReport, Spool, store_cell
from servers import Server, s3_env
from test_s3_store import result_of

ERRORS = {
    "AccessDenied": (403, "Access Denied."),
    "XMinioStorageFull": (507, "Storage backend has reached its minimum free drive threshold."),
    "RequestTimeTooSkewed": (403, "The difference between the request time and the server's time is too large."),
}


def s3_like(answer: str) -> type[BaseHTTPRequestHandler]:
    """A handler answering every request with S3's error `answer`, or never answering ("hang")."""

    class Handler(BaseHTTPRequestHandler):
        def _reply(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            if answer == "hang":
                time.sleep(READ_TIMEOUT_S * 3)
                return
            answer_error(self, answer)

        do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = _reply

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def answer_error(handler: BaseHTTPRequestHandler, code: str) -> None:
    """S3's answer for the error `code`: its status and XML error body."""
    status, message = ERRORS[code]
    body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code><Message>{message}</Message>'
            f"<Resource>{handler.path}</Resource><RequestId>1</RequestId></Error>").encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/xml")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(body)


@pytest.fixture
def s3_answering(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), s3_like(request.param))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("CCSWEEP_S3_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setenv("CCSWEEP_S3_ACCESS_KEY", "fault")
    monkeypatch.setenv("CCSWEEP_S3_SECRET_KEY", "fault-secret")
    yield request.param
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("s3_answering", sorted(ERRORS), indirect=True)
def test_a_refusing_store_keeps_the_result_in_the_spool(s3_answering: str, tmp_path: Path):
    spool = Spool(tmp_path / "spool")
    store = open_store("s3://refusing/run")
    result = result_of(10)
    err = io.StringIO()
    outcome = store_cell(store, result, None, {}, spool=spool, retries=3, backoff_s=0.1, err=err)
    assert not outcome.stored and outcome.spooled is not None
    assert s3_answering in (outcome.reason or "") and "fault-secret" not in err.getvalue()
    (line,) = err.getvalue().splitlines()
    assert "the store refused" in line and "upload-spool" in line  # refused: said once, not retried
    kept = FileStore(outcome.spooled.parents[1]).get_result(result.cell.id)
    assert kept == result


@pytest.mark.parametrize("s3_answering", ["hang"], indirect=True)
def test_a_hanging_store_costs_a_bounded_time_and_keeps_the_result(s3_answering: str, tmp_path: Path):
    spool = Spool(tmp_path / "spool")
    store = open_store("s3://hanging/run")
    started = time.monotonic()
    outcome = store_cell(store, result_of(10), None, {}, spool=spool, retries=1, backoff_s=0.1, err=io.StringIO())
    elapsed = time.monotonic() - started
    assert not outcome.stored and outcome.spooled is not None
    # One call to put (the record) and one upload retry, each at most CALL_ATTEMPTS reads:
    # a bound that no longer holds if a timeout grows, or if retries stop respecting it.
    bound = 2 * CALL_ATTEMPTS * (CONNECT_TIMEOUT_S + READ_TIMEOUT_S) + 5
    assert elapsed < bound, f"{elapsed:.0f} s against a bound of {bound:.0f} s"


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_under_the_file_store_keeps_the_result_in_the_spool(full_disk: Path, tmp_path: Path):
    store = FileStore(full_disk / "store")
    log = tmp_path / "uplink.log.gz"
    log.write_bytes(os.urandom(2 << 20))  # 2 MiB: more than the 1 MiB disk holds
    result = result_of(10)
    spool = Spool(tmp_path / "spool")
    outcome = store_cell(store, result, None, {"uplink.log.gz": log}, spool=spool, err=io.StringIO())
    assert not outcome.stored and outcome.spooled is not None and "No space left" in (outcome.reason or "")
    assert store.get_result(result.cell.id) is None  # nothing half-stored counts as done
    spooled = FileStore(outcome.spooled.parents[1])
    assert spooled.get_result(result.cell.id) == result.model_copy(update={"artifacts": ["uplink.log.gz"]})
    assert spooled.get_cell_file(result.cell.id, "uplink.log.gz") == log.read_bytes()


def test_when_the_spool_is_full_too_the_record_stays_in_the_cells_folder(full_disk: Path, tmp_path: Path):
    store = FileStore(full_disk / "store")
    log = tmp_path / "uplink.log.gz"
    log.write_bytes(os.urandom(2 << 20))
    scratch = tmp_path / "cell"
    scratch.mkdir()
    err = io.StringIO()
    outcome = store_cell(store, result_of(10), None, {"uplink.log.gz": log}, spool=Spool(full_disk / "spool"),
                         scratch=scratch, err=err)
    assert not outcome.stored and outcome.spooled is None and outcome.kept_in == scratch
    assert (scratch / "result.json").is_file() and str(scratch) in err.getvalue()


class Recovering(ThreadingHTTPServer):
    """In front of a real MinIO: unreachable until `open()`, then 403 for `refusals` requests, then MinIO's answers.

    The fault this stands for is a store changing its answer while it recovers (a proxy or
    MinIO itself coming up with its policies not yet loaded). Real MinIO cannot be made to
    answer AccessDenied for one request and then accept the same credentials, so those 403s
    are this server's; every other answer, and everything stored, is the real MinIO's (requests
    are forwarded as they came, Host header included, so MinIO checks the client's signature).
    """

    def __init__(self, minio: str, refusals: int):
        super().__init__(("127.0.0.1", 0), _forwarding(self), bind_and_activate=False)
        self.daemon_threads = True
        self.server_bind()  # the port is taken but nothing listens: connections are refused
        self.minio, self.refusals, self.answers = minio, refusals, []

    def open(self) -> None:
        self.server_activate()
        threading.Thread(target=self.serve_forever, daemon=True).start()


def _forwarding(server: Recovering) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _reply(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if server.refusals > 0:
                server.refusals -= 1
                server.answers.append(403)
                answer_error(self, "AccessDenied")
                return
            connection = http.client.HTTPConnection(server.minio, timeout=10)
            connection.request(self.command, self.path, body=body, headers=dict(self.headers.items()))
            answer = connection.getresponse()
            data = answer.read()
            server.answers.append(answer.status)
            self.send_response(answer.status)
            for name, value in answer.getheaders():
                if name.lower() not in ("connection", "transfer-encoding", "content-length"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            connection.close()

        do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = _reply

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def test_unreachable_then_refused_then_accepted_stores_the_result_once(minio: Server, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch):
    """unavailable -> 403 -> 200: the 403 met by a retry is a warning, not an error past a spooled result."""
    for name, value in s3_env(minio).items():
        monkeypatch.setenv(name, value)
    front = Recovering(minio.address, refusals=1)
    monkeypatch.setenv("CCSWEEP_S3_ENDPOINT", f"127.0.0.1:{front.server_address[1]}")

    class OpensOnFirstRetry(Spool):
        def flush(self, store: ResultStore) -> FlushReport:
            if not front.answers:
                front.open()
            return super().flush(store)

    spool = OpensOnFirstRetry(tmp_path / "spool")
    store = open_store(f"s3://recovering/{tmp_path.name}")
    result = result_of(41)
    err = io.StringIO()
    try:
        outcome = store_cell(store, result, None, {}, spool=spool, retries=3, backoff_s=0.1, err=err)
    finally:
        front.shutdown()
        front.server_close()
    lines = err.getvalue().splitlines()
    assert outcome.stored and outcome.spooled is None, lines
    assert "store unreachable" in lines[0] and "connection refused" in lines[0]
    assert "retry 1" in lines[1] and "AccessDenied" in lines[1]
    assert "uploaded" in lines[-1]
    assert front.answers[0] == 403 and 200 in front.answers[1:]
    monkeypatch.setenv("CCSWEEP_S3_ENDPOINT", minio.address)
    direct = open_store(f"s3://recovering/{tmp_path.name}")
    assert direct.get_result(result.cell.id) == result
    assert spool.pending(store.url) == []

