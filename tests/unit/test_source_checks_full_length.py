"""ReBBR's claims on ReBBR's own cells: the study at full length, recorded on Linux 6.18 (tests/fixtures/full-length).

The fixture holds records of 60-140 s flows on ReBBR's grid, on ccsweep-link (full-sweep) and on
Mahimahi, copied by tests/fixtures/record_full_length.py.  Each cell of those ran once, as in
ReBBR's study, and one run settles nothing: every verdict on them is "not settled", and what these
tests pin is how the run reads against each claim's bound (the verdict's lean, printed in the
report) and the numbers it prints.  Where a claim reads one way on one recorded set and the other
way on another (a link, a flow length), both are asserted.

The seeds sweeps (figure8-seeds on each link: Figure 8's cells at 0.1 % and above 5 % loss, 10 runs
a cell) are where claims settle: their verdicts are pass or fail on the whole bootstrap interval of
the median of 10 runs, and the tests pin the median, n and the interval each verdict prints.
"""

from __future__ import annotations

import functools
import html
import re
from pathlib import Path

import pytest

from ccsweep.checks.claims import Verdict, run_checks
from ccsweep.checks.source_claims import ALL_CLAIMS
from ccsweep.figures.report import render_report
from ccsweep.results.data import SweepData, load_sweep
from ccsweep.store.file import FileStore

STORE = Path(__file__).resolve().parents[1] / "fixtures" / "full-length" / "store"
LINK, MM_FIGURE8, MM_ALGORITHMS = "full-sweep", "figure8-mahimahi", "algorithms-mahimahi"
SWEEPS = (LINK, MM_FIGURE8, MM_ALGORITHMS)
#: Figure 8's cells at 0.1 % and above 5 % loss, 10 runs a cell, on each link.
SEEDS, MM_SEEDS = "figure8-seeds", "figure8-seeds-mahimahi"
SEEDED_LOSSES = (0.1, 10, 15, 20, 25, 30, 40, 50)
KERNEL = "6.18.44-fc-v657"
#: ReBBR's flow lengths per experiment (s).
DURATIONS = {"figure8": 60, "bandwidth": 30, "algorithms": 30, "rtt": 120, "cellular": 140}
PATH = "100 ms, 100 Mbit/s, infinite"


@functools.cache
def sweep(name: str) -> SweepData:
    return load_sweep(FileStore(STORE), name)


def verdicts(name: str, claim_id: str, experiment: str) -> dict[str, Verdict]:
    """The claim's verdicts on one experiment of a recorded sweep, by subject."""
    (claim,) = [c for c in ALL_CLAIMS if c.id == claim_id]
    rows = [row for row in run_checks(sweep(name), [claim]) if row.experiment == experiment]
    return {v.subject: v for row in rows for v in row.verdicts}


def test_the_fixture_is_rebbrs_study_at_full_length_on_one_kernel():
    """Real records, ReBBR's flow lengths, one run a cell, each sweep on its own link; small enough to commit."""
    links = {LINK: "ccsweep-link", MM_FIGURE8: "mahimahi", MM_ALGORITHMS: "mahimahi"}
    for name in SWEEPS:
        for exp in sweep(name).experiments:
            for result in exp.results:
                params = result.cell.params
                assert result.status == "ok" and result.environment.kernel == KERNEL
                assert result.environment.available_cc == ["reno", "bbr", "cubic"]
                assert params.duration_s == DURATIONS[exp.name] and params.repetition == 0
                assert params.link == links[name], (name, result.cell.id)
    assert sum(f.stat().st_size for f in STORE.rglob("*") if f.is_file()) < 2_000_000


@pytest.mark.parametrize(("name", "link"), [(SEEDS, "ccsweep-link"), (MM_SEEDS, "mahimahi")])
def test_the_seeds_sweeps_hold_10_real_runs_of_each_chaotic_figure8_cell(name: str, link: str):
    """Run 0 is figure8's own cell (its record as stored); runs 1-9 are compacted records of the same
    60 s cell with another seed, on the same link and kernel."""
    (exp,) = sweep(name).experiments
    assert exp.missing == []
    runs: dict[tuple[str, float], list[int]] = {}
    for result in exp.results:
        params = result.cell.params
        assert result.status == "ok" and result.environment.kernel == KERNEL and params.link == link
        assert params.duration_s == 60 and params.bandwidth_mbps == 100 and params.rtt_ms == 100
        runs.setdefault((params.flows[0].cc, round(params.loss * 100, 3)), []).append(params.repetition)
    assert runs == {(cc, loss): list(range(10)) for cc in ("cubic", "bbr") for loss in SEEDED_LOSSES}
    figure8 = sweep(LINK if link == "ccsweep-link" else MM_FIGURE8)
    shared = {r.cell.id for r in exp.results} & {r.cell.id for e in figure8.experiments for r in e.results}
    assert len(shared) == 16


