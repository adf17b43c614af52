"""The idle-wake result's README is made from its CSVs: regenerating it gives the committed text."""

from __future__ import annotations

from pathlib import Path

from benchmarks.lateness.idle_wake_report import main, readme

FOLDER = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "2026-11-29-idle-wake"


def test_the_readme_is_what_the_committed_data_gives():
    assert (FOLDER / "README.md").read_text() == readme(FOLDER)
    assert main([str(FOLDER), "--check"]) == 0


def test_a_number_changed_by_hand_is_caught(tmp_path: Path):
    for name in ("attempts.csv", "machine.csv", "command.txt"):
        (tmp_path / name).write_bytes((FOLDER / name).read_bytes())
    edited = (FOLDER / "README.md").read_text().replace("| poll | 12 | 0 |", "| poll | 12 | 1 |")
    assert edited != (FOLDER / "README.md").read_text()
    (tmp_path / "README.md").write_text(edited)
    assert main([str(tmp_path), "--check"]) == 1
