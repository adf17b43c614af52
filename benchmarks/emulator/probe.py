"""Timestamped probe packets through an emulated link's ACK direction: an emulator's lateness from outside.

Rattan and Mahimahi report no lateness of their own, so the peer bench (benchmarks/emulator/peers.py)
measures every emulator the same way: small UDP probes cross the link's downlink (the ACK
direction: outside in) while one TCP flow loads its uplink. The downlink is served by the same
process and event loop as the loaded uplink, carries only ACKs (a few % of its rate), and so keeps
no standing queue: a probe's one-way delay minus the configured delay and its own transmission
time is how late the emulator released it.

Both ends stamp CLOCK_REALTIME on the same machine: the sender just before sendto(), the receiver
with the kernel's receive time stamp (SO_TIMESTAMPNS: when the emulator's write put the packet into
the inside namespace's stack), so the receiver's own scheduling is left out.

Standard library only, and run as a file: Mahimahi's innermost shell runs as nobody, who cannot
read the repository, so the bench copies this file beside the run. Two roles:

    probe.py inside --base-env MAHIMAHI_BASE --port P --out FILE --flow-s S -- iperf3 ARGS...
    probe.py outside --port P --interval-us 2000 --max-s 60

`inside` sends a hello to BASE:P every 50 ms until the first probe arrives (the hello opens the way
back through Mahimahi's NAT and tells the outside where to send), receives for --idle-s (the
unloaded baseline), runs `iperf3 -c BASE -t S ARGS...`, receives 0.5 s more, then writes one JSON
object: the flow's start and end (CLOCK_REALTIME ns), iperf3's exit status and every probe as
[sequence, sent_ns, received_ns]. `outside` answers the first hello with a probe every
--interval-us until --max-s or SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

#: Linux's SO_TIMESTAMPNS (also the control message's type), which Python's socket module lacks.
SO_TIMESTAMPNS = 35
#: A probe's payload: sequence number and send time (ns), padded to PAYLOAD_BYTES.
HEADER = struct.Struct("!QQ")
PAYLOAD_BYTES = 32
#: A probe's IP packet: payload, UDP header (8) and IPv4 header (20).
PROBE_IP_BYTES = PAYLOAD_BYTES + 28
HELLO = b"hello"
HELLO_EVERY_S = 0.05
TAIL_S = 0.5
#: The kernel's receive time stamp: struct timespec (two 64-bit fields on 64-bit Linux).
TIMESPEC = struct.Struct("@qq")


def receive(sock: socket.socket, probes: list[list[int]], first: threading.Event, stop: threading.Event) -> None:
    """Collect [seq, sent_ns, received_ns] until `stop`; `first` is set at the first probe."""
    sock.settimeout(0.1)
    while not stop.is_set():
        try:
            data, ancillary, _, _ = sock.recvmsg(64, socket.CMSG_SPACE(TIMESPEC.size))
        except TimeoutError:
            continue
        stamp = next((TIMESPEC.unpack(body[:TIMESPEC.size]) for level, kind, body in ancillary
                      if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS), None)
        if stamp is None or len(data) < HEADER.size:
            continue
        seq, sent_ns = HEADER.unpack_from(data)
        probes.append([seq, sent_ns, stamp[0] * 1_000_000_000 + stamp[1]])
        first.set()


def inside(options: argparse.Namespace) -> int:
    base = options.base or os.environ.get(options.base_env or "", "")
    if not base:
        sys.exit(f"probe inside: no address: --base, or ${options.base_env} unset")
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind(("0.0.0.0", 0))
    probes: list[list[int]] = []
    first, stop = threading.Event(), threading.Event()
    receiver = threading.Thread(target=receive, args=(sock, probes, first, stop), daemon=True)
    receiver.start()
    deadline = time.monotonic() + options.hello_timeout_s
    while not first.is_set():
        if time.monotonic() > deadline:
            sys.exit(f"probe inside: no probe came back from {base}:{options.port} in {options.hello_timeout_s:g} s")
        sock.sendto(HELLO, (base, options.port))
        first.wait(HELLO_EVERY_S)
    time.sleep(options.idle_s)
    flow_start_ns = time.time_ns()
    iperf3 = subprocess.run([*options.command, "-c", base, "-t", str(options.flow_s)],
                            stdout=subprocess.DEVNULL, timeout=options.flow_s + 60)
    flow_end_ns = time.time_ns()
    time.sleep(TAIL_S)
    stop.set()
    receiver.join()
    with open(options.out, "w") as out:
        json.dump({"flow_start_ns": flow_start_ns, "flow_end_ns": flow_end_ns, "iperf3_rc": iperf3.returncode,
                   "probes": probes}, out)
    return 0


def outside(options: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("0.0.0.0", options.port))
    sock.settimeout(options.max_s)
    _, peer = sock.recvfrom(64)
    payload = bytearray(PAYLOAD_BYTES)
    interval_ns = options.interval_us * 1000
    start = time.monotonic_ns()
    seq = 0
    while time.monotonic_ns() - start < options.max_s * 1_000_000_000:
        HEADER.pack_into(payload, 0, seq, time.time_ns())
        try:
            sock.sendto(payload, peer)
        except OSError:  # the link is gone: the run is over
            return 0
        seq += 1
        wait = start + seq * interval_ns - time.monotonic_ns()
        if wait > 0:
            time.sleep(wait / 1e9)
    return 0


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    roles = parser.add_subparsers(dest="role", required=True)
    inner = roles.add_parser("inside", help="receive probes, run the flow, write the probes as JSON")
    inner.add_argument("--base", help="the outside's address")
    inner.add_argument("--base-env", help="the variable holding the outside's address ($MAHIMAHI_BASE, $RATTAN_BASE)")
    inner.add_argument("--port", type=int, required=True)
    inner.add_argument("--out", required=True)
    inner.add_argument("--flow-s", type=int, required=True)
    inner.add_argument("--idle-s", type=float, default=1.0)
    inner.add_argument("--hello-timeout-s", type=float, default=10.0)
    inner.add_argument("command", nargs="+", help="iperf3 and its options (after --)")
    outer = roles.add_parser("outside", help="send probes to the first hello's sender")
    outer.add_argument("--port", type=int, required=True)
    outer.add_argument("--interval-us", type=int, default=2000)
    outer.add_argument("--max-s", type=float, default=60.0)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    options = arguments(sys.argv[1:] if argv is None else argv)
    return inside(options) if options.role == "inside" else outside(options)


if __name__ == "__main__":
    sys.exit(main())
