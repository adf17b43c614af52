"""Numbered UDP probes across an emulated link, each stamped where it was sent and where it arrived.

The theory bench (benchmarks/effects/theory.py) runs the two roles in the namespaces on either side
of ccsweep-link, as `ip netns exec NS python -m benchmarks.effects.traffic ROLE ...`:

    send    --to ADDR --port P --rate-pps R --seconds S [--payload B] [--tos T]
            [--ect1-every K] [--filler-mbps M --filler-on-ms A --filler-off-ms B]
    receive --port P --seconds S --out FILE

`send` paces probes at R a second for S seconds: probe i carries its sequence number and its send
time (CLOCK_REALTIME ns, stamped just before sendto), in B bytes of UDP payload. Its IP header's
ECN field is T, or ECT(1) on every K-th probe and T on the others (the step marker's bench sends
both kinds). Filler (1472-byte payloads, Not-ECT, unnumbered) at M Mbit/s, A ms on and B ms off,
builds a queue for the probes to wait in. It prints one JSON line: the probes and filler sent.

`receive` takes what arrives for S seconds and writes one JSON object: every probe as
[sequence, sent_ns, received_ns, tos], in the order the probes arrived (received_ns is the kernel's
receive time stamp, SO_TIMESTAMPNS, so the receiver's own scheduling is left out; tos is the IP
header's TOS byte, IP_RECVTOS, whose low two bits are the ECN field), and the filler's count.

Standard library only: what runs inside the namespaces needs nothing the bench's venv adds.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import time

#: Linux's SO_TIMESTAMPNS (also the control message's type), which Python's socket module lacks.
SO_TIMESTAMPNS = 35
#: A probe's header: sequence number and send time (ns); filler carries FILLER_SEQ.
HEADER = struct.Struct("!QQ")
FILLER_SEQ = 2**64 - 1
FILLER_PAYLOAD = 1472
TIMESPEC = struct.Struct("@qq")
ECT1 = 0x01


def udp_socket(tos: int) -> socket.socket:
    """A sending socket whose packets carry `tos` (its low two bits: the ECN field)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
    return sock


def send(options: argparse.Namespace) -> int:
    """Paces probes (and filler, if asked) until --seconds; prints what was sent."""
    plain, ect1, filler_sock = udp_socket(options.tos), udp_socket(ECT1), udp_socket(0)
    probe = bytearray(options.payload)
    filler = bytearray(FILLER_PAYLOAD)
    HEADER.pack_into(filler, 0, FILLER_SEQ, 0)
    filler_gap_ns = (FILLER_PAYLOAD + 28) * 8 * 1000 / options.filler_mbps if options.filler_mbps else None
    period_ns = (options.filler_on_ms + options.filler_off_ms) * 1_000_000
    probe_gap_ns = 1e9 / options.rate_pps
    start = time.monotonic_ns()
    end = start + int(options.seconds * 1e9)
    seq, fillers = 0, 0
    next_probe, next_filler = float(start), float(start)
    destination = (options.to, options.port)
    while (now := time.monotonic_ns()) < end:
        while next_probe <= now:
            sock = ect1 if options.ect1_every and seq % options.ect1_every == 0 else plain
            HEADER.pack_into(probe, 0, seq, time.time_ns())
            sock.sendto(probe, destination)
            seq += 1
            next_probe += probe_gap_ns
        while filler_gap_ns and next_filler <= now:
            if (next_filler - start) % period_ns < options.filler_on_ms * 1_000_000:
                filler_sock.sendto(filler, destination)
                fillers += 1
            next_filler += filler_gap_ns
        upcoming = min(next_probe, next_filler) if filler_gap_ns else next_probe
        wait = upcoming - time.monotonic_ns()
        if wait > 0:
            time.sleep(wait / 1e9)
    print(json.dumps({"probes_sent": seq, "filler_sent": fillers}))
    return 0


def receive(options: argparse.Namespace) -> int:
    """Records every probe that arrives within --seconds, then writes them as JSON."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    sock.bind(("0.0.0.0", options.port))
    sock.settimeout(0.2)
    probes: list[list[int]] = []
    fillers = 0
    end = time.monotonic() + options.seconds
    space = socket.CMSG_SPACE(TIMESPEC.size) + socket.CMSG_SPACE(4)
    while time.monotonic() < end:
        try:
            data, ancillary, _, _ = sock.recvmsg(HEADER.size, space)
        except TimeoutError:
            continue
        stamp, tos = None, None
        for level, kind, body in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                seconds, nanoseconds = TIMESPEC.unpack(body[:TIMESPEC.size])
                stamp = seconds * 1_000_000_000 + nanoseconds
            elif level == socket.IPPROTO_IP and kind == socket.IP_TOS:
                tos = body[0]
        if stamp is None or tos is None or len(data) < HEADER.size:
            continue
        seq, sent_ns = HEADER.unpack(data)
        if seq == FILLER_SEQ:
            fillers += 1
        else:
            probes.append([seq, sent_ns, stamp, tos])
    with open(options.out, "w") as out:
        json.dump({"probes": probes, "filler_received": fillers}, out)
    return 0


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    roles = parser.add_subparsers(dest="role", required=True)
    sender = roles.add_parser("send", help="pace numbered probes (and filler) to the receiver")
    sender.add_argument("--to", required=True)
    sender.add_argument("--port", type=int, required=True)
    sender.add_argument("--rate-pps", type=float, required=True)
    sender.add_argument("--seconds", type=float, required=True)
    sender.add_argument("--payload", type=int, default=32)
    sender.add_argument("--tos", type=int, default=0)
    sender.add_argument("--ect1-every", type=int, default=0)
    sender.add_argument("--filler-mbps", type=float, default=0.0)
    sender.add_argument("--filler-on-ms", type=int, default=1000)
    sender.add_argument("--filler-off-ms", type=int, default=0)
    receiver = roles.add_parser("receive", help="record the probes that arrive, as JSON")
    receiver.add_argument("--port", type=int, required=True)
    receiver.add_argument("--seconds", type=float, required=True)
    receiver.add_argument("--out", required=True)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    options = arguments(sys.argv[1:] if argv is None else argv)
    return send(options) if options.role == "send" else receive(options)


if __name__ == "__main__":
    sys.exit(main())
