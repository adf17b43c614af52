"""Gilbert-Elliott loss, typed from the spec to the emulator's argv.

A spec gives netem's four parameters or a mean loss rate and burst length; the cell holds the four,
resolved; the emulator gets one argv element per value. Bad values and Mahimahi cells are refused
in one line naming the field, with exit status 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from ccsweep.cell import BernoulliLoss, CellParams, GilbertElliottLoss, canonical_json
from ccsweep.cli import main
from ccsweep.expand import expand
from ccsweep.linkrules import LinkError, cannot_express
from ccsweep.results.points import Point, cell_summary, loss_series, path_label, series_label, varying_facets
from ccsweep.runner.link import link_command
from ccsweep.runner.mahimahi import mahimahi_command
from ccsweep.specload import parse_spec

EXPERIMENT = {"name": "ge", "cc": ["cubic"], "rtt_ms": [40], "bandwidth_mbps": [10], "duration_s": 10}
BURSTY = {"mean_loss_percent": 1, "mean_burst_packets": 4}


def cells(**fields: object) -> list:
    return expand(parse_spec({"name": "s", "experiments": [{**EXPERIMENT, **fields}]}))


def validate(tmp_path: Path, **fields: object) -> tuple[int, str]:
    spec = tmp_path / "s.yaml"
    spec.write_text(json.dumps({"name": "s", "experiments": [{**EXPERIMENT, **fields}]}))
    done = CliRunner().invoke(main, ["validate", str(spec)], prog_name="ccsweep")
    return done.exit_code, done.stderr.strip()


def test_both_forms_resolve_to_netems_four_parameters():
    netem, friendly = cells(gilbert_elliott=[{"p": 0.02, "r": 0.3, "one_minus_h": 0.9}, BURSTY])
    assert netem.params.uplink.gilbert_elliott == GilbertElliottLoss(p=0.02, r=0.3, one_minus_h=0.9, one_minus_k=0)
    # The friendly form is the simple Gilbert model: r = 1 / burst, p from the rate p / (p + r).
    bursts = friendly.params.uplink.gilbert_elliott
    assert bursts == GilbertElliottLoss(p=0.01 * 0.25 / 0.99, r=0.25, one_minus_h=1, one_minus_k=0)
    assert friendly.params.loss == 0.01 == bursts.mean_loss_rate
    assert netem.params.uplink.loss == friendly.params.uplink.loss == 0.0
    assert netem.params.downlink.loss_model == BernoulliLoss(p=0.0)
    assert netem.id != friendly.id and '"gilbert_elliott":{' in canonical_json(friendly.params)


def test_loss_direction_places_it_and_a_reverse_path_keeps_its_bernoulli_loss():
    both, = cells(gilbert_elliott=[BURSTY], loss_direction="both")
    assert both.params.uplink.gilbert_elliott == both.params.downlink.gilbert_elliott is not None
    acks, = cells(gilbert_elliott=[BURSTY], loss_direction="downlink")
    assert acks.params.uplink.gilbert_elliott is None and acks.params.downlink.gilbert_elliott is not None
    reverse, = cells(gilbert_elliott=[BURSTY], loss_direction="both",
                     reverse=[{"label": "acks", "loss_percent": 0.5}])
    assert reverse.params.downlink.loss_model == BernoulliLoss(p=0.005)


def test_the_emulator_gets_one_argv_element_per_value(tmp_path: Path):
    cell, = cells(gilbert_elliott=[{"p": 0.02, "r": 0.3, "one_minus_k": 1e-05}])
    argv = link_command(cell, Path("/bin/ccsweep-link"), "a", "b", tmp_path, {}, 30)
    at = argv.index("--uplink-gilbert-elliott")
    assert argv[at + 1:at + 5] == ["0.02", "0.3", "1.0", "1e-05"]
    assert "--uplink-loss" not in argv and argv[argv.index("--downlink-loss") + 1] == "0"
    assert not any(" " in arg for arg in argv[1:] if not arg.startswith(("infinite", "droptail")))


def test_a_direction_holds_one_loss_model():
    ge = GilbertElliottLoss(p=0.1, r=0.5, one_minus_h=1, one_minus_k=0)
    cell, = cells(loss_percent=[1])
    data = cell.params.model_dump()
    data["uplink"]["gilbert_elliott"] = ge.model_dump()
    with pytest.raises(ValidationError, match="one loss model: loss 0.01 and gilbert_elliott both given"):
        CellParams.model_validate(data)
    with pytest.raises(ValidationError, match="p and r are both 0"):
        GilbertElliottLoss(p=0, r=0, one_minus_h=1, one_minus_k=0)


@pytest.mark.parametrize(("setting", "message"), [
    ({"p": 1.5, "r": 0.3}, "experiments[ge].gilbert_elliott[0].p: 1.5 is outside [0, 1] (a fraction)"),
    ({"p": 0.1, "r": 0.3, "one_minus_h": -0.1},
     "experiments[ge].gilbert_elliott[0].one_minus_h: -0.1 is outside [0, 1] (a fraction)"),
    ({"mean_loss_percent": 0, "mean_burst_packets": 2},
     "experiments[ge].gilbert_elliott[0].mean_loss_percent: 0.0 is outside (0, 100] (percent)"),
    ({"mean_loss_percent": 1, "mean_burst_packets": 0.5},
     "experiments[ge].gilbert_elliott[0].mean_burst_packets: 0.5 is outside [1, 100000] packets"),
    ({"mean_loss_percent": 60, "mean_burst_packets": 1},
     "experiments[ge].gilbert_elliott[0]: mean_loss_percent: 60 is outside (0, 50], the most bursts of mean 1 "
     "packets can lose"),
    ({"p": 0, "r": 0}, "experiments[ge].gilbert_elliott[0]: p and r are both 0"),
    ({"p": 0.1}, "experiments[ge].gilbert_elliott[0]: give p and r"),
    ({"mean_loss_percent": 1}, "experiments[ge].gilbert_elliott[0]: mean_loss_percent and mean_burst_packets go "
                               "together"),
    ({"p": 0.1, "r": 0.2, "mean_burst_packets": 3}, "experiments[ge].gilbert_elliott[0]: give netem's parameters or"),
])
def test_bad_values_are_one_line_naming_the_field_and_range_with_exit_2(tmp_path: Path, setting, message):
    code, err = validate(tmp_path, gilbert_elliott=[setting])
    assert code == 2 and "\n" not in err
    assert err.startswith("ccsweep: error: ") and f".yaml: {message}" in err, err


def test_it_replaces_the_bernoulli_axis_rather_than_joining_it(tmp_path: Path):
    code, err = validate(tmp_path, gilbert_elliott=[BURSTY], loss_percent=[1])
    assert code == 2
    assert err.endswith("give exactly one of loss (fraction), loss_percent and gilbert_elliott")
    code, err = validate(tmp_path, gilbert_elliott=[BURSTY, {"p": 0.01 * 0.25 / 0.99, "r": 0.25}])
    assert code == 2 and "gilbert_elliott: " in err and "is given twice" in err


def test_mahimahi_refuses_it_in_one_line_naming_the_field(tmp_path: Path):
    code, err = validate(tmp_path, gilbert_elliott=[BURSTY], link="mahimahi", rtt_ms=[40])
    assert code == 2
    assert err.endswith("experiments[ge].gilbert_elliott: needs link ccsweep-link; mahimahi's mm-loss "
                   "loses each packet independently (give loss or loss_percent)"), err
    # A cell that reaches the Mahimahi runner as JSON, past any spec, is refused there too.
    cell, = cells(gilbert_elliott=[BURSTY])
    moved = CellParams.model_validate({**cell.params.model_dump(), "link": "mahimahi", "link_offload": "none"})
    assert (cannot_express(moved) or "").startswith("draw uplink loss from a Gilbert-Elliott model")
    # And were it asked for the shells' argv regardless, it says so rather than run without loss.
    folder, logs = Path("/mm/bin"), {"uplink": Path("/w/up.log"), "downlink": Path("/w/down.log")}
    with pytest.raises(LinkError, match="mahimahi cannot draw uplink loss from GilbertElliottLoss"):
        mahimahi_command(moved, folder, {"uplink": Path("/w/up"), "downlink": Path("/w/down")}, logs, ["true"])


def test_figures_draw_a_line_per_burst_length_and_name_it():
    settings = [{"mean_loss_percent": 1, "mean_burst_packets": 4}, {"mean_loss_percent": 2, "mean_burst_packets": 4},
                {"mean_loss_percent": 1, "mean_burst_packets": 2}]
    points = [Point(cell.params, []) for cell in cells(gilbert_elliott=settings, loss_direction="both")]
    series = loss_series(points, "both")
    assert [[p.params.loss for p in line] for line in series] == [[0.01, 0.02], [0.01]]
    facets = varying_facets([line[0].params for line in series], skip=("loss",))
    assert [series_label(line[0].params, facets) for line in series] == ["CUBIC (bursts of 4 pkts)",
                                                                        "CUBIC (bursts of 2 pkts)"]
    assert cell_summary(points[0].params, repetition=False).startswith("CUBIC, 1 % loss in bursts of 4 pkts, 40 ms")
    acks, = cells(gilbert_elliott=[settings[0]], loss_direction="downlink")
    assert path_label(acks.params) == "reverse 20 ms, 1 % loss in bursts of 4 pkts"
    assert path_label(points[0].params) == "symmetric"
