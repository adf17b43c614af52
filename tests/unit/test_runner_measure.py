"""Cell measurements on small synthetic runs: goodput windows, link logs, tcp_info structs."""

import struct

import pytest

from ccsweep.runner.measure import (
    bytes_between,
    flow_goodput,
    limited_fraction,
    link_log_totals,
    per_second_mbps,
    rtt_stats,
)
from ccsweep.runner.tcpinfo import TCP_INFO_BYTES, parse_bbr_info, parse_tcp_info

# A flow receiving exactly 1.25 MB per second (10 Mbit/s), sampled every 100 ms for 4 s.
T = [round(k * 0.1, 1) for k in range(41)]
CUM = [125_000 * k for k in range(41)]


def test_bytes_between_interpolates_off_the_sample_grid():
    assert bytes_between(T, CUM, 1.0, 2.0) == pytest.approx(1_250_000)
    assert bytes_between(T, CUM, 0.05, 0.15) == pytest.approx(125_000)
    assert bytes_between(T, CUM, 2.0, 2.0) == 0
    assert bytes_between([], [], 0, 1) == 0


def test_per_second_throughput_covers_whole_seconds_only():
    assert per_second_mbps(T, CUM, 0.5, 4.0) == [10.0, 10.0, 10.0]


def test_flow_goodput_skips_the_cells_warmup_for_the_steady_value():
    # Nothing for the first second, then 10 Mbit/s: goodput 7.5 over 4 s, steady (from 1 s) 10.
    cum = [0] * 11 + [125_000 * k for k in range(1, 31)]
    result = flow_goodput(T, cum, start_s=0, duration_s=4, warmup_s=1)
    assert result.goodput_mbps == pytest.approx(7.5)
    assert result.goodput_steady_mbps == pytest.approx(10.0)
    assert result.bytes_received == 3_750_000
    assert result.throughput_per_s_mbps == [0.0, 10.0, 10.0, 10.0]


def test_a_late_flow_is_measured_over_its_own_time():
    cum = [0] * 21 + [125_000 * k for k in range(1, 21)]  # starts at 2 s
    result = flow_goodput(T, cum, start_s=2, duration_s=4, warmup_s=1)
    assert result.goodput_mbps == pytest.approx(10.0)
    assert result.goodput_steady_mbps == pytest.approx(10.0)
    assert len(result.throughput_per_s_mbps) == 2


LOG = """# mahimahi mm-link (uplink) [100 Mbit/s] > uplink.log
# init timestamp: 1700000000000
# base timestamp: 0
0 # 1504
1 + 1500
1 # 1504
1 - 1500 0
2 + 1500
2 d 1 1500
999 # 1504
1000 # 1504
1000 + 100
1000 - 100 0
"""


def test_link_log_totals_count_each_kind_of_line_in_the_window():
    totals = link_log_totals(LOG.splitlines(), 0, 1000)
    assert (totals.arrival_bytes, totals.departure_bytes, totals.capacity_bytes, totals.drop_bytes) == \
        (3000, 1500, 3 * 1504, 1500)
    assert totals.bottleneck_throughput_mbps == pytest.approx(1500 * 8 / 1e6)
    assert totals.capacity_mbps == pytest.approx(3 * 1504 * 8 / 1e6)
    later = link_log_totals(LOG.splitlines(), 1000, 2000)
    assert (later.departure_bytes, later.capacity_bytes) == (100, 1504)


def test_rtt_statistics_skip_samples_before_the_first_ack():
    stats = rtt_stats([0, 100_000, 100_000, 200_000])
    assert stats.mean_ms == pytest.approx(133.333, abs=1e-3)
    assert stats.p50_ms == 100.0
    assert rtt_stats([0, 0]).mean_ms is None


def test_limited_fraction():
    assert limited_fraction(250, 1000) == 0.25
    assert limited_fraction(5, 0) is None
    assert limited_fraction(None, 10) is None


def test_tcp_info_fields_are_read_at_the_kernels_offsets():
    data = bytearray(TCP_INFO_BYTES)
    struct.pack_into("=I", data, 68, 100_123)       # tcpi_rtt
    struct.pack_into("=I", data, 80, 850)           # tcpi_snd_cwnd
    struct.pack_into("=I", data, 100, 42)           # tcpi_total_retrans
    struct.pack_into("=Q", data, 104, 12_500_000)   # tcpi_pacing_rate
    struct.pack_into("=I", data, 148, 100_000)      # tcpi_min_rtt
    struct.pack_into("=Q", data, 160, 12_000_000)   # tcpi_delivery_rate
    struct.pack_into("=Q", data, 176, 7)            # tcpi_rwnd_limited
    info = parse_tcp_info(bytes(data))
    assert (info["rtt_us"], info["cwnd"], info["total_retrans"], info["pacing_rate"], info["min_rtt_us"],
            info["delivery_rate"], info["rwnd_limited_us"]) == (100_123, 850, 42, 12_500_000, 100_000, 12_000_000, 7)
    # An older kernel's shorter struct: the later fields are simply absent.
    assert "delivery_rate" not in parse_tcp_info(bytes(data[:104]))


def test_bbr_info_joins_the_bandwidth_halves_and_unshifts_the_gains():
    bw = 5 << 32 | 7
    info = parse_bbr_info(struct.pack("=5I", bw & 0xFFFFFFFF, bw >> 32, 100_000, 320, 512))
    assert info == {"bw": bw, "min_rtt_us": 100_000, "pacing_gain": 1.25, "cwnd_gain": 2.0}
    assert parse_bbr_info(b"\0" * 8) is None