@pytest.mark.parametrize(("name", "at_15"), [(SEEDS, False), (MM_SEEDS, None)])
def test_bbr_holds_settles_pass_to_10_percent_and_fail_from_20_on_10_runs_a_cell(name: str, at_15: bool | None):
    """ReBBR's "BBR holds up to about 45 % loss" (Linux 4.11.1) settles fail on Linux 6.18 from 20 % on both
    links: there the whole interval of the median of 10 runs is far below half the payload-rate ideal.  At
    15 % it settles fail on ccsweep-link; Mahimahi's runs straddle the bound (bimodal), not settled."""
    found = verdicts(name, "rebbr-bbr-holds", "figure8")
    settled = {float(subject.split(", ")[1].removesuffix(" % loss")): v.ok for subject, v in found.items()}
    assert settled == {0.1: True, 10: True, 15: at_15, 20: False, 25: False, 30: False, 40: False}
    (row,) = [r for r in run_checks(sweep(name), ALL_CLAIMS) if r.claim.id == "rebbr-bbr-holds"]
    assert row.status == "fail" and row.reading == "fail"


@pytest.mark.parametrize(("name", "loss", "reading", "measured", "interval"), [
    (SEEDS, 0.1, "pass", "92.6 Mbit/s vs bound 48.2 ", "n = 10, interval [91.7, 93]"),
    (SEEDS, 10, "pass", "50.2 Mbit/s vs bound 43.4 ", "n = 10, interval [43.6, 54.3]"),
    (SEEDS, 15, "fail", "15.9 Mbit/s vs bound 41 ", "n = 10, interval [5.99, 37.5]"),
    (SEEDS, 20, "fail", "0.783 Mbit/s vs bound 38.6 ", "n = 10, interval [0.558, 3.51]"),
    (MM_SEEDS, 0.1, "pass", "94.1 Mbit/s vs bound 48.2 ", "n = 10, interval [93.9, 94.6]"),
    (MM_SEEDS, 15, "not settled (the medians read fail)", "40.4 Mbit/s vs bound 41 ", "n = 10, interval [21.5, 44.4]"),
    (MM_SEEDS, 20, "fail", "3.21 Mbit/s vs bound 38.6 ", "n = 10, interval [0.821, 10.5]"),
    (MM_SEEDS, 40, "fail", "0.0927 Mbit/s vs bound 29 ", "n = 10, interval [0.0726, 0.121]")])
def test_bbr_holds_prints_the_median_of_10_runs_its_interval_and_the_kernel(name: str, loss: float, reading: str,
                                                                            measured: str, interval: str):
    verdict = verdicts(name, "rebbr-bbr-holds", "figure8")[f"BBR, {loss:g} % loss, {PATH}"]
    assert verdict.reading == reading
    assert f"steady-state goodput {measured}" in verdict.detail and f"kernel {KERNEL}" in verdict.detail
    assert f"95 % bootstrap CI of the median, {interval}" in verdict.detail


@pytest.mark.parametrize(("name", "measured", "interval"), [
    (SEEDS, "92.6 Mbit/s vs bound 86.8 ", "n = 10, interval [91.7, 93]"),
    (MM_SEEDS, "94.1 Mbit/s vs bound 86.8 ", "n = 10, interval [93.9, 94.6]")])
def test_the_bbr_papers_ideal_settles_pass_at_0_1_percent_on_10_runs(name: str, measured: str, interval: str):
    """The BBR paper's "BBR meets (1 − p) × link rate up to 5 %": at 0.1 % the whole interval of the median of
    10 runs is above 0.9 × the payload-rate ideal on both links (2 and 5 % ran once: see the test below)."""
    (verdict,) = verdicts(name, "bbr-ideal", "figure8").values()
    assert verdict.subject == f"BBR, 0.1 % loss, {PATH}" and verdict.ok is True
    assert f"steady-state goodput {measured}" in verdict.detail and interval in verdict.detail


@pytest.mark.parametrize("name", [SEEDS, MM_SEEDS])
def test_mathis_settles_pass_to_20_percent_and_fail_above_for_cubic_on_10_runs(name: str):
    """CUBIC within a factor of 2 of Mathis' model at 10-20 % loss; from 25 % its goodput falls below half
    of it on both links (the square-root model leaves out retransmission timeouts, frequent at such loss)."""
    found = verdicts(name, "mathis", "figure8")
    settled = {float(subject.split(", ")[1].removesuffix(" % loss")): v.ok for subject, v in found.items()}
    assert settled == {p: p <= 20 for p in SEEDED_LOSSES if p >= 1}
    assert all("n = 10, interval [" in v.detail for v in found.values())


