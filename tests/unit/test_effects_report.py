"""The link-effects result's README quotes what its committed cell table gives
(benchmarks/effects/report.py), and a number changed by hand no longer matches."""

from __future__ import annotations

from benchmarks.effects.report import README, compute
from benchmarks.quoted import fill, names


def test_regenerating_reproduces_the_readme_byte_for_byte() -> None:
    text = README.read_text()
    assert {"effects.runs", "effects.busy-min", "effects.table"} <= set(names(text))
    assert fill(text, compute()) == text


def test_a_quoted_table_changed_by_hand_no_longer_matches_its_data() -> None:
    text = README.read_text()
    edited = text.replace("| policer 10 Mbit/s, 15 kB | bbr | 0 | ", "| policer 10 Mbit/s, 15 kB | bbr | 0 | 1", 1)
    assert edited != text and fill(edited, compute()) == text
