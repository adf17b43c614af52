"""How much of its receive buffer this kernel advertises as window, against Linux 4.11's half.

    python -m benchmarks.pacing.window_share [--loss 0,20] [--seconds 40] [--out FILE.json]   # root

Why: with ReBBR's socket buffers (tcp_rmem's maximum 6,553,600 bytes) unpaced BBR is limited by
the receive window for more than half of its busy time on this kernel (2026-11-29-rebbr-pacing),
while on Linux 4.11 the same buffers let ReBBR's BBR hold most of the link. Linux 4.11 advertised a
fixed share of the buffer: tcp_win_from_space() is space - (space >> tcp_adv_win_scale), with the
sysctl at 1, a half. Since Linux 6.6 the share is measured instead: tp->scaling_ratio, the payload
over the memory (skb->len / skb->truesize, in 256ths) of the packets received, and autotuning sets
the window clamp to that share of the buffer it grows.

One flow over ReBBR's path through ccsweep-link (100 Mbit/s each way, 50 ms each way, no queue
limit, Bernoulli loss on the data direction), both namespaces given the buffers of a cell
(`--rmem`, `--wmem`, ReBBR's by default). Every 100 ms the receiver reads its own socket: the
buffer (SO_RCVBUF, sk_rcvbuf), the window clamp (TCP_WINDOW_CLAMP) and the window it last
advertised (tcp_info's rcv_wnd, Linux 6.10+); the sender reads its cwnd, the window it was given
(snd_wnd) and how long it was limited by it (rwnd_limited). The clamp over the buffer is the share
the kernel gives the window; Linux 4.11's would be a half.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.emulator.host import stop
from benchmarks.options import number_list
from ccsweep.runner.flow import RCVLOWAT_BYTES
from ccsweep.runner.link import find_link_binary
from ccsweep.runner.tcpinfo import TCP_INFO, TCP_INFO_FIELDS, parse_tcp_info, set_congestion_control
from ccsweep.spec import BufferSetting

REPO = Path(__file__).resolve().parents[2]
TCP_WINDOW_CLAMP = getattr(socket, "TCP_WINDOW_CLAMP", 10)
#: struct tcp_info up to tcpi_rehash (Linux 6.10), of which the fields below are read.
INFO_BYTES = 240


def _recorded(*names: str) -> tuple[tuple[str, int, str], ...]:
    """The fields of `names` as a cell records them (ccsweep.runner.tcpinfo), at the same offsets."""
    return tuple(field for field in TCP_INFO_FIELDS if field[0] in names)


#: (name, offset, struct format): the receiver's side, and fields a cell does not record.
RECEIVER_FIELDS = (("rcv_mss", 20, "I"), ("rcv_ssthresh", 64, "I"), ("advmss", 84, "I"), ("rcv_space", 96, "I"),
                   *_recorded("bytes_received"), ("rcv_ooopack", 224, "I"), ("rcv_wnd", 232, "I"))
SENDER_FIELDS = (*_recorded("rtt_us", "cwnd", "bytes_acked", "busy_us", "rwnd_limited_us"), ("snd_wnd", 228, "I"))
#: ReBBR's buffers, as its presets give them to every cell (ccsweep.spec.BufferSetting's defaults).
REBBR_RMEM = " ".join(map(str, BufferSetting().tcp_rmem))
REBBR_WMEM = " ".join(map(str, BufferSetting().tcp_wmem))
INTERVAL_S = 0.1
#: Samples before this many seconds into the flow are start-up, left out of the medians.
STEADY_AFTER_S = 10.0
PORT = 5201


def _emit(**values: Any) -> None:
    print(json.dumps(values), flush=True)


def receive(seconds: float) -> None:
    """The receiver's side: read everything, and sample the socket every 100 ms."""
    listener = socket.create_server(("10.0.0.2", PORT))
    _emit(event="ready")
    listener.settimeout(30)
    conn, _ = listener.accept()
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, RCVLOWAT_BYTES)
    conn.settimeout(INTERVAL_S)
    buffer = bytearray(1 << 20)
    start = next_sample = time.monotonic()
    while time.monotonic() < start + seconds + 30:
        try:
            if conn.recv_into(buffer) == 0:
                break
        except TimeoutError:
            pass
        if (now := time.monotonic()) >= next_sample:
            next_sample += INTERVAL_S
            info = conn.getsockopt(socket.IPPROTO_TCP, TCP_INFO, INFO_BYTES)
            _emit(t=round(now - start, 3), rcvbuf=conn.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
                  window_clamp=conn.getsockopt(socket.IPPROTO_TCP, TCP_WINDOW_CLAMP),
                  **parse_tcp_info(info, RECEIVER_FIELDS))
    conn.close()


