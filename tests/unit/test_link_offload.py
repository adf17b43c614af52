"""The link's offloads as a per-experiment choice (`link_offload`), carried into each cell.

ccsweep-link with `tso` hands the receiver joined frames, as a NIC's GRO would; `none` moves one
packet at a time, as Mahimahi does. The choice is part of a cell's identity, but a cell that does
not make it keeps the id it had before the field existed, on either link: the presets' cells and
the running study's results are stored by those ids.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from ccsweep.cell import Cell, CellParams, DirectionParams, FlowParams, canonical_json
from ccsweep.cli import main
from ccsweep.expand import expand
from ccsweep.runner.link import link_command
from ccsweep.spec import SpecError
from ccsweep.specload import parse_spec

EXPERIMENT = {"name": "e", "cc": ["bbr"], "loss_percent": [0], "rtt_ms": [500], "bandwidth_mbps": [100],
              "duration_s": 10}


def params(**changes: object) -> CellParams:
    path = DirectionParams(rate_mbps=100, delay_ms=250, loss=0)
    base: dict[str, object] = dict(flows=(FlowParams(cc="bbr"),), uplink=path, downlink=path, duration_s=20,
                                   warmup_s=5, seed=1)
    return CellParams.model_validate({**base, **changes})


def cells(**experiment: object) -> list[Cell]:
    return expand(parse_spec({"name": "s", "experiments": [{**EXPERIMENT, **experiment}]}))


def test_a_cell_that_does_not_choose_gets_its_links_way_and_keeps_its_id():
    tso, mahimahi = params(), params(link="mahimahi")
    assert (tso.link_offload, mahimahi.link_offload) == ("tso", "none")
    # Neither default is hashed: both cells have the id they had before the field existed (pinned
    # from the code before it).
    assert "link_offload" not in canonical_json(tso) and "link_offload" not in canonical_json(mahimahi)
    assert Cell.build("s", "e", tso).id == "21278868ebb36aa2"
    assert Cell.build("s", "e", mahimahi).id == "8d082fc5c132fba5"


def test_packet_by_packet_on_ccsweep_link_is_another_cell_and_tso_said_is_the_default_one():
    default, = cells()
    none, = cells(link_offload="none")
    said, = cells(link_offload="tso")
    assert (default.params.link_offload, none.params.link_offload) == ("tso", "none")
    assert none.id != default.id and '"link_offload":"none"' in canonical_json(none.params)
    assert said.id == default.id


def test_mahimahi_saying_none_is_mahimahis_own_cell():
    assert cells(link="mahimahi", link_offload="none")[0].id == cells(link="mahimahi")[0].id


def test_mahimahi_with_tso_is_refused_naming_the_field():
    with pytest.raises(SpecError, match=r"^experiments\[e\]\.link_offload: tso needs link ccsweep-link"):
        cells(link="mahimahi", link_offload="tso")
    with pytest.raises(ValidationError, match="Mahimahi moves one packet"):
        params(link="mahimahi", link_offload="tso")


def test_a_run_time_link_of_mahimahi_refuses_an_experiment_that_asks_for_tso(tmp_path: Path):
    spec = tmp_path / "s.yaml"
    spec.write_text(json.dumps({"name": "s", "experiments": [{**EXPERIMENT, "link_offload": "tso"}]}))
    done = CliRunner().invoke(main, ["validate", str(spec), "--link", "mahimahi"], prog_name="ccsweep")
    assert done.exit_code == 2
    assert done.stderr.splitlines() == [
        "ccsweep: error: experiments[e].link_offload: tso needs link ccsweep-link; mahimahi moves one packet at a "
        "time (give none, or leave it unset)"]
    # Unset, the same experiment follows the link it is moved to.
    spec.write_text(json.dumps({"name": "s", "experiments": [EXPERIMENT]}))
    done = CliRunner().invoke(main, ["expand", str(spec), "--link", "mahimahi"], prog_name="ccsweep")
    assert done.exit_code == 0, done.stderr
    assert [c["params"]["link_offload"] for c in json.loads(done.stdout)] == ["none"]


def test_a_stored_cell_from_before_the_field_loads_with_its_links_way():
    for link, offload in (("ccsweep-link", "tso"), ("mahimahi", "none")):
        data = Cell.build("s", "e", params(link=link)).model_dump(mode="json")
        del data["params"]["link_offload"]
        assert Cell.model_validate(data).params.link_offload == offload
        assert Cell.model_validate_json(json.dumps(data)).params.link_offload == offload  # as a store reads it


def test_the_runner_passes_the_cells_offload_to_the_emulator_as_one_argument(tmp_path: Path):
    def offload(cell: Cell) -> str:
        argv = link_command(cell, Path("/bin/ccsweep-link"), "a", "b", tmp_path, {}, 30)
        return argv[argv.index("--offload") + 1]

    default, = cells()
    none, = cells(link_offload="none")
    assert (offload(default), offload(none)) == ("tso", "none")
