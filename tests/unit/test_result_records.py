"""A committed result table names its records as its README's commands do, never by a local folder.

`ccsweep export` writes where each cell's record is stored (the `record` column): for a folder store
that is an absolute path on the machine that ran it, which says nothing to a reader and something
about the machine's working folders. Committed tables therefore say STORE, the name their README's
commands give the store (`ccsweep run ... --store STORE`), or keep a location that is part of the
command itself (an s3:// prefix the bench was told, a report's own relative link).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
RECORD = re.compile(r"(STORE|\.\./\.\.|s3://[a-z0-9.-]+/[A-Za-z0-9._/-]+)/cells/[0-9a-f]{16}/result\.json")


def tables_with_records() -> list[Path]:
    found = []
    for path in sorted(RESULTS.rglob("*.csv")):
        with path.open(newline="") as handle:
            if "record" in (csv.DictReader(handle).fieldnames or []):
                found.append(path)
    return found


def test_there_are_tables_to_check() -> None:
    assert len(tables_with_records()) >= 10


@pytest.mark.parametrize("table", tables_with_records(), ids=lambda p: str(p.relative_to(RESULTS)))
def test_every_record_is_named_by_the_store_the_readme_names(table: Path) -> None:
    with table.open(newline="") as handle:
        records = [row["record"] for row in csv.DictReader(handle)]
    named_locally = [r for r in records if not RECORD.fullmatch(r)]
    assert not named_locally, f"{len(named_locally)} records named by a local path, e.g. {named_locally[0]}"
