"""The rebbr-pacing result's README quotes what its committed cell tables give
(benchmarks/pacing/report.py), and a number changed by hand no longer matches."""

from __future__ import annotations

from benchmarks.pacing.report import README, compute
from benchmarks.quoted import fill, names


def test_regenerating_reproduces_the_readme_byte_for_byte() -> None:
    text = README.read_text()
    assert {"pacing.runs", "pacing.cliffs", "pacing.medians"} <= set(names(text))
    assert fill(text, compute()) == text


def test_a_quoted_table_changed_by_hand_no_longer_matches_its_data() -> None:
    text = README.read_text()
    edited = text.replace("| 20 | ", "| 21 | ", 1)
    assert edited != text and fill(edited, compute()) == text
