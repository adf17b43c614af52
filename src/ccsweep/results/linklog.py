"""Per-packet queueing delay from a stored Mahimahi-format link log, as mm-delay-graph reads it.

A departure line `t - bytes delay_ms` says when a packet left the bottleneck and how long it
waited there (arrival to departure, in whole milliseconds), so the log holds every packet's
queueing delay; the 100 ms time series holds only the queue's length.
"""

from __future__ import annotations

import numpy as np

from ccsweep.gunzip import gunzip

#: The most a stored link log may unpack to: 1 GiB, about 20 million packets (a 100 Mbit/s link
#: for half an hour at full-size packets); Mahimahi logs every arrival and departure in ~15 bytes.
MAX_LINK_LOG_BYTES = 1 << 30


def departure_delays(blob: bytes, start_ms: float, end_ms: float) -> tuple[np.ndarray, np.ndarray]:
    """(departure time in s since `start_ms`, queueing delay in ms) of each packet leaving in [start, end).

    `blob` is the log as stored (gzip, unpacked to at most MAX_LINK_LOG_BYTES: gunzip.TooLarge past
    that) or plain; header and malformed lines are skipped.
    """
    text = gunzip(blob, MAX_LINK_LOG_BYTES) if blob[:2] == b"\x1f\x8b" else blob
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
