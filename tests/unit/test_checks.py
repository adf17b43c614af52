"""Every reference check made to pass and made to fail by synthetic records, and the statistics behind them.

The fixture cells only reach some claims (their paths are small, so the tenfold claim's 1.25 MB
BDP is never in scope); here each claim gets cells in its scope with numbers on either side of
its bound, so a wrong comparison or a wrong bound shows.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import synthetic
from ccsweep.cell import Cell
from ccsweep.checks.claims import CLAIMS, CheckRow, mathis_mbps, run_checks
from ccsweep.manifest import SweepManifest
from ccsweep.result import FlowSeries, LinkSeries, TimeSeries
from ccsweep.results.data import ExperimentData, SweepData
from ccsweep.stats import collapsed_fraction, mean_ci, mean_ci_columns, median_ci
from synthetic import goodput

#: Mathis at 1 % loss and 100 ms: 1448 B x 8 / 0.1 s x 1.22 / 0.1 = 1.41 Mbit/s.
MATHIS_1PCT = mathis_mbps(100, 0.01, 100)


def experiment(exp: dict[str, Any], measure: Callable[[Cell], dict[str, Any]],
               series: Callable[[Cell], TimeSeries] | None = None) -> ExperimentData:
    """synthetic.experiment with two runs of each cell unless `exp` says otherwise: a measure that gives both
    runs one number gives a zero-width interval, which settles a claim either way (one run settles nothing)."""
    return synthetic.experiment({"repetitions": 2, **exp}, measure, series)


def verdicts(claim_id: str, data: ExperimentData) -> list[bool | None]:
    (claim,) = [c for c in CLAIMS if c.id == claim_id]
    return [v.ok for v in claim.evaluate(data)]


def bbr_estimate(follows: bool) -> Callable[[Cell], TimeSeries]:
    """BBR's bandwidth estimate over 30 s: 100 Mbit/s, and 200 from 11 s on if it follows the step at 10 s."""
    def series(cell: Cell) -> TimeSeries:
        t = [i / 10 for i in range(300)]
        bw = [200e6 if follows and s >= 11 else 100e6 for s in t]
        return TimeSeries(cell_id=cell.id, flows=[FlowSeries(t=t, bbr_bw_bps=[int(b) for b in bw])])
    return series


def steady_loss(loss_percent: float, startup_percent: float = 20.0) -> Callable[[Cell], TimeSeries]:
    """A 30 s cell's link counters: `startup_percent` of its packets lost before the 5 s warm-up, then
    `loss_percent`; 1000 packets offered per second throughout."""
    def series(cell: Cell) -> TimeSeries:
        t = [i / 10 for i in range(301)]
        offered = [100 * i for i in range(301)]
        warm = 5000  # packets offered by the end of the warm-up
        lost = [round(n * startup_percent / 100) if n <= warm else
                round(warm * startup_percent / 100 + (n - warm) * loss_percent / 100) for n in offered]
        zeros = [0] * len(t)
        link = LinkSeries(t=t, uplink_queue_bytes=zeros, uplink_queue_packets=zeros, uplink_out_bytes=zeros,
                          uplink_bottleneck_bytes=zeros, uplink_capacity_bytes=zeros, uplink_drops_loss=zeros,
                          uplink_drops_queue=lost, uplink_drops_aqm=zeros, lateness_p99_us=[0.0] * len(t),
                          uplink_in_packets=offered)
        return TimeSeries(cell_id=cell.id, flows=[], link=link)
    return series


def shallow(high: bool) -> Callable[[Cell], TimeSeries]:
    """Four BBR flows in half a BDP: 1.2 % loss after start-up (high enough) or 0.8 % (not)."""
    return steady_loss(1.2 if high else 0.8)


SHALLOW_BELOW = {"cc": ["bbr"], "flows": 4, "loss_percent": [0], "rtt_ms": [25], "bandwidth_mbps": [80],
                 "queue": [{"kind": "droptail", "bdp": 0.5}]}

