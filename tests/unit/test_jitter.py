"""Jitter from spec to emulator argv: an axis of delay variations, each on the directions it names,
refused on Mahimahi and outside its range in one line naming the field. The draws themselves are
tested against theory in emulator/src/jitter.rs and, end to end, in tests/emulator/test_link.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccsweep.expand import expand
from ccsweep.results.points import cell_summary, series_label, varying_facets
from ccsweep.runner.link import link_command
from ccsweep.spec import SpecError
from ccsweep.specload import parse_spec
from support.refusal import validate_refusal


def spec(jitter: list[dict] | None, **extra: object) -> dict:
    return {"name": "jittered", "experiments": [{
        "name": "j", "cc": ["bbr"], "loss_percent": [0], "rtt_ms": [40], "bandwidth_mbps": [50],
        "duration_s": 10, "jitter": jitter, **extra}]}


def test_an_axis_of_jitters_on_the_directions_each_names():
    cells = expand(parse_spec(spec([{"jitter_ms": 5},
                                    {"jitter_ms": 2, "distribution": "normal", "order": "reorder", "direction": "both"},
                                    {"jitter_ms": 1, "distribution": "paretonormal", "direction": "downlink"}])))
    placed = [(c.params.uplink.jitter, c.params.downlink.jitter) for c in cells]
    assert [(u and (u.jitter_ms, u.distribution, u.order), d and (d.jitter_ms, d.distribution, d.order))
            for u, d in placed] == [((5, "uniform", "keep"), None),
                                    ((2, "normal", "reorder"), (2, "normal", "reorder")),
                                    (None, (1, "paretonormal", "keep"))]
    assert len({c.id for c in cells}) == 3
    # Without one the cell is the one it was before jitter existed (tests/unit/test_preset_ids.py holds
    # every preset to that); with one it is another cell.
    (plain,) = expand(parse_spec(spec(None)))
    assert plain.id not in {c.id for c in cells}
    params = [c.params for c in cells]
    assert "jitter" in varying_facets(params)
    assert series_label(params[1], ["jitter"]) == "BBR (uplink jitter 2 ms normal, reordered; downlink jitter 2 ms " \
                                                  "normal, reordered)"
    assert cell_summary(params[0]).endswith("uplink jitter 5 ms uniform, rep 0")


def test_the_emulator_gets_the_jitter_exactly(tmp_path: Path):
    (cell,) = expand(parse_spec(spec([{"jitter_ms": 2.5, "distribution": "normal", "order": "reorder"}])))
    argv = link_command(cell, Path("ccsweep-link"), "s", "r", tmp_path, {}, 10)
    at = argv.index("--uplink-jitter")
    assert argv[at + 1:at + 4] == ["2.5ms", "normal", "reorder"]
    assert "--downlink-jitter" not in argv


def test_mahimahi_refuses_a_jitter_in_one_line():
    with pytest.raises(SpecError, match=r"experiments\[j\]\.link: mahimahi cannot vary the uplink delay \(jitter\)"):
        expand(parse_spec(spec([{"jitter_ms": 5}], link="mahimahi")))


@pytest.mark.parametrize(("jitter", "message"), [
    ({"jitter_ms": 0.0000001}, "experiments[j].jitter[0].jitter_ms: 1e-07 is outside [0.001, 10000] ms"),
    ({"jitter_ms": 0}, "experiments[j].jitter[0].jitter_ms: 0.0 is outside [0.001, 10000] ms"),
    ({"jitter_ms": 20_000}, "experiments[j].jitter[0].jitter_ms: 20000.0 is outside [0.001, 10000] ms"),
    ({"jitter_ms": 5, "distribution": "gamma"}, "experiments[j].jitter[0].distribution"),
    ({"jitter_ms": 5, "order": "sideways"}, "experiments[j].jitter[0].order"),
    ({"jitter_ms": "5; rm -rf /"}, "experiments[j].jitter[0].jitter_ms"),
])
def test_a_bad_jitter_is_one_line_naming_the_field_and_exit_2(tmp_path: Path, jitter: dict, message: str):
    assert message in validate_refusal(tmp_path, spec([jitter]))
