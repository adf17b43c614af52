"""ccsweep-link against real TUN devices and the kernel's own TCP, in namespaces the test owns.

Rates are measured at the receiver's device (kernel counters), not from the emulator's own
bookkeeping, so a wrong schedule cannot confirm itself.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from emulator_harness import TRACES, link_binary, namespace_tag, netns_names, stop, udp_flood

pytestmark = pytest.mark.integration

# z for a two-sided 99.9% interval.
Z999 = 3.29
# Mahimahi's accounting: a 1500-byte IP packet plus its 4-byte TUN header fills one opportunity,
# and a link of R bit/s offers R / 12000 such opportunities per second.
OPPORTUNITY_BYTES = 1504
OPPORTUNITY_IP_BITS = 12_000


def needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces and TUN devices")


def delivered_rate(link, seconds: float) -> float:
    """IP bit rate into the receiver's device over `seconds`, from kernel counters."""
    t1, b1, _ = link.device_counters(link.receiver)
    time.sleep(seconds)
    t2, b2, _ = link.device_counters(link.receiver)
    return (b2 - b1) * 8 / (t2 - t1)


@pytest.mark.parametrize("rate_mbit", [10, 100])
def test_delivered_rate_within_one_percent(link, rate_mbit):
    # Offer 1.3x the rate so the 500-packet queue never empties; measure 4 s after 1 s of fill.
    with link("--uplink-rate", f"{rate_mbit}mbit", "--downlink-rate", f"{rate_mbit}mbit",
              "--uplink-queue", "droptail packets=500") as emu:
        with udp_flood(emu, rate_mbit * 1.3e6, 6):
            time.sleep(1)
            measured = delivered_rate(emu, 4)
    assert measured == pytest.approx(rate_mbit * 1e6, rel=0.01), f"{measured / 1e6:.3f} Mbit/s"
    assert emu.summary["uplink"]["drops_queue"] > 0, "the link was not saturated"


def test_min_rtt_is_twice_the_one_way_delay(link):
    with link("--uplink-rate", "100mbit", "--downlink-rate", "100mbit",
              "--uplink-delay", "12.5ms", "--downlink-delay", "12.5ms") as emu:
        out = emu.run_in(emu.sender, "ping", "-c", "40", "-i", "0.05", "-n", "10.0.0.2").stdout
    min_rtt = float(re.search(r"= ([\d.]+)/", out).group(1))
    # 84-byte pings serialise in 7 us per direction; the rest is scheduling. Each ping needs two
    # releases after 12.5 ms sleeps, and this VM's timer fires 50-200 us late after such sleeps,
    # so two late releases alone can exceed 0.3 ms (25.33 ms was seen). The emulator wakes early
    # by the latency it observes and spins the rest (within 2% of the sleep, here up to 250 us),
    # so the releases are punctual without --spin. What remains is ping's own path (about 45 us,
    # measured with the emulator spinning throughout) and the one wake-up for reading the
    # request, which nothing can foresee: 25.10-25.14 ms on this machine.
    assert 25.0 <= min_rtt <= 25.3, out


def test_uniform_jitter_spreads_the_rtt_over_the_delay_plus_minus_jitter(link):
    """20 ms each way, the uplink's varied by 5 ms of uniform jitter: ping's RTTs spread evenly over
    40 ± 5 ms. Quartiles of U[35, 45] are 37.5, 40 and 42.5 ms; with 300 pings each sample quartile
    is within 0.9 ms of its own with 99.7 % (3 standard errors of 0.29 ms), plus up to 0.3 ms of
    scheduling (test_min_rtt_is_twice_the_one_way_delay). No maximum is asserted: a loaded machine
    makes a single release late by more than a millisecond (46.6 ms was seen beside 7 cells)."""
    with link("--uplink-rate", "100mbit", "--downlink-rate", "100mbit", "--uplink-delay", "20ms",
              "--downlink-delay", "20ms", "--uplink-jitter", "5ms", "uniform", "reorder") as emu:
        out = emu.run_in(emu.sender, "ping", "-c", "300", "-i", "0.01", "-n", "10.0.0.2").stdout
    rtts = sorted(float(m) for m in re.findall(r"time=([\d.]+) ms", out))
    assert len(rtts) == 300, out[-300:]
    assert rtts[0] >= 35.0, rtts[:5]  # lateness only adds: nothing leaves before D - J
    quartiles = statistics.quantiles(rtts, n=4)
    for measured, expected in zip(quartiles, (37.5, 40.0, 42.5), strict=True):
        assert expected - 0.9 <= measured <= expected + 1.2, (quartiles, emu.summary["uplink"].get("lateness"))
    assert emu.summary["config"]["uplink"]["jitter"] == {"jitter_us": 5000.0, "distribution": "uniform",
                                                         "order": "reorder"}


