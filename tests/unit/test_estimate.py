"""The wall-time estimate plays the executor's admission: bounded by CPU, by the stagger, by the longest cell."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from ccsweep.admission import START_STAGGER_S
from ccsweep.cli import main
from ccsweep.estimate import CELL_SETUP_S, cpu_budget, estimate_wall, format_duration
from ccsweep.expand import expand
from ccsweep.specload import parse_spec

CELLS = expand(parse_spec({"name": "e", "experiments": [
    {"name": "e", "cc": ["bbr", "cubic"], "loss_percent": [0, 0.1, 1, 2, 5], "rtt_ms": [100],
     "bandwidth_mbps": [100], "duration_s": 60, "repetitions": 4}]}))


def test_one_cell_takes_its_flow_time_and_set_up():
    result = estimate_wall(CELLS[:1], cores=2)
    assert result.wall_s == pytest.approx(60 + CELL_SETUP_S)
    assert result.peak_cells == 1


def test_the_estimate_respects_cpu_stagger_and_the_longest_cell():
    # One cost for every cell: the BBR cells, which the model prices alike (each carries the line
    # rate; CUBIC's lossy cells it prices lower, so one measured cost would contradict it).
    line_rate = [c for c in CELLS if c.params.cc_label == "bbr"]
    cost = 0.3
    for cores in (2, 8, 64):
        result = estimate_wall(line_rate, cores, cost=lambda _: cost)
        cell_s = 60 + CELL_SETUP_S
        cpu_bound = len(line_rate) * cost * cell_s / cpu_budget(cores)
        stagger_bound = (len(line_rate) - 1) * START_STAGGER_S + cell_s
        assert result.wall_s >= max(cpu_bound, stagger_bound) - 1e-6, cores
        assert result.peak_cells * cost <= cpu_budget(cores) + 1e-9, "the budget is never overfilled"
        assert result.cpu_core_s == pytest.approx(len(line_rate) * cost * cell_s)


def test_more_cores_and_cheaper_cells_finish_sooner():
    walls = [estimate_wall(CELLS, cores, cost=lambda _: 0.3).wall_s for cores in (2, 8, 64)]
    # Past 8 cores the admission's ramp (one more cell at once per on-time cell) sets the pace.
    assert walls[0] > walls[1] >= walls[2]
    assert estimate_wall(CELLS, 2, cost=lambda _: 0.15).wall_s < walls[0]
    # On two cores 0.3-core cells run 5 at once at most: 40 cells of 61 s take at least 8 rounds.
    assert walls[0] >= 8 * 61


def test_bad_core_count_is_refused():
    with pytest.raises(ValueError, match="cores"):
        estimate_wall(CELLS, 0)


def test_durations_read_at_a_glance():
    assert format_duration(45) == "45 s"
    assert format_duration(750) == "12 min 30 s"
    assert format_duration(3 * 3600 + 300) == "3 h 05 min"


def test_cli_prints_one_line_per_machine_size():
    out = CliRunner().invoke(main, ["estimate", "quick", "--cores", "2", "--cores", "64"])
    assert out.exit_code == 0, out.output
    lines = out.output.strip().splitlines()
    assert lines[0].startswith("quick: ")
    assert [line.split()[0] for line in lines[1:]] == ["2", "64"]


def test_cells_the_machine_would_refuse_are_counted_not_run():
    gigabit = expand(parse_spec({"name": "g", "experiments": [
        {"name": "g", "cc": ["bbr"], "loss_percent": [0], "rtt_ms": [50], "bandwidth_mbps": [1000],
         "duration_s": 60}]}))
    one_core = estimate_wall([*CELLS[:2], *gigabit], cores=1)
    assert (one_core.refused, one_core.peak_cells) == (1, 1)
    assert estimate_wall([*CELLS[:2], *gigabit], cores=2).refused == 0
