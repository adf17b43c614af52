"""The link-effects result's README quotes what its committed cell table gives
(benchmarks/effects/report.py), and a number changed by hand no longer matches."""

from __future__ import annotations

import pytest

from benchmarks.effects.report import FOLDERS, compute
from benchmarks.quoted import fill, names


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda folder: folder.name)
def test_regenerating_reproduces_the_readme_byte_for_byte(folder) -> None:
    text = (folder / "README.md").read_text()
    assert {"effects.runs", "effects.busy-min", "effects.table"} <= set(names(text))
    assert fill(text, compute(folder)) == text


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda folder: folder.name)
def test_a_quoted_table_changed_by_hand_no_longer_matches_its_data(folder) -> None:
    text = (folder / "README.md").read_text()
    edited = text.replace("| policer 10 Mbit/s, 15 kB | bbr | 0 | ", "| policer 10 Mbit/s, 15 kB | bbr | 0 | 1", 1)
    assert edited != text and fill(edited, compute(folder)) == text
