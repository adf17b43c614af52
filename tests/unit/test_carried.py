"""A cell is priced at what its flows are expected to carry (ccsweep.carried), checked against the
rates the study through Argo measured (benchmarks/results/2026-11-30-argo-full)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from ccsweep.carried import expected_carried_mbps
from ccsweep.cell import BernoulliLoss, GilbertElliottLoss
from ccsweep.expand import expand
from ccsweep.specload import load_spec, parse_spec

REPO = Path(__file__).resolve().parents[2]
ARGO_FULL = REPO / "benchmarks/results/2026-11-30-argo-full/cells.csv"


def cells(**experiment: object) -> list:
    return expand(parse_spec({"name": "c", "experiments": [
        {"name": "c", "rtt_ms": [100], "bandwidth_mbps": [100], "duration_s": 20, **experiment}]}))


def test_bbr_keeps_the_link_rate_and_a_loss_based_flow_carries_little_at_high_loss():
    by_cc = {c.params.flows[0].cc: c for c in cells(cc=["bbr", "cubic", "reno"], loss_percent=[5])}
    assert expected_carried_mbps(by_cc["bbr"], 100.0) == 100.0
    assert expected_carried_mbps(by_cc["cubic"], 100.0) < 5.0
    assert expected_carried_mbps(by_cc["reno"], 100.0) == pytest.approx(expected_carried_mbps(by_cc["cubic"], 100.0))
    lossless = cells(cc=["cubic"], loss_percent=[0])[0]
    assert expected_carried_mbps(lossless, 100.0) == 100.0


def test_flows_add_up_to_at_most_the_link_rate():
    one, two, mixed = (cells(loss_percent=[1], mixes=[mix])[0] for mix in (
        [{"cc": "cubic"}], [{"cc": "cubic"}, {"cc": "cubic"}], [{"cc": "cubic"}, {"cc": "bbr"}]))
    assert expected_carried_mbps(two, 100.0) == pytest.approx(2 * expected_carried_mbps(one, 100.0))
    assert expected_carried_mbps(mixed, 100.0) == 100.0


def test_a_loss_event_is_a_run_of_losses_as_a_simulated_chain_counts_them():
    """The Gilbert-Elliott chain played packet by packet, as docs/emulator.md orders it (lose by the
    state found, then move): the share of losses after a delivered packet is the closed form's."""
    model = GilbertElliottLoss(p=0.004, r=0.25, one_minus_h=0.9, one_minus_k=0.001)
    rng = np.random.default_rng(7)
    packets = 2_000_000
    draws, moves = rng.random(packets), rng.random(packets)
    lost = np.empty(packets, dtype=bool)
    bad = False
    for i in range(packets):
        lost[i] = draws[i] < (model.one_minus_h if bad else model.one_minus_k)
        bad = moves[i] >= model.r if bad else moves[i] < model.p
    starts = np.count_nonzero(lost[1:] & ~lost[:-1]) / (packets - 1)
    assert starts == pytest.approx(model.loss_event_rate, rel=0.05)
    assert np.mean(lost) == pytest.approx(model.mean_loss_rate, rel=0.05)
    assert BernoulliLoss(p=0.1).loss_event_rate == pytest.approx(0.09)


def test_bursts_are_fewer_events_and_so_more_carried_at_the_same_mean_loss():
    burst1, burst8 = (cells(cc=["cubic"], gilbert_elliott=[{"mean_loss_percent": 1, "mean_burst_packets": burst}])[0]
                      for burst in (1, 8))
    events1, events8 = (c.params.uplink.loss_model.loss_event_rate for c in (burst1, burst8))
    assert events8 == pytest.approx(events1 / 8, rel=0.05)
    assert expected_carried_mbps(burst8, 100.0) > 2 * expected_carried_mbps(burst1, 100.0)


def test_no_loss_based_cell_of_the_study_carried_more_than_its_expected_rate():
    """The margin's claim, on the committed records: every CUBIC and Reno cell the study stored
    through Argo took no more Mbit/s through its bottleneck than it was priced at."""
    study = {c.id: c for c in expand(load_spec("full-sweep"))}
    with ARGO_FULL.open(newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["cc"] in ("cubic", "reno") and r["status"] == "ok"]
    assert len(rows) > 150
    checked = 0
    for row in rows:
        cell = study[row["cell_id"]]
        rate = cell.params.uplink.rate_mbps or 50.0
        expected = expected_carried_mbps(cell, rate)
        assert float(row["bottleneck_throughput_mbps"]) <= expected * 1.02, (row["cell_id"], row["loss"], expected)
        checked += expected < rate
    assert checked > 100, "the bound held most cells below their link's rate"