def test_a_delay_trace_steps_the_rtt_and_holds_order_when_the_delay_falls(link, tmp_path):
    """10 ms each way, the uplink's 110 ms from 1 s after the link's start and 10 ms again from 2 s
    (the trace's clock is the link's, from its ready line): ping every 20 ms reads 20 ms of RTT,
    then 120, then 20. Each ping is placed on that clock by its reply's time stamp less its RTT
    (the ready line is read within a few ms of the clock's start; 100 ms around each step are left
    out). A window's median is within 1 ms above its delays' sum (test_min_rtt_is_twice_the_one_way_delay
    sees 0.1-0.3 ms of scheduling) and nothing is early. When the delay falls, the requests sent
    up to 100 ms after the last slow one would be due before it: they wait for it in the FIFO, and
    those sent within 90 ms after it (pings leave 20-30 ms apart here: at least two) have their
    replies right after its reply. A model that let them overtake would give 20 ms RTTs and
    replies out of order; one without the trace, 20 ms throughout."""
    trace = tmp_path / "delay.trace"
    trace.write_text("# ms since the link started, one-way delay in ms\n1000 110\n2000 10\n")
    with link("--uplink-rate", "100mbit", "--downlink-rate", "100mbit", "--uplink-delay", "10ms",
              "--downlink-delay", "10ms", "--uplink-delay-trace", str(trace)) as emu:
        started = time.time()
        out = emu.run_in(emu.sender, "ping", "-D", "-c", "140", "-i", "0.02", "-n", "10.0.0.2").stdout
    pings = [(int(seq), float(at) - started, float(rtt) / 1000) for at, seq, rtt in
             re.findall(r"\[([\d.]+)\] .*icmp_seq=(\d+) .*time=([\d.]+) ms", out)]
    assert len(pings) == 140, out[-300:]
    assert [seq for seq, _, _ in pings] == sorted(seq for seq, _, _ in pings), "replies in the order sent"
    sent = [(at - rtt, rtt * 1000) for _, at, rtt in pings]
    for start, end, expected in ((0.0, 0.9, 20.0), (1.1, 1.9, 120.0), (2.1, 9.0, 20.0)):
        rtts = [rtt for at, rtt in sent if start < at < end]
        assert len(rtts) >= 20 and min(rtts) >= expected - 0.05, (start, rtts[:5])
        assert expected <= statistics.median(rtts) <= expected + 1.0, (start, statistics.quantiles(rtts, n=4))
    # The last request sent at 110 ms (at s0) is due at s0 + 110; the ones sent up to s0 + 100 would
    # be due sooner and wait for it: those sent within 90 ms after it leave with it.
    last_slow = max(i for i, (at, rtt) in enumerate(sent) if at < 2.05 and rtt >= 119.5)
    held = [i for i, (at, _) in enumerate(sent) if sent[last_slow][0] < at < sent[last_slow][0] + 0.09]
    assert len(held) >= 2 and sent[last_slow][0] > 1.95, sent[last_slow:last_slow + 6]
    for i in held:  # each reply right after the last slow one's
        assert 0 <= pings[i][1] - pings[last_slow][1] < 0.001, (pings[last_slow], pings[i])
    assert emu.summary["config"]["uplink"]["delay_trace"] == {"path": str(trace), "steps": 2, "min_delay_us": 10000.0,
                                                              "max_delay_us": 110000.0}


def test_slots_hold_each_reply_until_a_slot_opens(link):
    """20 ms each way, the downlink released in slots 2-8 ms apart: a reply waits for the next
    opening, so ping's RTTs spread over 40 to 48 ms instead of sitting at 40. A reply due at a
    random time waits the renewal process's residual gap, E[G^2] / 2E[G] = 2.8 ms on average for
    gaps uniform on [2, 8] ms (the median a little less), and ping, which sends just after a reply
    arrives (just after an opening), sees the same. A slot every 5 ms exactly would lock ping's
    phase: every reply would wait nearly 5 ms."""
    with link("--uplink-rate", "100mbit", "--downlink-rate", "100mbit", "--uplink-delay", "20ms",
              "--downlink-delay", "20ms", "--downlink-slot", "2ms", "8ms", "0", "0") as emu:
        out = emu.run_in(emu.sender, "ping", "-c", "300", "-i", "0.01", "-n", "10.0.0.2").stdout
    rtts = sorted(float(m) for m in re.findall(r"time=([\d.]+) ms", out))
    assert len(rtts) == 300, out[-300:]
    assert rtts[0] >= 40.0, rtts[:5]  # nothing leaves before its delay
    q1, median, q3 = statistics.quantiles(rtts, n=4)
    assert 41.0 <= median <= 44.0 and q3 - q1 >= 1.5, (q1, median, q3)
    assert emu.summary["config"]["downlink"]["slot"] == {"min_us": 2000.0, "max_us": 8000.0, "packets": 0, "bytes": 0}


