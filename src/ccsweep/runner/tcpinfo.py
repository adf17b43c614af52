"""Reading the kernel's per-socket TCP state: struct tcp_info and BBR's struct tcp_bbr_info.

Parsed with `struct` at the offsets of include/uapi/linux/tcp.h, because Python's socket module
exposes the option numbers but not the structs.  The structs only ever grow at the end, so a
field beyond what an older kernel returns is simply absent from the parsed dict.

Stdlib only: imported by the flow endpoints, which must start fast inside a namespace.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterable

AVAILABLE_CC_PATH = "/proc/sys/net/ipv4/tcp_available_congestion_control"
TCP_INFO = getattr(socket, "TCP_INFO", 11)
TCP_CONGESTION = getattr(socket, "TCP_CONGESTION", 13)
TCP_CC_INFO = 26  # not in Python's socket module

#: The bytes of struct tcp_info asked for: everything up to and including tcpi_delivered_ce.
TCP_INFO_BYTES = 200
#: struct tcp_bbr_info: bw_lo, bw_hi, min_rtt, pacing_gain, cwnd_gain (five __u32).
TCP_BBR_INFO_BYTES = 20

#: (name, offset, struct format) of the struct tcp_info fields a cell records.
TCP_INFO_FIELDS: tuple[tuple[str, int, str], ...] = (
    ("ca_state", 1, "B"),
    ("snd_mss", 16, "I"),
    ("unacked", 24, "I"),         # packets sent and not yet acknowledged (packets_out)
    ("sacked", 28, "I"),
    ("lost", 32, "I"),
    ("retrans", 36, "I"),         # retransmitted packets out
    ("rtt_us", 68, "I"),          # smoothed RTT
    ("rttvar_us", 72, "I"),
    ("snd_ssthresh", 76, "I"),
    ("cwnd", 80, "I"),            # packets
    ("total_retrans", 100, "I"),  # segments
    ("pacing_rate", 104, "Q"),    # bytes/s
    ("bytes_acked", 120, "Q"),
    ("bytes_received", 128, "Q"),
    ("min_rtt_us", 148, "I"),
    ("delivery_rate", 160, "Q"),  # bytes/s
    ("busy_us", 168, "Q"),
    ("rwnd_limited_us", 176, "Q"),
    ("sndbuf_limited_us", 184, "Q"),
    ("delivered_ce", 196, "I"),   # packets acknowledged by ACKs echoing congestion (ECE), Linux 4.18+
)


def parse_tcp_info(data: bytes, fields: Iterable[tuple[str, int, str]] = TCP_INFO_FIELDS) -> dict[str, int]:
    """The `fields` (by default those a cell records) of a struct tcp_info (native byte order),
    those the buffer holds."""
    out: dict[str, int] = {}
    for name, offset, fmt in fields:
        end = offset + struct.calcsize("=" + fmt)
        if end <= len(data):
            out[name] = struct.unpack_from("=" + fmt, data, offset)[0]
    return out


def parse_bbr_info(data: bytes) -> dict[str, float] | None:
    """BBR's bandwidth estimate (bytes/s), min RTT (us) and gains (as plain factors), or None."""
    if len(data) < TCP_BBR_INFO_BYTES:
        return None
    bw_lo, bw_hi, min_rtt, pacing_gain, cwnd_gain = struct.unpack_from("=5I", data, 0)
    return {
        "bw": bw_hi << 32 | bw_lo,
        "min_rtt_us": min_rtt,
        "pacing_gain": pacing_gain / 256,  # the kernel reports gains shifted left by 8 bits
        "cwnd_gain": cwnd_gain / 256,
    }


def read_tcp_info(sock: socket.socket) -> dict[str, int]:
    return parse_tcp_info(sock.getsockopt(socket.IPPROTO_TCP, TCP_INFO, TCP_INFO_BYTES))


def read_bbr_info(sock: socket.socket) -> dict[str, float] | None:
    """TCP_CC_INFO of a BBR socket (other algorithms return a different union member, or nothing)."""
    try:
        return parse_bbr_info(sock.getsockopt(socket.IPPROTO_TCP, TCP_CC_INFO, TCP_BBR_INFO_BYTES))
    except OSError:
        return None


def set_congestion_control(sock: socket.socket, cc: str) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, cc.encode())


def available_congestion_controls() -> list[str]:
    """The algorithms the kernel lists; empty where it lists none (not Linux). For messages and the
    result record: whether a socket takes an algorithm is `unavailable_congestion_controls`'s call."""
    try:
        with open(AVAILABLE_CC_PATH) as listed:
            return listed.read().split()
    except OSError:
        return []


def unavailable_congestion_controls(wanted: Iterable[str]) -> list[str]:
    """The algorithms of `wanted` (each once, in order) that a socket here refuses.

    A socket is asked rather than the kernel's list read: an algorithm built as a module is loaded
    by the first socket that asks for it, and an unprivileged process may only pick the ones in
    net.ipv4.tcp_allowed_congestion_control. The local executor, the runner and the sender in its
    namespace all decide with this one check, so they never disagree about a cell.
    """
    refused = []
    for cc in dict.fromkeys(wanted):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                set_congestion_control(probe, cc)
            except OSError:
                refused.append(cc)
    return refused
