"""The committed Prometheus config and recording rules, checked and unit-tested by promtool."""

from __future__ import annotations

import subprocess

import pytest

from servers import REPO, debian_binary

MONITORING = REPO / "monitoring"


@pytest.mark.parametrize("args", [
    ["check", "config", "prometheus.yml"],
    ["check", "rules", "rules.yml"],
    ["test", "rules", "rules_test.yml"],  # expected counts, progress and ETA on made-up sweeps
])
def test_promtool_accepts(args: list[str]):
    done = subprocess.run([debian_binary("promtool"), *args], cwd=MONITORING, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
