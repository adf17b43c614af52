"""How much of a link's CPU is the cell's own TCP, run in the link's context, and how much is the link.

A TUN link's write() runs the receiving host's network stack in the writer's context: for data,
the receiver's TCP (and the wake-up of the receiving application); for ACKs, the sender's TCP,
which may transmit the next segments there and then. Any TUN emulator pays that work, Mahimahi
included, but it is the cell's TCP, not the link's, and a cell's cost is told apart into the
link and the two hosts' TCP (docs/emulator.md, "Measuring"). A system-wide `perf record` call
graph sorts each sample of a link process by whether `tcp_v4_rcv` is on its stack. What is left
is the link's own work: its loop, its sleeps and wake-ups, the TUN reads and writes, and (for
Mahimahi) the IP forwarding between its shells. Sampling at 1 kHz over a 15 s flow gives
thousands of samples per process, so the shares are good to a few percent.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

#: Samples a second per CPU: a 15 s flow still gives thousands per link process.
SAMPLE_HZ = 1000
#: A sample whose stack holds this symbol is TCP receive processing (data or ACKs) of a cell host.
TCP_MARK = "tcp_v4_rcv"


@contextlib.contextmanager
def recording(path: Path) -> Iterator[None]:
    """perf record of every CPU, with call graphs, while the block runs."""
    recorder = subprocess.Popen(["perf", "record", "-q", "-a", "-g", "-e", "cpu-clock", "-F", str(SAMPLE_HZ),
                                 "-o", str(path)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        recorder.terminate()
        recorder.wait(timeout=120)


def tcp_shares(path: Path, prefixes: dict[str, tuple[str, ...]], pids: frozenset[int]
               ) -> dict[str, tuple[int, float]]:
    """Per group of process names (by prefix): its samples and the share of them in the cells' TCP.

    Only the processes `pids` count: other cells on the machine run links of the same names. The
    call graphs are read as perf prints them (a header line, then one line per frame, then a blank
    line), without holding them: a few minutes of every CPU is hundreds of MB of text."""
    samples: Counter[str] = Counter()
    tcp: Counter[str] = Counter()
    group: str | None = None
    in_tcp = False
    with subprocess.Popen(["perf", "script", "-i", str(path), "-F", "comm,pid,ip,sym"], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True) as script:
        assert script.stdout is not None
        for line in script.stdout:
            if not line.strip():
                if group is not None:
                    samples[group] += 1
                    tcp[group] += in_tcp
                group, in_tcp = None, False
            elif not line[0].isspace():
                comm, _, pid = line.strip().rpartition(" ")
                known = pid.isdigit() and int(pid) in pids
                group = next((g for g, names in prefixes.items() if comm.startswith(names)), None) if known else None
            elif group is not None and line.rstrip().endswith(TCP_MARK):
                in_tcp = True
    if script.returncode != 0:
        raise RuntimeError(f"perf script -i {path} exited with {script.returncode}")
    return {group: (samples[group], tcp[group] / samples[group] if samples[group] else 0.0) for group in prefixes}
