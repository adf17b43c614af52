"""The cold-demo result's README is made from its CSVs: regenerating it gives the committed text."""

from __future__ import annotations

from pathlib import Path

from benchmarks.lateness.demo_report import END, report

FOLDER = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "2026-11-29-demo-cold"


def test_the_generated_part_is_what_the_committed_data_gives():
    committed = (FOLDER / "README.md").read_text()
    assert committed.split(END, 1)[0] + END == report(FOLDER).split(END, 1)[0] + END


def test_a_number_changed_by_hand_is_caught(tmp_path: Path):
    for name in ("runs.csv", "attempts.csv", "machine.csv", "command.txt"):
        (tmp_path / name).write_bytes((FOLDER / name).read_bytes())
    edited = (FOLDER / "README.md").read_text().replace("| 1 | 0 | 154 |", "| 1 | 0 | 104 |")
    assert edited != (FOLDER / "README.md").read_text()
    assert edited.split(END, 1)[0] != report(tmp_path).split(END, 1)[0]
