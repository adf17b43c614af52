"""The build identity (version plus commit) that results, the image tag and the chart's appVersion carry."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from ccsweep import __version__, buildinfo
from ccsweep.cli import main
from ccsweep.result import CellResult

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests/fixtures"


@pytest.fixture(autouse=True)
def fresh_cache():
    buildinfo.source_commit.cache_clear()
    yield
    buildinfo.source_commit.cache_clear()


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()


def test_a_clone_used_in_place_reports_its_head_and_uncommitted_changes():
    if buildinfo.COMMIT_FILE.exists():
        pytest.skip(f"{buildinfo.COMMIT_FILE} stamps this copy (a build's, not a clone's)")
    head = git("rev-parse", "--short=12", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    assert buildinfo.source_commit() == (f"{head}-dirty" if dirty else head)
    assert buildinfo.build_identity() == f"{__version__}-g{buildinfo.source_commit()}"


def test_a_stamped_commit_wins_and_a_malformed_one_is_not_believed(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch):
    stamp = tmp_path / "COMMIT"
    monkeypatch.setattr(buildinfo, "COMMIT_FILE", stamp)
    stamp.write_text("0123456789ab\n")
    assert buildinfo.source_commit() == "0123456789ab"
    assert buildinfo.build_identity() == f"{__version__}-g0123456789ab"
    buildinfo.source_commit.cache_clear()
    stamp.write_text("$(reboot)")
    assert buildinfo.source_commit() is None
    assert buildinfo.build_identity() == __version__


def test_only_the_clone_holding_this_package_counts(tmp_path: Path):
    """A venv inside some other git work tree must not report that tree's HEAD."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "src/ccsweep").mkdir(parents=True)
    assert buildinfo._clone_commit(tmp_path) is None
    assert buildinfo._clone_commit(tmp_path / "nowhere") is None


def test_version_option_prints_the_build_identity():
    done = CliRunner().invoke(main, ["--version"])
    assert done.exit_code == 0
    assert done.output == f"ccsweep {buildinfo.build_identity()}\n"


def test_records_stored_before_the_commit_was_recorded_still_load_with_the_same_cell_ids():
    """The figure fixtures recorded before ccsweep stamped its commit load without one; those recorded
    since carry theirs."""
    raws = {path: json.loads(path.read_text()) for path in sorted(FIXTURES.glob("*/cells/*/result.json"))}
    assert sum("ccsweep_commit" not in raw["environment"] for raw in raws.values()) > 20
    for path, raw in raws.items():
        result = CellResult.model_validate(raw)
        assert result.environment.ccsweep_commit == raw["environment"].get("ccsweep_commit")
        assert result.cell.id == path.parent.name == raw["cell"]["id"]
