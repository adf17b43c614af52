"""Spec validation: every bad field gives one line naming the field and the allowed range."""

from pathlib import Path

import pytest

from ccsweep.expand import expand
from ccsweep.spec import SpecError
from ccsweep.specload import load_spec, parse_spec

BASE = {"name": "t", "experiments": [{"name": "e", "cc": ["bbr"], "loss_percent": [1], "rtt_ms": [100],
                                      "bandwidth_mbps": [100], "duration_s": 10}]}


def with_exp(**changes):
    exp = {**BASE["experiments"][0], **changes}
    return {"name": "t", "experiments": [{k: v for k, v in exp.items() if v is not None}]}


@pytest.mark.parametrize(("changes", "expected"), [
    ({"loss_percent": [150]}, "experiments[e].loss_percent[0]: 150.0 is outside [0, 100] (percent)"),
    ({"loss_percent": None, "loss": [1.5]}, "experiments[e].loss[0]: 1.5 is outside [0, 1]"),
    ({"rtt_ms": [-1]}, "experiments[e].rtt_ms[0]: -1.0 is outside [0, 20000] ms"),
    ({"bandwidth_mbps": [0]}, "experiments[e].bandwidth_mbps[0]: 0.0 is outside [0.01, 100000] Mbit/s"),
    ({"cc": ["BBR"]}, "experiments[e].cc[0]: 'BBR': Input should be 'bbr', 'bbr2', 'bbr3', 'bic', 'cdg', 'cubic'"),
    ({"repetitions": 0}, "experiments[e].repetitions: Input should be greater than or equal to 1"),
    ({"warmup_s": 10}, "warmup_s 10.0 must be below duration_s 10.0"),
    ({"loss": [0.1]}, "give exactly one of loss (fraction), loss_percent and gilbert_elliott"),
    ({"queue": [{"kind": "fifo"}]}, "experiments[e].queue[0].kind: 'fifo': Input should be 'infinite', 'droptail'"),
    ({"colour": "red"}, "experiments[e].colour: unknown field"),
    ({"queue": [{"kind": "droptail"}]},
     "experiments[e].queue[0]: kind droptail needs a limit: packets, bytes or bdp (at least one)"),
    ({"queue": [{"kind": "infinite", "bdp": 1}]},
     "experiments[e].queue[0]: kind infinite takes no limit (bdp given); a limited queue is droptail, drophead, "
     "codel or pie"),
    ({"queue": [{"kind": "droptail", "packets": 10, "target_ms": 5}]},
     "experiments[e].queue[0]: target_ms: only for kind codel, not droptail"),
    ({"queue": [{"kind": "infinite"}, {"kind": "codel", "bytes": 9000, "max_burst_ms": 100}]},
     "experiments[e].queue[1]: max_burst_ms: only for kind pie, not codel"),
    ({"queue": [{"kind": "drophead", "bytes": 9000, "bdp": 1}]},
     "experiments[e].queue[0]: give bdp or bytes, not both"),
    ({"queue": [{"kind": "drophead", "packets": 10, "min_bytes": 3000}]},
     "experiments[e].queue[0]: min_bytes is the floor of a bdp limit: give bdp with it"),
])
def test_bad_field_is_one_line_naming_it(changes, expected):
    with pytest.raises(SpecError) as info:
        parse_spec(with_exp(**changes), origin="t.yaml")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("t.yaml: ")
    assert expected in message


@pytest.mark.parametrize("queue", [
    {"kind": "infinite"},
    {"kind": "droptail", "packets": 100, "bytes": 150000},
    {"kind": "drophead", "bdp": 0.5, "min_bytes": 30000},
    {"kind": "codel", "packets": 100, "target_ms": 5, "interval_ms": 100},
    {"kind": "pie", "bdp": 2, "qdelay_ref_ms": 15, "max_burst_ms": 150},
])
def test_good_queues_validate_and_expand(queue):
    (cell,) = expand(parse_spec(with_exp(queue=[queue])))
    assert cell.params.uplink.queue.kind == queue["kind"]


