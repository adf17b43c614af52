"""The link as a run-time choice: `--link` moves every experiment that does not set its own link.

The link is part of each cell's identity, so cells on Mahimahi are other cells, stored beside the
ccsweep-link ones; the ccsweep-link cells of every preset keep their ids (the running full-length
study is stored by them), and a sweep moved to another link is named apart from the spec's own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ccsweep.cli import _load, main
from ccsweep.expand import expand
from ccsweep.specload import load_spec, parse_spec, sweep_search_path

PRESETS = sorted({p.stem for d in sweep_search_path() for p in d.glob("*.yaml")})
EXPERIMENT = {"cc": ["bbr"], "loss_percent": [1], "rtt_ms": [100], "bandwidth_mbps": [100], "duration_s": 10}


def cli(*args: str) -> tuple[int, str, str]:
    done = CliRunner().invoke(main, list(args), prog_name="ccsweep")
    return done.exit_code, done.stdout, done.stderr


def ids(*args: str) -> list[str]:
    code, out, err = cli("expand", *args, "--format", "ids")
    assert code == 0, err
    return out.split()


@pytest.mark.parametrize("preset", PRESETS)
def test_every_presets_cells_keep_their_ids_with_link_ccsweep_link(preset):
    plain = expand(load_spec(preset))
    assert ids(preset, "--link", "ccsweep-link") == list(dict.fromkeys(c.id for c in plain))
    assert all(c.params.link == "ccsweep-link" for c in plain)


def test_link_mahimahi_moves_every_cell_and_names_the_sweep_apart():
    code, out, err = cli("expand", "quick", "--link", "mahimahi")
    assert code == 0, err
    cells = json.loads(out)
    assert {c["params"]["link"] for c in cells} == {"mahimahi"}
    assert {c["sweep"] for c in cells} == {"quick-mahimahi"}
    assert not set(ids("quick", "--link", "mahimahi")) & set(ids("quick"))
    # The rest of each cell is unchanged: the same path, loss and flows, cell for cell; the link's
    # offloads follow the link (Mahimahi moves one packet at a time).
    plain = json.loads(cli("expand", "quick")[1])
    assert {c["params"]["link_offload"] for c in cells} == {"none"}
    assert ([{**c["params"], "link": None, "link_offload": None} for c in cells]
            == [{**c["params"], "link": None, "link_offload": None} for c in plain])
    code, out, _ = cli("expand", "quick", "--link", "mahimahi", "--sweep", "mine", "--format", "json")
    assert {c["sweep"] for c in json.loads(out)} == {"mine"}


def test_an_experiment_that_sets_its_link_keeps_it_in_its_mapping_defaults_or_an_included_file(tmp_path: Path):
    (tmp_path / "inner.yaml").write_text(json.dumps({
        "name": "inner", "defaults": {"link": "ccsweep-link"}, "experiments": [{"name": "own", **EXPERIMENT}]}))
    (tmp_path / "outer.yaml").write_text(json.dumps({"name": "outer", "include": ["inner.yaml"], "experiments": [
        {"name": "open", **EXPERIMENT}, {"name": "fixed", **EXPERIMENT, "link": "ccsweep-link"}]}))
    moved = load_spec(str(tmp_path / "outer.yaml")).with_link("mahimahi")
    assert {e.name: e.link for e in moved.experiments} == {"own": "ccsweep-link", "open": "mahimahi",
                                                           "fixed": "ccsweep-link"}
    back = parse_spec({"name": "m", "experiments": [{"name": "m", **EXPERIMENT, "link": "mahimahi"}]})
    assert back.with_link("ccsweep-link") == back


def test_a_sweep_the_link_does_not_change_keeps_its_name_and_scaling_adds_to_it():
    assert {c["sweep"] for c in json.loads(cli("expand", "quick", "--link", "ccsweep-link")[1])} == {"quick"}
    assert _load("quick", None, 0.25, "mahimahi").name == "quick-mahimahi-x0-25"
    assert _load("quick", None, 0.25, "ccsweep-link").name == "quick-x0-25"
    assert _load("quick", "mine", 0.25, "mahimahi").name == "mine"


def test_validate_takes_link_and_refuses_what_mahimahi_cannot_express_in_one_line(tmp_path: Path):
    code, out, err = cli("validate", "full-sweep", "--link", "mahimahi")
    assert code == 0, err
    assert out.strip().endswith("full-sweep-mahimahi: 364 cells, valid")
    spec = tmp_path / "odd.yaml"
    spec.write_text(json.dumps({"name": "odd", "experiments": [{"name": "odd", **EXPERIMENT, "rtt_ms": [25]}]}))
    assert cli("validate", str(spec))[0] == 0
    code, out, err = cli("validate", str(spec), "--link", "mahimahi")
    assert code == 2
    assert err.strip() == ("ccsweep: error: experiments[odd].link: mahimahi cannot delay by 12.5 ms: mm-delay takes "
                           "whole milliseconds (give an even rtt_ms)")


def test_a_link_outside_the_two_backends_is_refused_naming_the_choices():
    code, _, err = cli("run", "quick", "--link", "ns3")
    assert code == 2
    assert "'ns3' is not one of 'ccsweep-link', 'mahimahi'" in err
