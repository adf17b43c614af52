"""A cell whose store is down when it finishes: where its result goes and what its exit status says.

A real cell (3 s, real kernel TCP) against an S3 endpoint nothing listens on. Run by the local
executor, the spool on this machine is durable: exit 0. In a pod (any other executor), the spool
is the pod's own disk, gone with the pod: exit 75, which the cell template's retryStrategy retries
(tests/workflows/test_lint.py), so the result is measured again and stored, never counted as done.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

from ccsweep.exitcodes import EXIT_RETRY
from ccsweep.expand import expand
from ccsweep.specload import parse_spec
from support.bookkeeping import BOOKKEEPING_THRESHOLD
from support.rerun import run_cell_attempts
from tinyspec import tiny_spec

pytestmark = pytest.mark.integration



def refused_port() -> int:
    """A loopback port nothing listens on (bound once by this process, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("executor, exit_status", [("local", 0), ("argo", EXIT_RETRY)])
def test_a_result_the_store_cannot_take_is_spooled_and_only_a_pod_asks_to_run_again(
        tmp_path: Path, executor: str, exit_status: int):
    (cell,) = expand(parse_spec(tiny_spec("down", cc=["cubic"])))
    cell_file = tmp_path / "cell.json"
    cell_file.write_text(cell.model_dump_json())
    spool = tmp_path / "spool"
    env = {**os.environ, "CCSWEEP_S3_ENDPOINT": f"http://127.0.0.1:{refused_port()}", "CCSWEEP_S3_ACCESS_KEY": "k",
           "CCSWEEP_S3_SECRET_KEY": "s", "CCSWEEP_SPOOL": str(spool), "CCSWEEP_SPOOL_RETRIES": "0",
           "HOME": str(tmp_path)}
    done = run_cell_attempts(lambda attempt: [sys.executable, "-m", "ccsweep", "cell", "--cell", f"@{cell_file}",
                                              "--store", "s3://down/run", "--executor", executor,
                                              "--attempt", str(attempt), *BOOKKEEPING_THRESHOLD],
                            env=env, timeout=120)
    assert done.returncode == exit_status, done.stderr
    assert '"status": "ok"' in done.stdout and '"stored": false' in done.stdout
    assert [p.parent.name for p in spool.rglob("result.json")] == [cell.id]
