"""An algorithm the kernel lacks: one check decides it, and every process reports it with exit 3."""

import json
import subprocess
import sys
from pathlib import Path

from ccsweep.cell import Cell, CellParams, DirectionParams, FlowParams
from ccsweep.exitcodes import EXIT_UNAVAILABLE
from ccsweep.runner.tcpinfo import available_congestion_controls, unavailable_congestion_controls

MISSING = "ccsweep_none"  # no kernel has it


def test_a_socket_decides_which_algorithms_are_unavailable():
    assert "reno" in available_congestion_controls()  # built into every Linux kernel
    assert unavailable_congestion_controls(["reno", MISSING, "reno", MISSING]) == [MISSING]


def test_sender_exits_3_naming_the_algorithm_before_any_flow():
    done = subprocess.run([sys.executable, "-m", "ccsweep.runner.flow", "sender", "--duration", "1",
                           "--flow", "0:reno:0", "--flow", f"1:{MISSING}:0"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == EXIT_UNAVAILABLE, done
    event = json.loads(done.stdout.splitlines()[-1])
    assert event["kind"] == "cc_unavailable" and event["cc"] == MISSING
    assert "reno" in event["available"]


def test_cell_exits_3_without_loading_the_executor(tmp_path: Path):
    """`ccsweep cell` runs once per cell: it must not import the executor (rich, prometheus_client)."""
    params = CellParams(flows=(FlowParams(cc=MISSING),), uplink=DirectionParams(rate_mbps=10, delay_ms=5, loss=0),
                        downlink=DirectionParams(rate_mbps=10, delay_ms=5, loss=0), duration_s=2, warmup_s=1, seed=1)
    cell = Cell.build("s", "e", params)
    probe = ("import runpy, sys; sys.argv = sys.argv[1:]\n"
             "try:\n    runpy.run_module('ccsweep', run_name='__main__')\n"
             "finally:\n    print(sorted(m for m in sys.modules if m.startswith('ccsweep.executor')), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe, "ccsweep", "cell", "--cell", cell.model_dump_json(),
                           "--store", str(tmp_path / "store")], capture_output=True, text=True, timeout=60)
    assert done.returncode == EXIT_UNAVAILABLE, done
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["status"] == "unavailable" and MISSING in report["error"]
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr
    assert not (tmp_path / "store").exists() or not any((tmp_path / "store").rglob("result*.json"))
