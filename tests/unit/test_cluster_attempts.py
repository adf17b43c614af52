"""Reading kept Workflows back into per-attempt rows (benchmarks/cluster/attempts.py)."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

from benchmarks.cluster.attempts import attempts_of, main, read_attempts
from benchmarks.cluster.full_sweep import fixed_steps_s


def pod(cell: str, attempt: int, phase: str, exit_code: str | None, created: str, ended: str | None) -> dict:
    node = {"type": "Pod", "name": f"w[1].cell(0:id:{cell})({attempt})", "phase": phase,
            "templateRef": {"name": "ccsweep-cell", "template": "cell"}, "startedAt": created, "finishedAt": ended,
            "inputs": {"parameters": [{"name": "id", "value": cell}, {"name": "cpu", "value": "224m"},
                                      {"name": "retry-cpu", "value": "448m"}, {"name": "memory", "value": "320Mi"},
                                      {"name": "retry-memory", "value": "640Mi"}]}}
    if exit_code is not None:
        node["outputs"] = {"exitCode": exit_code}
    return node


WORKFLOW = {"metadata": {"name": "w"}, "status": {"nodes": {
    "a0": pod("a", 0, "Failed", "75", "2026-11-29T11:00:00Z", "2026-11-29T11:01:30Z"),
    "a1": pod("a", 1, "Succeeded", "0", "2026-11-29T11:01:40Z", "2026-11-29T11:03:00Z"),
    "b0": pod("b", 0, "Failed", "130", "2026-11-29T11:00:00Z", "2026-11-29T11:00:20Z"),
    "c0": pod("c", 0, "Pending", None, "2026-11-29T11:00:00Z", None),
    "d0": pod("d", 0, "Failed", None, "2026-11-29T11:00:00Z", "2026-11-29T11:04:00Z")
    | {"message": "workflow shutdown with strategy:  Stop"},
    "plan": {"type": "Pod", "name": "w[0].plan", "phase": "Succeeded", "templateName": "plan"},
}}}


def test_attempts_carry_their_outcome_and_the_requests_they_asked_for():
    rows = {(a.cell, a.attempt): a for a in attempts_of(WORKFLOW)}
    assert sorted(rows) == [("a", 0), ("a", 1), ("b", 0), ("c", 0), ("d", 0)]  # the plan step is no attempt
    assert [rows[k].outcome for k in sorted(rows)] == ["late", "succeeded", "failed", "unfinished", "stopped"]
    assert (rows["a", 0].cpu_request, rows["a", 1].cpu_request) == ("224m", "448m")  # a retry asks for twice
    assert (rows["a", 1].memory_request, rows["a", 0].seconds, rows["c", 0].seconds) == ("640Mi", 90.0, None)


def test_the_command_writes_a_row_per_attempt_and_sums_them(tmp_path: Path, capsys):
    kept = tmp_path / "w.json.gz"
    kept.write_bytes(gzip.compress(json.dumps(WORKFLOW).encode()))
    assert main([str(kept), "--csv", str(tmp_path / "a.csv"), "--figure", str(tmp_path / "a.png")]) == 0
    assert len((tmp_path / "a.csv").read_text().splitlines()) == 1 + 5
    assert (tmp_path / "a.png").stat().st_size > 0
    out = capsys.readouterr().out
    assert "| w | 5 | 1 (20%) | 1 | 1 | 1 | 1 | 1 |" in out
    assert "Cells retried at least once: 1; attempts past the first: 1." in out


def test_attempts_read_back_from_their_csv_are_the_same(tmp_path: Path):
    kept = tmp_path / "w.json"
    kept.write_text(json.dumps(WORKFLOW))
    assert main([str(kept), "--csv", str(tmp_path / "a.csv")]) == 0
    assert read_attempts(tmp_path / "a.csv") == attempts_of(WORKFLOW)


def test_compressed_node_status_is_read_as_the_controller_wrote_it():
    """Past 1 MiB the controller keeps the nodes gzipped and base64'd in status.compressedNodes."""
    packed = base64.b64encode(gzip.compress(json.dumps(WORKFLOW["status"]["nodes"]).encode())).decode()
    compressed = {"metadata": WORKFLOW["metadata"], "status": {"compressedNodes": packed}}
    assert attempts_of(compressed) == attempts_of(WORKFLOW)


def test_the_full_sweep_bench_reads_a_compressed_workflows_steps_too():
    """The bench's plan-and-figures time and its progress line read the same nodes once the controller
    compressed them (a full-length run's Workflow does, about halfway)."""
    nodes = {**WORKFLOW["status"]["nodes"], "plan": {"type": "Pod", "templateName": "plan", "phase": "Succeeded",
                                                     "startedAt": "2026-11-29T10:59:00Z",
                                                     "finishedAt": "2026-11-29T10:59:11Z"}}
    packed = base64.b64encode(gzip.compress(json.dumps(nodes).encode())).decode()
    assert fixed_steps_s({"status": {"nodes": nodes}}) == 11.0
    assert fixed_steps_s({"status": {"compressedNodes": packed}}) == 11.0
