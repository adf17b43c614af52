"""The idle-catch-up result's README is made from its CSV: regenerating it gives the committed text."""

from __future__ import annotations

from pathlib import Path

from benchmarks.lateness.idle_catch_up_report import STUDY, main, readme

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
FOLDER = RESULTS / "2026-11-30-idle-catch-up"


def test_the_readme_is_what_the_committed_data_gives():
    assert (FOLDER / "README.md").read_text() == readme(FOLDER)
    assert main([str(FOLDER), "--check"]) == 0


def test_a_number_changed_by_hand_is_caught(tmp_path: Path):
    folder = tmp_path / FOLDER.name
    folder.mkdir()
    for name in ("attempts.csv", "command.txt"):
        (folder / name).write_bytes((FOLDER / name).read_bytes())
    (tmp_path / STUDY.parent).mkdir()
    (tmp_path / STUDY).write_bytes((RESULTS / STUDY).read_bytes())
    committed = (FOLDER / "README.md").read_text()
    edited = committed.replace("of its 19 late attempts", "of its 18 late attempts")
    assert edited != committed
    (folder / "README.md").write_text(edited)
    assert main([str(folder), "--check"]) == 1
