"""The cross-check's agreement rule (support/crosscheck.py) on goodputs made up to show each case: a
pair run again after one slow start-up agrees on the medians, a link off on every run does not."""

from __future__ import annotations

from support.crosscheck import Comparison

KEY = ("bbr", 0.01, "100 Mbit/s")


def test_one_slow_start_up_among_three_runs_does_not_decide_the_median() -> None:
    runs = {"ccsweep-link": [83.8, 84.6, 83.1], "mahimahi": [70.0, 84.2, 83.5]}
    assert Comparison(KEY, runs, bbr_relative=0.10, summary="median").agrees
    assert Comparison(KEY, runs, bbr_relative=0.05, summary="median").agrees
    assert not Comparison(KEY, runs, bbr_relative=0.05).agrees  # the mean carries the slow run


def test_a_link_off_on_every_run_still_fails_on_the_median() -> None:
    runs = {"ccsweep-link": [83.8, 84.6, 83.1], "mahimahi": [71.3, 72.9, 70.8]}
    assert not Comparison(KEY, runs, bbr_relative=0.10, summary="median").agrees


def test_a_single_run_is_its_own_median() -> None:
    runs = {"ccsweep-link": [83.78], "mahimahi": [71.28]}
    single = Comparison(KEY, runs, bbr_relative=0.10, summary="median")
    assert single.typical("mahimahi") == 71.28 and not single.agrees
