"""Fixtures that run the real ccsweep-link between two network namespaces the test owns.

Every emulator, iperf3 server and traffic generator started here is stopped by its PID in a
finally block; the emulator removes the namespaces it created when it exits.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TRACES = REPO / "src" / "ccsweep" / "traces"
_names = itertools.count()


def namespace_tag() -> str:
    """A prefix no other test (or test run) uses; namespaces are named `<tag>s` and `<tag>r`."""
    return f"cce{os.getpid() % 100000}x{next(_names)}"


def netns_names() -> set[str]:
    """Names `ip netns list` shows (each line is `name` or `name (id: N)`)."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def link_binary() -> str:
    candidates = [os.environ.get("CCSWEEP_LINK"), str(REPO / "bin" / "ccsweep-link"), shutil.which("ccsweep-link")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return candidate
    pytest.fail("ccsweep-link is not built: run `make emulator`")


@dataclass
class Link:
    """A running emulator and what the test needs to use it."""

    sender: str
    receiver: str
    process: subprocess.Popen
    workdir: Path
    summary: dict = field(default_factory=dict)

    def run_in(self, netns: str, *argv: str, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(["ip", "netns", "exec", netns, *argv], capture_output=True, text=True, **kwargs)

    def spawn_in(self, netns: str, *argv: str) -> subprocess.Popen:
        return subprocess.Popen(["ip", "netns", "exec", netns, *argv], stdout=subprocess.PIPE, text=True)

    def device_counters(self, netns: str) -> tuple[float, int, int]:
        """(monotonic time, rx_bytes, rx_packets) of the TUN device in `netns`, read from the kernel."""
        out = subprocess.run(["ip", "-n", netns, "-s", "-j", "link", "show", "ccl0"],
                             capture_output=True, text=True, check=True).stdout
        stamp = time.monotonic()
        rx = json.loads(out)[0]["stats64"]["rx"]
        return stamp, rx["bytes"], rx["packets"]

    def stats(self) -> list[dict]:
        path = self.workdir / "stats.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def stop(process: subprocess.Popen, timeout: float = 10) -> None:
    """Ends a process this test started, by PID."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def running_link(tmp_path: Path, *args: str) -> Iterator[Link]:
    """Starts ccsweep-link with `args` between two fresh namespaces; yields once it is ready."""
    tag = namespace_tag()
    workdir = tmp_path / tag
    workdir.mkdir()
    command = [link_binary(), "--sender-netns", f"{tag}s", "--receiver-netns", f"{tag}r",
               "--stats", str(workdir / "stats.jsonl"), *args]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    link = Link(f"{tag}s", f"{tag}r", process, workdir)
    try:
        ready = json.loads(process.stdout.readline() or "{}")
        assert ready.get("event") == "ready", process.stderr.read()
        yield link
    finally:
        stop(process)
        lines = [json.loads(line) for line in process.stdout.read().splitlines() if line.strip()]
        link.summary = next((line for line in lines if line.get("event") == "summary"), {})
        leftover = {f"{tag}s", f"{tag}r"} & netns_names()
        assert not leftover, f"namespaces left behind: {leftover}"


@contextlib.contextmanager
def udp_flood(link: Link, rate_bps: float, seconds: float, payload: int = 1472) -> Iterator[subprocess.Popen]:
    """Paced UDP from the sender namespace to a discard port on the receiver."""
    code = (
        "import socket,time,sys\n"
        "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
        f"data=b'x'*{payload}; gap={(payload + 28) * 8 / rate_bps!r}; end=time.monotonic()+{seconds!r}\n"
        "t=time.monotonic(); sent=0\n"
        "while t<end:\n"
        "    now=time.monotonic()\n"
        "    while t<=now:\n"
        "        try: s.sendto(data,('10.0.0.2',9)); sent+=1\n"
        "        except OSError: pass\n"
        "        t+=gap\n"
        "    time.sleep(max(0,t-time.monotonic()))\n"
        "print(sent)\n"
    )
    process = link.spawn_in(link.sender, sys.executable, "-c", code)
    try:
        yield process
    finally:
        stop(process)


@pytest.fixture
def link(tmp_path: Path):
    """Factory: `with link("--uplink-rate", "10mbit", ...) as l:`."""
    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces and TUN devices")
    return lambda *args: running_link(tmp_path, *args)
