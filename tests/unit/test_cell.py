"""Cells: content-addressed ids are stable, sensitive to every parameter, and resolved fully."""

import pytest
from pydantic import ValidationError

from ccsweep.cell import Cell, CellParams, DirectionParams, FlowParams, QueueParams, cell_id
from ccsweep.expand import expand, load_trace
from ccsweep.specload import parse_spec


def params(**changes) -> CellParams:
    base = dict(flows=(FlowParams(cc="bbr"),),
                uplink=DirectionParams(rate_mbps=100, delay_ms=50, loss=0.01,
                                       queue=QueueParams(kind="droptail", bytes=1_250_000)),
                downlink=DirectionParams(rate_mbps=100, delay_ms=50, loss=0),
                duration_s=20, warmup_s=5, seed=1)
    return CellParams(**{**base, **changes})


def test_id_is_a_pinned_content_hash():
    # Pinned: if this changes, every stored result would be orphaned; bump the schema instead.
    assert cell_id(params()) == "93e7ad17563b8c73"


@pytest.mark.parametrize("changes", [
    {"seed": 2}, {"repetition": 1}, {"duration_s": 21}, {"loss_position": "before"},
    {"flows": (FlowParams(cc="cubic"),)}, {"flows": (FlowParams(cc="bbr", start_s=1),)},
    {"uplink": DirectionParams(rate_mbps=100, delay_ms=50, loss=0.02)},
])
def test_every_parameter_changes_the_id(changes):
    assert cell_id(params(**changes)) != cell_id(params())


def test_sweep_and_experiment_names_do_not_change_the_id():
    a = Cell.build("sweep-a", "x", params())
    b = Cell.build("sweep-b", "y", params())
    assert a.id == b.id


def test_a_tampered_id_is_refused():
    data = Cell.build("s", "e", params()).model_dump()
    data["params"]["seed"] = 99
    with pytest.raises(ValidationError, match="does not match its parameters"):
        Cell.model_validate(data)


def test_cell_round_trips_through_json():
    cell = Cell.build("s", "e", params())
    assert Cell.model_validate_json(cell.model_dump_json()) == cell


def test_queue_spec_for_the_emulator():
    assert QueueParams(kind="droptail", packets=100, bytes=30000).emulator_spec() == "droptail packets=100,bytes=30000"
    assert QueueParams(kind="codel", packets=1000).emulator_spec() == "codel packets=1000,target=5,interval=100"
    assert QueueParams().emulator_spec() == "infinite"
    with pytest.raises(ValidationError, match="needs packets or bytes"):
        QueueParams(kind="droptail")


def test_expansion_resolves_bdp_rtt_and_repetitions():
    spec = parse_spec({"name": "t", "experiments": [{
        "name": "e", "cc": ["bbr", "cubic"], "loss_percent": [0, 1], "rtt_ms": [40], "bandwidth_mbps": [80],
        "queue": [{"kind": "droptail", "bdp": 0.5, "min_bytes": 30000}], "duration_s": 10, "repetitions": 3,
        "seed": 7}]})
    cells = expand(spec)
    assert len(cells) == 2 * 2 * 3
    first = cells[0].params
    assert first.uplink.delay_ms == first.downlink.delay_ms == 20
    assert first.uplink.queue.bytes == 200_000  # 0.5 x 80 Mbit/s x 40 ms / 8
    assert first.downlink.queue.kind == "infinite"
    assert [c.params.seed for c in cells[:3]] == [7, 8, 9]
    assert len({c.id for c in cells}) == len(cells)


def test_mixes_asymmetric_reverse_and_loss_direction():
    spec = parse_spec({"name": "t", "experiments": [{
        "name": "e",
        "mixes": [[{"cc": "bbr", "count": 2}, {"cc": "cubic", "count": 2, "start_s": 1, "stagger_s": 0.5}]],
        "loss_percent": [2], "loss_direction": "both", "rtt_ms": [50], "bandwidth_mbps": [10],
        "reverse": [{"label": "sym"}, {"label": "asym", "delay_ms": 5, "loss_percent": 0.5}], "duration_s": 10}]})
    sym, asym = expand(spec)
    assert [f.cc for f in sym.params.flows] == ["bbr", "bbr", "cubic", "cubic"]
    assert [f.start_s for f in sym.params.flows] == [0, 0, 1, 1.5]
    assert sym.params.cc_label == "bbr+cubic"
    assert (sym.params.uplink.loss, sym.params.downlink.loss, sym.params.downlink.delay_ms) == (0.02, 0.02, 25)
    assert (asym.params.downlink.loss, asym.params.downlink.delay_ms, asym.params.rtt_ms) == (0.005, 5, 30)


def test_traces_are_pinned_by_content(monkeypatch, tmp_path):
    (tmp_path / "up").write_text("1\n1\n2\n4\n")
    (tmp_path / "down").write_text("2\n4\n")
    monkeypatch.setenv("CCSWEEP_TRACES", str(tmp_path))
    exp = {"name": "e", "cc": ["bbr"], "loss": [0], "rtt_ms": [100], "duration_s": 10,
           "trace": [{"name": "tiny", "uplink": "up", "downlink": "down"}]}
    first = expand(parse_spec({"name": "t", "experiments": [exp]}))[0]
    assert first.params.uplink.trace.name == "up"
    assert first.params.uplink.rate_mbps is None
    # 4 opportunities of 1504 B in a 4 ms period: 12.032 Mbit/s.
    assert load_trace("up").mean_mbps == pytest.approx(12.032)
    (tmp_path / "up").write_text("1\n2\n3\n4\n")
    second = expand(parse_spec({"name": "t", "experiments": [exp]}))[0]
    assert second.id != first.id
