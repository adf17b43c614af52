"""Few-packet cells late after idle: two emulator builds side by side on the cells that showed it.

ReBBR's RTT experiment has CUBIC at 50 % loss on a 100 Mbit/s link: a few packets a second, with
idle stretches of seconds between bursts. Through Argo these two cells (2 and 10 ms RTT) came back
late on every attempt, with their timers on time. Their time series put every late 100 ms interval
right after such an idle stretch. A constant-rate link logs each delivery opportunity (8,300 a
second at 100 Mbit/s), and the emulator caught up on an idle stretch's opportunities in the loop,
at the next packet's arrival: after 27 s, 225,000 log lines were written while the burst waited.

Run as root from the repository root, with the emulator built before and after the change:

    .venv/bin/python -m benchmarks.lateness.idle_catch_up --before OLD/ccsweep-link \
        --after NEW/ccsweep-link --reps 3 --out benchmarks/results/DATE-idle-catch-up

Each repetition runs the two cells once with each build (`ccsweep run --max-attempts 1`, both cells
at once, a fresh store each, the builds taking turns and alternating which goes first) and writes
`attempts.csv`: per attempt, the build, its lateness and what its record measured about it, and,
from its time series, the late 100 ms intervals and the longest idle stretch before one of them.
`python -m benchmarks.lateness.idle_catch_up_report DIR` turns the folder into its README.
"""

from __future__ import annotations

import argparse
import gzip
import os
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.lateness.demo_runs import ATTEMPT_KINDS, attempt_row, cpu_model, write_csv
from ccsweep.plan import planned_cells
from ccsweep.result import CellResult, LinkSeries, TimeSeries
from ccsweep.store import open_store
from ccsweep.store.base import TIMESERIES, attempt_prefix

SPEC = Path(__file__).with_name("idle-cells.yaml")
SWEEP = "idle-cells"
#: The cells' flows last 120 s; a run of both at once, with set-up, takes about 130 s.
RUN_TIMEOUT_S = 600.0


def idle_columns(series: LinkSeries | None, threshold_us: float) -> dict[str, Any]:
    """The late intervals of an attempt's time series and how long the link was idle before them.

    Idle: no packet entered the data direction (`uplink_in_packets` unchanged). For each late
    interval (p99 over the threshold), the idle time is the time since the last interval before it
    in which a packet arrived; `idle_before_late_s` is the longest of those.
    """
    if series is None or not series.uplink_in_packets:
        return {"late_intervals": None, "idle_before_late_s": None, "longest_idle_s": None}
    last_arrival: float | None = None
    idle_before_late = 0.0
    longest_idle = 0.0
    late = 0
    arrived = series.uplink_in_packets
    for i in range(1, len(series.t)):
        t = series.t[i]
        idle = t - last_arrival if last_arrival is not None else 0.0
        if series.lateness_p99_us[i] > threshold_us:
            late += 1
            idle_before_late = max(idle_before_late, idle)
        if arrived[i] > arrived[i - 1]:
            longest_idle = max(longest_idle, idle)
            last_arrival = t
    return {"late_intervals": late, "idle_before_late_s": round(idle_before_late, 1),
            "longest_idle_s": round(longest_idle, 1)}


def attempt_series(store_url: str, cell_id: str) -> list[tuple[CellResult, TimeSeries | None]]:
    """Every attempt of a cell in a store, kept or stored, with its time series."""
    store = open_store(store_url)
    found: list[tuple[CellResult, TimeSeries | None]] = []
    for kind in ATTEMPT_KINDS:
        for key in store.list_keys(attempt_prefix(cell_id, kind)):
            record = CellResult.model_validate_json(store.read_bytes(key) or b"")
            data = store.attempt_files(key).get(TIMESERIES)
            found.append((record, TimeSeries.model_validate_json(gzip.decompress(data)) if data else None))
    result = store.get_result(cell_id)
    if result is not None:
        found.append((result, store.get_timeseries(cell_id)))
    return found


def run_once(binary: Path, store_url: str) -> int:
    """`ccsweep run` of the two cells with one emulator build; its exit code."""
    env = {**os.environ, "CCSWEEP_LINK": str(binary)}
    argv = [sys.executable, "-m", "ccsweep", "run", str(SPEC), "--store", store_url, "--max-attempts", "1",
            "--jobs", "2", "--no-figures"]
    return subprocess.run(argv, env=env, timeout=RUN_TIMEOUT_S, check=False).returncode


def rows_of(rep: int, build: str, store_url: str) -> list[dict[str, Any]]:
    rows = []
    for cell in planned_cells(open_store(store_url), SWEEP):
        for record, series in attempt_series(store_url, cell.id):
            check = record.link.selfcheck if record.link else None
            threshold = check.threshold_us if check and check.threshold_us else 400.0
            row = {"build": build, "rtt_ms": record.cell.params.rtt_ms, **attempt_row(rep, record),
                   **idle_columns(series.link if series else None, threshold)}
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="ccsweep-link built before the change")
    parser.add_argument("--after", type=Path, required=True, help="ccsweep-link built after it")
    parser.add_argument("--before-commit", required=True, help="the commit --before was built at (hex)")
    parser.add_argument("--after-commit", required=True, help="the commit --after was built at (hex)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions of each build (1-20, default 3)")
    parser.add_argument("--out", type=Path, required=True, help="folder for attempts.csv and command.txt")
    args = parser.parse_args(argv)
    if not 1 <= args.reps <= 20:
        parser.error(f"--reps: {args.reps} is outside 1-20")
    for name in ("before_commit", "after_commit"):
        if not re.fullmatch(r"[0-9a-f]{7,40}", getattr(args, name)):
            parser.error(f"--{name.replace('_', '-')}: {getattr(args, name)!r} is not 7-40 lowercase hex digits")
    for name in ("before", "after"):
        if not os.access(getattr(args, name), os.X_OK):
            parser.error(f"--{name}: {getattr(args, name)} is not an executable file")
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ccsweep-idle-") as scratch:
        for rep in range(1, args.reps + 1):
            builds = [("before", args.before), ("after", args.after)]
            for build, binary in builds if rep % 2 else builds[::-1]:
                store_url = f"file://{scratch}/{build}-{rep}"
                code = run_once(binary, store_url)
                print(f"rep {rep} {build}: ccsweep run exited {code}", file=sys.stderr)
                rows += rows_of(rep, build, store_url)
    write_csv(args.out / "attempts.csv", rows)
    (args.out / "command.txt").write_text(
        f"python -m benchmarks.lateness.idle_catch_up --before BEFORE --after AFTER --before-commit "
        f"{args.before_commit} --after-commit {args.after_commit} --reps {args.reps} --out OUT\n"
        f"machine: {cpu_model()}, {os.cpu_count()} CPUs, Linux {platform.release()}\n"
        f"builds: BEFORE at {args.before_commit}, AFTER at {args.after_commit} (`make emulator` in each)\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
