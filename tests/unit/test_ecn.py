"""ECN from spec to emulator argv and namespaces: a queue that marks (CoDel or PIE with `ecn`, an
L4S step on any queue), the endpoints' `tcp_ecn`, refused on Mahimahi and outside their range in one
line naming the field. The marking itself is tested against its RFCs in emulator/src/queue.rs and
emulator/src/ecn.rs and, with the kernel's TCP, in tests/integration/test_cell_ecn.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccsweep.expand import expand
from ccsweep.results.points import series_label, varying_facets
from ccsweep.runner.link import link_command
from ccsweep.spec import SpecError
from ccsweep.specload import parse_spec
from support.refusal import validate_refusal


def spec(queue: list[dict], **extra: object) -> dict:
    return {"name": "marked", "experiments": [{
        "name": "e", "cc": ["cubic"], "loss_percent": [0], "rtt_ms": [40], "bandwidth_mbps": [50],
        "duration_s": 10, "queue": queue, **extra}]}


def test_a_marking_queue_and_the_endpoints_ecn_reach_the_emulator_and_the_cell(tmp_path: Path):
    dropping, marking, stepped = expand(parse_spec(spec(
        [{"kind": "codel", "bdp": 1}, {"kind": "codel", "bdp": 1, "ecn": True},
         {"kind": "droptail", "bdp": 1, "l4s_step_us": 1000}], tcp_ecn="on")))
    assert {c.params.tcp_ecn for c in (dropping, marking, stepped)} == {"on"}
    argv = link_command(marking, Path("ccsweep-link"), "s", "r", tmp_path, {}, 10)
    assert argv[argv.index("--uplink-queue") + 1] == "codel bytes=250000,target=5,interval=100,ecn=1"
    argv = link_command(stepped, Path("ccsweep-link"), "s", "r", tmp_path, {}, 10)
    assert argv[argv.index("--uplink-queue") + 1] == "droptail bytes=250000,l4s_step_us=1000"
    params = [c.params for c in (dropping, marking)]
    assert "queue" in varying_facets(params)
    assert series_label(params[1], ["queue"]) == "CUBIC (codel 250 kB ECN (1 BDP))"


def test_without_ecn_a_cell_keeps_the_id_it_had():
    (plain,) = expand(parse_spec(spec([{"kind": "codel", "bdp": 1}])))
    (accepting,) = expand(parse_spec(spec([{"kind": "codel", "bdp": 1, "ecn": False}], tcp_ecn="accept")))
    assert plain.id == accepting.id and plain.params.tcp_ecn is None
    (asking,) = expand(parse_spec(spec([{"kind": "codel", "bdp": 1}], tcp_ecn="on")))
    assert asking.id != plain.id


@pytest.mark.parametrize("written, read", [(True, "on"), (False, "off"), ("on", "on"), ("accept", None)])
def test_yaml_s_unquoted_on_and_off_read_as_the_words(written: object, read: str | None):
    (cell,) = expand(parse_spec(spec([{"kind": "infinite"}], tcp_ecn=written)))
    assert cell.params.tcp_ecn == read


def test_mahimahi_refuses_a_marking_queue_in_one_line():
    for queue in ({"kind": "codel", "packets": 100, "ecn": True}, {"kind": "infinite", "l4s_step_us": 500}):
        with pytest.raises(SpecError, match=r"experiments\[e\]\.link: mahimahi cannot mark uplink packets CE"):
            expand(parse_spec(spec([queue], link="mahimahi", rtt_ms=[40])))


@pytest.mark.parametrize(("queue", "extra", "message"), [
    ({"kind": "droptail", "packets": 100, "ecn": True}, {}, "ecn: only for kind codel or pie"),
    ({"kind": "codel", "packets": 100, "ecn": "yes"}, {}, "experiments[e].queue[0].ecn"),
    ({"kind": "infinite", "l4s_step_us": 0}, {}, "experiments[e].queue[0].l4s_step_us"),
    ({"kind": "infinite", "l4s_step_us": 2.5}, {}, "experiments[e].queue[0].l4s_step_us"),
    ({"kind": "infinite"}, {"tcp_ecn": "sometimes"}, "experiments[e].tcp_ecn"),
])
def test_a_bad_ecn_setting_is_one_line_naming_the_field_and_exit_2(tmp_path: Path, queue: dict, extra: dict,
                                                                   message: str):
    assert message in validate_refusal(tmp_path, spec([queue], **extra))
