"""Is a 1 Gbit/s cell on time on this machine, alone and with another cell beside it?

Run as root. The cell is the loss-table preset's (1 Gbit/s, 50 ms RTT, one BDP of droptail queue,
64 MB buffers, no loss, symmetric path; BBR by default), its flow time scaled to `--seconds`, run
as the executor runs it (`ccsweep cell`, the window and lateness threshold its RTT gets: 125 us and
500 us). Each repetition runs it alone and then beside a 100 Mbit/s cell of the density bench
(started 1 s before it, with a flow 5 s longer, so it spans the whole of it). Per run: the
emulator's lateness p99 against the goal (< 200 us) and the cell's threshold, its status,
goodput and the emulator's CPU.

    python -m benchmarks.emulator.gigabit --reps 3 --seconds 15
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from support.density import density_cell

GOAL_P99_US = 200.0


def gigabit_cell(cc: str, seconds: float) -> dict[str, Any]:
    from ccsweep.expand import expand
    from ccsweep.specload import load_spec

    spec = load_spec("loss-table")
    spec = spec.model_copy(update={"time_scale": seconds / spec.experiments[0].duration_s})
    for cell in expand(spec):
        p = cell.params
        if p.cc_label == cc and p.loss == 0 and p.downlink.loss == 0 and p.downlink.delay_ms == p.uplink.delay_ms:
            return cell.model_dump(mode="json")
    raise SystemExit(f"no symmetric loss-free {cc} cell in the loss-table preset")


def start(cell: dict[str, Any], scratch: Path, name: str) -> tuple[subprocess.Popen[str], Path, float]:
    path, stderr_path = scratch / f"{name}.json", scratch / f"{name}.stderr"
    path.write_text(json.dumps(cell))
    with stderr_path.open("w") as stderr:
        process = subprocess.Popen([sys.executable, "-m", "ccsweep", "cell", "--cell", f"@{path}", "--store",
                                    str(scratch / f"store-{name}-{time.monotonic_ns()}")],
                                   stdout=subprocess.PIPE, stderr=stderr, text=True)
    return process, stderr_path, time.monotonic()


def outcome(started: tuple[subprocess.Popen[str], Path, float]) -> dict[str, Any]:
    """The cell's report, with `tree_cores`: its whole process tree's CPU (rusage) over its wall time."""
    process, stderr_path, began = started
    assert process.stdout is not None
    out = process.stdout.read()
    _, _, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - began
    process.returncode = 0  # reaped here, by wait4
    lines = [line for line in out.splitlines() if line.startswith("{")]
    report = json.loads(lines[-1]) if lines else {"status": "failed",
                                                  "error": stderr_path.read_text(errors="replace").strip()[-300:]}
    report["tree_cores"] = (usage.ru_utime + usage.ru_stime) / wall
    return report


def run(cell: dict[str, Any], beside: dict[str, Any] | None, scratch: Path, label: str) -> dict[str, Any]:
    neighbour = None
    if beside is not None:
        neighbour = start(beside, scratch, f"{label}-beside")
        time.sleep(1.0)
    report = outcome(start(cell, scratch, label))
    if neighbour is not None:
        report["beside"] = outcome(neighbour)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cc", default="bbr", choices=["bbr", "cubic"])
    parser.add_argument("--seconds", type=float, default=15.0, help="flow time of the 1 Gbit/s cell")
    parser.add_argument("--reps", type=int, default=3)
    options = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root (network namespaces and TUN devices)")
    cell = gigabit_cell(options.cc, options.seconds)
    beside = density_cell(options.seconds + 5)
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    rows: dict[str, list[dict[str, Any]]] = {"alone": [], "beside a 100 Mbit/s cell": []}
    with tempfile.TemporaryDirectory(prefix="ccsweep-gigabit-") as tmp:
        for rep in range(options.reps):
            for arm, neighbour in (("alone", None), ("beside a 100 Mbit/s cell", beside)):
                report = run(cell, neighbour, Path(tmp), f"{rep}-{len(rows[arm])}")
                rows[arm].append(report)
                other = report.get("beside", {})
                print(f"rep {rep + 1} {arm}: {report.get('status')}, p99 {report.get('lateness_p99_us')} us, "
                      f"goodput {report.get('goodput_mbps')}, emulator {report.get('cpu_share')}, "
                      f"cell {report['tree_cores']:.2f} cores"
                      + (f"; the 100 Mbit/s cell: {other.get('status')}, p99 {other.get('lateness_p99_us')} us"
                         if other else "") + (f"; error: {report.get('error')}" if report.get("error") else ""),
                      flush=True)
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"\n| 1 Gbit/s {options.cc} cell, 50 ms RTT | runs | late | lateness p99 (us), median (range) | "
          "p99 < 200 us | goodput (Mbit/s) | emulator (cores) | cell in total (cores) |")
    print("|---|---|---|---|---|---|---|---|")
    for arm, reports in rows.items():
        p99 = [float(r["lateness_p99_us"]) for r in reports if r.get("lateness_p99_us") is not None]
        goodput = [float(r["goodput_mbps"]) for r in reports if r.get("goodput_mbps") is not None]
        cpu = [float(r["cpu_share"]) for r in reports if r.get("cpu_share") is not None]
        tree = [float(r["tree_cores"]) for r in reports]
        late = sum(r.get("status") == "late" for r in reports)

        def spread(values: list[float], fmt: str) -> str:
            if not values:
                return "-"
            return f"{format(statistics.median(values), fmt)} ({format(min(values), fmt)}-{format(max(values), fmt)})"

        print(f"| {arm} | {len(reports)} | {late} | {spread(p99, '.0f')} | {sum(v < GOAL_P99_US for v in p99)} of "
              f"{len(p99)} | {spread(goodput, '.0f')} | {spread(cpu, '.2f')} | {spread(tree, '.2f')} |")


if __name__ == "__main__":
    main()
