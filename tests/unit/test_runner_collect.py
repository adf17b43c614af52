"""From endpoint and emulator events to flow records, time series and live samples."""

import pytest

from ccsweep.cell import Cell, CellParams, DirectionParams, FlowParams
from ccsweep.runner.api import LiveSample
from ccsweep.runner.collect import cell_goodput, flow_result, flow_series, link_series, receiver_curves, samples_of
from ccsweep.runner.events import SenderSample
from ccsweep.runner.live import LiveFeed

PARAMS = CellParams(flows=(FlowParams(cc="bbr"), FlowParams(cc="cubic", start_s=1)),
                    uplink=DirectionParams(rate_mbps=20, delay_ms=10, loss=0),
                    downlink=DirectionParams(rate_mbps=20, delay_ms=10, loss=0), duration_s=3, warmup_s=1, seed=1)
CELL = Cell.build("s", "e", PARAMS)
# Flow 0 gets 1.25 MB/s (10 Mbit/s) from t=0, flow 1 the same from t=1.
RX = [{"event": "rx", "t": round(k * 0.1, 1), "bytes": [125_000 * k, max(0, 125_000 * (k - 10))]} for k in range(31)]
SAMPLES = [{"event": "sample", "t": round(k * 0.1, 1), "flow": 0, "rtt_us": 20_000 + 1000 * k, "min_rtt_us": 20_000,
            "cwnd": 10 + k, "pacing_rate": 1_250_000, "delivery_rate": 1_200_000, "total_retrans": k // 10,
            "bytes_acked": 125_000 * k, "busy_us": 1000 * k + 1, "rwnd_limited_us": 0, "sndbuf_limited_us": 0,
            "unacked": 20 + k, "sacked": 2, "lost": 1, "retrans": 1,
            "bbr": {"bw": 1_250_000, "min_rtt_us": 20_000, "pacing_gain": 1.25, "cwnd_gain": 2.0}}
           for k in range(31)]


def test_flow_records_from_receiver_counts_and_sender_samples():
    curves = receiver_curves(RX, 2)
    first = flow_result(0, PARAMS, samples_of(SAMPLES, 0), curves)
    assert first.goodput_mbps == pytest.approx(10.0) and first.bytes_received == 3_750_000
    assert first.retransmits == 3 and first.min_rtt_ms == 20.0
    assert first.rtt_p50_ms == pytest.approx(35.0)
    assert first.rwnd_limited_fraction == 0.0
    second = flow_result(1, PARAMS, samples_of(SAMPLES, 1), curves)
    assert second.goodput_mbps == pytest.approx(10.0) and second.throughput_per_s_mbps == [10.0, 10.0]
    assert second.retransmits == 0 and second.rtt_mean_ms is None
    assert cell_goodput(PARAMS, curves) == pytest.approx((50 / 3, 20.0), abs=1e-4)


def test_series_convert_rates_to_bits_and_keep_bbrs_estimate():
    series = flow_series(samples_of(SAMPLES, 0), [0.0, 0.1], [0, 125_000])
    assert series.pacing_rate_bps[0] == 10_000_000
    assert series.bbr_bw_bps[0] == 10_000_000
    # BBR's gains as TCP_CC_INFO gave them (tcpinfo.parse_bbr_info has already unshifted them).
    assert (series.bbr_pacing_gain[0], series.bbr_cwnd_gain[0]) == (1.25, 2.0)
    # Packets in flight as tcp_packets_in_flight counts them: unacked - sacked - lost + retrans.
    assert series.inflight[:2] == [18, 19]
    bare = flow_series([SenderSample(t=0.0, flow=0, rtt_us=5)], [], [])
    assert bare.bbr_bw_bps is None and bare.bbr_pacing_gain is None and bare.inflight is None


def test_a_sample_from_an_older_kernel_has_no_limit_counters():
    sample = SenderSample.from_event({"event": "sample", "t": 0.5, "flow": 1, "rtt_us": 900, "pacing_rate": 10})
    assert (sample.flow, sample.rtt_us, sample.pacing_rate, sample.cwnd) == (1, 900, 10, 0)
    assert sample.busy_us is None and sample.bbr is None
    assert flow_result(0, PARAMS, [sample], receiver_curves(RX, 2)).rwnd_limited_fraction is None


def test_link_series_is_put_on_the_flows_clock():
    stats = [{"event": "stats", "t": 0.1 * k, "uplink": {"queue_bytes": k, "drops_loss": k}, "lateness_us": {"p99": 9}}
             for k in range(1, 4)]
    series = link_series(stats, offset_s=0.2)
    assert series.t == pytest.approx([-0.1, 0.0, 0.1])
    assert series.uplink_queue_bytes == [1, 2, 3]
    assert link_series([], 0) is None


class Recorder:
    """A CellObserver that keeps what it is given (the metrics push is tested with real services)."""

    def __init__(self):
        self.samples: list[LiveSample] = []

    def on_sample(self, cell, sample):
        self.samples.append(sample)


def test_live_feed_gives_one_sample_per_second_of_flow_time():
    recorder = Recorder()
    feed = LiveFeed(CELL, recorder)
    feed.on_link({"event": "stats", "t": 1.0, "uplink": {"queue_bytes": 3000, "drops_loss": 2},
                  "lateness_us": {"p99": 12.0}})
    for event in RX[:25]:
        feed.on_receiver(event)
    feed.on_sender(SAMPLES[20])
    feed.tick()
    assert [s.t for s in recorder.samples] == [1.0, 2.0]
    second = recorder.samples[1]
    assert second.goodput_mbps == pytest.approx(20.0)
    assert [f.goodput_mbps for f in second.flows] == [pytest.approx(10.0)]
    assert second.queue_bytes == 3000 and second.lateness_p99_us == 12.0
    for event in RX[25:]:
        feed.on_receiver(event)
    feed.tick()
    assert [s.t for s in recorder.samples] == [1.0, 2.0, 3.0]


def test_a_failing_observer_does_not_fail_the_cell(capsys):
    class Broken:
        def on_sample(self, cell, sample):
            raise ConnectionError("pushgateway down")

    feed = LiveFeed(CELL, Broken())
    for event in RX:
        feed.on_receiver(event)
    feed.tick()
    feed.tick()
    assert capsys.readouterr().err.count("pushgateway down") == 1
