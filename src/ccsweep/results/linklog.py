"""Per-packet queueing delay from a stored Mahimahi-format link log, as mm-delay-graph reads it.

A departure line `t - bytes delay_ms` says when a packet left the bottleneck and how long it
waited there (arrival to departure, in whole milliseconds), so the log holds every packet's
queueing delay; the 100 ms time series holds only the queue's length.
"""

from __future__ import annotations

import gzip

import numpy as np


def departure_delays(blob: bytes, start_ms: float, end_ms: float) -> tuple[np.ndarray, np.ndarray]:
    """(departure time in s since `start_ms`, queueing delay in ms) of each packet leaving in [start, end).

    `blob` is the log as stored (gzip) or plain; header and malformed lines are skipped.
    """
    text = gzip.decompress(blob) if blob[:2] == b"\x1f\x8b" else blob
    times, delays = [], []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) != 4 or fields[1] != b"-" or not fields[0].isdigit():
            continue
        t = int(fields[0])
        if start_ms <= t < end_ms:
            times.append(t)
            delays.append(int(fields[3]))
    return (np.asarray(times, dtype=float) - start_ms) / 1000, np.asarray(delays, dtype=float)
