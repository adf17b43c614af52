"""The values a Workflow's parameters may give a cell pod, checked by the plan step (ccsweep.podspec)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ccsweep.podspec import PodValueError, check_cpu, check_image, check_memory


@pytest.mark.parametrize("cpu", ["100m", "900m", "1", "1.5", "16"])
def test_cpu_quantities_a_cell_can_use(cpu: str):
    assert check_cpu(cpu) == cpu


@pytest.mark.parametrize(("cpu", "message"), [
    ("50m", "cell-cpu 50m: must be 100m to 16 cores"), ("60", "cell-cpu 60: must be 100m to 16 cores"),
    ('1", "hostPID": true, "x": "', "not a CPU quantity"), ("1e3", "not a CPU quantity"), ("", "not a CPU quantity")])
def test_other_cpu_values_are_one_line_naming_the_parameter(cpu: str, message: str):
    with pytest.raises(PodValueError, match=message):
        check_cpu(cpu)


@pytest.mark.parametrize("memory", ["128Mi", "512Mi", "1Gi", "1G", "0.5Gi", "16Gi"])
def test_memory_as_the_charts_schema_writes_it(memory: str):
    assert check_memory(memory) == memory


@pytest.mark.parametrize("memory", ["64Mi", "17Gi", "1Ti", "512Mi\"", "x"])
def test_other_memory_values_are_refused(memory: str):
    with pytest.raises(PodValueError, match="cell-memory"):
        check_memory(memory)


def test_an_image_must_be_a_reference_the_allowlist_names():
    allowed = ["ccsweep/cell:0.1.0", "registry.example.org/lab/*"]
    assert check_image("registry.example.org/lab/cell:2", allowed) == "registry.example.org/lab/cell:2"
    for image in ("evil.example/x:1", "registry.example.org.evil.com/lab/x", "ccsweep/cell:0.1.0-x"):
        with pytest.raises(PodValueError, match=f"image {image}: not allowed; allowed: ccsweep/cell:0.1.0, "):
            check_image(image, allowed)
    with pytest.raises(PodValueError, match="not an image reference"):
        check_image('ccsweep/cell:0.1.0" x', ["*"])


def test_plan_refuses_an_image_the_chart_does_not_allow_in_one_line(tmp_path: Path):
    """Before anything is planned or stored: one line, exit 2, an empty store."""
    env = {"CCSWEEP_ALLOWED_IMAGES": "ccsweep/cell:0.1.0", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    store = tmp_path / "store"
    done = subprocess.run([sys.executable, "-m", "ccsweep", "plan", "quick", "--store", str(store), "--image",
                           "evil.example/miner:1"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "ccsweep: error: image evil.example/miner:1: not allowed; allowed: ccsweep/cell:0.1.0 "
        "(the chart's image and operator.allowedImages)"]
    assert not store.exists()
    done = subprocess.run([sys.executable, "-m", "ccsweep", "plan", "quick", "--store", str(store), "--image",
                           "ccsweep/cell:0.1.0", "--cell-cpu", "500m"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    (item, *_) = json.loads(done.stdout)
    assert (item["image"], item["cpu"], item["memory"]) == ("ccsweep/cell:0.1.0", "500m", "320Mi")