@pytest.mark.parametrize("loss", [0.01, 0.10, 0.50])
def test_loss_within_binomial_interval(link, loss):
    sent_packets = 20_000
    with link("--uplink-rate", "1gbit", "--downlink-rate", "1gbit", "--uplink-loss", str(loss),
              "--seed", "7") as emu:
        # 20,000 small datagrams at 40 Mbit/s: well below the link rate, so only loss drops them.
        with udp_flood(emu, 40e6, 3.0, payload=472) as flood:
            sent = int(flood.stdout.readline())
        time.sleep(0.2)
        _, _, received = emu.device_counters(emu.receiver)
    assert sent >= sent_packets * 0.9
    arrived = emu.summary["uplink"]["in_packets"]
    lost = emu.summary["uplink"]["drops_loss"]
    assert arrived - lost == received, "every packet not lost reached the receiver"
    half_width = Z999 * math.sqrt(loss * (1 - loss) / arrived)
    assert abs(lost / arrived - loss) <= half_width, f"{lost}/{arrived} lost at p={loss}"


def test_a_policer_passes_its_rate_and_drops_the_rest_without_queueing(link):
    """A 10 Mbit/s policer with a 15 kB bucket on a 100 Mbit/s link, offered 20 Mbit/s: what passes
    is its rate (a token bucket's long-run rate), the rest is dropped by the policer, and the queue
    behind it never holds more than the bucket let through at once."""
    rate, burst = 10e6, 15000
    with link("--uplink-rate", "100mbit", "--downlink-rate", "100mbit",
              "--uplink-policer", "10mbit", str(burst)) as emu:
        with udp_flood(emu, 2 * rate, 4):
            time.sleep(1)
            measured = delivered_rate(emu, 2)
    up = emu.summary["uplink"]
    assert measured == pytest.approx(rate, rel=0.02), f"{measured / 1e6:.3f} Mbit/s"
    # Offered twice the rate: about half is dropped, all of it by the policer.
    assert up["drops_policer"] == pytest.approx(up["in_packets"] / 2, rel=0.1), up
    assert up["drops_queue"] == 0 and up["drops_loss"] == 0
    assert up["queue_bytes_max"] <= burst + OPPORTUNITY_BYTES, up
    assert emu.summary["order"] == "policer>queue>bottleneck>loss>delay"
    assert emu.summary["config"]["uplink"]["policer"] == {"rate_bps": rate, "burst_bytes": burst}


def test_same_seed_same_losses(link):
    def lost(seed: str) -> int:
        with link("--uplink-rate", "1gbit", "--downlink-rate", "1gbit", "--uplink-loss", "0.3",
                  "--loss-position", "before", "--seed", seed) as emu:
            emu.run_in(emu.sender, "ping", "-c", "200", "-i", "0.002", "-W", "0.2", "-n", "10.0.0.2")
        return emu.summary["uplink"]["drops_loss"]

    assert lost("3") == lost("3")


@pytest.mark.parametrize("queue,limit_key,limit", [
    ("droptail packets=40", "packets", 40),
    ("droptail bytes=30000", "bytes", 30000),
])
def test_droptail_never_exceeds_its_limit(link, queue, limit_key, limit):
    rate = 10e6
    delay_ms = 5
    with link("--uplink-rate", "10mbit", "--downlink-rate", "10mbit", "--uplink-queue", queue,
              "--uplink-delay", f"{delay_ms}ms", "--downlink-delay", f"{delay_ms}ms") as emu:
        with udp_flood(emu, 2 * rate, 4):
            time.sleep(0.5)
            ping = emu.run_in(emu.sender, "ping", "-c", "30", "-i", "0.1", "-n", "10.0.0.2").stdout
    up = emu.summary["uplink"]
    assert up["drops_queue"] > 0, "the queue never filled"
    # The emulator's running maxima over every enqueue (not 100 ms samples). Fed at twice its
    # rate, the queue reaches its limit: exactly 40 packets, or within one 1504-byte packet of
    # 30000 bytes (ping packets of 88 bytes may fill part of that last gap).
    if limit_key == "packets":
        assert up["queue_packets_max"] == limit, up
        queue_bytes = limit * OPPORTUNITY_BYTES
    else:
        assert limit - OPPORTUNITY_BYTES < up["queue_bytes_max"] <= limit, up
        queue_bytes = limit
    # The live stats lines carry the same running maximum, never decreasing.
    live = [line["uplink"][f"queue_{limit_key}_max"] for line in emu.stats()]
    assert live == sorted(live) and live[-1] <= up[f"queue_{limit_key}_max"], live
    # Seen from outside: the typical ping waited no longer than a full queue plus one packet in
    # service (24-50 ms here), with 10 ms for scheduling on a loaded machine. A single reply may
    # be later: on CI one of 30 read 47 ms and the next 17 ms, a 14 ms stall of the machine, not
    # of the queue. Every reply stays within 100 ms: an unbounded queue fed at twice its rate
    # grows by 500 ms each second, so it would read seconds.
    rtts = sorted(float(ms) for ms in re.findall(r"time=([\d.]+) ms", ping))
    if not rtts:
        # Every ping met a full queue: the flood refills it between departures, and a full make
        # test once lost all 30. The emulator's own maxima above are then the whole check.
        assert " 0 received" in ping, ping
        return
    service_ms = (queue_bytes + OPPORTUNITY_BYTES) / OPPORTUNITY_BYTES * OPPORTUNITY_IP_BITS / rate * 1e3
    assert statistics.median(rtts) <= 2 * delay_ms + service_ms + 10, ping
    assert rtts[-1] <= 100, ping


