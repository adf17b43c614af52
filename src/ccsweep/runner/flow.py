"""The cell's TCP endpoints: `python -m ccsweep.runner.flow receiver|sender ...`, one per namespace.

The runner starts each inside its namespace (`ip netns exec`), waits for its `ready` line, then
writes `go <t0_ns>` on its stdin.  t0 is a CLOCK_MONOTONIC instant, the same clock in every
network namespace, so the receiver's byte counts, the sender's samples and the flows' start
offsets share one origin.  Both speak JSON lines on stdout so the runner can forward samples live.

Stdlib only, so they start quickly.  Errors are one JSON line `{"event": "error", ...}` and a
non-zero exit: 3 when the kernel lacks a flow's algorithm (checked before anything else).
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ccsweep.exitcodes import EXIT_UNAVAILABLE
from ccsweep.runner.tcpinfo import (
    AVAILABLE_CC_PATH,
    available_congestion_controls,
    read_bbr_info,
    read_tcp_info,
    set_congestion_control,
    unavailable_congestion_controls,
)

#: Sampling period of both endpoints (the time series' interval).
INTERVAL_S = 0.1


def emit(event: str, **fields: object) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def wait_for_go() -> int:
    """Block until the runner writes `go <t0_ns>`; returns t0 (CLOCK_MONOTONIC ns)."""
    line = sys.stdin.readline().split()
    if len(line) != 2 or line[0] != "go":
        emit("error", message=f"expected 'go <t0_ns>' on stdin, got {' '.join(line)!r}")
        sys.exit(1)
    return int(line[1])


def sleep_until(deadline_ns: int) -> None:
    delay = (deadline_ns - time.monotonic_ns()) / 1e9
    if delay > 0:
        time.sleep(delay)


def ticks(t0_ns: int, duration_s: float) -> list[tuple[float, int]]:
    """(seconds since t0, monotonic ns) every INTERVAL_S from 0 to duration_s inclusive."""
    count = round(duration_s / INTERVAL_S)
    return [(round(k * INTERVAL_S, 3), t0_ns + round(k * INTERVAL_S * 1e9)) for k in range(count + 1)]


# --- receiver -----------------------------------------------------------------------------------

#: The receiver asks to be woken once this much data is waiting (SO_RCVLOWAT), at most a quarter
#: of the socket's receive buffer, rather than for every segment. Each wake-up of the receiving
#: process costs the link an inter-processor interrupt inside its write() (14% of the emulator's CPU
#: at 100 Mbit/s in the profile of benchmarks/results/2026-11-25-cheaper-cells.md), and each small
#: read makes the kernel send a window update, which wakes the emulator once more. The kernel ACKs
#: data as it arrives whatever the application does, and the counts are taken at every tick after
#: reading everything waiting, so neither the flow nor its byte counts change.
RCVLOWAT_BYTES = 16384


def wake_threshold(conn: socket.socket) -> int:
    """SO_RCVLOWAT for a new connection: small against its buffer, so the kernel never grows the
    buffer or clamps the window for it (it does when twice the threshold exceeds the buffer)."""
    return max(1, min(RCVLOWAT_BYTES, conn.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) // 4))


def run_receiver(args: argparse.Namespace) -> None:
    """Count application bytes per flow; print cumulative counts every 100 ms until the flows end."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((args.addr, args.port))
    listener.listen(64)
    listener.setblocking(False)
    emit("ready", addr=args.addr, port=args.port)
    t0 = wait_for_go()

    counts = [0] * args.flows
    buffer = memoryview(bytearray(1 << 20))
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, None)
    connections: dict[socket.socket, int] = {}

    def read(conn: socket.socket, index: int) -> None:
        """Everything waiting on one connection (a 1 MB buffer takes it in one call); closes it at its end."""
        try:
            n = conn.recv_into(buffer)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            n = 0
        if n:
            counts[index] += n
        else:
            selector.unregister(conn)
            del connections[conn]
            conn.close()

    def on_readable(key: selectors.SelectorKey) -> None:
        if key.data is not None:
            read(key.fileobj, key.data)  # type: ignore[arg-type]
            return
        conn, (_, peer_port) = listener.accept()
        index = peer_port - args.sender_port_base
        if not 0 <= index < args.flows:
            conn.close()  # not one of the cell's flows
            return
        conn.setblocking(False)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, wake_threshold(conn))
        connections[conn] = index
        selector.register(conn, selectors.EVENT_READ, index)

    for t, deadline in ticks(t0, args.duration):
        while (timeout := (deadline - time.monotonic_ns()) / 1e9) > 0:
            for key, _ in selector.select(timeout):
                on_readable(key)
        for conn, index in list(connections.items()):
            read(conn, index)  # below the wake-up threshold, but counted at the tick
        emit("rx", t=t, bytes=counts)
    emit("done", bytes=counts)


# --- sender -------------------------------------------------------------------------------------

@dataclass
class Flow:
    index: int
    cc: str
    start_s: float
    sock: socket.socket | None = None
    thread: threading.Thread | None = None
    error: str | None = None


def parse_flow(text: str) -> Flow:
    """`INDEX:CC:START_S`, e.g. `0:bbr:0`."""
    index, cc, start = text.split(":")
    return Flow(int(index), cc, float(start))