# (claim, experiment fields, measurements that pass, measurements that fail, series factory)
CASES = {
    # bound 0.9 x the payload-rate ideal, 0.99 x 100 x 1448/1500: 86.0
    "bbr-ideal": ({"cc": ["bbr"], "loss_percent": [1]}, goodput(lambda c: 86.1), goodput(lambda c: 85.9), None),
    "cubic-tenfold": ({"cc": ["cubic"], "loss_percent": [0.001, 0.1]},  # 100 Mbit/s x 100 ms: the paper's BDP
                      goodput(lambda c: 90.0 if c.params.loss < 1e-4 else 8.9),
                      goodput(lambda c: 90.0 if c.params.loss < 1e-4 else 9.1), None),
    "mathis": ({"cc": ["reno"], "loss_percent": [1]},
               goodput(lambda c: 1.9 * MATHIS_1PCT, rtt_mean_ms=100), goodput(lambda c: 2.1 * MATHIS_1PCT,
                                                                              rtt_mean_ms=100), None),
    "bbr-step": ({"cc": ["bbr"], "loss_percent": [0], "rate_schedule": [{"at_s": 10, "factor": 2}],
                  "repetitions": 1},  # judged per run
                 goodput(lambda c: 90.0), goodput(lambda c: 90.0), bbr_estimate),
    # 10 BDP at 100 Mbit/s drains in 1000 ms: both bounds are 100 + 500 ms.
    "bbr-low-delay": ({"cc": ["bbr"], "loss_percent": [0], "queue": [{"kind": "droptail", "bdp": 10}]},
                      goodput(lambda c: 90.0, rtt_p50_ms=590), goodput(lambda c: 90.0, rtt_p50_ms=610), None),
    "cubic-fills-buffer": ({"cc": ["cubic"], "loss_percent": [0], "queue": [{"kind": "droptail", "bdp": 10}]},
                           goodput(lambda c: 90.0, rtt_p95_ms=610), goodput(lambda c: 90.0, rtt_p95_ms=590), None),
    # CUBIC at half of BBR's goodput or less: 45 of 90 passes, 46 does not.
    "rebbr-short-rtt": ({"cc": ["bbr", "cubic"], "loss_percent": [1], "rtt_ms": [2]},
                        goodput(lambda c: 90.0 if c.params.cc_label == "bbr" else 45.0),
                        goodput(lambda c: 90.0 if c.params.cc_label == "bbr" else 46.0), None),
    # BBR from 95 Mbit/s without loss: 86 at 1 % is -9.5 %, 85 is -10.5 %.
    "thousandeyes-1pct": ({"cc": ["bbr"], "loss_percent": [0, 1]},
                          goodput(lambda c: 95.0 if c.params.loss == 0 else 86.0),
                          goodput(lambda c: 95.0 if c.params.loss == 0 else 85.0), None),
    "shallow-loss": (SHALLOW_BELOW, goodput(lambda c: 20.0), goodput(lambda c: 20.0), shallow),
}


def test_every_claim_has_a_case():
    assert set(CASES) == {c.id for c in CLAIMS}


@pytest.mark.parametrize("claim_id", sorted(CASES))
def test_claim_passes_and_fails(claim_id: str):
    exp, passing, failing, series = CASES[claim_id]
    assert verdicts(claim_id, experiment(exp, passing, series and series(True))) == [True]
    assert verdicts(claim_id, experiment(exp, failing, series and series(False))) == [False]


def test_a_claim_straddled_by_its_interval_is_not_settled():
    """BBR at 1 % loss (bound 89.1 Mbit/s) with runs on both sides: neither passed nor failed, with the numbers."""
    runs = [95.0, 60.0, 94.0, 58.0, 96.0, 61.0]
    data = experiment({"cc": ["bbr"], "loss_percent": [1], "repetitions": 6},
                      goodput(lambda c: runs[c.params.repetition]))
    (verdict,) = CLAIMS[0].evaluate(data)
    assert verdict.ok is None and verdict.word == "not settled"
    assert "95 % bootstrap CI of the median, n = 6, interval [" in verdict.detail
    # One run has no interval: not settled either, however far from the bound it lies.
    one = experiment({"cc": ["bbr"], "loss_percent": [1], "repetitions": 1}, goodput(lambda c: 99.0))
    assert [v.ok for v in CLAIMS[0].evaluate(one)] == [None]


@pytest.mark.parametrize(("claim_id", "exp"), [
    ("bbr-ideal", {"cc": ["bbr"], "loss_percent": [10]}),  # the paper's claim stops at 5 %
    ("bbr-ideal", {"cc": ["cubic"], "loss_percent": [1]}),
    ("cubic-tenfold", {"cc": ["cubic"], "loss_percent": [0.001, 0.1], "bandwidth_mbps": [10]}),  # BDP too small
    ("mathis", {"cc": ["cubic"], "loss_percent": [0.1]}),  # below 1 %
    ("bbr-low-delay", {"cc": ["bbr"], "loss_percent": [0], "queue": [{"kind": "droptail", "bdp": 2}]}),  # not deep
    ("rebbr-short-rtt", {"cc": ["bbr", "cubic"], "loss_percent": [1], "rtt_ms": [10]}),  # not ReBBR's 2 ms
    ("rebbr-short-rtt", {"cc": ["cubic"], "loss_percent": [1], "rtt_ms": [2]}),  # no BBR to compare with
    ("thousandeyes-1pct", {"cc": ["bbr"], "loss_percent": [1, 2]}),  # no loss-free baseline
    ("shallow-loss", {**SHALLOW_BELOW, "cc": ["cubic"]}),  # CUBIC flows
    ("shallow-loss", {**SHALLOW_BELOW, "flows": 1}),  # one flow
    ("shallow-loss", {**SHALLOW_BELOW, "queue": [{"kind": "droptail", "bdp": 1.5}]}),  # the edge itself
])
def test_claims_ignore_cells_outside_their_scope(claim_id: str, exp: dict[str, Any]):
    assert verdicts(claim_id, experiment(exp, goodput(lambda c: 1.0, rtt_p50_ms=1e4))) == []


