"""The receiver is woken per 16 KB, not per segment, and still counts every byte at every tick."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

from ccsweep.runner.flow import RCVLOWAT_BYTES, wake_threshold


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_bytes_below_the_wake_threshold_are_counted_at_the_next_tick():
    port, sender_port = free_port(), free_port()
    receiver = subprocess.Popen(
        [sys.executable, "-m", "ccsweep.runner.flow", "receiver", "--addr", "127.0.0.1", "--port", str(port),
         "--flows", "1", "--duration", "1.0", "--sender-port-base", str(sender_port)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert receiver.stdin is not None and receiver.stdout is not None
    try:
        assert json.loads(receiver.stdout.readline())["event"] == "ready"
        receiver.stdin.write(f"go {time.monotonic_ns()}\n")
        receiver.stdin.flush()
        with socket.socket() as client:
            client.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            client.bind(("127.0.0.1", sender_port))
            client.connect(("127.0.0.1", port))
            client.sendall(b"x" * 1000)  # far below the threshold: no wake-up for it
            events = [json.loads(line) for line in receiver.stdout]
    finally:
        receiver.kill()
        receiver.wait()
    rx = [e for e in events if e["event"] == "rx"]
    counted = [e for e in rx if e["bytes"] == [1000]]
    assert counted, rx
    # Sent within the first 100 ms or so: counted from the tick after it arrived, not at the end.
    assert counted[0]["t"] <= 0.3, rx
    assert events[-1] == {"event": "done", "bytes": [1000]}


def test_the_threshold_stays_small_against_the_receive_buffer():
    with socket.socket() as big, socket.socket() as small:
        small.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        assert wake_threshold(big) <= RCVLOWAT_BYTES
        # Twice the threshold above the buffer would make the kernel grow it and clamp the window.
        assert 2 * wake_threshold(small) <= small.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) // 2
