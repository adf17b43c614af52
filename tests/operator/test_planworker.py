"""A Sweep's planning in a bounded child process: a plan past its memory or time fails that Sweep only.

The children are real processes with a real RLIMIT_AS and a real timeout; the plans are real
plans into file stores. The operator's own process (this test's) plans the next Sweep after one
failed, as the handler would.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ccsweep.crd import SweepStatus
from ccsweep_operator.planworker import CHILD_ENV, MEMORY_ENV, MIN_MEMORY_MIB, TIMEOUT_ENV, PlanBounds, decide_bounded
from ccsweep_operator.reconcile import SweepObject

EXAMPLES = Path(__file__).resolve().parents[2] / "operator/examples"


def sweep_object(name: str, cells: int = 2, adaptive: bool = False) -> SweepObject:
    """The quick example under `name`, with `cells` cells: up to 1,000 loss rates, each repeated (with
    `adaptive`, up to 50 times as an adaptive rule asks)."""
    losses = min(cells // (100 if adaptive else 2), 1000)
    repetitions: int | dict = cells // (2 * losses)
    if adaptive:
        repetitions = {"min": 3, "max": repetitions, "target": {"ci_relative": 0.05}}
    body = yaml.safe_load((EXAMPLES / "quick/sweep.yaml").read_text())
    body["metadata"] = {"name": name, "namespace": "lab", "uid": f"uid-{name}", "generation": 1}
    body["spec"]["experiments"][0] |= {"loss_percent": [round(0.001 * (i + 1), 4) for i in range(losses)],
                                       "repetitions": repetitions}
    return SweepObject.from_body(body)


@pytest.fixture
def store_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The child inherits the operator's environment: its store is a file store here."""
    monkeypatch.setenv("CCSWEEP_STORE", f"file://{tmp_path}")
    return tmp_path


def planned(status: dict) -> tuple[str, str, str]:
    condition = next(c for c in SweepStatus.model_validate(status).conditions if c.type == "Planned")
    return condition.status, condition.reason, condition.message


def test_a_plan_past_its_time_fails_that_sweep_and_the_next_sweep_is_planned(store_env: Path):
    """100,000 cells (the cap) take about 17 s to plan on one idle core of the test machine; two cells
    0.3 s there, and 2.3 s at a load average of 33. A bound of 4 s lies between, with room both ways."""
    bounds = PlanBounds(timeout_s=4)
    huge = decide_bounded(sweep_object("huge", cells=100_000), None, bounds)
    assert huge.workflow is None and not huge.retry
    assert huge.status["phase"] == "Failed"
    assert huge.status["message"] == ("Sweep huge: planning took longer than the operator's 4 s "
                                      "(operator.plan.timeoutSeconds); the Sweep was not planned")
    assert planned(huge.status) == ("False", "PlanFailed", huge.status["message"])
    small = decide_bounded(sweep_object("small"), None, bounds)
    assert small.status["phase"] == "Pending" and small.workflow is not None, small.status["message"]
    assert small.status["cells"]["total"] == 2
    assert planned(small.status)[:2] == ("True", "Planned")


def loaded_planner_mib() -> float:
    """The address space (MiB) of a planning child that has loaded its code and planned nothing."""
    done = subprocess.run([sys.executable, "-c", "from ccsweep_operator.planworker import mapped_bytes; "
                           "print(mapped_bytes())"], env={**os.environ, **CHILD_ENV},
                          capture_output=True, text=True, check=True, timeout=60)
    return int(done.stdout) / 2**20


def test_a_plan_past_its_memory_fails_that_sweep_and_the_next_sweep_is_planned(store_env: Path):
    """The bound is set 4 MiB over the loaded planner, measured here, since the planner's own code
    maps a different amount on each machine (about 130 MiB here). Planning 1,000 adaptive runs adds
    9 MiB to it; two cells add under 1 MiB. The bound sits with a factor of 2 on either side."""
    bounds = PlanBounds(memory_mib=math.ceil(loaded_planner_mib()) + 4, timeout_s=600)
    huge = decide_bounded(sweep_object("huge", cells=1_000, adaptive=True), None, bounds)
    assert huge.workflow is None and not huge.retry
    assert huge.status["message"] == (f"Sweep huge: planning needed more than the operator's {bounds.memory_mib} "
                                      "MiB (operator.plan.memoryMiB); the Sweep was not planned")
    assert planned(huge.status) == ("False", "PlanFailed", huge.status["message"])
    small = decide_bounded(sweep_object("small"), None, bounds)
    assert small.status["phase"] == "Pending" and small.workflow is not None, small.status["message"]


def test_a_bound_the_loaded_planner_exceeds_fails_every_sweep_at_once(store_env: Path):
    """Left to the kernel, a plan under such a bound would pass or fail by whether it mapped anything."""
    bounds = PlanBounds(memory_mib=math.floor(loaded_planner_mib()) - 1, timeout_s=600)
    small = decide_bounded(sweep_object("small"), None, bounds)
    assert small.workflow is None
    assert small.status["message"] == (f"Sweep small: planning needed more than the operator's {bounds.memory_mib} "
                                       "MiB (operator.plan.memoryMiB); the Sweep was not planned")


def test_bounds_come_from_the_environment_and_a_bad_one_is_refused():
    assert PlanBounds.from_env({MEMORY_ENV: "300", TIMEOUT_ENV: "30"}) == PlanBounds(memory_mib=300, timeout_s=30)
    assert PlanBounds.from_env({}) == PlanBounds()
    with pytest.raises(ValueError, match=f"{MEMORY_ENV} must be at least {MIN_MEMORY_MIB}"):
        PlanBounds.from_env({MEMORY_ENV: str(MIN_MEMORY_MIB - 1)})
