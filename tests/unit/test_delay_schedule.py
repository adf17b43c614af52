"""A delay schedule from spec to emulator: steps of one-way delay over the flows' time, on the
directions the spec names, written by the runner as ccsweep-link's delay trace, refused on Mahimahi
and outside its range in one line naming the field. The link's model of it is tested in
emulator/src/delaytrace.rs and link.rs and, end to end, in tests/emulator/test_link.py."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from ccsweep.cell import CellParams, DelayStep, DirectionParams, FlowParams, canonical_json, cell_id
from ccsweep.checks.claims import one_flow
from ccsweep.compare import _coarse_of
from ccsweep.expand import expand
from ccsweep.figures.published import _key_of_params
from ccsweep.linkrules import lateness_threshold_us, release_window_us
from ccsweep.results.points import cell_summary, series_label, varying_facets
from ccsweep.results.tidy import params_row
from ccsweep.runner.link import delay_schedule_trace, link_command, prepare_delay_traces
from ccsweep.runner.link_run import SCHEDULE_LEAD_S, EmulatorLink
from ccsweep.spec import SpecError
from ccsweep.specload import parse_spec
from support.refusal import validate_refusal

STEPS = [{"at_s": 10, "delay_ms": 80}, {"at_s": 40, "delay_ms": 20}]


def spec(delay_schedule: dict | None, **extra: object) -> dict:
    return {"name": "stepped", "experiments": [{
        "name": "d", "cc": ["bbr"], "loss_percent": [0], "rtt_ms": [40, 100], "bandwidth_mbps": [50],
        "duration_s": 60, "delay_schedule": delay_schedule, **extra}]}


def test_a_schedule_goes_to_the_directions_it_names_and_to_every_cell():
    for direction, up, down in (("uplink", True, False), ("downlink", False, True), ("both", True, True)):
        cells = expand(parse_spec(spec({"steps": STEPS, "direction": direction})))
        assert len(cells) == 2
        for cell in cells:
            steps = ((10.0, 80.0), (40.0, 20.0))
            placed = [tuple((s.at_s, s.delay_ms) for s in d.delay_schedule) for d in (cell.params.uplink,
                                                                                     cell.params.downlink)]
            assert placed == [steps if up else (), steps if down else ()], direction
    (default, _) = expand(parse_spec(spec({"steps": STEPS})))
    assert default.params.uplink.delay_schedule and not default.params.downlink.delay_schedule


def test_a_scaled_sweep_scales_the_steps_as_it_scales_the_flows():
    (cell, _) = expand(parse_spec({**spec({"steps": STEPS}), "time_scale": 0.5}))
    assert [(s.at_s, s.delay_ms) for s in cell.params.uplink.delay_schedule] == [(5.0, 80.0), (20.0, 20.0)]


def test_a_cell_without_a_schedule_keeps_its_id_and_one_with_a_schedule_is_another():
    params = CellParams(flows=(FlowParams(cc="bbr"),), uplink=DirectionParams(rate_mbps=50, delay_ms=20, loss=0),
                        downlink=DirectionParams(rate_mbps=50, delay_ms=20, loss=0), duration_s=60, warmup_s=5,
                        seed=1)
    # The id this cell had before delay schedules existed.
    assert cell_id(params) == "adb8775e59a3d113"
    assert "delay_schedule" not in canonical_json(params)
    stepped = params.model_copy(update={"uplink": params.uplink.model_copy(
        update={"delay_schedule": (DelayStep(at_s=10, delay_ms=80),)})})
    assert cell_id(CellParams.model_validate(stepped.model_dump())) != cell_id(params)
    plain = expand(parse_spec(spec(None)))
    stepped_cells = expand(parse_spec(spec({"steps": STEPS})))
    assert not {c.id for c in plain} & {c.id for c in stepped_cells}


def test_a_cell_refuses_steps_that_go_back_in_time():
    with pytest.raises(ValueError, match=r"delay_schedule: at_s \[10.0, 5.0\] must not decrease"):
        DirectionParams(rate_mbps=50, delay_ms=20, loss=0,
                        delay_schedule=(DelayStep(at_s=10, delay_ms=1), DelayStep(at_s=5, delay_ms=2)))


def test_the_runner_writes_the_trace_from_the_flows_start_and_names_it_to_the_emulator(tmp_path: Path):
    (cell, _) = expand(parse_spec(spec({"steps": STEPS, "direction": "both"})))
    # Each step lead_s after the emulator's start, in whole ms of its clock; the delays as floats.
    assert delay_schedule_trace(cell.params.uplink.delay_schedule, lead_s=2.0) == "12000 80.0\n42000 20.0\n"
    traces = prepare_delay_traces(cell, tmp_path, lead_s=2.0)
    assert traces == {"uplink": tmp_path / "uplink.delay.trace", "downlink": tmp_path / "downlink.delay.trace"}
    assert traces["downlink"].read_text() == "12000 80.0\n42000 20.0\n"
    argv = link_command(cell, Path("ccsweep-link"), "s", "r", tmp_path, {}, 10, delay_traces=traces)
    assert argv[argv.index("--uplink-delay-trace") + 1] == str(tmp_path / "uplink.delay.trace")
    assert argv[argv.index("--downlink-delay-trace") + 1] == str(tmp_path / "downlink.delay.trace")
    assert argv[argv.index("--uplink-delay") + 1] == "20ms", "the delay before the first step"
    (plain, _) = expand(parse_spec(spec(None)))
    assert prepare_delay_traces(plain, tmp_path / "none", lead_s=0) == {}
    assert not any(a.endswith("-delay-trace") for a in link_command(plain, Path("l"), "s", "r", tmp_path, {}, 10))


def test_the_runner_starts_the_flows_a_lead_after_the_link_when_a_delay_steps(tmp_path: Path):
    binary = tmp_path / "ccsweep-link"
    binary.write_text("")
    binary.chmod(0o755)
    leads = {}
    for schedule in (None, {"steps": STEPS, "direction": "downlink"}):
        (cell, _) = expand(parse_spec(spec(schedule)))
        link = EmulatorLink(binary)
        workdir = tmp_path / str(len(leads))
        workdir.mkdir()
        link.prepare(SimpleNamespace(cell=cell, workdir=workdir, attempt=1, threshold_us=400.0, cpu_milli=None))
        assert link._command is not None
        argv = link._command(sender_netns="s", receiver_netns="r")
        leads[bool(schedule)] = link._lead_s
        if schedule:
            trace = argv[argv.index("--downlink-delay-trace") + 1]
            assert Path(trace).read_text() == f"{round((SCHEDULE_LEAD_S + 10) * 1000)} 80.0\n" \
                                              f"{round((SCHEDULE_LEAD_S + 40) * 1000)} 20.0\n"
    assert leads == {False: 0.0, True: SCHEDULE_LEAD_S}


def test_labels_export_and_the_rules_that_follow_the_rtt():
    (cell, _) = expand(parse_spec(spec({"steps": STEPS})))
    (plain, _) = expand(parse_spec(spec(None)))
    params = [cell.params, plain.params]
    assert "delay schedule" in varying_facets(params)
    assert series_label(cell.params, ["delay schedule"]) == "BBR (uplink delay 80 ms at 10 s, 20 ms at 40 s)"
    assert series_label(plain.params, ["delay schedule"]) == "BBR (fixed delay)"
    assert cell_summary(cell.params).endswith("uplink delay 80 ms at 10 s, 20 ms at 40 s, rep 0")
    row = params_row(cell.params)
    assert row["uplink_delay_schedule"] == '[{"at_s": 10.0, "delay_ms": 80.0}, {"at_s": 40.0, "delay_ms": 20.0}]'
    assert row["downlink_delay_schedule"] is None and params_row(plain.params)["uplink_delay_schedule"] is None
    # 40 ms of RTT, 20 + 20 at its lowest: the lateness a cell tolerates and its release window follow
    # the shortest RTT the path has; claims weighed against a fixed RTT leave the cell out.
    assert (cell.params.rtt_ms, cell.params.shortest_rtt_ms) == (40.0, 40.0)
    (_, long) = expand(parse_spec(spec({"steps": [{"at_s": 30, "delay_ms": 1}]})))
    assert (long.params.rtt_ms, long.params.shortest_rtt_ms) == (100.0, 51.0)
    assert lateness_threshold_us(long) == 510.0 and release_window_us(long) == 128.0
    assert one_flow(plain.params, "bbr") and not one_flow(cell.params, "bbr")
    # Nor is it set beside a published number of a fixed RTT.
    assert _coarse_of(plain.params) and _coarse_of(cell.params) is None
    assert _key_of_params(plain.params) and _key_of_params(cell.params) is None


def test_mahimahi_refuses_a_delay_schedule_in_one_line():
    with pytest.raises(SpecError, match=r"^experiments\[d\]\.link: mahimahi cannot step the uplink delay "
                                        r"\(delay_schedule\): mm-delay's one delay is fixed for its whole life"):
        expand(parse_spec(spec({"steps": STEPS}, link="mahimahi", rtt_ms=[40])))


@pytest.mark.parametrize(("schedule", "message"), [
    ({"steps": [{"at_s": 10, "delay_ms": 1}, {"at_s": 70, "delay_ms": 2}]},
     "experiments[d]: delay_schedule.steps[1].at_s 70 is not before duration_s 60"),
    ({"steps": [{"at_s": 10, "delay_ms": 1}, {"at_s": 10, "delay_ms": 2}]},
     "experiments[d].delay_schedule: steps[1].at_s 10 is not after steps[0].at_s 10"),
    ({"steps": [{"at_s": 10, "delay_ms": 20_000}]},
     "experiments[d].delay_schedule.steps[0].delay_ms: 20000.0 is outside [0, 10000] ms"),
    ({"steps": [{"at_s": -1, "delay_ms": 5}]},
     "experiments[d].delay_schedule.steps[0].at_s: -1.0 is outside [0, 3600] s"),
    ({"steps": [{"at_s": 1, "delay_ms": "5"}]}, "experiments[d].delay_schedule.steps[0].delay_ms: '5' (text): must be"),
    ({"steps": []}, "experiments[d].delay_schedule.steps: "),
    ({"steps": STEPS, "direction": "sideways"}, "experiments[d].delay_schedule.direction: 'sideways': "),
    ({"steps": STEPS, "shape": "ramp"}, "experiments[d].delay_schedule.shape: unknown field"),
])
def test_a_bad_schedule_is_one_line_naming_the_field_and_exit_2(tmp_path: Path, schedule: dict, message: str):
    assert message in validate_refusal(tmp_path, spec(schedule))