def check_congestion_controls(flows: list[Flow]) -> None:
    """Exit 3 naming the algorithm if a socket cannot use it: before any flow starts."""
    refused = unavailable_congestion_controls(f.cc for f in flows)
    if refused:
        available = available_congestion_controls()
        emit("error", kind="cc_unavailable", cc=refused[0], available=available,
             message=f"congestion control {refused[0]!r} is not available in this kernel "
                     f"(see {AVAILABLE_CC_PATH}: {' '.join(available)})")
        sys.exit(EXIT_UNAVAILABLE)


def send_flow(flow: Flow, args: argparse.Namespace, t0: int, connected: Callable[[Flow], None]) -> None:
    """Connect at the flow's start and write message_bytes messages until the runner shuts it."""
    sleep_until(t0 + round(flow.start_s * 1e9))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        set_congestion_control(sock, flow.cc)
        sock.bind((args.src, args.sender_port_base + flow.index))
        sock.connect((args.dst, args.port))
    except OSError as exc:
        flow.error = f"flow {flow.index} ({flow.cc}): connect to {args.dst}:{args.port}: {exc}"
        sock.close()
        return
    flow.sock = sock
    connected(flow)
    message = b"\0" * args.message_bytes
    try:
        while True:
            sock.sendall(message)
    except OSError:
        pass  # shut down at the end of the flow time (or the receiver went away)


def sample(flow: Flow, t: float) -> dict[str, object]:
    """One flow's tcp_info (and BBR's own estimate) at t seconds since t0."""
    assert flow.sock is not None
    info: dict[str, object] = {"t": t, "flow": flow.index, **read_tcp_info(flow.sock)}
    if flow.cc == "bbr":
        bbr = read_bbr_info(flow.sock)
        if bbr is not None:
            info["bbr"] = bbr
    return info


def wait_for_setup() -> None:
    """Say where this process is and wait for `setup-done`: a link that wraps the sender in network
    namespaces of its own (Mahimahi) leaves the runner their sysctls to set before any socket exists."""
    emit("setup", pid=os.getpid())
    if sys.stdin.readline().strip() != "setup-done":
        emit("error", message="expected 'setup-done' on stdin")
        sys.exit(1)


def run_sender(args: argparse.Namespace) -> None:
    """Start each flow at its offset, sample every flow every 100 ms, stop all at t0 + duration."""
    if args.wait_setup:
        wait_for_setup()
    if args.dst_env:
        args.dst = os.environ.get(args.dst_env, "")
        if not args.dst:
            emit("error", message=f"--dst-env: ${args.dst_env} is not set")
            sys.exit(1)
    flows = [parse_flow(f) for f in args.flow]
    check_congestion_controls(flows)
    emit("ready", flows=len(flows))
    t0 = wait_for_go()
    lock = threading.Lock()

    def connected(flow: Flow) -> None:
        with lock:
            emit("connected", flow=flow.index, cc=flow.cc, t=round((time.monotonic_ns() - t0) / 1e9, 4))

    for flow in flows:
        flow.thread = threading.Thread(target=send_flow, args=(flow, args, t0, connected), daemon=True)
        flow.thread.start()
    for t, deadline in ticks(t0, args.duration):
        sleep_until(deadline)
        samples = [sample(f, t) for f in flows if f.sock is not None]
        with lock:
            for s in samples:
                emit("sample", **s)
        failed = [f.error for f in flows if f.error]
        if failed:
            emit("error", kind="flow", message=failed[0])
            sys.exit(1)
    for flow in flows:
        if flow.sock is not None:
            # Abort rather than close: data still queued in a 6 MB send buffer would keep the link
            # busy after the flow time, and the receiver has already taken its last count.
            flow.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
            try:
                flow.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
    for flow in flows:
        if flow.thread is not None:
            flow.thread.join(timeout=2)
        if flow.sock is not None:
            flow.sock.close()
    emit("done")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m ccsweep.runner.flow", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="role", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--port", type=int, default=5201)
    common.add_argument("--duration", type=float, required=True, help="flow time in seconds (the cell's duration_s)")
    common.add_argument("--sender-port-base", type=int, default=40000,
                        help="flow i connects from this port + i, which is how the receiver tells flows apart")
    common.add_argument("--label", default="", help="not used: names the cell in `ps`, so a process is traced to it")
    receiver = sub.add_parser("receiver", parents=[common], help="listen and count bytes per flow")
    receiver.add_argument("--addr", default="10.0.0.2")
    receiver.add_argument("--flows", type=int, required=True)
    sender = sub.add_parser("sender", parents=[common], help="run the flows and sample tcp_info")
    sender.add_argument("--src", default="10.0.0.1")
    sender.add_argument("--dst", default="10.0.0.2")
    sender.add_argument("--dst-env", metavar="NAME",
                        help="take the receiver's address from $NAME (Mahimahi's MAHIMAHI_BASE), not --dst")
    sender.add_argument("--wait-setup", action="store_true",
                        help="print a `setup` event with this PID and wait for `setup-done` on stdin first")
    sender.add_argument("--message-bytes", type=int, default=1024)
    sender.add_argument("--flow", action="append", required=True, metavar="INDEX:CC:START_S")
    args = parser.parse_args(argv)
    try:
        (run_receiver if args.role == "receiver" else run_sender)(args)
    except OSError as exc:
        emit("error", kind="os", message=f"{args.role}: {exc}")
        sys.exit(1)


if __name__ == "__main__":
    main()