def test_the_report_of_10_runs_a_cell_prints_settled_rows_and_quotes_the_source_beside_the_failed_one():
    data = sweep(SEEDS)
    claims = [c for c in ALL_CLAIMS if c.id in ("bbr-ideal", "rebbr-bbr-holds")]
    report = " ".join(html.unescape(render_report(data, [], run_checks(data, claims), outputs=[])).split())
    assert "not settled" not in report
    shown = re.findall(r"What the source measured: ([^<]*)<", report)
    assert [s.strip() for s in shown] == [" ".join(claims[1].measured.split())]


def test_one_run_a_cell_settles_no_rebbr_claim_but_each_reads_one_way():
    rebbr = [c for c in ALL_CLAIMS if c.id.startswith("rebbr-")]
    rows = [row for name in SWEEPS for row in run_checks(sweep(name), rebbr)]
    assert {row.claim.id for row in rows} == {"rebbr-cubic-above-lowest-loss", "rebbr-bbr-holds",
                                              "rebbr-bbr-beats-others", "rebbr-gap-shrinks", "rebbr-cubic-1mbps",
                                              "rebbr-verizon", "rebbr-short-rtt"}
    for row in rows:
        assert row.status == "not settled", (row.claim.id, row.experiment)
        for v in row.verdicts:
            assert v.ok is None, v
            measured = "median of 1 run, no interval" in v.detail
            assert measured != ("not measured" in v.detail) and (v.leans is not None) == measured, v


def leans_by_loss(name: str, experiment: str) -> dict[float, bool | None]:
    return {float(subject.split(", ")[1].removesuffix(" % loss")): v.leans
            for subject, v in verdicts(name, "rebbr-bbr-holds", experiment).items()}


@pytest.mark.parametrize(("name", "experiment", "holds_through"), [
    (LINK, "figure8", 15), (MM_FIGURE8, "figure8", 15),  # 60 s flows
    (LINK, "algorithms", 10), (MM_ALGORITHMS, "algorithms", 10), (LINK, "bandwidth", 10),  # 30 s flows
    (LINK, "rtt", 10)])  # 120 s flows, 40.8 Mbit/s at 15 % against a bound of 41
def test_bbr_holds_reads_fail_from_20_percent_on_both_links(name: str, experiment: str, holds_through: float):
    """ReBBR's 4.11.1 BBR held to about 45 %; 6.18's collapses from 20 % on ccsweep-link and Mahimahi alike,
    and at 15 % the 60 s flows read pass where the 30 s and 120 s ones read fail (the cell is bimodal there)."""
    losses = [0.001, 0.01, 0.1, 1, 2, 5, 10, 15, 20, 25, 30, 40]
    assert leans_by_loss(name, experiment) == {p: p <= holds_through for p in losses}


@pytest.mark.parametrize(("name", "experiment", "loss", "measured"), [
    (LINK, "figure8", 15, "45.3 Mbit/s vs bound 41 "), (MM_FIGURE8, "figure8", 15, "42.9 Mbit/s vs bound 41 "),
    (LINK, "algorithms", 15, "29.1 Mbit/s vs bound 41 "), (MM_ALGORITHMS, "algorithms", 15, "5.66 Mbit/s vs bound 41 "),
    (LINK, "rtt", 15, "40.8 Mbit/s vs bound 41 "), (LINK, "rtt", 20, "4.78 Mbit/s vs bound 38.6 "),
    (LINK, "figure8", 20, "0.558 Mbit/s vs bound 38.6 "), (MM_FIGURE8, "figure8", 20, "0.632 Mbit/s vs bound 38.6 "),
    (LINK, "figure8", 40, "0.0878 Mbit/s vs bound 29 "), (MM_FIGURE8, "figure8", 40, "0.0596 Mbit/s vs bound 29 ")])
def test_bbr_holds_prints_the_recorded_goodput_the_bound_and_the_kernel(name: str, experiment: str, loss: float,
                                                                        measured: str):
    verdict = verdicts(name, "rebbr-bbr-holds", experiment)[f"BBR, {loss:g} % loss, {PATH}"]
    assert f"steady-state goodput {measured}" in verdict.detail and f"kernel {KERNEL}" in verdict.detail


