"""Slots (ACK aggregation) from spec to emulator argv: an axis of slot settings, by default on the
ACKs' direction, refused on Mahimahi and outside their range in one line naming the field. The
releases themselves are tested against theory in emulator/src/slot.rs and emulator/src/link.rs."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccsweep.expand import expand
from ccsweep.results.points import cell_summary, varying_facets
from ccsweep.runner.link import link_command
from ccsweep.spec import SpecError
from ccsweep.specload import parse_spec
from support.refusal import validate_refusal


def spec(slot: list[dict] | None, **extra: object) -> dict:
    return {"name": "slotted", "experiments": [{
        "name": "s", "cc": ["bbr"], "loss_percent": [0], "rtt_ms": [40], "bandwidth_mbps": [50],
        "duration_s": 10, "slot": slot, **extra}]}


def test_an_axis_of_slots_on_the_acks_unless_told_otherwise():
    cells = expand(parse_spec(spec([{"min_ms": 1, "max_ms": 4, "packets": 16},
                                    {"min_ms": 2, "max_ms": 2, "bytes": 30000, "direction": "uplink"}])))
    first, second = (c.params for c in cells)
    assert (first.uplink.slot, first.downlink.slot and first.downlink.slot.packets) == (None, 16)
    assert (second.downlink.slot, second.uplink.slot and second.uplink.slot.bytes) == (None, 30000)
    (plain,) = expand(parse_spec(spec(None)))
    assert plain.id not in {c.id for c in cells} and len({c.id for c in cells}) == 2
    assert "slots" in varying_facets([first, second])
    assert cell_summary(first).endswith("downlink slots 1-4 ms of 16 packets, rep 0")


def test_the_emulator_gets_the_slots_exactly(tmp_path: Path):
    (cell,) = expand(parse_spec(spec([{"min_ms": 0.5, "max_ms": 4, "packets": 16, "bytes": 64000}])))
    argv = link_command(cell, Path("ccsweep-link"), "s", "r", tmp_path, {}, 10)
    at = argv.index("--downlink-slot")
    assert argv[at + 1:at + 5] == ["0.5ms", "4.0ms", "16", "64000"]
    assert "--uplink-slot" not in argv


def test_mahimahi_refuses_slots_in_one_line():
    with pytest.raises(SpecError, match=r"experiments\[s\]\.link: mahimahi cannot release downlink packets in slots"):
        expand(parse_spec(spec([{"min_ms": 1, "max_ms": 4}], link="mahimahi")))


@pytest.mark.parametrize(("slot", "message"), [
    ({"min_ms": 4, "max_ms": 1}, "experiments[s].slot[0]: max_ms 1 is under min_ms 4"),
    ({"min_ms": 0, "max_ms": 1}, "experiments[s].slot[0].min_ms: 0.0 is outside [0.001, 1000] ms"),
    ({"min_ms": 1, "max_ms": 2000}, "experiments[s].slot[0].max_ms: 2000.0 is outside [0.001, 1000] ms"),
    ({"min_ms": 1, "max_ms": 2, "packets": -1}, "experiments[s].slot[0].packets"),
    ({"min_ms": 1, "max_ms": 2, "bytes": "64k"}, "experiments[s].slot[0].bytes"),
])
def test_a_bad_slot_is_one_line_naming_the_field_and_exit_2(tmp_path: Path, slot: dict, message: str):
    assert message in validate_refusal(tmp_path, spec([slot]))
