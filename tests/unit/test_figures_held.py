"""The figures step's records held in a temporary file: read back equal, and grouping holds none.

That this keeps the figures step's peak flat from 400 to 40,000 cells is measured by
benchmarks/memory, not here.
"""

from __future__ import annotations

from pathlib import Path

from ccsweep.results.data import load_sweep
from ccsweep.results.held import RecordFile, Results
from ccsweep.results.points import group_points
from ccsweep.store import open_store

FIXTURE = Path(__file__).parents[1] / "fixtures" / "goodput-vs-loss"


def fixture_sweep():
    store = open_store(str(FIXTURE))
    (sweep,) = store.list_sweeps()
    return store, load_sweep(store, sweep)


def test_a_record_reads_back_equal_to_the_stored_one_every_time() -> None:
    store, data = fixture_sweep()
    results = data.distinct_results()
    assert isinstance(results, Results) and len(results) > 1
    for result in results:
        assert result == store.get_result(result.cell.id)
    assert [r.cell.id for r in results] == [r.cell.id for r in results]  # a second pass reads the same


def test_recent_records_are_bounded() -> None:
    store, data = fixture_sweep()
    records = RecordFile()
    first = next(iter(data.distinct_results()))
    rows = [records.add(first) for _ in range(RecordFile.RECENT * 2)]
    assert [records[row] for row in rows] == [first] * len(rows)
    assert len(records._recent) == RecordFile.RECENT
    assert records[rows[0]] is not records[rows[1]]  # parsed anew, not one object shared


def test_points_hold_positions_of_the_same_records_not_records() -> None:
    _, data = fixture_sweep()
    results = data.experiments[0].results
    points = group_points(results)
    assert sum(len(p.results) for p in points) == len(results)
    assert all(isinstance(p.results, Results) and p.results._source is results._source for p in points)  # type: ignore[attr-defined]
    assert {r.cell.id for p in points for r in p.results} == {r.cell.id for r in results}
    first = points[0].results
    assert [r.cell.id for r in first[:1]] == [first[0].cell.id]


def test_records_in_memory_group_the_same() -> None:
    _, data = fixture_sweep()
    results = data.experiments[0].results
    held = list(results)
    assert [[r.cell.id for r in p.results] for p in group_points(held)] == \
        [[r.cell.id for r in p.results] for p in group_points(results)]
