"""Real sweeps for the services tests: a small spec, `ccsweep` run as a user runs it, and polling.

Cells are short and slow (10 Mbit/s, 20 ms RTT, a few seconds) so they cost little CPU on a
shared machine; the quality of measurements is tested in tests/integration, and the sweeps here
run with the bookkeeping tests' lateness threshold (support/bookkeeping.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pytest
import yaml

from ccsweep.store import ResultStore

T = TypeVar("T")

#: Real cells create network namespaces and TUN devices.
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="real cells need root (network namespaces, TUN devices)")
RTT_MS = 20
BANDWIDTH_MBPS = 10


def write_spec(path: Path, name: str, *, cc: list[str], loss_percent: list[float], duration_s: float) -> Path:
    """A one-experiment goodput-vs-loss sweep named `name` (its experiment too)."""
    spec = {"name": name, "experiments": [{
        "name": name, "title": f"{name}: goodput vs loss", "figure": "goodput-vs-loss", "cc": cc,
        "loss_percent": loss_percent, "rtt_ms": [RTT_MS], "bandwidth_mbps": [BANDWIDTH_MBPS],
        "queue": [{"kind": "droptail", "bdp": 2, "min_bytes": 30000}], "duration_s": duration_s, "warmup_s": 1}]}
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def sweep_env(s3: dict[str, str], spool: Path, **extra: str) -> dict[str, str]:
    """The environment of a `ccsweep` process: S3 settings, a spool of the test's own, wide console lines."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("CCSWEEP_S3_", "AWS_"))}
    return {**inherited, **s3, "CCSWEEP_SPOOL": str(spool), "COLUMNS": "240", **extra}


def ccsweep(*args: str, env: dict[str, str], cwd: Path | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ccsweep", *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


@contextmanager
def start_ccsweep(*args: str, env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """`ccsweep ARGS` in the background while the test disturbs it; killed if the test fails first."""
    process = subprocess.Popen([sys.executable, "-m", "ccsweep", *args], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def wait_until(what: str, probe: Callable[[], T], process: subprocess.Popen[str] | None = None,
               timeout: float = 120) -> T:
    """Poll `probe` until it returns something true; fail early if `process` ends first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        if process is not None and process.poll() is not None:
            _, err = process.communicate()
            pytest.fail(f"ccsweep exited {process.returncode} before {what}: {err[-3000:]}")
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


def stored_cells(store: ResultStore) -> list[str]:
    """Ids of the cells with a result record in the store."""
    return sorted(k.split("/")[1] for k in store.list_keys("cells/") if k.endswith("/result.json"))


def summary_row(stderr: str, experiment: str) -> dict[str, str]:
    """The summary table's row of an experiment, by column name (rich draws ┃ in the header, │ below)."""
    rows = [[cell.strip() for cell in re.split("[│┃]", line)]
            for line in stderr.splitlines() if re.search("[│┃]", line)]
    header = next(row for row in rows if "spooled" in row)
    return dict(zip(header, next(row for row in rows if row[1] == experiment), strict=True))
