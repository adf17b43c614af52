"""The demo_runs result folders' READMEs are made from their CSVs: regenerating each gives the committed text."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.lateness.demo_report import END, report

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
FOLDERS = [RESULTS / "2026-11-29-demo-cold", RESULTS / "2026-11-30-demo-cold", RESULTS / "2026-11-30-full-study-quiet",
           RESULTS / "2026-11-30-full-study-one-sitting"]


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: f.name)
def test_the_generated_part_is_what_the_committed_data_gives(folder: Path):
    committed = (folder / "README.md").read_text()
    assert committed.split(END, 1)[0] + END == report(folder).split(END, 1)[0] + END


def test_a_number_changed_by_hand_is_caught(tmp_path: Path):
    folder = FOLDERS[0]
    for name in ("runs.csv", "attempts.csv", "machine.csv", "command.txt"):
        (tmp_path / name).write_bytes((folder / name).read_bytes())
    edited = (folder / "README.md").read_text().replace("| 1 | 0 | 154 |", "| 1 | 0 | 104 |")
    assert edited != (folder / "README.md").read_text()
    assert edited.split(END, 1)[0] != report(tmp_path).split(END, 1)[0]

