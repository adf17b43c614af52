"""Real cells for the integration tests: `ccsweep cell` processes over namespaces, ccsweep-link and kernel TCP.

Each cell runs as the same subprocess the local executor and an Argo pod run, so these tests
exercise the one cell path.  Cells run concurrently (each has its own namespaces) to keep the
suite short.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ccsweep.cell import Cell
from ccsweep.expand import expand
from ccsweep.result import CellResult
from ccsweep.runner.netns import namespace_names
from ccsweep.specload import parse_spec
from ccsweep.store import open_store
from support.rerun import run_again


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here is an integration test and needs root (namespaces, TUN devices)."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)
            if os.geteuid() != 0:
                item.add_marker(pytest.mark.skip(reason="needs root (network namespaces, TUN devices)"))


@dataclass
class CellRun:
    """A finished `ccsweep cell` process: exit status, its one-line report and the stored result."""

    cell: Cell
    pid: int
    returncode: int
    report: dict[str, Any]
    stderr: str
    result: CellResult | None

    @property
    def namespaces(self) -> tuple[str, str]:
        names = namespace_names(self.cell.id, self.pid)
        return names.sender, names.receiver

    def describe(self) -> str:
        """The numbers of the run, for assertion messages."""
        r = self.result
        if r is None:
            return f"cell {self.cell.id}: exit {self.returncode}, report {self.report}, stderr {self.stderr[-300:]!r}"
        check = r.link.selfcheck if r.link else None
        flow = r.flows[0] if r.flows else None
        return (f"{self.cell.params.cc_label} loss {self.cell.params.loss:g}: goodput {r.goodput_mbps} Mbit/s, "
                f"steady {r.goodput_steady_mbps}, bottleneck throughput {r.bottleneck_throughput_mbps}, "
                f"retransmits {flow and flow.retransmits}, rwnd-limited {flow and flow.rwnd_limited_fraction}, "
                f"emulator lateness p99 {check and check.lateness_p99_us} us (late: {check and check.late}), "
                f"emulator cpu {check and round(check.cpu_share, 2)}")


class Cells:
    """Runs cells as `ccsweep cell` processes and looks for what they might leave behind."""

    def __init__(self, store: Path, scratch: Path):
        self.store = store
        self.scratch = scratch

    @staticmethod
    def of(spec: dict[str, Any]) -> list[Cell]:
        return expand(parse_spec(spec, origin="test"))

    def start(self, cell: Cell, prefix: tuple[str, ...] = (), attempt: int = 1) -> subprocess.Popen[str]:
        """`prefix`: what the process starts under (e.g. setpriv with a pod's capabilities)."""
        workdir = self.scratch / cell.id / f"attempt-{attempt}"
        workdir.mkdir(parents=True, exist_ok=True)
        return subprocess.Popen([*prefix, sys.executable, "-m", "ccsweep", "cell", "--cell", cell.model_dump_json(),
                                 "--store", str(self.store), "--workdir", str(workdir), "--attempt", str(attempt)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def finish(self, cell: Cell, process: subprocess.Popen[str], timeout: float = 120) -> CellRun:
        try:
            out, err = process.communicate(timeout=timeout)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        lines = out.strip().splitlines()
        report = json.loads(lines[-1]) if lines else {}
        result = open_store(str(self.store)).get_result(cell.id)
        return CellRun(cell, process.pid, process.returncode, report, err, result)

    def run(self, cell: Cell, timeout: float = 120, prefix: tuple[str, ...] = ()) -> CellRun:
        """Run `cell` as a user's sweep would: an attempt the machine spoiled (late or starved, exit
        75) is kept and run again, as often as the executor would (attempts_allowed), and what each spoiled
        attempt measured of its own lateness is printed (pytest shows it beside a failure)."""
        attempt = 1
        while True:
            run = self.finish(cell, self.start(cell, prefix, attempt), timeout)
            if not run_again(run.report, attempt):
                return run
            print(f"cell {cell.id} attempt {attempt}: {run.report.get('status')}: {run.report.get('timing')}")
            attempt += 1

    @staticmethod
    def namespaces() -> set[str]:
        out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
        return {line.split()[0] for line in out.splitlines() if line.startswith("ccs-")}

    @staticmethod
    def processes_mentioning(*words: str) -> list[str]:
        """Command lines of running processes containing any of `words` (e.g. a cell's namespaces)."""
        found = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if any(w in cmdline for w in words):
                found.append(f"{proc.name}: {cmdline.strip()}")
        return found


@pytest.fixture(scope="module")
def cells(tmp_path_factory: pytest.TempPathFactory) -> Cells:
    root = tmp_path_factory.mktemp("cells")
    return Cells(root / "store", root / "scratch")