def test_a_bdp_limit_of_zero_bytes_names_the_queue():
    spec = parse_spec(with_exp(rtt_ms=[0], queue=[{"kind": "infinite"}, {"kind": "droptail", "bdp": 1}]))
    with pytest.raises(SpecError) as info:
        expand(spec)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("experiments[e].queue[1]: bdp 1 of a 0-byte BDP")
    assert "is 0 bytes, less than one full-size packet (1500); set min_bytes" in message
    # A floor makes the same path valid.
    (_, cell) = expand(parse_spec(with_exp(rtt_ms=[0], queue=[{"kind": "infinite"},
                                                              {"kind": "droptail", "bdp": 1, "min_bytes": 3000}])))
    assert cell.params.uplink.queue.bytes == 3000


def test_percent_and_fraction_give_the_same_cells():
    by_percent = expand(parse_spec(with_exp(loss_percent=[0.1])))
    by_fraction = expand(parse_spec(with_exp(loss_percent=None, loss=[0.001])))
    assert [c.id for c in by_percent] == [c.id for c in by_fraction]


def test_defaults_merge_into_experiments():
    spec = parse_spec({"name": "t", "defaults": {"duration_s": 7, "rtt_ms": [20]},
                       "experiments": [{"name": "a", "cc": ["bbr"], "loss": [0], "bandwidth_mbps": [10]}]})
    assert spec.experiments[0].duration_s == 7
    assert spec.experiments[0].rtt_ms == [20]


def test_duplicate_experiment_names_are_refused():
    data = {"name": "t", "experiments": [BASE["experiments"][0], BASE["experiments"][0]]}
    with pytest.raises(SpecError, match="repeated: e"):
        parse_spec(data)


def test_include_pulls_in_other_files(tmp_path: Path):
    (tmp_path / "a.yaml").write_text("name: a\nexperiments:\n  - {name: ea, cc: [bbr], loss: [0], rtt_ms: [10], "
                                     "bandwidth_mbps: [10], duration_s: 5}\n")
    (tmp_path / "all.yaml").write_text("name: all\ninclude: [a.yaml]\n")
    spec = load_spec(str(tmp_path / "all.yaml"))
    assert [e.name for e in spec.experiments] == ["ea"]
    assert spec.name == "all"


def test_include_cycle_is_reported(tmp_path: Path):
    (tmp_path / "a.yaml").write_text("name: a\ninclude: [b.yaml]\n")
    (tmp_path / "b.yaml").write_text("name: b\ninclude: [a.yaml]\n")
    with pytest.raises(SpecError, match="include cycle"):
        load_spec(str(tmp_path / "a.yaml"))


def test_unknown_preset_names_the_search_path():
    with pytest.raises(SpecError, match="not a spec file and not a preset"):
        load_spec("no-such-preset")


@pytest.mark.parametrize("preset", ["figure8", "quick"])
def test_repository_presets_validate(preset):
    spec = load_spec(preset)
    assert spec.name == preset
    assert expand(spec)


def test_negative_zero_is_the_same_cell_as_zero():
    """ids hash the numbers' JSON: -0.0 would be a second id for the same physical cell."""
    (plain,) = expand(parse_spec(with_exp(loss_percent=[0], rtt_ms=[20])))
    (signed,) = expand(parse_spec(with_exp(loss_percent=[-0.0], rtt_ms=[20], flow_stagger_s=-0.0)))
    assert signed.id == plain.id
    assert str(expand(parse_spec(with_exp(loss_percent=[-0.0])))[0].params.uplink.loss) == "0.0"


def test_a_reverse_loss_is_rounded_like_the_forward_one():
    """0.7 % is 0.007 (not 0.006999999999999999) either way it is written: forward and reverse agree."""
    base = {"loss_direction": "both", "reverse": [{"label": "r"}]}
    (forward,) = expand(parse_spec(with_exp(loss_percent=[0.7], **base)))
    (reverse,) = expand(parse_spec(with_exp(loss_percent=[0.7], loss_direction="uplink",
                                            reverse=[{"label": "r", "loss_percent": 0.7}])))
    assert forward.params.downlink.loss == reverse.params.downlink.loss == 0.007


def test_cell_count_counts_kernels():
    spec = parse_spec(with_exp(kernels=["6.8.0", "6.9.0"], rtt_ms=[10, 20]))
    (exp,) = spec.experiments
    assert exp.cell_count() == len(expand(spec)) == 4


def test_a_title_with_mathtext_matplotlib_draws_is_accepted():
    (exp,) = parse_spec(with_exp(title=r"Goodput at $\alpha = 0.1$ and \$5")).experiments
    assert exp.title.startswith("Goodput")
