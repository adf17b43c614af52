"""The theory bench's expectations (benchmarks/effects/measures.py) are the models' own, drawn here
from the definitions with Python's generator; its reading of probe records finds what was put in
them; and the result's README quotes what its committed data give (theory_report.py)."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from benchmarks.effects import measures
from benchmarks.effects.theory_report import FOLDERS, compute
from benchmarks.quoted import fill, names


@pytest.mark.parametrize("distribution", ["uniform", "normal"])
@pytest.mark.parametrize("gap_ms", [0.5, 2.0, 6.0])
def test_overtaking_probability_is_what_two_drawn_offsets_give(distribution: str, gap_ms: float) -> None:
    rng = random.Random(4)
    draw = (lambda: rng.uniform(-5, 5)) if distribution == "uniform" else (lambda: rng.gauss(0, 5))
    n = 100_000
    overtaken = sum(1 for _ in range(n) if draw() - draw() < -gap_ms) / n
    expected = measures.overtaking_probability(distribution, gap_ms * 1e6, 5e6)
    assert abs(overtaken - expected) < 4 * math.sqrt(expected * (1 - expected) / n) + 1e-9, (overtaken, expected)


def test_the_loss_share_error_is_the_spread_of_drawn_chains() -> None:
    # 300 chains of 3,000 packets (2 % in bursts of 3): the shares' standard deviation against the
    # formula, within the 10 % a standard deviation of 300 draws is known to (4 of its errors ~ 16 %).
    rng = random.Random(8)
    p, r = 0.02 / 3 / 0.98, 1 / 3
    shares = []
    for _ in range(300):
        bad, lost = False, 0
        for _ in range(3000):
            lost += bad
            bad = (rng.random() >= r) if bad else (rng.random() < p)
        shares.append(lost / 3000)
    sigma = measures.loss_share_sigma(p, r, 1.0, 0.0, 3000)
    assert abs(statistics.stdev(shares) / sigma - 1) < 0.16, (statistics.stdev(shares), sigma)
    assert sigma > 2 * math.sqrt(0.02 * 0.98 / 3000), "bursts must widen the error beyond the binomial one"


def test_bursts_are_the_runs_of_missing_sequence_numbers() -> None:
    assert measures.bursts({0, 3, 4, 8}, 10) == [2, 3, 1]
    assert measures.bursts(set(range(5)), 5) == []


def test_releases_are_clumps_of_arrivals() -> None:
    assert measures.releases([5000, 0, 10, 5003, 5004, 20000], 1000) == [(0, 2), (5000, 3), (20000, 1)]


def test_a_step_mark_is_held_against_the_probe_s_own_wait() -> None:
    # ECT(1) on even sequence numbers; delay 5 ms, no service time, step 10 ms.
    probes = [[0, 0, 16_000_000, 3], [2, 0, 6_000_000, 1], [4, 0, 15_050_000, 1], [1, 0, 30_000_000, 2]]
    found = {s.statistic: s for s in measures.step_stats(probes, 5_000_000, 0, 10_000_000, 2)}
    assert found["ECT(1) marked"].measured == pytest.approx(100 / 3)
    assert found["ECT(1) marked"].expected == pytest.approx(200 / 3)
    assert found["ECT(1) mark against its wait, disagreeing"].measured == pytest.approx(100 / 3)
    assert found["a disagreeing probe's wait from the step, largest"].measured == pytest.approx(0.05)
    assert found["ECT(0) marked"].measured == 0


def test_the_bucket_run_again_passes_burst_plus_rate_and_the_gaps_are_filled_in() -> None:
    # 1,000-byte packets every 0.4 ms (20 Mbit/s) for 1 s into 10 Mbit/s and 15 kB: 15 packets of
    # bucket and 1,250 of rate, within one packet.
    passed = measures.token_bucket([i * 400_000 for i in range(2500)], 10e6, 15_000, 1000)
    assert abs(sum(passed) - (15 + 1250)) <= 1
    assert measures.send_times([[0, 0, 0, 0], [3, 300, 0, 0]], 5) == [0, 100, 200, 300, 300]


def test_mathis_at_one_percent() -> None:
    # 1448 B every 40 ms, times sqrt(1.5 / 0.01) = 12.25: 3.55 Mbit/s.
    assert measures.mathis_mbps(1448, 0.040, 0.01) == pytest.approx(3.547, abs=0.001)


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda folder: folder.name)
def test_regenerating_reproduces_the_readme_byte_for_byte(folder) -> None:
    text = (folder / "README.md").read_text()
    assert {"theory.table", "theory.tcp-table", "theory.z-max"} <= set(names(text))
    assert fill(text, compute(folder)) == text


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda folder: folder.name)
def test_a_quoted_number_changed_by_hand_no_longer_matches_its_data(folder) -> None:
    text = (folder / "README.md").read_text()
    edited = text.replace("<!-- value: theory.z-max -->", "<!-- value: theory.z-max -->9", 1)
    assert edited != text and fill(edited, compute(folder)) == text


def traced_probes(keep_order: bool) -> list[list[int]]:
    """Probes every 1 ms from 0.7 s on the emulator's clock through 20 ms that steps up 40 ms from
    2.5 to 4.5 s, with order kept (ccsweep-link's delay trace) or not; arrival order, as recorded."""
    due_before, probes = 0, []
    for seq in range(7000):
        sent = 700_000_000 + seq * 1_000_000
        due = sent + (60 if 2_500_000_000 <= sent < 4_500_000_000 else 20) * 1_000_000
        due = max(due, due_before) if keep_order else due
        due_before = max(due, due_before)
        probes.append([seq, sent, due + 5_000, 0])
    return sorted(probes, key=lambda probe: (probe[2], probe[0]))


def test_a_delay_trace_s_stretches_and_its_held_probes_read_as_the_model_says() -> None:
    found = {s.statistic: s for s in measures.delay_trace_stats(traced_probes(True), 20_000_000, 5_000, 40_000_000,
                                                                 2_000_000_000, [0] * 100)}
    assert all(abs(s.measured - s.expected) < 1.01 for s in found.values()), found  # ms, and % of neighbours
    assert found["rise to the first probe back under half the step"].expected == 2020
    assert found["neighbours overtaken"].measured == 0
    # Without the FIFO hold the fast probes leave first: back under half at once, and overtaking.
    loose = {s.statistic: s for s in measures.delay_trace_stats(traced_probes(False), 20_000_000, 5_000, 40_000_000,
                                                                 2_000_000_000, [0] * 100)}
    assert loose["rise to the first probe back under half the step"].measured == pytest.approx(2000, abs=1)
    assert loose["neighbours overtaken"].measured > 0  # the last slow probe and the first fast one
