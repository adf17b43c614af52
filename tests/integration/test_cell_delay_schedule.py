"""A real cell whose uplink delay steps: the spec's delay_schedule goes through expansion, the
runner's delay trace and the emulator to the path, on the flows' clock.

20 ms of RTT, the uplink's one-way delay 60 ms from 3 s into the flow and 10 ms again from 6 s:
the sender's smoothed RTT (tcp_info, every 100 ms) reads 20 ms plus at most a BDP of queue (the
queue holds one: 20 ms at 20 Mbit/s), then 70 ms plus that, then 20 again. A schedule that
started with the emulator instead of the flows (2 s earlier) would put 70 ms into the first window.
"""

from __future__ import annotations

import statistics

from ccsweep.store import open_store

SPEC = {"name": "stepped", "experiments": [{
    "name": "stepped", "cc": ["bbr"], "loss_percent": [0], "rtt_ms": [20], "bandwidth_mbps": [20],
    "duration_s": 8, "warmup_s": 1, "queue": [{"kind": "droptail", "bdp": 1, "min_bytes": 30000}],
    "delay_schedule": {"steps": [{"at_s": 3, "delay_ms": 60}, {"at_s": 6, "delay_ms": 10}]}}]}


def test_the_rtt_follows_the_delay_schedule_from_the_flows_start(cells):
    (cell,) = cells.of(SPEC)
    run = cells.run(cell)
    assert run.returncode == 0 and run.result is not None, run.describe()
    series = open_store(str(cells.store)).get_timeseries(cell.id).flows[0]
    srtt = list(zip(series.t, (us / 1000 for us in series.rtt_us), strict=True))

    def window(start: float, end: float) -> list[float]:
        return [ms for t, ms in srtt if start <= t < end]

    before, stepped, after = window(1.5, 3.0), window(4.0, 6.0), window(7.0, 8.0)
    message = f"srtt {[(round(t, 1), round(ms, 1)) for t, ms in srtt]}; {run.describe()}"
    assert before and stepped and after, message
    assert 20 <= statistics.median(before) <= 45, message
    assert min(stepped) >= 69 and statistics.median(stepped) <= 95, message
    assert 20 <= statistics.median(after) <= 45, message
