"""Idle CPUs that poll against idle CPUs that halt: does a CPU-latency request keep cells on time?

On this kind of guest (cpuidle driver haltpoll, `haltpoll.guest_halt_poll_ns=0` on the kernel's
command line) an idle vCPU halts at once, and the hypervisor must run it again before a timer
due there is served; /proc/stat counts that wait as steal. The demo's late cells had their run
queue idle and 6-9 % of a CPU stolen (benchmarks/results/2026-11-29-demo-cold/). If the steal
comes from halting, holding /dev/cpu_dma_latency at 0 while a cell runs ($CCSWEEP_IDLE_WAKE_US=0,
runner/wakelatency.py: idle CPUs poll instead of halting) should take most of it away. The
`halt` arm asks for none ($CCSWEEP_IDLE_WAKE_US=off), the `poll` arm for 0 us.

Run as root from the repository root: `.venv/bin/python -m benchmarks.lateness.idle_wake --pairs 6
--out benchmarks/results/DATE-idle-wake`. Each pair runs the same small sweep twice from an empty
store, once with each arm, in alternating order (halt first in odd pairs): the quick preset's
path (100 Mbit/s, 100 ms, 1 BDP drop-tail) at 0.001 % loss, CUBIC and BBR, one cell at a time and
one attempt each, so a late attempt is kept as it came and nothing is run again.

It writes into `--out`: `attempts.csv` (one row per attempt, with its arm; the columns of
demo_runs.attempt_row), `machine.csv` (load and the busiest CPU's steal and softirq each second,
labelled with the arm running) and `command.txt`; it prints each run's attempts as they end.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from benchmarks.lateness.demo_runs import MachineLog, cpu_model, store_rows, write_csv
from ccsweep.runner.wakelatency import ENV as IDLE_WAKE_ENV

#: The two arms, as $CCSWEEP_IDLE_WAKE_US: no request (idle CPUs halt), and a 0 us request (idle CPUs poll).
ARMS = {"halt": "off", "poll": "0"}
SWEEP = "idle-wake"


def sweep_spec(duration_s: float) -> dict[str, Any]:
    """The quick preset's path at its lowest loss rate, CUBIC and BBR."""
    return {"name": SWEEP, "experiments": [{
        "name": SWEEP, "title": "idle wake: quick's path at 0.001 % loss", "figure": "goodput-vs-loss",
        "cc": ["cubic", "bbr"], "loss_percent": [0.001], "rtt_ms": [100], "bandwidth_mbps": [100],
        "queue": [{"kind": "droptail", "bdp": 1, "min_bytes": 30000}], "duration_s": duration_s,
        "warmup_s": min(5.0, duration_s / 4)}]}


def run_arm(arm: str, spec: Path, pair: int) -> list[dict[str, Any]]:
    """One cold run of the sweep with `arm`'s request; every attempt it left, tagged with the arm."""
    env = {**os.environ, IDLE_WAKE_ENV: ARMS[arm]}
    with tempfile.TemporaryDirectory(prefix="ccsweep-idle-wake-") as scratch:
        store = Path(scratch) / "store"
        done = subprocess.run([sys.executable, "-m", "ccsweep", "run", str(spec), "--store", str(store),
                               "--no-figures", "--jobs", "1", "--max-attempts", "1"],
                              capture_output=True, text=True, timeout=1800, env=env)
        rows = store_rows(pair, store, SWEEP)
    if not rows:
        raise SystemExit(f"pair {pair}, {arm}: no attempt stored (exit {done.returncode}): {done.stderr[-2000:]}")
    return [{"arm": arm, **row} for row in rows]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=6, help="runs of each arm, interleaved (default 6)")
    parser.add_argument("--duration", type=float, default=20, help="flow seconds per cell (default 20, quick's)")
    parser.add_argument("--out", type=Path, required=True, help="folder for the CSVs")
    args = parser.parse_args(argv)
    if not 1 <= args.pairs <= 50:
        parser.error("--pairs: give 1 to 50")
    if not 5 <= args.duration <= 120:
        parser.error("--duration: give 5 to 120 s")
    args.out.mkdir(parents=True, exist_ok=True)
    machine = MachineLog()
    attempts: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="ccsweep-idle-wake-spec-") as folder:
            spec = Path(folder) / f"{SWEEP}.yaml"
            spec.write_text(yaml.safe_dump(sweep_spec(args.duration), sort_keys=False))
            for pair in range(1, args.pairs + 1):
                order = ["halt", "poll"] if pair % 2 else ["poll", "halt"]
                for arm in order:
                    machine.run = pair
                    machine.label = arm
                    rows = run_arm(arm, spec, pair)
                    attempts += rows
                    print(f"pair {pair} {arm}: " + ", ".join(
                        f"{r['cc']} {r['status']} p99 {r['lateness_p99_us']:.0f} us steal {r['steal_pct']}%"
                        for r in rows), flush=True)
    finally:
        machine.stop()
    write_csv(args.out / "attempts.csv", attempts)
    write_csv(args.out / "machine.csv", machine.rows)
    (args.out / "command.txt").write_text(
        f"python -m benchmarks.lateness.idle_wake --pairs {args.pairs} --duration {args.duration:g} --out {args.out}\n"
        f"machine: {os.cpu_count()} CPUs ({cpu_model()}), Linux {platform.release()}, cpuidle "
        f"{Path('/sys/devices/system/cpu/cpuidle/current_driver').read_text().strip()}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