def test_thousandeyes_asks_cubic_to_fall_by_more_than_70_percent():
    exp = {"cc": ["cubic"], "loss_percent": [0, 1]}
    assert verdicts("thousandeyes-1pct", experiment(exp, goodput(lambda c: 100.0 if c.params.loss == 0 else 29.0))) \
        == [True]
    assert verdicts("thousandeyes-1pct", experiment(exp, goodput(lambda c: 100.0 if c.params.loss == 0 else 31.0))) \
        == [False]


def test_shallow_loss_asks_deep_buffers_for_low_loss_after_start_up():
    deep = {**SHALLOW_BELOW, "queue": [{"kind": "droptail", "bdp": 3}]}
    assert verdicts("shallow-loss", experiment(deep, goodput(lambda c: 20.0), steady_loss(0.4))) == [True]
    assert verdicts("shallow-loss", experiment(deep, goodput(lambda c: 20.0), steady_loss(0.6))) == [False]
    # Start-up's losses are left out: 20 % in the first 5 s and none after is low loss.
    assert verdicts("shallow-loss", experiment(deep, goodput(lambda c: 20.0), steady_loss(0.0, 20.0))) == [True]


def test_claims_name_their_source_and_their_numbers():
    for claim_id, (exp, passing, _, series) in CASES.items():
        (claim,) = [c for c in CLAIMS if c.id == claim_id]
        assert claim.source and claim.scope
        for verdict in claim.evaluate(experiment(exp, passing, series and series(True))):
            assert any(ch.isdigit() for ch in verdict.detail), (claim_id, verdict.detail)


def test_run_checks_rows_are_per_claim_and_experiment():
    exp = CASES["bbr-ideal"][0]
    data = experiment({**exp, "loss_percent": [1, 5]}, goodput(lambda c: 95.0 if c.params.loss < 0.02 else 80.0))
    manifest = SweepManifest(name="s", spec={}, cells=[], created_at="now", ccsweep_version="0")
    (row,) = run_checks(SweepData(manifest=manifest, description="", experiments=[data], failures=[]))
    assert isinstance(row, CheckRow) and row.claim.id == "bbr-ideal" and row.experiment == "e"
    assert (row.passed, len(row.verdicts), row.status) == (1, 2, "fail")  # 80 < 0.9 x 0.95 x 100 x 1448/1500


def test_mathis_is_capped_at_the_links_payload_rate():
    assert MATHIS_1PCT == pytest.approx(1448 * 8 / 0.1 * 1.22 / 0.1 / 1e6)
    assert mathis_mbps(1, 0.01, 10) == pytest.approx(1448 / 1500 * 0.99 * 10)


def test_median_ci_is_a_seeded_bootstrap_interval_that_says_what_it_is():
    runs = [43.0, 1.9, 42.6, 2.4, 41.8, 43.5, 3.3, 42.1, 40.9, 2.2, 42.8, 41.1]  # two modes
    first = median_ci(runs)
    assert first == median_ci(runs)  # the same runs, the same interval: the generator is seeded
    assert first.center == pytest.approx(41.45) and first.low is not None and first.high is not None
    assert first.low < 41.45 < first.high <= 43.5
    assert first.label == "95 % bootstrap CI of the median, n = 12"
    assert median_ci([5.0]).label == "median of 1 run, no interval" and median_ci([5.0]).low is None
    calm = median_ci([95.0] * 4)
    assert (calm.low, calm.high, calm.relative_half_width) == (95.0, 95.0, 0.0)
    assert collapsed_fraction(runs, 100.0) == pytest.approx(4 / 12)  # below 5 % of 100 Mbit/s
    assert collapsed_fraction(runs, None) is None


def test_mean_ci_is_the_t_interval():
    mean, half = mean_ci([1.0, 2.0, 3.0])  # sample sd 1, n 3, t(0.975, 2) = 4.303
    assert mean == 2.0
    assert half == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)
    assert mean_ci([5.0]) == (5.0, None)
    with pytest.raises(ValueError):
        mean_ci([])
    means, halves = mean_ci_columns(np.array([[1.0, 10.0], [3.0, 10.0]]))
    np.testing.assert_allclose(means, [2.0, 10.0])
    np.testing.assert_allclose(halves, [12.706205, 0.0], rtol=1e-6)  # sd sqrt(2) over sqrt(2) runs
    assert mean_ci_columns(np.array([[1.0, 2.0]]))[1] is None