def send(seconds: float, cc: str) -> None:
    """The sender's side: write as fast as the socket takes it for `seconds`, sampling every 100 ms."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    set_congestion_control(sock, cc)
    sock.connect(("10.0.0.2", PORT))
    sock.settimeout(INTERVAL_S)
    chunk = bytes(1 << 16)
    start = next_sample = time.monotonic()
    while (now := time.monotonic()) < start + seconds:
        try:
            sock.send(chunk)
        except TimeoutError:
            pass
        if now >= next_sample:
            next_sample += INTERVAL_S
            info = sock.getsockopt(socket.IPPROTO_TCP, TCP_INFO, INFO_BYTES)
            _emit(t=round(now - start, 3), **parse_tcp_info(info, SENDER_FIELDS))
    sock.close()


def _in_netns(netns: str, *argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(["ip", "netns", "exec", netns, *argv], stdout=subprocess.PIPE, text=True, cwd=REPO)


def one_flow(loss_percent: float, args: argparse.Namespace) -> dict[str, Any]:
    """One flow over the path at `loss_percent`; the samples of both ends."""
    tag = f"ccws{os.getpid() % 100000}l{int(loss_percent * 1000)}"
    sender_ns, receiver_ns = f"{tag}s", f"{tag}r"
    link = subprocess.Popen([str(find_link_binary()), "--sender-netns", sender_ns, "--receiver-netns", receiver_ns,
                             "--uplink-rate", "100mbit", "--downlink-rate", "100mbit", "--uplink-delay", "50ms",
                             "--downlink-delay", "50ms", "--uplink-loss", repr(loss_percent / 100), "--seed", "1",
                             "--duration", f"{args.seconds + 90:g}s"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ends: list[subprocess.Popen[str]] = []
    try:
        ready = json.loads(link.stdout.readline() or "{}") if link.stdout else {}
        if ready.get("event") != "ready":
            raise SystemExit(f"ccsweep-link did not start: {link.stderr.read() if link.stderr else ''}")
        for netns in (sender_ns, receiver_ns):
            subprocess.run(["ip", "netns", "exec", netns, "sysctl", "-q", "-w", f"net.ipv4.tcp_rmem={args.rmem}",
                            f"net.ipv4.tcp_wmem={args.wmem}"], check=True)
        me = [sys.executable, "-m", "benchmarks.pacing.window_share", "--seconds", f"{args.seconds:g}"]
        receiver = _in_netns(receiver_ns, *me, "--role", "receiver")
        ends.append(receiver)
        assert receiver.stdout is not None
        if json.loads(receiver.stdout.readline() or "{}").get("event") != "ready":
            raise SystemExit("the receiver did not start")
        # Read the receiver's samples as they come: a full pipe would stop it reading its socket.
        received: list[str] = []
        drain = threading.Thread(target=lambda: received.extend(receiver.stdout or []), daemon=True)
        drain.start()
        sender = _in_netns(sender_ns, *me, "--role", "sender", "--cc", args.cc)
        ends.append(sender)
        out_sender, _ = sender.communicate(timeout=args.seconds + 60)
        receiver.wait(timeout=60)
        drain.join(timeout=10)
    finally:
        for process in (*ends, link):
            stop(process)
    return {"loss_percent": loss_percent, "receiver": [json.loads(line) for line in received if line.strip()],
            "sender": [json.loads(line) for line in out_sender.splitlines() if line.strip()]}


def summarise(flow: dict[str, Any], rmem_max: int) -> dict[str, Any]:
    """The steady state of one flow: the buffer, the window clamp and its share of the buffer, the
    window the sender was given, the round trip, goodput, and the share of the sender's busy time
    the window limited it."""
    rx = [s for s in flow["receiver"] if s["t"] >= STEADY_AFTER_S]
    tx = [s for s in flow["sender"] if s["t"] >= STEADY_AFTER_S]
    span = rx[-1]["t"] - rx[0]["t"]
    busy = tx[-1]["busy_us"] - tx[0]["busy_us"]
    return {
        "loss_percent": flow["loss_percent"],
        "rcvbuf_max": max(s["rcvbuf"] for s in rx),
        "window_clamp_median": statistics.median(s["window_clamp"] for s in rx),
        "clamp_share_median": statistics.median(s["window_clamp"] / s["rcvbuf"] for s in rx),
        "snd_wnd_median": statistics.median(s["snd_wnd"] for s in tx),
        "rtt_ms_median": statistics.median(s["rtt_us"] for s in tx) / 1e3,
        "goodput_mbps": (rx[-1]["bytes_received"] - rx[0]["bytes_received"]) * 8 / span / 1e6,
        "rwnd_limited_share": (tx[-1]["rwnd_limited_us"] - tx[0]["rwnd_limited_us"]) / busy if busy else 0.0,
        "linux_4_11_window_cap": rmem_max - (rmem_max >> 1),
    }


def table(summaries: list[dict[str, Any]]) -> list[str]:
    """The summaries as a Markdown table's lines."""
    rows = [f"| {s['loss_percent']:g} | {s['rcvbuf_max']:,} | {s['window_clamp_median']:,.0f} | "
            f"{s['clamp_share_median']:.3f} | {s['linux_4_11_window_cap']:,} | {s['snd_wnd_median']:,.0f} | "
            f"{s['rtt_ms_median']:.0f} | {s['goodput_mbps']:.1f} | {s['rwnd_limited_share']:.0%} |" for s in summaries]
    return ["| loss % | receive buffer, max (B) | window clamp, median (B) | clamp / buffer | Linux 4.11's "
            "window for this buffer (B) | window the sender was given, median (B) | RTT, median (ms) | "
            "goodput (Mbit/s) | limited by the window |",
            "|---|---|---|---|---|---|---|---|---|", *rows]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pacing.window_share",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--loss", type=number_list("loss rate", "%", 0, 90, "0,20"), default=[0.0, 20.0],
                        help="loss rates of the data direction, in %% (default 0,20)")
    parser.add_argument("--seconds", type=float, default=40, help="each flow's length (default 40)")
    parser.add_argument("--cc", default="bbr", help="the sender's algorithm (default bbr: the window is the "
                        "receiver's, whatever sends)")
    parser.add_argument("--rmem", type=_buffer_sysctl, default=REBBR_RMEM,
                        help=f"net.ipv4.tcp_rmem of both ends (default ReBBR's: {REBBR_RMEM})")
    parser.add_argument("--wmem", type=_buffer_sysctl, default=REBBR_WMEM,
                        help=f"net.ipv4.tcp_wmem of both ends (default ReBBR's: {REBBR_WMEM})")
    parser.add_argument("--out", type=Path,
                        help="write every sample and the summaries here after each flow (JSON; gzip if it ends in .gz)")
    parser.add_argument("--role", choices=["sender", "receiver"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 5 <= args.seconds <= 600:
        parser.error(f"--seconds {args.seconds:g}: give 5 to 600")
    if args.role == "receiver":
        return receive(args.seconds)
    if args.role == "sender":
        return send(args.seconds, args.cc)
    flows: list[dict[str, Any]] = []
    for loss in args.loss:
        print(f"[window_share] {args.cc}, {loss:g} % loss, {args.seconds:g} s", file=sys.stderr, flush=True)
        flows.append(one_flow(loss, args))
        if args.out:  # after each flow: a later one that fails loses none measured before it
            _write(args, flows)
    print("\n".join(table([summarise(flow, buffer_max(args.rmem)) for flow in flows])))


def _buffer_sysctl(text: str) -> str:
    """An argparse type: tcp_rmem's or tcp_wmem's three whole numbers of bytes (min default max)."""
    words = text.split()
    if len(words) != 3 or not all(word.isdigit() for word in words):
        raise argparse.ArgumentTypeError(f"{text!r}: give three whole numbers of bytes (min default max), "
                                         f"e.g. {REBBR_RMEM!r}")
    return " ".join(words)


def buffer_max(sysctl: str) -> int:
    """The maximum (the third number) of a tcp_rmem or tcp_wmem value."""
    return int(sysctl.split()[2])


def _write(args: argparse.Namespace, flows: list[dict[str, Any]]) -> None:
    """The run so far, every sample with the command and the machine's kernel."""
    command = ["python", "-m", "benchmarks.pacing.window_share", *sys.argv[1:]]
    record = {"kernel": os.uname().release, "command": command, "rmem": args.rmem, "wmem": args.wmem,
              "cc": args.cc, "seconds": args.seconds,
              "summaries": [summarise(flow, buffer_max(args.rmem)) for flow in flows], "flows": flows}
    text = (json.dumps(record, indent=1) + "\n").encode()
    args.out.write_bytes(gzip.compress(text, mtime=0) if args.out.suffix == ".gz" else text)

if __name__ == "__main__":
    main()
