"""The delay-step result's README quotes what its committed tables give
(benchmarks/effects/delay_step_report.py), and the reading of BBR's min_rtt it rests on is right on
runs made up to show each case."""

from __future__ import annotations

import json

import pytest

from benchmarks.effects.delay_step_report import FOLDER, compute, estimates_until_taken, step_of, taken
from benchmarks.quoted import fill, names

ROW = {"cell_id": "0123456789abcdef", "experiment": "delay-step-late", "cc": "bbr", "loss": "0", "repetition": "0",
       "uplink_delay_ms": "20", "rtt_ms": "40", "uplink_rate_mbps": "50",
       "uplink_delay_schedule": json.dumps([{"at_s": 15, "delay_ms": 120}, {"at_s": 25, "delay_ms": 20}])}


def samples(took_at: float | None, delivered: float) -> list[dict[str, float]]:
    """100 ms samples over 30 s: min_rtt 40 ms until `took_at`, then 140; from the step on, `delivered`
    in its first second, half that after, and a bandwidth estimate a tenth above the delivery."""
    out = []
    for tenth in range(1, 301):
        t = tenth / 10
        new = took_at is not None and t >= took_at
        rate = 47.0 if t < 15 or new else delivered if t < 16.2 else delivered / 2
        out.append({"t": t, "bbr_min_rtt_ms": 140.0 if new else 40.0, "delivery_rate_mbps": rate,
                    "bbr_bw_mbps": 1.1 * (rate if not new else delivered / 2)})
    return out


def test_the_step_and_its_cwnd_bound_come_from_the_cell() -> None:
    step = step_of(ROW)
    assert (step.at_s, step.base_rtt_ms, step.stepped_rtt_ms) == (15, 40, 140)
    assert step.cwnd_bound_mbps() == pytest.approx(2 * 40 / 140 * 50)
    assert step_of({**ROW, "uplink_delay_schedule": ""}) is None


def test_a_filter_that_holds_the_old_rtt_shows_its_lag_and_what_was_delivered_meanwhile() -> None:
    run = taken(ROW, samples(took_at=20.2, delivered=28.0))
    assert run.lag_s == pytest.approx(5.2)
    # From one stepped RTT (15.14 s) on: 28 until 16.2 s, then 14 until 20.2 s.
    assert run.first_second_mbps == 28.0 and run.delivered_mbps == 14.0
    assert run.bw_when_taken_mbps == pytest.approx(1.1 * 14.0)


def test_the_estimates_until_taken_are_the_one_at_the_step_and_each_fall() -> None:
    assert estimates_until_taken(ROW, samples(took_at=20.2, delivered=28.0)) == pytest.approx([30.8, 15.4])
    assert estimates_until_taken(ROW, samples(took_at=None, delivered=28.0)) == []


def test_a_filter_that_takes_the_new_rtt_at_once_has_no_meanwhile() -> None:
    run = taken(ROW, samples(took_at=15.2, delivered=28.0))
    assert run.lag_s == pytest.approx(0.2) and run.first_second_mbps is None and run.delivered_mbps is None


def test_a_filter_that_never_takes_it_says_so() -> None:
    run = taken(ROW, samples(took_at=None, delivered=28.0))
    assert run.taken_s is None and run.lag_s is None and run.delivered_mbps is None


def test_regenerating_reproduces_the_readme_byte_for_byte() -> None:
    text = (FOLDER / "README.md").read_text()
    assert {"delay-step.goodput", "delay-step.taken", "delay-step.delay-step-late.lag-median"} <= set(names(text))
    assert fill(text, compute(FOLDER)) == text


def test_a_quoted_lag_changed_by_hand_no_longer_matches_its_data() -> None:
    text = (FOLDER / "README.md").read_text()
    marker = "<!-- value: delay-step.delay-step-late.lag-median -->"
    edited = text.replace(marker, marker + "1", 1)
    assert edited != text and fill(edited, compute(FOLDER)) == text