@pytest.mark.parametrize(("name", "experiment", "leans", "measured"), [
    (LINK, "figure8", True, ("CUBIC median 96.3 Mbit/s", "BBR median 94 Mbit/s")),
    (MM_FIGURE8, "figure8", True, ("CUBIC median 96.1 Mbit/s", "BBR median 93.8 Mbit/s")),
    (LINK, "algorithms", True, ("CUBIC median 96.5 Mbit/s", "BBR median 94.8 Mbit/s")),
    (LINK, "rtt", True, ("CUBIC median 95.3 Mbit/s", "BBR median 91.7 Mbit/s")),
    # Mahimahi's 30 s CUBIC run at 0.001 % came out 10 % below BBR: the same claim reads fail there.
    (MM_ALGORITHMS, "algorithms", False, ("CUBIC median 85 Mbit/s", "BBR median 94.2 Mbit/s"))])
def test_cubic_above_bbr_at_the_lowest_loss(name: str, experiment: str, leans: bool, measured: tuple[str, str]):
    (verdict,) = verdicts(name, "rebbr-cubic-above-lowest-loss", experiment).values()
    assert verdict.subject == f"CUBIC, 0.001 % loss, {PATH}" and verdict.leans is leans
    assert all(number in verdict.detail for number in measured)


@pytest.mark.parametrize(("name", "bbr", "cubic", "reno"), [(LINK, 89.6, 1.32, 1.34), (MM_ALGORITHMS, 88.1, 1.31, 1.5)])
def test_bbr_beats_others_reads_pass_against_what_ran_and_names_what_this_kernel_lacks(
        name: str, bbr: float, cubic: float, reno: float):
    found = verdicts(name, "rebbr-bbr-beats-others", "algorithms")
    for label, goodput in (("CUBIC", cubic), ("Reno", reno)):
        verdict = found[f"{label}, 1 % loss, {PATH}"]
        assert verdict.leans is True
        assert f"BBR median {bbr:g} Mbit/s" in verdict.detail
        assert f"{label.lower()} median {goodput:g} Mbit/s" in verdict.detail
    for label in ("BIC", "Vegas", "Westwood"):
        verdict = found[f"{label}, 1 % loss, {PATH}"]
        assert verdict.ok is None and verdict.leans is None and verdict.reading == "not settled"
        assert (f"{label.lower()} unavailable on this kernel (available: bbr, cubic, reno)") in verdict.detail
    assert len(found) == 5


def test_gap_shrinks_reads_pass_to_15_percent_and_fail_where_bbr_collapsed_at_100_mbits():
    """At 10 kbit/s BBR and CUBIC are about equal up to 10 % loss, as ReBBR said; from 20 % the gap at
    100 Mbit/s is gone because 6.18's BBR collapsed there, so the gap is larger at the lower rate."""
    found = verdicts(LINK, "rebbr-gap-shrinks", "bandwidth")
    leans = {float(subject.split(" % loss")[0]): v.leans for subject, v in found.items()}
    assert leans == {p: p <= 15 for p in (1, 2, 5, 10, 15, 20, 25, 30, 40, 50)}
    assert "0.000 at 0.01 Mbit/s vs 0.883 at 100 Mbit/s" in found["1 % loss, 100 ms, 0.01 vs 100 Mbit/s"].detail
    assert "0.240 at 0.01 Mbit/s vs 0.009 at 100 Mbit/s" in found["20 % loss, 100 ms, 0.01 vs 100 Mbit/s"].detail


@pytest.mark.parametrize(("name", "experiment", "goodput"), [
    (LINK, "figure8", 1.38), (MM_FIGURE8, "figure8", 1.34), (LINK, "algorithms", 1.32),
    (MM_ALGORITHMS, "algorithms", 1.31), (LINK, "rtt", 1.41)])
def test_cubic_gets_about_1_mbits_at_100_ms_and_1_percent(name: str, experiment: str, goodput: float):
    (verdict,) = verdicts(name, "rebbr-cubic-1mbps", experiment).values()
    assert verdict.leans is True and f"steady-state goodput {goodput:g} Mbit/s vs 0.5-2" in verdict.detail


def test_bbr_beats_cubic_over_the_verizon_trace_at_every_loss_from_1_percent():
    found = verdicts(LINK, "rebbr-verizon", "cellular")
    leans = {float(subject.split(", ")[1].removesuffix(" % loss")): v.leans for subject, v in found.items()}
    assert leans == {p: True for p in (1, 2, 5, 10, 15, 20, 25, 30, 40, 50)}
    trace = "100 ms, trace Verizon-LTE-short.up, infinite"
    for loss, bbr, cubic in ((1, 5.2, 1.18), (20, 0.395, 0.134), (50, 0.0159, 0.0047)):
        detail = found[f"BBR, {loss} % loss, {trace}"].detail
        assert f"BBR median {bbr:g} Mbit/s" in detail and f"CUBIC median {cubic:g} Mbit/s" in detail