def trace_opportunities(path, start_s: float, end_s: float) -> int:
    """Delivery opportunities of a repeating Mahimahi trace between two times (seconds)."""
    stamps = [int(line) for line in path.read_text().split()]
    period = stamps[-1]
    count = 0
    for rep in range(int(start_s * 1000 // period), int(end_s * 1000 // period) + 1):
        count += sum(1 for s in stamps if start_s * 1000 <= rep * period + s < end_s * 1000)
    return count


def test_trace_replay_delivers_its_capacity(link):
    trace = TRACES / "Verizon-LTE-short.up"
    # Saturate a 15 s window of the trace: the link must deliver exactly its opportunities'
    # bytes (1504 each, counting Mahimahi's 4-byte header per packet).
    with link("--uplink-trace", str(trace), "--downlink-rate", "100mbit",
              "--uplink-queue", "droptail packets=3000") as emu:
        started = time.monotonic()
        with udp_flood(emu, 40e6, 19):
            time.sleep(2)
            t1, b1, p1 = emu.device_counters(emu.receiver)
            time.sleep(15)
            t2, b2, p2 = emu.device_counters(emu.receiver)
    delivered = (b2 - b1) + 4 * (p2 - p1)
    capacity = 1504 * trace_opportunities(trace, t1 - started, t2 - started)
    assert delivered == pytest.approx(capacity, rel=0.02), f"{delivered} of {capacity} bytes"


def iperf3_receiver_intervals(link, cc: str, seconds: int) -> list[dict]:
    """Per-second receiver-side reports (`start`, `end`, `bytes` of application data, seconds
    since the receiver's first byte) of one iperf3 TCP flow with congestion control `cc`.

    Socket buffers as ReBBR's (6.5 MB, 5x the 1.25 MB BDP of 100 Mbit/s x 100 ms), so neither
    window limits the flow.
    """
    for netns in (link.sender, link.receiver):
        link.run_in(netns, "sysctl", "-qw", "net.ipv4.tcp_rmem=4096 87380 6553600",
                    "net.ipv4.tcp_wmem=4096 65536 6553600", check=True)
    # The server reports in JSON so that the client can hand its reports back (--get-server-output).
    server = link.spawn_in(link.receiver, "iperf3", "-s", "-1", "-J", "-B", "10.0.0.2")
    try:
        time.sleep(0.5)
        client = link.run_in(link.sender, "iperf3", "-c", "10.0.0.2", "-t", str(seconds), "-C", cc, "-J",
                             "--get-server-output")
        result = json.loads(client.stdout)
        assert "error" not in result, result.get("error")
        return [interval["sum"] for interval in result["server_output_json"]["intervals"]]
    finally:
        stop(server)


def mean_goodput(intervals: list[dict], from_s: float = 0.0) -> float:
    """Application bit/s over the reports that start at or after `from_s`."""
    kept = [i for i in intervals if i["start"] >= from_s - 0.01]
    return sum(i["bytes"] for i in kept) * 8 / sum(i["end"] - i["start"] for i in kept)


BDP_LINK = ("--uplink-rate", "100mbit", "--downlink-rate", "100mbit", "--uplink-delay", "50ms",
            "--downlink-delay", "50ms", "--uplink-queue", "droptail bytes=1250000", "--seed", "1")


#: Attempts of the BBR flow: a working link reaches 90 Mbit/s in most (9 of 11 alone on the 2-vCPU
#: test guest, 2026-11-30, the two short ones with the link's p99 lateness at 3.8 and 9.3 ms); a
#: link 7 % slow reaches it in none (its ceiling is 89.7).
BBR_ATTEMPTS = 3


def test_bbr_reaches_90_mbit_within_20_s(link):
    """BBR at 100 Mbit/s, 100 ms RTT, no loss, 1-BDP queue: at least 90 Mbit/s of goodput.

    "Within 20 s" is read as: over seconds 10-20 of a 20 s flow, measured by the receiver. The
    ceiling is 96.5 Mbit/s (1448 payload bytes per 1500-byte packet). BBR's start-up (about 2 s
    here) is outside the window; inside it, one PROBE_RTT (~300 ms at 4 packets, 3% of the
    window) and retransmissions when the 2-BDP cwnd fills the 1-BDP queue cost a few percent, so
    a working link stays above 90 and a link 7% slow or lossy does not. The flow runs alone
    (no other flow through the emulator at the same time). On a crowded or halting guest one flow
    can read below 90 with the link running late (two full suites read 81.2 and 88.8), so the
    flow runs up to BBR_ATTEMPTS times and one attempt must reach 90; a failure lists each
    attempt's goodput with the link's lateness.
    """
    attempts = []
    for _ in range(BBR_ATTEMPTS):
        with link(*BDP_LINK) as emu:
            intervals = iperf3_receiver_intervals(emu, "bbr", 20)
        steady = mean_goodput(intervals, from_s=10)
        attempts.append(f"{steady / 1e6:.1f} Mbit/s (link p99 lateness {emu.summary['lateness_us']['p99']:.0f} us)")
        if steady >= 90e6:
            return
    pytest.fail(f"BBR under 90 Mbit/s over seconds 10-20 in every attempt: {attempts}")


def test_cubic_stays_below_10_mbit_at_1_percent_loss(link):
    """CUBIC at 1% loss, 100 Mbit/s, 100 ms: Mathis et al. give 1448 B x 8 / 0.1 s x 1.22 /
    sqrt(0.01) = 1.4 Mbit/s, far below 10 Mbit/s over the 20 s flow; above 0.2 Mbit/s it is a
    flow that ran rather than one the link stalled.
    """
    with link(*BDP_LINK, "--uplink-loss", "0.01") as emu:
        intervals = iperf3_receiver_intervals(emu, "cubic", 20)
    mean = mean_goodput(intervals)
    assert 0.2e6 < mean < 10e6, f"CUBIC {mean / 1e6:.2f} Mbit/s"
    assert emu.summary["uplink"]["drops_loss"] > 0


# Runs in a namespace: a TCP receiver that prints how many bytes it got and their SHA-256, or the
# sender of a fixed pattern of that many bytes (argv: role, congestion control, bytes).
PATTERN_FLOW = """
import hashlib, socket, sys
role, cc, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
if role == "receiver":
    server = socket.create_server(("10.0.0.2", 5301))
    print("listening", flush=True)
    conn, _ = server.accept()
    digest, got = hashlib.sha256(), 0
    while chunk := conn.recv(1 << 16):
        digest.update(chunk)
        got += len(chunk)
    print(got, digest.hexdigest(), flush=True)
else:
    conn = socket.socket()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    conn.connect(("10.0.0.2", 5301))
    conn.sendall(bytes(i % 251 for i in range(total)))
    conn.shutdown(socket.SHUT_WR)
    conn.recv(1)
"""


@pytest.mark.parametrize("offload", ["tso", "none"])
def test_offloads_hand_the_model_mtu_packets_and_tcp_its_bytes(link, tmp_path, offload):
    """4 MB over BBR at 100 Mbit/s, 100 ms RTT and 0.5 % loss, with TUN offloads on and off.

    With `tso` the sending host hands over whole segments, which the link cuts into packets and
    joins again where they leave together. Either way the model must see only packets of at most
    the MTU (every `+` line of the log: 1500 + 4 bytes) and lose them one by one, and the
    receiving application must get every byte in order: its SHA-256 is the sender's. (A packet
    written with a partial checksum is not checked by the receiving host, so a wrong cut would
    otherwise pass unseen.) Without offloads nothing is cut and every packet is its own write.
    """
    total = 4_000_000
    log = tmp_path / f"up-{offload}.log"
    with link(*BDP_LINK, "--uplink-loss", "0.005", "--offload", offload, "--uplink-log", str(log)) as emu:
        receiver = emu.spawn_in(emu.receiver, sys.executable, "-c", PATTERN_FLOW, "receiver", "bbr", str(total))
        try:
            assert receiver.stdout.readline().strip() == "listening"
            emu.run_in(emu.sender, sys.executable, "-c", PATTERN_FLOW, "sender", "bbr", str(total), timeout=60)
            got, digest = receiver.stdout.readline().split()
        finally:
            stop(receiver)
    assert int(got) == total
    assert digest == hashlib.sha256(bytes(i % 251 for i in range(total))).hexdigest()
    up = emu.summary["uplink"]
    sizes = [size for _, size in link_log(log)["+"]]
    assert len(sizes) == up["in_packets"] and max(sizes) <= OPPORTUNITY_BYTES, max(sizes)
    assert up["drops_loss"] > 0 and up["segments_unsplit"] == 0
    if offload == "tso":
        assert up["segments_split"] > 0, "the sending host handed over no segment"
        assert up["writes"] < up["out_packets"], "no packets left joined"
        assert emu.summary["config"]["offload"] == "tso"
    else:
        assert up["segments_split"] == 0 and up["writes"] == up["out_packets"]


def run_link(tag: str, changes: dict[str, str | None]) -> subprocess.CompletedProcess:
    """Runs ccsweep-link to completion with a 10 Mbit/s link between `<tag>s` and `<tag>r`,
    `changes` applied to those options (None removes one)."""
    options = {"--sender-netns": f"{tag}s", "--receiver-netns": f"{tag}r", "--uplink-rate": "10mbit",
               "--downlink-rate": "10mbit", "--duration": "5s"} | changes
    argv = [link_binary()]
    for key, value in options.items():
        argv += [key, value] if value is not None else []
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


def assert_one_error_line(result: subprocess.CompletedProcess, status: int, message: str) -> None:
    lines = result.stderr.splitlines()
    assert result.returncode == status, result.stderr
    assert len(lines) == 1 and lines[0].startswith("ccsweep-link: error: "), result.stderr
    assert message in lines[0], result.stderr


@pytest.mark.parametrize("changes,message", [
    ({"--uplink-rate": "0mbit"}, '--uplink-rate: "0mbit": rate must be > 0'),
    ({"--uplink-rate": "-3mbit"}, '--uplink-rate: "-3mbit": rate must be > 0'),
    ({"--uplink-loss": "1.5"}, "--uplink-loss"),
    ({"--uplink-queue": "droptail bogus=3"}, "--uplink-queue"),
    ({"--uplink-queue": "droptail packets=5,packets=6"}, '--uplink-queue: queue argument "packets" is given twice'),
    ({"--uplink-rate": None, "--uplink-trace": "/dev/null"}, "/dev/null: the trace is empty"),
    ({"--receiver-netns": None}, "required arguments were not provided: --receiver-netns"),
    ({"--dev": "a-name-far-too-long"}, "--dev"),
    ({"--sender-addr": "10.0.0.256"}, "--sender-addr"),
    ({"--receiver-addr": "10.0.0.1"}, "--receiver-addr"),
    ({"--inject-lateness": "fixed:2ms,p=2"}, "--inject-lateness: p: 2 is outside [0, 1]"),
    ({"--offload": "gro"}, "--offload"),
    ({"--realtime-priority": "100"}, '--realtime-priority: "100" is not a SCHED_FIFO priority'),
    ({"--realtime-priority": "10", "--spin": "5ms"}, '--spin: "5ms" is more than 1ms'),
])
def test_bad_arguments_one_line_exit_2(changes, message):
    tag = namespace_tag()
    result = run_link(tag, changes)
    assert_one_error_line(result, 2, message)
    assert not {f"{tag}s", f"{tag}r"} & netns_names(), "an argument error created a namespace"


@pytest.mark.parametrize("content,where", [("10\nx\n", ":2:"), ("10\n5\n", ":2:"), ("0\n", "ends at 0")])
def test_bad_trace_names_file_and_line(tmp_path, content, where):
    trace = tmp_path / "bad.trace"
    trace.write_text(content)
    result = run_link(namespace_tag(), {"--uplink-rate": None, "--uplink-trace": str(trace)})
    assert_one_error_line(result, 2, f"--uplink-trace: {trace}")
    assert where in result.stderr


def stale_entry_file(path: Path) -> None:
    """What a crashed `ip netns add` leaves: a file where a namespace should be mounted."""
    path.touch()


def stale_entry_dangling_link(path: Path) -> None:
    """An entry `ip netns add` cannot create over, so creating that namespace fails."""
    path.symlink_to("/nonexistent/ccsweep-test")


@pytest.mark.parametrize("make_entry,message", [
    (stale_entry_dangling_link, "ip netns add"),
    (stale_entry_file, "setns into"),
])
def test_runtime_error_after_creating_a_namespace_removes_it(make_entry, message):
    """The sender's namespace is created, then the receiver's cannot be created (or entered):
    the emulator exits 1 with one line, removes the namespace it created, and leaves the entry
    it did not create alone."""
    needs_root()
    tag = namespace_tag()
    entry = Path("/run/netns") / f"{tag}r"
    entry.parent.mkdir(exist_ok=True)
    make_entry(entry)
    try:
        result = run_link(tag, {})
        assert_one_error_line(result, 1, message)
        assert f"{tag}s" not in netns_names(), "the sender namespace was left behind"
        assert entry.is_symlink() or entry.exists(), "removed an entry it did not create"
    finally:
        entry.unlink()


def test_runtime_error_with_both_namespaces_created_removes_both():
    """`--dev lo` passes the argument checks, but every namespace already has a device `lo`
    that is not a TUN device: TUNSETIFF fails after both namespaces exist."""
    needs_root()
    tag = namespace_tag()
    result = run_link(tag, {"--dev": "lo"})
    assert_one_error_line(result, 1, "TUNSETIFF lo")
    assert not {f"{tag}s", f"{tag}r"} & netns_names()


def link_log(path: Path) -> dict[str, list[tuple[int, ...]]]:
    """A Mahimahi link log's event lines by kind (`+ - # d`), each as its integers (time in ms
    first); the header's `# ...` lines are skipped."""
    events: dict[str, list[tuple[int, ...]]] = {kind: [] for kind in "+-#d"}
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            continue
        t, kind, *numbers = line.split()
        events[kind].append((int(t), *map(int, numbers)))
    return events


def test_link_log_opportunities_drops_and_departure_delays(link, tmp_path):
    """A 10 Mbit/s link with `droptail packets=40`, fed UDP at twice its rate for 2.5 s.

    `#`: 1504 bytes each, 10e6 / 12000 = 833.3 per second (833 or 834 in each whole second).
    `d`: one line per dropped packet, as many as the queue drops; the flood's 1500-byte
    datagrams count 1504 bytes. (The kernel's few IPv6 control packets sent when the device comes
    up are small and may be among the drops: at least 99% of some 2000 drops are the flood's.)
    `+`, `-`, `d`: every byte that arrived left the bottleneck, was dropped, or is still queued or
    in service (at most one packet) at the end.
    `-`: one line per packet leaving the bottleneck, with its delay in the queue and on the
    wire. A full-size packet takes 1.2 ms; one accepted by the full queue (when a departure has
    left 39 waiting) waits for the rest of the packet in service (0 to 1.2 ms), the 39 ahead and
    its own, so 48 to 49.2 ms, read as 47 to 50 whole ms. No packet can wait longer than that.
    """
    log = tmp_path / "up.log"
    with link("--uplink-rate", "10mbit", "--downlink-rate", "10mbit", "--uplink-queue", "droptail packets=40",
              "--uplink-log", str(log)) as emu:
        with udp_flood(emu, 20e6, 2.5):
            time.sleep(2.5)
    up = emu.summary["uplink"]
    events = link_log(log)

    assert {size for _, size in events["#"]} == {OPPORTUNITY_BYTES}
    whole_seconds = int(emu.summary["wall_s"])
    per_second = [sum(1 for t, _ in events["#"] if s * 1000 <= t < (s + 1) * 1000) for s in range(whole_seconds)]
    assert whole_seconds >= 2 and set(per_second) <= {833, 834}, per_second

    assert len(events["+"]) == up["in_packets"]
    assert up["drops_queue"] > 0
    assert all(packets == 1 for _, packets, _ in events["d"]) and len(events["d"]) == up["drops_queue"]
    drop_sizes = [size for _, _, size in events["d"]]
    assert drop_sizes.count(OPPORTUNITY_BYTES) >= 0.99 * len(drop_sizes), sorted(set(drop_sizes))

    departures = events["-"]
    assert len(departures) == up["bottleneck_packets"]
    assert sum(size for _, size, _ in departures) == up["bottleneck_bytes"]
    in_service = (sum(size for _, size in events["+"]) - up["bottleneck_bytes"] - sum(drop_sizes)
                  - up["queue_bytes"])
    assert 0 <= in_service <= OPPORTUNITY_BYTES, in_service
    delays = [delay for _, _, delay in departures]
    saturated = [delay for t, _, delay in departures if t >= 500]
    assert max(delays) <= 50, max(delays)
    assert 47 <= statistics.median(saturated) <= 50, statistics.median(saturated)


def test_once_ends_with_the_trace(link, tmp_path):
    """`--once` with a 300 ms trace (one opportunity per ms): the link ends by itself, with reason
    `trace-end`, exit 0, after the trace's 300 ms (the loop wakes for that instant; 200 ms of
    slack for a loaded machine), having offered exactly the trace's 300 opportunities."""
    trace = tmp_path / "short.trace"
    trace.write_text("".join(f"{ms}\n" for ms in range(1, 301)))
    with link("--uplink-trace", str(trace), "--once", "--downlink-rate", "10mbit") as emu:
        returncode = emu.process.wait(timeout=10)
    assert returncode == 0
    assert emu.summary["reason"] == "trace-end"
    assert 0.3 <= emu.summary["wall_s"] < 0.5, emu.summary["wall_s"]
    assert emu.summary["uplink"]["capacity_bytes"] == 300 * OPPORTUNITY_BYTES


def test_sigterm_flushes_logs_and_removes_namespaces(link, tmp_path):
    log = tmp_path / "up.log"
    with link("--uplink-rate", "10mbit", "--downlink-rate", "10mbit", "--uplink-log", str(log)) as emu:
        emu.run_in(emu.sender, "ping", "-c", "5", "-i", "0.05", "-n", "10.0.0.2")
        process = emu.process
    assert process.returncode == 0
    lines = log.read_text().splitlines()
    assert lines[0].startswith("# mahimahi mm-link (uplink)")
    assert sum(1 for line in lines if " + " in line) >= 5
    assert sum(1 for line in lines if " - " in line) >= 5
    assert emu.summary["event"] == "summary" and emu.summary["lateness_us"]["count"] >= 10
    stop(process)


def test_injected_lateness_is_caught_by_the_self_check(link):
    """`--inject-lateness fixed:3ms,p=0.05`: about 5% of releases are held 3 ms. The self-check
    measures each packet against its scheduled time, so its p99 exceeds the injected 3 ms, and
    the summary counts the held releases (within the 99.9% binomial interval) and echoes the
    option, so a result record can tell injected lateness from a busy machine."""
    p = 0.05
    with link("--uplink-rate", "10mbit", "--downlink-rate", "10mbit", "--inject-lateness", f"fixed:3ms,p={p}",
              "--seed", "5") as emu:
        with udp_flood(emu, 5e6, 3):
            time.sleep(3)
    lateness = emu.summary["lateness_us"]
    assert lateness["p99"] > 3000, lateness
    assert lateness["max"] < 3000 + 20_000, lateness
    released = lateness["count"]
    held = emu.summary["uplink"]["injected_delays"] + emu.summary["downlink"]["injected_delays"]
    assert released > 1000, lateness
    assert abs(held - p * released) <= Z999 * math.sqrt(released * p * (1 - p)) + 1, (held, released)
    assert emu.summary["config"]["inject_lateness"] == "fixed:3ms,p=0.05"


def test_without_injection_nothing_is_held(link):
    with link("--uplink-rate", "10mbit", "--downlink-rate", "10mbit") as emu:
        emu.run_in(emu.sender, "ping", "-c", "5", "-i", "0.05", "-n", "10.0.0.2")
    assert emu.summary["uplink"]["injected_delays"] == 0 and emu.summary["downlink"]["injected_delays"] == 0
    assert emu.summary["config"]["inject_lateness"] is None
    assert emu.summary["sched"] == "normal"


def test_realtime_priority_where_permitted_and_normal_where_not():
    """As root the packet loop gets SCHED_FIFO and says so; without CAP_SYS_NICE (dropped with
    setpriv, as in a pod without the capability) the link still runs, at normal priority, says
    so once on stderr, and records why in `sched`."""
    needs_root()

    def run(*prefix: str) -> tuple[subprocess.CompletedProcess, dict]:
        tag = namespace_tag()
        argv = [*prefix, link_binary(), "--sender-netns", f"{tag}s", "--receiver-netns", f"{tag}r",
                "--uplink-rate", "10mbit", "--downlink-rate", "10mbit", "--duration", "1s",
                "--realtime-priority", "10"]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        lines = [json.loads(line) for line in result.stdout.splitlines()]
        assert result.returncode == 0, result.stderr
        assert lines[0]["sched"] == lines[-1]["sched"], lines
        return result, lines[-1]

    result, summary = run()
    assert summary["sched"] == "fifo:10" and summary["config"]["realtime_priority"] == 10, summary
    assert result.stderr == ""
    result, summary = run("setpriv", "--bounding-set=-sys_nice", "--inh-caps=-sys_nice")
    assert summary["sched"].startswith("normal (fifo: EPERM"), summary["sched"]
    warnings = result.stderr.splitlines()
    assert len(warnings) == 1 and "--realtime-priority 10: not permitted" in warnings[0], result.stderr


def test_a_cgroup_without_real_time_budget_gets_deadline_scheduling():
    """A pod's cgroup on a cgroup-v1 node with real-time group scheduling has no real-time budget
    (the kubelet leaves `cpu.rt_runtime_us` at 0), so SCHED_FIFO is refused there: the link then
    runs its loop at SCHED_DEADLINE, says so once on stderr and records it. Made for real: a `cpu`
    cgroup of the test's own, which the kernel creates with a budget of 0."""
    needs_root()
    root = Path("/sys/fs/cgroup/cpu")
    if not (root / "cpu.rt_runtime_us").exists():
        pytest.skip("this kernel has no cgroup-v1 real-time group scheduling (pods get SCHED_FIFO there)")
    group = root / f"ccsweep-test-{os.getpid()}"
    try:
        group.mkdir()
    except OSError as exc:   # a read-only cgroup file system (a container)
        pytest.skip(f"cannot make a cpu cgroup here: {exc}")
    try:
        assert (group / "cpu.rt_runtime_us").read_text().strip() == "0"
        tag = namespace_tag()
        argv = [link_binary(), "--sender-netns", f"{tag}s", "--receiver-netns", f"{tag}r",
                "--uplink-rate", "10mbit", "--downlink-rate", "10mbit", "--duration", "1s",
                "--realtime-priority", "10"]
        procs = str(group / "cgroup.procs")

        def enter_group() -> None:   # in the child, before exec: "0" moves the writing process
            with open(procs, "w") as f:
                f.write("0")

        result = subprocess.run(argv, capture_output=True, text=True, timeout=30, preexec_fn=enter_group)
        assert result.returncode == 0, result.stderr
        summary = [json.loads(line) for line in result.stdout.splitlines()][-1]
        assert summary["sched"] == "deadline:300/1000us (fifo: EPERM)", summary["sched"]
        warnings = result.stderr.splitlines()
        assert len(warnings) == 1 and "SCHED_FIFO refused" in warnings[0], result.stderr
    finally:
        group.rmdir()
