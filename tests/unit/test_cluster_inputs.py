"""The local cluster's scripts refuse bad input in one line that names it, with exit 2, before they
touch anything (no root, no cluster needed): hack/cluster/node.sh's action, node name, CPU slice
and labels, up.sh's NODES, and argo.sh's requeue time."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def run(script: str, *args: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """The script with the given arguments and environment, against an empty BASE and an unused
    netns name (nothing there to act on)."""
    return subprocess.run([str(REPO / "hack/cluster" / script), *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "CCSWEEP_CLUSTER_BASE": str(tmp_path / "base"),
                               "CCSWEEP_CLUSTER_NS": "ccsweep-unit-none", **env})


@pytest.mark.parametrize(("args", "env", "named"), [
    (("start", "n2"), {}, "action"),
    (("add", "Node_2"), {}, "NAME"),
    (("add", "ccsweep-node"), {}, "first node"),
    (("add", "n2"), {"CCSWEEP_NODE_CPU_MILLI": "50"}, "CCSWEEP_NODE_CPU_MILLI"),
    (("add", "n2"), {"CCSWEEP_NODE_CPU_MILLI": "1e3"}, "CCSWEEP_NODE_CPU_MILLI"),
    (("add", "n2"), {"CCSWEEP_NODE_MEMORY_MI": "-1"}, "CCSWEEP_NODE_MEMORY_MI"),
    (("add", "n2"), {"CCSWEEP_NODE_LABELS": "a=b;touch x"}, "CCSWEEP_NODE_LABELS"),
])
def test_node_sh_refuses_bad_input_in_one_line(args: tuple[str, ...], env: dict[str, str], named: str,
                                               tmp_path: Path):
    done = run("node.sh", *args, tmp_path=tmp_path, **env)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert named in line
    assert not (tmp_path / "base").exists()


@pytest.mark.parametrize("nodes", ["0", "9", "two", "2; true"])
def test_up_sh_refuses_a_bad_node_count_in_one_line(nodes: str, tmp_path: Path):
    done = run("up.sh", tmp_path=tmp_path, NODES=nodes)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert "NODES must be an integer from 1 to 8" in line


@pytest.mark.parametrize("seconds", ["0", "61", "1s", "1; true", "600"])
def test_argo_sh_refuses_a_bad_requeue_time_in_one_line(seconds: str, tmp_path: Path):
    done = run("argo.sh", tmp_path=tmp_path, CCSWEEP_ARGO_REQUEUE_S=seconds)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert "CCSWEEP_ARGO_REQUEUE_S must be 1-60 seconds" in line
