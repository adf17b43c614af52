"""A real cell run as a user's sweep runs it: an attempt the machine spoiled is run again.

A single cell in a test meets the same machine a user's does: on a small guest its link can be
late now and then (exit 75, status late or starved), which says nothing about what the test is
about. The executor keeps such an attempt and runs the cell again, as often as attempts_allowed says;
a test does the same, and prints what each spoiled attempt measured of its own lateness.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import Any

from ccsweep.executor import attempts_allowed
from ccsweep.result import RERUN_STATUSES


def last_report(stdout: str) -> dict[str, Any]:
    """`ccsweep cell`'s one-line JSON report (its last line of output), or {}."""
    lines = stdout.strip().splitlines()
    try:
        return dict(json.loads(lines[-1])) if lines else {}
    except json.JSONDecodeError:
        return {}


def run_again(report: dict[str, Any], attempt: int) -> bool:
    """Whether the executor would run a cell again after attempt `attempt` reported `report`."""
    return report.get("status") in RERUN_STATUSES and attempt < attempts_allowed(report.get("late_cause"))


def run_cell_attempts(argv: Callable[[int], list[str]], **run: Any) -> subprocess.CompletedProcess[str]:
    """Run `argv(attempt)` (a `ccsweep cell` command line with `--attempt`) until an attempt is not
    late or starved, as often as the executor would (attempts_allowed); returns the last run."""
    attempt = 1
    while True:
        done = subprocess.run(argv(attempt), capture_output=True, text=True, **run)
        report = last_report(done.stdout)
        if not run_again(report, attempt):
            return done
        print(f"attempt {attempt}: {report.get('status')}: {report.get('timing')}")
        attempt += 1
