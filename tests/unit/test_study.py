"""The whole-study comparison: each cell on two links beside ReBBR's number, and a run's own statistics.

The cells are a real expansion of Figure 8's grid; their measurements are made up (synthetic.py)
so each assertion has a known answer: which twin pairs with which cell, which published row a cell
meets, and which differences the summary may count.
"""

from __future__ import annotations

import pytest

from ccsweep.result import CellResult
from ccsweep.results.published_sets import SETS, load
from ccsweep.results.study import FLOOR_MBPS, compare_links, relative, run_stats, table_markdown
from synthetic import experiment, goodput

FIGURE8 = {"cc": ["bbr", "cubic"], "loss_percent": [0.001, 1, 50], "duration_s": 60, "published": ["rebbr-figure8"]}


def _with_throughput(results: list[CellResult], value: float, **update: object) -> list[CellResult]:
    return [r.model_copy(update={"bottleneck_throughput_mbps": value, **update}) for r in results]


def _mahimahi_twins(results: list[CellResult], value: float) -> list[CellResult]:
    twins = []
    for r in results:
        cell = r.cell.model_copy(update={"params": r.cell.params.model_copy(update={"link": "mahimahi"})})
        twins.append(r.model_copy(update={"cell": cell, "bottleneck_throughput_mbps": value}))
    return twins


def test_each_cell_meets_its_mahimahi_twin_and_its_published_number() -> None:
    data = experiment(FIGURE8, goodput(lambda _c: 50.0))
    link = _with_throughput(data.results, 90.0)
    (table,) = compare_links([(data.experiment, link)], _mahimahi_twins(link, 100.0))
    published = {(r.congestion_control, r.loss_rate): r.goodput_Mbps for r in load(SETS["rebbr-figure8"])}
    assert len(table.rows) == 6
    for row in table.rows:
        assert row.values == {"ccsweep-link": 90.0, "mahimahi": 100.0}
        assert row.published == published[(row.cc, round(row.loss, 9))]
    link_vs_mm = table.differences[0]
    assert link_vs_mm.pair == ("ccsweep-link", "mahimahi")
    assert link_vs_mm.compared == 6
    assert link_vs_mm.median == pytest.approx(0.1)


def test_a_cell_without_a_twin_shows_none_and_is_left_out_of_the_summary() -> None:
    data = experiment(FIGURE8, goodput(lambda _c: 50.0))
    link = _with_throughput(data.results, 90.0)
    (table,) = compare_links([(data.experiment, link)], _mahimahi_twins(link[:2], 80.0))
    assert sum(row.values["mahimahi"] is None for row in table.rows) == 4
    assert table.differences[0].compared == 2
    assert "| - |" in table_markdown(table)


def test_references_below_the_floor_are_not_relative_differences() -> None:
    assert relative(0.02, FLOOR_MBPS / 2) is None
    assert relative(2.0, 1.0) == pytest.approx(1.0)
    assert relative(None, 5.0) is None
    data = experiment(FIGURE8, goodput(lambda _c: 50.0))
    tiny = _with_throughput(data.results, 0.01)
    (table,) = compare_links([(data.experiment, tiny)], _mahimahi_twins(tiny, 0.5))
    assert table.differences[0].compared == 0
    assert table.differences[0].median is None


def test_run_stats_counts_cells_at_once_and_busy_time_from_record_times() -> None:
    data = experiment(FIGURE8, goodput(lambda _c: 50.0))
    spans = [("2026-01-01T00:00:00+00:00", "2026-01-01T00:01:00+00:00"),
             ("2026-01-01T00:00:30+00:00", "2026-01-01T00:01:30+00:00"),
             ("2026-01-01T00:01:10+00:00", "2026-01-01T00:02:00+00:00"),
             # a resumed run an hour later: the pause is not wall time
             ("2026-01-01T01:00:00+00:00", "2026-01-01T01:00:30+00:00")]
    results = [r.model_copy(update={"started_at": s, "finished_at": e})
               for r, (s, e) in zip(data.results[:4], spans, strict=True)]
    late = results[2].model_copy(update={"status": "late"})
    stats = run_stats([results[0], results[1], results[3]], [late])
    assert (stats.cells, stats.attempts, stats.max_at_once) == (3, {"late": 1}, 2)
    assert stats.wall_s == 120 + 30
    assert stats.cell_seconds == 60 + 60 + 50 + 30
    assert stats.mean_at_once == pytest.approx(200 / 150)
    assert stats.cells_per_minute == pytest.approx(3 / 2.5)
