"""The presets of the source studies: every one validates, expands, and asks for a figure that exists."""

from pathlib import Path

import pytest
import yaml

from ccsweep.expand import expand
from ccsweep.spec import load_spec

REPO = Path(__file__).resolve().parents[2]
PRESETS = sorted(p.stem for p in (REPO / "sweeps").glob("*.yaml"))
REBBR = {"figure8": 26, "bandwidth": 130, "algorithms": 78, "rtt": 130, "cellular": 26}


def test_every_study_has_a_preset():
    assert set(REBBR) | {"full-sweep", "step-response", "bufferbloat", "shallow-buffers", "loss-table"} <= set(PRESETS)


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_expands(preset):
    spec = load_spec(preset)
    assert spec.name == preset
    cells = expand(spec)
    assert cells
    # Every experiment states its queue explicitly (ReBBR's code and write-up disagreed on it once).
    raw = yaml.safe_load((REPO / "sweeps" / f"{preset}.yaml").read_text())
    stated = "queue" in raw.get("defaults", {})
    assert all(stated or "queue" in experiment for experiment in raw.get("experiments", [])), preset
    if preset in REBBR:  # ReBBR's final code, which made its official figures, used the infinite queue
        assert {c.params.uplink.queue.kind for c in cells} == {"infinite"}


@pytest.mark.parametrize(("preset", "count"), REBBR.items())
def test_rebbr_experiment_cell_counts(preset, count):
    assert len(expand(load_spec(preset))) == count


def test_full_sweep_is_rebbrs_390_cells():
    spec = load_spec("full-sweep")
    cells = expand(spec)
    assert len(cells) == 390
    assert [e.name for e in spec.experiments] == list(REBBR)
    # bandwidth at 100 Mbit/s and algorithms' BBR/CUBIC cells are the same 26 cells: run once.
    assert len({c.id for c in cells}) == 390 - 26
    assert sum(c.params.duration_s for c in cells) == 27_040


def test_step_response_doubles_then_halves():
    (cell, *_) = expand(load_spec("step-response"))
    rates = [cell.params.uplink.rate_mbps * s.factor for s in cell.params.uplink.rate_schedule]
    assert rates == [2 * cell.params.uplink.rate_mbps, cell.params.uplink.rate_mbps]


def test_shallow_buffers_cover_quarter_to_eight_bdp():
    cells = expand(load_spec("shallow-buffers"))
    bdp = 80e6 / 8 * 0.025
    assert sorted({c.params.uplink.queue.bytes / bdp for c in cells}) == [0.25, 0.5, 1, 2, 4, 8]
    assert {c.params.cc_label for c in cells} == {"bbr", "bbr+cubic"}
    assert all(len(c.params.flows) == 4 for c in cells)


def test_loss_table_has_a_symmetric_and_an_asymmetric_path():
    cells = expand(load_spec("loss-table"))
    paths = {(c.params.downlink.delay_ms, c.params.downlink.loss) for c in cells}
    assert paths == {(25, 0.0), (75, 0.01)}
    assert sorted({round(c.params.loss * 100, 6) for c in cells}) == list(range(1, 11))
