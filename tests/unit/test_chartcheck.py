"""`helm test`'s store check (ccsweep_operator.chartcheck) against a real file store: it must pass on a
store that keeps what it is given and fail, in one line, on one that cannot take a write."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccsweep_operator import chartcheck


def test_the_store_check_writes_reads_back_and_leaves_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    store = tmp_path / "results"
    assert chartcheck.main(["store", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"ok store: store {store}: wrote, read back and deleted {chartcheck.PROBE_FOLDER}/")
    assert not [p for p in store.rglob("*") if p.is_file()]


def test_a_store_that_cannot_take_a_write_fails_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the store's folder would be")
    assert chartcheck.main(["store", "--store", str(blocker)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("FAIL store: ") and err.count("\n") == 1, err


def test_every_check_has_help(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as done:
        chartcheck.main(["--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    assert all(check in shown for check in ("crd", "operator", "store"))
