"""ccsweep-link against real TUN devices and the kernel's own TCP, in namespaces the test owns.

Rates are measured at the receiver's device (kernel counters), not from the emulator's own
bookkeeping, so a wrong schedule cannot confirm itself.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from emulator_harness import TRACES, link_binary, stop, udp_flood

pytestmark = pytest.mark.integration

# z for a two-sided 99.9% interval.
Z999 = 3.29


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
              "--uplink-queue", "droptail packets=500") as l:
        with udp_flood(l, rate_mbit * 1.3e6, 6):
            time.sleep(1)
            measured = delivered_rate(l, 4)
    assert measured == pytest.approx(rate_mbit * 1e6, rel=0.01), f"{measured / 1e6:.3f} Mbit/s"
    assert l.summary["uplink"]["drops_queue"] > 0, "the link was not saturated"


def test_min_rtt_is_twice_the_one_way_delay(link):
    with link("--uplink-rate", "100mbit", "--downlink-rate", "100mbit",
              "--uplink-delay", "12.5ms", "--downlink-delay", "12.5ms") as l:
        out = l.run_in(l.sender, "ping", "-c", "40", "-i", "0.05", "-n", "10.0.0.2").stdout
    min_rtt = float(re.search(r"= ([\d.]+)/", out).group(1))
    # 84-byte pings serialise in 7 us per direction; the rest is scheduling.
    assert 25.0 <= min_rtt <= 25.3, out


@pytest.mark.parametrize("loss", [0.01, 0.10, 0.50])
def test_loss_within_binomial_interval(link, loss):
    sent_packets = 20_000
    with link("--uplink-rate", "1gbit", "--downlink-rate", "1gbit", "--uplink-loss", str(loss),
              "--seed", "7") as l:
        # 20,000 small datagrams at 40 Mbit/s: well below the link rate, so only loss drops them.
        with udp_flood(l, 40e6, 3.0, payload=472) as flood:
            sent = int(flood.stdout.readline())
        time.sleep(0.2)
        _, _, received = l.device_counters(l.receiver)
    assert sent >= sent_packets * 0.9
    arrived = l.summary["uplink"]["in_packets"]
    lost = l.summary["uplink"]["drops_loss"]
    assert arrived - lost == received, "every packet not lost reached the receiver"
    half_width = Z999 * math.sqrt(loss * (1 - loss) / arrived)
    assert abs(lost / arrived - loss) <= half_width, f"{lost}/{arrived} lost at p={loss}"


def test_same_seed_same_losses(link):
    def lost(seed: str) -> int:
        with link("--uplink-rate", "1gbit", "--downlink-rate", "1gbit", "--uplink-loss", "0.3",
                  "--loss-position", "before", "--seed", seed) as l:
            l.run_in(l.sender, "ping", "-c", "200", "-i", "0.002", "-W", "0.2", "-n", "10.0.0.2")
        return l.summary["uplink"]["drops_loss"]

    assert lost("3") == lost("3")


@pytest.mark.parametrize("queue,limit_key,limit", [
    ("droptail packets=40", "packets", 40),
    ("droptail bytes=30000", "bytes", 30000),
])
def test_droptail_never_exceeds_its_limit(link, queue, limit_key, limit):
    rate = 10e6
    delay_ms = 5
    with link("--uplink-rate", "10mbit", "--downlink-rate", "10mbit", "--uplink-queue", queue,
              "--uplink-delay", f"{delay_ms}ms", "--downlink-delay", f"{delay_ms}ms") as l:
        with udp_flood(l, 2 * rate, 4):
            time.sleep(0.5)
            ping = l.run_in(l.sender, "ping", "-c", "30", "-i", "0.1", "-n", "10.0.0.2").stdout
    stats = l.stats()
    if limit_key == "packets":
        assert max(s["uplink"]["queue_packets"] for s in stats) <= limit
        queue_bytes = limit * 1500
    else:
        assert l.summary["uplink"]["queue_bytes_max"] <= limit
        queue_bytes = limit
    assert l.summary["uplink"]["drops_queue"] > 0, "the queue never filled"
    # Seen from outside: no ping waited longer than a full queue plus one packet in service
    # (24-48 ms here), with 10 ms for scheduling on a loaded machine. An unbounded queue fed at
    # twice its rate would reach seconds.
    max_rtt = float(re.search(r"= [\d.]+/[\d.]+/([\d.]+)/", ping).group(1))
    bound_ms = 2 * delay_ms + (queue_bytes + 1500) * 8 / rate * 1e3 + 10
    assert max_rtt <= bound_ms, ping


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
              "--uplink-queue", "droptail packets=3000") as l:
        started = time.monotonic()
        with udp_flood(l, 40e6, 19):
            time.sleep(2)
            t1, b1, p1 = l.device_counters(l.receiver)
            time.sleep(15)
            t2, b2, p2 = l.device_counters(l.receiver)
    delivered = (b2 - b1) + 4 * (p2 - p1)
    capacity = 1504 * trace_opportunities(trace, t1 - started, t2 - started)
    assert delivered == pytest.approx(capacity, rel=0.02), f"{delivered} of {capacity} bytes"


def iperf3_goodput(link, cc: str, seconds: int) -> float:
    """Receiver-side goodput (bit/s) of one iperf3 TCP flow with congestion control `cc`."""
    for netns in (link.sender, link.receiver):
        link.run_in(netns, "sysctl", "-qw", "net.ipv4.tcp_rmem=4096 87380 6553600",
                    "net.ipv4.tcp_wmem=4096 65536 6553600", check=True)
    server = link.spawn_in(link.receiver, "iperf3", "-s", "-1", "-B", "10.0.0.2")
    try:
        time.sleep(0.5)
        client = link.run_in(link.sender, "iperf3", "-c", "10.0.0.2", "-t", str(seconds), "-C", cc, "-J")
        result = json.loads(client.stdout)
        assert "error" not in result, result.get("error")
        return result["end"]["sum_received"]["bits_per_second"]
    finally:
        stop(server)


def test_bbr_fills_and_cubic_starves_under_loss(link):
    """BBR at 100 Mbit/s, 100 ms, no loss: >= 90 Mbit/s in 20 s. CUBIC at 1% loss: < 10 Mbit/s.

    Both run at once (independent namespaces) to keep the suite short. Queue: 1 BDP (1.25 MB).
    """
    common = ("--uplink-rate", "100mbit", "--downlink-rate", "100mbit", "--uplink-delay", "50ms",
              "--downlink-delay", "50ms", "--uplink-queue", "droptail bytes=1250000", "--seed", "1")

    def run(cc: str, loss: str) -> float:
        with link(*common, "--uplink-loss", loss) as l:
            return iperf3_goodput(l, cc, 20)

    with ThreadPoolExecutor(2) as pool:
        bbr = pool.submit(run, "bbr", "0")
        cubic = pool.submit(run, "cubic", "0.01")
        bbr_bps, cubic_bps = bbr.result(), cubic.result()
    assert bbr_bps >= 90e6, f"BBR {bbr_bps / 1e6:.1f} Mbit/s"
    assert cubic_bps < 10e6, f"CUBIC {cubic_bps / 1e6:.1f} Mbit/s"


@pytest.mark.parametrize("args,message", [
    (["--uplink-rate", "0mbit"], "--uplink-rate"),
    (["--uplink-loss", "1.5"], "--uplink-loss"),
    (["--uplink-queue", "droptail bogus=3"], "--uplink-queue"),
    (["--uplink-trace", "/dev/null"], "the trace is empty"),
])
def test_bad_arguments_one_line_exit_2(tmp_path, args, message):
    defaults = {"--uplink-rate": "10mbit", "--downlink-rate": "10mbit"}
    if "--uplink-trace" in args:
        defaults.pop("--uplink-rate")
    for key in args[::2]:
        defaults.pop(key, None)
    argv = [link_binary(), "--sender-netns", "never-s", "--receiver-netns", "never-r", *args]
    for key, value in defaults.items():
        argv += [key, value]
    result = subprocess.run(argv, capture_output=True, text=True)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert message in result.stderr
    assert "never-s" not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


@pytest.mark.parametrize("content,where", [("10\nx\n", ":2:"), ("10\n5\n", ":2:"), ("0\n", "ends at 0")])
def test_bad_trace_names_file_and_line(tmp_path, content, where):
    trace = tmp_path / "bad.trace"
    trace.write_text(content)
    result = subprocess.run([link_binary(), "--sender-netns", "a", "--receiver-netns", "b", "--uplink-trace",
                             str(trace), "--downlink-rate", "1mbit"], capture_output=True, text=True)
    assert result.returncode == 2
    assert f"{trace}" in result.stderr and where in result.stderr


def test_sigterm_flushes_logs_and_removes_namespaces(link, tmp_path):
    log = tmp_path / "up.log"
    with link("--uplink-rate", "10mbit", "--downlink-rate", "10mbit", "--uplink-log", str(log)) as l:
        l.run_in(l.sender, "ping", "-c", "5", "-i", "0.05", "-n", "10.0.0.2")
        process = l.process
    assert process.returncode == 0
    lines = log.read_text().splitlines()
    assert lines[0].startswith("# mahimahi mm-link (uplink)")
    assert sum(1 for line in lines if " + " in line) >= 5
    assert sum(1 for line in lines if " - " in line) >= 5
    assert l.summary["event"] == "summary" and l.summary["lateness_us"]["count"] >= 10
    stop(process)
