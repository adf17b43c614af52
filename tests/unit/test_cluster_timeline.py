"""Each Argo pod attempt beside the record its cell left (benchmarks/cluster/timeline.py)."""

from __future__ import annotations

import csv
from pathlib import Path

from benchmarks.cluster.timeline import counts, main, timeline

ATTEMPTS = """\
workflow,cell,attempt,phase,exit_code,cpu_request,memory_request,created_at,finished_at,seconds,message,node,\
outcome
w,a,0,Failed,75,224m,320Mi,2026-11-30T10:00:00Z,2026-11-30T10:01:10Z,70.0,main: Error (exit code 75),n1,late
w,a,1,Succeeded,0,448m,640Mi,2026-11-30T10:01:20Z,2026-11-30T10:12:30Z,670.0,,n1,succeeded
w,b,0,Failed,1,224m,320Mi,2026-11-30T10:00:00Z,2026-11-30T10:00:05Z,5.0,main: Error (exit code 1),n1,failed
"""
RECORDS = """\
run,cell,cc,loss,attempt,status,started_at,flows_started_at,finished_at,late_cause,lateness_p99_us,\
emulator_cpu_share
1,a,bbr,0.01,1,late,2026-11-30T10:00:05+00:00,2026-11-30T10:00:06+00:00,2026-11-30T10:01:06+00:00,run-queue,1500,0.1
1,a,bbr,0.01,2,ok,2026-11-30T10:11:20+00:00,2026-11-30T10:11:21+00:00,2026-11-30T10:12:21+00:00,,200,0.2
"""


def write(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "attempts.csv").write_text(ATTEMPTS)
    (tmp_path / "records.csv").write_text(RECORDS)
    return tmp_path / "attempts.csv", tmp_path / "records.csv"


def test_an_attempt_meets_the_record_of_the_same_attempt(tmp_path: Path):
    """Argo counts attempts from 0 and the runner from 1; an attempt that left no record keeps empty columns."""
    rows = {(r["cell"], r["attempt"]): r for r in timeline(*write(tmp_path))}
    retry = rows["a", "1"]
    assert (retry["record_status"], retry["waited_s"], retry["after_record_s"]) == ("ok", "600.0", "9.0")
    assert retry["emulator_cpu_s"] == "12.2" and retry["node"] == "n1"  # 0.2 x 61 s
    assert rows["a", "0"]["late_cause"] == "run-queue"
    assert rows["b", "0"]["record_status"] == "" and rows["b", "0"]["waited_s"] == ""


def test_cells_at_once_step_up_and_down(tmp_path: Path):
    rows = timeline(*write(tmp_path))
    assert [level for _, level in counts(rows, "flows_started_at", "record_finished_at")] == [1, 0, 1, 0]
    assert [level for _, level in counts(rows, "pod_created_at", "runner_started_at")] == [1, 0, 1, 0]


def test_the_command_writes_the_table_and_the_figure(tmp_path: Path, capsys):
    attempts, records = write(tmp_path)
    out = ["--csv", str(tmp_path / "t.csv"), "--figure", str(tmp_path / "t.png")]
    assert main([str(attempts), str(records), *out]) == 0
    with (tmp_path / "t.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == 3
    assert (tmp_path / "t.png").stat().st_size > 0
    assert "3 attempts, 2 with their record" in capsys.readouterr().out