def test_cubic_far_below_bbr_at_2_ms_and_1_percent():
    """ReBBR printed CUBIC ~25 and BBR 98 Mbit/s; here 39.2 and 94: a ratio of 0.42, under the bound of half."""
    (verdict,) = verdicts(LINK, "rebbr-short-rtt", "rtt").values()
    assert verdict.subject == "CUBIC, 1 % loss, 2 ms, 100 Mbit/s, infinite" and verdict.leans is True
    assert "CUBIC median 39.2 Mbit/s" in verdict.detail and "BBR median 94 Mbit/s" in verdict.detail
    assert "ratio 0.42" in verdict.detail


def test_claims_these_cells_do_not_reach_give_no_verdict_and_a_missing_cell_says_why():
    """The queue and buffer claims need rebbr-queue's and rebbr-buffers' cells: no verdict, so the report
    lists them as not checked rather than passed.  The one RTT cell whose link ran late on every attempt
    is missing with that reason, as in the store."""
    out_of_reach = [c for c in ALL_CLAIMS if c.id in ("rebbr-queue-no-difference", "rebbr-default-buffers")]
    assert len(out_of_reach) == 2
    for name in SWEEPS:
        assert run_checks(sweep(name), out_of_reach) == []
    (rtt,) = [exp for exp in sweep(LINK).experiments if exp.name == "rtt"]
    (missing,) = rtt.missing
    assert missing.summary == "CUBIC, 50 % loss, 2 ms, 100 Mbit/s, infinite, rep 0"
    assert missing.reason.startswith("late: link ran late: p99 lateness 4,883 us")


def test_a_verdict_not_settled_says_how_its_medians_read():
    assert Verdict("s", None, "d", leans=False).reading == "not settled (the medians read fail)"
    assert Verdict("s", None, "d", leans=True).reading == "not settled (the medians read pass)"
    assert Verdict("s", True, "d").reading == "pass" and Verdict("s", None, "d").reading == "not settled"


def test_the_report_counts_how_a_one_run_row_reads_and_quotes_the_source_where_it_reads_fail():
    """BBR holds on ccsweep-link's Figure 8: 8 cells read pass and 4 fail, so ReBBR's own measurement
    (Linux 4.11.1) is shown beside it; CUBIC's 1 Mbit/s reads pass everywhere and is shown without."""
    data = sweep(LINK)
    claims = [c for c in ALL_CLAIMS if c.id in ("rebbr-bbr-holds", "rebbr-cubic-1mbps")]
    rows = [row for row in run_checks(data, claims) if row.experiment == "figure8"]
    report = " ".join(html.unescape(render_report(data, [], rows, outputs=[])).split())
    assert "not settled (by their medians: 8 pass, 4 fail)" in report
    assert "not settled (by their medians: 1 pass, 0 fail)" in report
    assert "not settled (the medians read fail)" in report
    shown = re.findall(r"What the source measured: ([^<]*)<", report)
    assert [s.strip() for s in shown] == [" ".join(claims[0].measured.split())]


@pytest.mark.parametrize(("name", "at_2_percent", "at_5_percent"), [(LINK, 81.4, 67.7), (MM_FIGURE8, 79.7, 68.8)])
def test_the_bbr_papers_ideal_reads_pass_to_1_percent_and_fail_from_2_on_both_links(
        name: str, at_2_percent: float, at_5_percent: float):
    """The BBR paper's "near (1 − p) × link up to 5 %" on these cells: below 0.9 × the payload-rate ideal
    from 2 % loss on ccsweep-link and Mahimahi alike (ReBBR's 4.11.1 bottleneck throughput, 84.1 Mbit/s at 2 %,
    missed the paper's bound too)."""
    found = verdicts(name, "bbr-ideal", "figure8")
    leans = {float(subject.split(", ")[1].removesuffix(" % loss")): v.leans for subject, v in found.items()}
    assert leans == {0.001: True, 0.01: True, 0.1: True, 1: True, 2: False, 5: False}
    assert f"{at_2_percent:g} Mbit/s vs bound 85.1 " in found[f"BBR, 2 % loss, {PATH}"].detail
    assert f"{at_5_percent:g} Mbit/s vs bound 82.5 " in found[f"BBR, 5 % loss, {PATH}"].detail
