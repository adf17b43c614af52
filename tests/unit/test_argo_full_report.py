"""The full-length Argo runs' results READMEs quote what their committed files give
(benchmarks/cluster/argo_report.py), and a number changed by hand no longer matches."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks.cluster.argo_report import FOLDERS, compute, granted_sched
from benchmarks.quoted import fill, names


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda folder: folder.name)
def test_regenerating_reproduces_the_readme_byte_for_byte(folder: Path) -> None:
    text = (folder / "README.md").read_text()
    assert {"argo.cells", "argo.busy-min", "argo.attempts", "argo.comparison", "argo.estimate"} <= set(names(text))
    assert fill(text, compute(folder)) == text


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda folder: folder.name)
def test_a_quoted_number_changed_by_hand_no_longer_matches_its_data(folder: Path) -> None:
    text = (folder / "README.md").read_text()
    quoted = re.search(r"<!-- value: argo\.busy-min -->([^<]*)<!-- /value -->", text)
    assert quoted is not None
    edited = text.replace(quoted.group(0), "<!-- value: argo.busy-min -->1.0<!-- /value -->", 1)
    assert edited != text and fill(edited, compute(folder)) == text


def test_the_loops_scheduling_is_counted_by_what_they_got_with_the_reservations_span() -> None:
    records = [{"sched": "deadline:150/1000us (fifo: EPERM)", "status": "ok"},
               {"sched": "deadline:300/1000us (fifo: EPERM)", "status": "late"},
               {"sched": "nice:-10 (fifo: EPERM, deadline: EBUSY)", "status": "late"},
               {"sched": "", "status": "ok"}]
    assert granted_sched(records) == "deadline 2 (1 late, 150-300 us of every 1 ms), nice 1 (1 late)"
    assert granted_sched([{"status": "ok"}]) == ""  # a records.csv from before the column
