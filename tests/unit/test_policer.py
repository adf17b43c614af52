"""The policer from spec to emulator argv: an axis of token buckets, each on the directions it names,
refused on Mahimahi and for a bucket smaller than one packet, in one line naming the field.
The emulator's own behaviour is tested against theory in emulator/src/policer.rs and, end to end,
in tests/emulator/test_link.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccsweep.expand import expand
from ccsweep.runner.link import link_command
from ccsweep.spec import SpecError
from ccsweep.specload import parse_spec
from support.refusal import validate_refusal


def spec(policer: list[dict], **extra: object) -> dict:
    return {"name": "policed", "experiments": [{
        "name": "p", "cc": ["bbr"], "loss_percent": [0], "rtt_ms": [40], "bandwidth_mbps": [50],
        "duration_s": 10, "policer": policer, **extra}]}


def test_an_axis_of_policers_on_the_directions_each_names():
    cells = expand(parse_spec(spec([{"rate_mbps": 10, "burst_bytes": 30000},
                                    {"rate_mbps": 5, "burst_bytes": 1500, "direction": "both"},
                                    {"rate_mbps": 1, "burst_bytes": 3000, "direction": "downlink"}])))
    placed = [(c.params.uplink.policer, c.params.downlink.policer) for c in cells]
    assert [(u and (u.rate_mbps, u.burst_bytes), d and (d.rate_mbps, d.burst_bytes)) for u, d in placed] == [
        ((10, 30000), None), ((5, 1500), (5, 1500)), (None, (1, 3000))]
    assert len({c.id for c in cells}) == 3
    # Without one the cell is the one it was before policers existed (tests/unit/test_preset_ids.py holds
    # every preset to that); with one it is another cell.
    plain = expand(parse_spec({**spec([]), "experiments": [{**spec([])["experiments"][0], "policer": None}]}))
    assert plain[0].id not in {c.id for c in cells}


def test_the_emulator_gets_the_bucket_exactly(tmp_path: Path):
    (cell,) = expand(parse_spec(spec([{"rate_mbps": 12.5, "burst_bytes": 30000}])))
    argv = link_command(cell, Path("ccsweep-link"), "s", "r", tmp_path, {}, 10)
    at = argv.index("--uplink-policer")
    assert argv[at + 1:at + 3] == ["12.5mbit", "30000"]
    assert "--downlink-policer" not in argv


def test_mahimahi_refuses_a_policer_in_one_line():
    with pytest.raises(SpecError, match=r"experiments\[p\]\.link: mahimahi cannot police uplink packets"):
        expand(parse_spec(spec([{"rate_mbps": 10, "burst_bytes": 30000}], link="mahimahi")))


@pytest.mark.parametrize(("policer", "message"), [
    ({"rate_mbps": 10, "burst_bytes": 100}, "experiments[p].policer[0].burst_bytes: Input should be greater than or "
                                            "equal to 1500"),
    ({"rate_mbps": 0, "burst_bytes": 30000}, "experiments[p].policer[0].rate_mbps: 0.0 is outside [0.01, 100000]"),
    ({"rate_mbps": 10, "burst_bytes": 30000, "direction": "sideways"}, "experiments[p].policer[0].direction"),
])
def test_a_bad_policer_is_one_line_naming_the_field_and_exit_2(tmp_path: Path, policer: dict, message: str):
    assert message in validate_refusal(tmp_path, spec([policer]))
