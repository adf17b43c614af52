"""Links other than a constant rate: a Mahimahi trace (cellular) and a step in the bottleneck rate.

The step cell checks the BBR paper's claim that BBR follows a 2x increase and a 2x decrease of
the bottleneck rate within about 2 seconds, and with it that the generated schedule starts with
the flows (a misaligned schedule would shift the plateaus by the setup time).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from ccsweep.store import open_store

BASE_MBPS = 20
STEP = {"name": "step", "experiments": [{
    "name": "step", "cc": ["bbr"], "loss_percent": [0], "rtt_ms": [40], "bandwidth_mbps": [BASE_MBPS],
    "rate_schedule": [{"at_s": 4, "factor": 2}, {"at_s": 8, "factor": 0.5}], "duration_s": 12, "warmup_s": 1,
    # A 1-BDP queue, as ReBBR's: with an infinite one the RTT grows ~9x after the halving and BBR's
    # 10-round bandwidth filter takes ~4 s to forget the old rate (measured: 3.8 s at 40 ms).
    "queue": [{"kind": "droptail", "bdp": 1, "min_bytes": 30000}]}]}
CELLULAR = {"name": "cellular", "experiments": [{
    "name": "cellular", "cc": ["bbr"], "loss_percent": [0], "rtt_ms": [100], "duration_s": 12, "warmup_s": 3,
    "trace": [{"name": "verizon", "uplink": "Verizon-LTE-short.up", "downlink": "Verizon-LTE-short.down"}]}]}
#: Application bytes per IP byte of a full-sized segment (1448 of 1500).
PAYLOAD = 1448 / 1500


@pytest.fixture(scope="module")
def runs(cells):
    (step,) = cells.of(STEP)
    (cellular,) = cells.of(CELLULAR)
    with ThreadPoolExecutor(2) as pool:
        return dict(zip(["step", "cellular"], pool.map(cells.run, [step, cellular]), strict=True))


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def test_bbr_follows_a_doubling_and_a_halving_of_the_rate_within_2_seconds(runs, cells):
    run = runs["step"]
    assert run.returncode == 0, run.describe()
    per_s = run.result.flows[0].throughput_per_s_mbps
    series = open_store(str(cells.store)).get_timeseries(run.cell.id).flows[0]
    bbr_mbps = {round(t, 1): bw / 1e6 for t, bw in zip(series.t, series.bbr_bw_bps, strict=True)}
    message = f"per-second goodput {per_s}, BBR's estimate {[round(bbr_mbps[t], 1) for t in (3.5, 7.5, 11.5)]}; " \
              f"{run.describe()}"
    assert mean(per_s[2:4]) == pytest.approx(BASE_MBPS * PAYLOAD, rel=0.1), message
    assert mean(per_s[6:8]) == pytest.approx(2 * BASE_MBPS * PAYLOAD, rel=0.1), message
    # After the halving, goodput is capped by the link anyway (and jumps when loss recovery hands
    # over held data); what shows BBR followed is its own estimate (payload bytes per second).
    after_2_s = [bbr_mbps[round(10 + k / 10, 1)] for k in range(20)]
    assert mean(after_2_s) == pytest.approx(BASE_MBPS / 2 * PAYLOAD, rel=0.15), message
    # Capacity over the flow time: 4 s at each of 20, 40 and 10 Mbit/s (1504-byte opportunities).
    assert run.result.capacity_mbps == pytest.approx(70 / 3 * 1504 / 1500, rel=0.01), message


def test_a_trace_link_never_delivers_more_than_its_trace_offers(runs):
    run = runs["cellular"]
    assert run.returncode == 0, run.describe()
    result = run.result
    assert result.cell.params.uplink.trace.name == "Verizon-LTE-short.up"
    assert 0 < result.goodput_mbps <= result.capacity_mbps, run.describe()
    assert result.bottleneck_throughput_mbps <= result.capacity_mbps * 1.01, run.describe()
    # BBR uses most of what the trace offers once started (the trace varies between 2 and 9 Mbit/s).
    assert result.goodput_steady_mbps >= 0.6 * result.capacity_mbps * PAYLOAD, run.describe()
