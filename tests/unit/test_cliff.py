"""Where a goodput-vs-loss curve drops: the lowest loss whose median run is under half the ideal."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccsweep.results.cliff import experiment_cliffs, find_cliff
from ccsweep.results.data import load_sweep
from ccsweep.results.quantities import payload_ideal_mbps
from ccsweep.store import FileStore

GRID = [0.01, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5]
RATE = 100.0


def curve(falls_at: float | None, runs: int = 5, **cells: list[float]) -> dict[float, list[float]]:
    """Runs at 0.9 of the ideal below `falls_at` and at 1 Mbit/s from it; `cells` overrides a loss (p20=...)."""
    out = {}
    for loss in GRID:
        held = falls_at is None or loss < falls_at
        base = 0.9 * payload_ideal_mbps(RATE, loss) if held else 1.0
        out[loss] = cells.get(f"p{round(loss * 100)}", [base * (1 + 0.01 * i) for i in range(runs)])
    return out


def test_a_clean_drop_is_one_grid_point_with_no_doubt():
    cliff = find_cliff(curve(0.2), RATE)
    assert (cliff.loss(), cliff.loss(cliff.low), cliff.loss(cliff.high)) == (0.2, 0.2, 0.2)
    assert cliff.describe() == "20 % [20, 20 %] (95 % bootstrap CI, 5 runs a cell)"
    assert (cliff.where(), cliff.with_interval()) == ("20 %", "20 % [20, 20 %]")


def test_a_bimodal_cell_at_the_edge_widens_the_interval_to_the_next_point():
    """Three of five runs at 20 % fell: the median fell there, but a resample can hold it."""
    high = 0.9 * payload_ideal_mbps(RATE, 0.2)
    cliff = find_cliff(curve(0.25, p20=[1.0, 1.2, 1.1, high, high]), RATE)
    assert cliff.loss() == 0.2
    assert (cliff.loss(cliff.low), cliff.loss(cliff.high)) == (0.2, 0.25)


def test_a_curve_that_never_falls_has_its_cliff_above_the_grid():
    cliff = find_cliff(curve(None), RATE)
    assert cliff.loss() is None and cliff.index == len(GRID)
    assert cliff.describe().startswith("above 50 % [above 50, above 50 %]")
    assert cliff.where() == "above 50 %"


def test_the_bound_is_half_the_payload_ideal_at_that_loss():
    """At 40 % the ideal is 57.9 Mbit/s: a median of 29.5 holds, 28.5 falls."""
    for value, falls in ((29.5, False), (28.5, True)):
        runs = curve(None, p40=[value] * 3)
        assert (find_cliff(runs, RATE).loss() == 0.4) is falls


def test_one_run_a_cell_has_no_interval():
    cliff = find_cliff(curve(0.2, runs=1), RATE)
    assert cliff.loss() == 0.2 and cliff.low is None
    assert cliff.describe() == "20 % (no interval, 1 run a cell)"
    assert cliff.with_interval() == "20 %"


def test_two_cliffs_overlap_only_where_their_intervals_share_a_loss_rate():
    """A cliff at 20 % [20, 25 %] overlaps one at 25 %; not one at 40 %; a cliff without an interval
    is its own point."""
    high = 0.9 * payload_ideal_mbps(RATE, 0.2)
    edge = find_cliff(curve(0.25, p20=[1.0, 1.2, 1.1, high, high]), RATE)
    assert edge.overlaps(find_cliff(curve(0.25), RATE))
    assert not edge.overlaps(find_cliff(curve(0.4), RATE))
    single = find_cliff(curve(0.2, runs=1), RATE)
    assert single.overlaps(edge) and not single.overlaps(find_cliff(curve(0.25), RATE))


def test_a_cell_of_one_run_beside_cells_of_several_is_read_as_it_is():
    """Figure 8's CUBIC has one run at most loss rates and ten at the seeded ones: the single runs
    stay what they are in every resample, and the interval comes from the cells that have runs to draw."""
    runs = curve(0.2)
    runs[0.01] = runs[0.01][:1]
    high = 0.9 * payload_ideal_mbps(RATE, 0.2)
    runs[0.2] = [1.0, 1.2, 1.1, high, high]
    cliff = find_cliff(runs, RATE)
    assert cliff.runs[0] == 1 and (cliff.loss(), cliff.loss(cliff.low), cliff.loss(cliff.high)) == (0.2, 0.2, 0.25)


def test_a_loss_rate_without_runs_is_refused_by_name():
    runs = curve(0.2)
    runs[0.3] = [float("nan")]
    with pytest.raises(ValueError, match="none at 30 %"):
        find_cliff(runs, RATE)


def test_bbrs_cliff_on_this_kernel_from_the_committed_full_length_runs():
    """figure8-seeds' 10 runs a cell (tests/fixtures/full-length): BBR drops at 15 % on ccsweep-link,
    and at 15 % with 20 % inside the interval on Mahimahi; CUBIC, loss-bound, at 0.1 % on both."""
    store = FileStore(Path(__file__).parents[1] / "fixtures" / "full-length" / "store")
    found = {}
    for sweep in ("figure8-seeds", "figure8-seeds-mahimahi"):
        for data in load_sweep(store, sweep).experiments:
            for row in experiment_cliffs(data):
                found[row.series.split(",")[0], row.link] = row.cliff.describe()
    assert found == {
        ("BBR", "ccsweep-link"): "15 % [15, 15 %] (95 % bootstrap CI, 10 runs a cell)",
        ("BBR", "mahimahi"): "15 % [15, 20 %] (95 % bootstrap CI, 10 runs a cell)",
        ("CUBIC", "ccsweep-link"): "0.1 % [0.1, 0.1 %] (95 % bootstrap CI, 10 runs a cell)",
        ("CUBIC", "mahimahi"): "0.1 % [0.1, 0.1 %] (95 % bootstrap CI, 10 runs a cell)",
    }
