"""The carried-prior result's README quotes what its committed runs give
(benchmarks/admission/prior_report.py), and a run folder without its closing line is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.admission.prior_report import FOLDER, compute, read_run
from benchmarks.quoted import fill, names


def test_regenerating_reproduces_the_readme_byte_for_byte() -> None:
    text = (FOLDER / "README.md").read_text()
    assert {"prior.table", "prior.ratio"} <= set(names(text))
    assert fill(text, compute()) == text


def test_a_run_without_its_closing_line_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "carried-9"
    run.mkdir()
    (run / "summary.txt").write_text("wall_s=290.21\n")
    (run / "figure8-cells.csv").write_text("cell_id,started_at,finished_at\n")
    with pytest.raises(ValueError, match="no wall_s= or closing line"):
        read_run(run)
