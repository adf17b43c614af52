"""Do cells run side by side measure what they measure alone? The quick preset both ways.

Run as root (`make bench-density`). `ccsweep run quick` runs the preset's cells once as a user
runs them (admission decides how many at once) and then `--reps` times with `--jobs 1`, each run
in its own fresh store (a store never runs a stored cell again). Per cell it prints the goodput of
the concurrent run and of each run alone, the spread of the alone runs (min-max and the 95%
prediction interval of one more run), and whether the concurrent value lies within it; then
the largest difference, the wall time of each run, the attempts re-run because their emulator
ran late (each kept under cells/<id>/late/ in the store), and how many cells ran at once at most
(from the stored records' start and finish times, late attempts included).

Goodput is the figure's number: all application bytes over the flow time. `--quick` runs a
two-cell spec of short flows instead, to check the bench works (not a measurement).

`--cells-per-core` measures instead how many cells at 100 Mbit/s this machine carries, with the
emulator's old fixed 100 us release window and with each cell's own, in one run. Per arm, one
saturating cell (BBR, 100 Mbit/s, 100 ms RTT, 0.001% loss, one BDP of droptail queue, 15 s flows,
`--seconds`) first runs alone `--reps` times: its goodput's spread (the 95% prediction interval of
N more alone runs, see AloneSpread.band) is the reference. Then 1, 2, 3, ... copies of that very cell (the same id,
each a `ccsweep cell` process into a store of its own) start 1 s apart as the executor staggers
them. A step counts only if every cell is stored, on time (neither late nor starved), and with
goodput within the alone spread; the first step that does not ends the arm's search (or the
cap), and a failed or starved cell's error text is reported. Per step it records each cell's CPU
in total (os.wait4's rusage of the cell's process tree: the runner, the emulator with the
receiving TCP stack its writes run, the endpoints with the sending one) over its wall time, the
machine's busy cores from /proc/stat (softirq work included), and the cells' lateness and goodput.
`make bench-emulator` prints the result next to its own figures (`cells_per_core_rows`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from support.density import density_cell
from support.procstat import busy_jiffies

TODAY = datetime.now(UTC).strftime("%Y-%m-%d")
#: Two-sided 95% quantiles of Student's t by degrees of freedom.
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571}
QUICK_SPEC = """name: density-check
experiments:
  - name: density-check
    cc: [cubic, bbr]
    loss_percent: [0.1]
    rtt_ms: [20]
    bandwidth_mbps: [100]
    duration_s: 4
    warmup_s: 1
"""


@dataclass
class Record:
    """A stored record of one cell attempt, counted or not."""

    cell: str  # short label: algorithm and loss
    status: str
    goodput_mbps: float | None
    started: float  # epoch seconds
    finished: float
    lateness_p99_us: float | None


@dataclass
class Mode:
    """One `ccsweep run` into its own store."""

    name: str
    wall_s: float
    exit_code: int
    counted: dict[str, Record]  # label -> the cell's counted result
    late_attempts: list[Record]

    @property
    def max_at_once(self) -> int:
        """Most records whose run overlapped in time (every attempt, counted or late)."""
        spans = [(r.started, r.finished) for r in [*self.counted.values(), *self.late_attempts]]
        events = sorted([(s, 1) for s, _ in spans] + [(f, -1) for _, f in spans])
        at_once = peak = 0
        for _, step in events:
            at_once += step
            peak = max(peak, at_once)
        return peak


def epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def label_of(params: dict[str, object]) -> str:
    flows = params["flows"]
    assert isinstance(flows, list)
    uplink = params["uplink"]
    assert isinstance(uplink, dict)
    return f"{flows[0]['cc']} loss {float(uplink['loss']) * 100:g}%"


def read_record(path: Path) -> Record:
    data = json.loads(path.read_text())
    check = ((data.get("link") or {}).get("selfcheck") or {})
    return Record(cell=label_of(data["cell"]["params"]), status=data["status"], goodput_mbps=data.get("goodput_mbps"),
                  started=epoch(data["started_at"]), finished=epoch(data["finished_at"]),
                  lateness_p99_us=check.get("lateness_p99_us"))


def run_mode(name: str, spec: str, store: Path, extra: list[str]) -> Mode:
    """`ccsweep run SPEC --store STORE [extra]`, its output passed through, then its store read."""
    ccsweep = str(Path(sys.executable).with_name("ccsweep"))
    argv = [ccsweep, "run", spec, "--store", str(store), "--no-figures", *extra]
    print(f"\n== {name}: {' '.join(argv[1:])}  (load {os.getloadavg()[0]:.2f})", flush=True)
    started = time.monotonic()
    code = subprocess.run(argv, check=False).returncode
    wall = time.monotonic() - started
    counted = {r.cell: r for r in map(read_record, sorted(store.glob("cells/*/result.json")))}
    late = [read_record(p) for p in sorted(store.glob("cells/*/late/*.json"))]
    return Mode(name, wall, code, counted, late)


def spread(values: list[float]) -> tuple[float, float, float, float]:
    """(mean, min, max, half-width of the 95% prediction interval of one more run)."""
    n = len(values)
    sd = statistics.stdev(values) if n > 1 else 0.0
    half = T_975[n - 1] * sd * math.sqrt(1 + 1 / n) if n > 1 else 0.0
    return statistics.fmean(values), min(values), max(values), half


def report(concurrent: Mode, alone: list[Mode], spec_name: str, load: tuple[float, float], note: str) -> str:
    reps = len(alone)
    lines = [f"# Density: the {spec_name} preset at the default concurrency and alone, {TODAY}", "",
             f"**Machine.** {os.cpu_count()}-vCPU KVM guest (Firecracker), Linux {platform.release()}, "
             f"running as {'root' if os.geteuid() == 0 else 'a user'}. Load average (1 min) before "
             f"{load[0]:.2f}, after {load[1]:.2f}. {note}".rstrip(), "",
             f"**How.** `make bench-density` (benchmarks/density/bench.py): `ccsweep run {spec_name}` with the "
             f"default admission, then {reps} times with `--jobs 1`, each into a fresh store. Goodput as in the "
             "figure (application bytes over the flow time), in Mbit/s. 'band' is the 95% prediction interval "
             f"of one more alone run (mean +- t * sd * sqrt(1 + 1/{reps})).", "",
             "| cell | concurrent | " + " | ".join(f"alone {i + 1}" for i in range(reps))
             + " | alone mean | alone min-max | band +- | concurrent - mean | within band | within min-max |",
             "|---" * (8 + reps) + "|"]
    worst: tuple[float, str, bool] = (0.0, "", True)
    outside = compared = 0
    for label in sorted(concurrent.counted):
        values = [m.counted[label].goodput_mbps for m in alone if label in m.counted]
        alone_values = [v for v in values if v is not None]
        value = concurrent.counted[label].goodput_mbps
        if value is None or len(alone_values) < 2:
            lines.append(f"| {label} | {value} | " + " | ".join(map(str, values)) + " | | | | | | |")
            continue
        mean, low, high, half = spread(alone_values)
        diff = value - mean
        within = abs(diff) <= half
        compared, outside = compared + 1, outside + (not within)
        if abs(diff) >= abs(worst[0]):
            worst = (diff, label, within)
        lines.append(f"| {label} | {value:.2f} | " + " | ".join(f"{v:.2f}" for v in alone_values)
                     + f" | {mean:.2f} | {low:.2f}-{high:.2f} | {half:.2f} | {diff:+.2f} ({diff / mean * 100:+.1f}%) "
                     f"| {'yes' if within else 'NO'} | {'yes' if low <= value <= high else 'no'} |")
    lines += ["", f"**Largest difference**: {worst[1]}, concurrent - alone mean = {worst[0]:+.2f} Mbit/s, "
              f"{'within' if worst[2] else 'OUTSIDE'} the run-to-run band; {outside} of {compared} cells outside "
              "their band.", "",
              "| run | wall time | exit | counted on time | counted late | attempts re-run (late/) | "
              "most cells at once | lateness p99 of counted results (us) |", "|---|---|---|---|---|---|---|---|"]
    for mode in [concurrent, *alone]:
        on_time = sum(r.status == "ok" for r in mode.counted.values())
        late = sum(r.status == "late" for r in mode.counted.values())
        p99 = sorted(r.lateness_p99_us for r in mode.counted.values() if r.lateness_p99_us is not None)
        p99_text = f"{p99[0]:.0f}-{p99[-1]:.0f}" if p99 else ""
        lines.append(f"| {mode.name} | {mode.wall_s:.0f} s | {mode.exit_code} | {on_time} | {late} | "
                     f"{len(mode.late_attempts)} | {mode.max_at_once} | {p99_text} |")
    return "\n".join(lines) + "\n"


#: The arms by default: the emulator's old fixed window for every cell, and each cell's own.
DEFAULT_WINDOWS = "100,cell"
WINDOW_ENV = "CCSWEEP_LINK_RELEASE_WINDOW_US"
STAGGER_S = 1.0


@dataclass
class Step:
    """N cells started together (1 s apart): how they fared and what they cost."""

    arm: str
    cells: int
    stored: int  # cells whose result.json is in their store: measured on time
    late: int
    starved: int
    failed: int
    #: Error text of each failed or starved cell (the record's one line).
    errors: list[str]
    goodput_mbps: list[float]  # every measured cell's, late ones included
    #: Stored cells whose goodput lies outside the alone spread (None: no spread to compare with).
    outside: int | None
    lateness_p99_us: list[float]
    #: p99 run-queue delay of each cell's emulator (what else makes a cell late), where recorded.
    runqueue_p99_us: list[float]
    threshold_us: float | None
    window_us: float | None
    cpu_per_cell: float  # cores: each cell's process-tree CPU over its wall time, averaged
    emulator_share: float  # cores: the emulators' own CPU share, averaged
    machine_busy: float  # cores busy on the whole machine over the step, less the idle baseline
    wall_s: float
    load: float  # the machine's 1-minute load average at the step's end
    alone: bool = False  # one of the reference runs alone, not a step of the search

    @property
    def counts(self) -> bool:
        """Every cell stored, on time, and with goodput within the alone spread (never a reference run)."""
        return not self.alone and self.stored == self.cells and self.outside == 0


@dataclass
class AloneSpread:
    """The goodput of the density cell run alone, `--reps` times: the reference a step is held to."""

    goodput_mbps: list[float]

    def band(self, cells: int = 1) -> tuple[float, float]:
        """Where each of `cells` more alone runs falls, all of them together with 95% probability.

        The prediction interval of one more run, mean +- t * sd * sqrt(1 + 1/n), with t's quantile
        split over the step's cells (Bonferroni): otherwise eight cells that measure exactly as
        alone would still leave a 95% band a third of the time.
        """
        from scipy.stats import t as student_t

        n = len(self.goodput_mbps)
        mean, sd = statistics.fmean(self.goodput_mbps), statistics.stdev(self.goodput_mbps)
        half = float(student_t.ppf(1 - 0.025 / cells, n - 1)) * sd * math.sqrt(1 + 1 / n)
        return mean - half, mean + half

    def outside(self, values: list[float]) -> int:
        low, high = self.band(len(values))
        return sum(not low <= v <= high for v in values)


#: A started cell process and when it started.
Running = tuple[subprocess.Popen[str], float]


def run_step(arm: str, window: str | None, n: int, scratch: Path, baseline: float, seconds: float,
             alone: AloneSpread | None = None) -> Step:
    """n copies of the density cell, each a `ccsweep cell` process started STAGGER_S after the last,
    each into a fresh store of its own (a store holds a cell once)."""
    env = {k: v for k, v in os.environ.items() if k != WINDOW_ENV}
    if window is not None:
        env[WINDOW_ENV] = window
    step_dir = Path(tempfile.mkdtemp(dir=scratch))
    busy0, total0 = busy_jiffies()
    started = time.monotonic()
    processes = start_cells(n, step_dir, seconds, env)
    shares = cpu_shares(processes)
    reports = cell_reports(processes)
    wall = time.monotonic() - started
    busy1, total1 = busy_jiffies()
    machine = (busy1 - busy0) / max(total1 - total0, 1) * (os.cpu_count() or 1) - baseline
    checks, stored_goodput = stored_records(step_dir)
    shutil.rmtree(step_dir, ignore_errors=True)
    return step_of(arm, n, reports, checks, stored_goodput, alone,
                   cpu_per_cell=statistics.fmean(shares.values()), machine_busy=machine, wall_s=wall)


def start_cells(n: int, step_dir: Path, seconds: float, env: dict[str, str]) -> list[Running]:
    """Start n `ccsweep cell` processes of the density cell, STAGGER_S apart: each with its start time."""
    ccsweep = str(Path(sys.executable).with_name("ccsweep"))
    path = step_dir / "cell.json"
    path.write_text(json.dumps(density_cell(seconds)))
    processes = []
    for i in range(n):
        if i:
            time.sleep(STAGGER_S)
        argv = [ccsweep, "cell", "--cell", f"@{path}", "--store", str(step_dir / f"store-{i}")]
        processes.append((subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env),
                          time.monotonic()))
    return processes


def cpu_shares(processes: list[Running]) -> dict[int, float]:
    """Wait for every cell; per pid, its CPU time over its own wall time (each reaped as it ends)."""
    shares: dict[int, float] = {}
    while len(shares) < len(processes):
        time.sleep(0.1)
        for process, began in processes:
            if process.pid in shares:
                continue
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                process.returncode = os.waitstatus_to_exitcode(status)
                shares[pid] = (usage.ru_utime + usage.ru_stime) / max(time.monotonic() - began, 1e-3)
    return shares


def cell_reports(processes: list[Running]) -> list[dict[str, Any]]:
    """Each ended cell's one-line JSON report (status failed when it printed none)."""
    reports = []
    for process, _ in processes:
        assert process.stdout is not None
        lines = [line for line in process.stdout.read().splitlines() if line.startswith("{")]
        reports.append(json.loads(lines[-1]) if lines else {"status": "failed"})
    return reports


def stored_records(step_dir: Path) -> tuple[list[dict[str, Any]], list[float]]:
    """The self-checks of every record the step's stores hold (results and attempts), and the
    goodput of the stored on-time results."""
    records = [json.loads(p.read_text()) for p in sorted(step_dir.glob("store-*/cells/*/**/*.json"))
               if p.name != "timeseries.json" and '"selfcheck"' in p.read_text()]
    checks = [((r.get("link") or {}).get("selfcheck") or {}) for r in records]
    stored = [json.loads(p.read_text()) for p in sorted(step_dir.glob("store-*/cells/*/result.json"))]
    return checks, [float(r["goodput_mbps"]) for r in stored if r.get("status") == "ok"]


def step_of(arm: str, n: int, reports: list[dict[str, Any]], checks: list[dict[str, Any]], stored_goodput: list[float],
            alone: AloneSpread | None, *, cpu_per_cell: float, machine_busy: float, wall_s: float) -> Step:
    """The step's row: the cells' reports and stored records counted and summarised."""
    windows = {c.get("release_window_us") for c in checks}
    thresholds = {c.get("threshold_us") for c in checks}
    return Step(arm=arm, cells=n, stored=len(stored_goodput), late=sum(r.get("status") == "late" for r in reports),
                starved=sum(r.get("status") == "starved" for r in reports),
                failed=sum(r.get("status") not in ("ok", "late", "starved") for r in reports),
                errors=[f"{r.get('status')}: {r.get('error') or 'no report'}" for r in reports
                        if r.get("status") not in ("ok", "late")],
                goodput_mbps=[float(r["goodput_mbps"]) for r in reports if r.get("goodput_mbps") is not None],
                outside=alone.outside(stored_goodput) if alone is not None else None,
                lateness_p99_us=[float(r["lateness_p99_us"]) for r in reports if r.get("lateness_p99_us") is not None],
                runqueue_p99_us=[float(c["runqueue_p99_us"]) for c in checks if c.get("runqueue_p99_us") is not None],
                threshold_us=next(iter(thresholds)) if len(thresholds) == 1 else None,
                window_us=next(iter(windows)) if len(windows) == 1 else None,
                cpu_per_cell=cpu_per_cell,
                emulator_share=statistics.fmean([float(r["cpu_share"]) for r in reports if r.get("cpu_share")] or [0]),
                machine_busy=machine_busy, wall_s=wall_s, load=os.getloadavg()[0])


def idle_baseline(seconds: float = 3.0) -> float:
    """Cores busy on the machine with no cell running (other work, the system)."""
    busy0, total0 = busy_jiffies()
    time.sleep(seconds)
    busy1, total1 = busy_jiffies()
    return (busy1 - busy0) / max(total1 - total0, 1) * (os.cpu_count() or 1)


def window_arms(windows: str) -> list[tuple[str, str | None]]:
    """(label, fixed window or None for the cell's own) from "100,cell,500" (us)."""
    from ccsweep.linkrules import release_window_us

    arms: list[tuple[str, str | None]] = []
    for item in windows.split(","):
        if item.strip() == "cell":
            own = release_window_us(parse_cell(density_cell(15)))
            arms.append((f"per cell ({own:g} us at 100 ms)", None))
        else:
            window = float(item)
            arms.append((f"{window:g} us{' (old, fixed)' if window == 100 else ', fixed'}", f"{window:g}"))
    return arms


def parse_cell(data: dict[str, object]) -> Any:
    from ccsweep.cell import Cell

    return Cell.model_validate(data)


def overlapping(cells: int, seconds: float) -> bool:
    """Whether `cells` cells started STAGGER_S apart all run at once: the last starts before the first's flow
    ends. Past that a step of n cells is not n at once, and what it shows is not n cells per machine."""
    return (cells - 1) * STAGGER_S < seconds


def cells_per_core(max_cells: int = 8, seconds: float = 15.0, log: Any = print,
                   windows: str = DEFAULT_WINDOWS, reps: int = 5,
                   first_cells: int = 1) -> tuple[list[Step], dict[str, AloneSpread]]:
    """Per arm: the cell alone `reps` times, then `first_cells`, one more, ... at once until a step does not
    count (or max_cells). Starting above 1 saves the steps an earlier run showed to count; the limit
    found is then only the limit if the first step counts.

    Returns every step and each arm's alone spread (an arm whose alone runs were not all stored
    on time has none, and no steps).
    """
    steps: list[Step] = []
    spreads: dict[str, AloneSpread] = {}
    with tempfile.TemporaryDirectory(prefix="ccsweep-cpc-") as tmp:
        for arm, window in window_arms(windows):
            baseline = idle_baseline()
            log(f"== {arm}: idle baseline {baseline:.2f} cores busy")
            alone = [replace(run_step(arm, window, 1, Path(tmp), baseline, seconds), alone=True) for _ in range(reps)]
            steps += alone
            for i, run in enumerate(alone):
                log(f"alone {i + 1}: {describe(run)}")
            if not all(a.stored == 1 for a in alone):
                log("alone: not every run stored on time; no reference, arm skipped")
                continue
            spreads[arm] = AloneSpread([g for a in alone for g in a.goodput_mbps])
            low, high = spreads[arm].band()
            log(f"alone x{reps}: goodput {', '.join(f'{g:.2f}' for g in spreads[arm].goodput_mbps)} Mbit/s, "
                f"band {low:.2f}-{high:.2f}")
            for n in range(first_cells, max_cells + 1):
                step = run_step(arm, window, n, Path(tmp), baseline, seconds, spreads[arm])
                steps.append(step)
                log(f"{n} cell(s): {describe(step)}, {step.outside} outside the alone band")
                if not step.counts:
                    break
    return steps, spreads


def describe(step: Step) -> str:
    """One step in a log line: outcome, goodput, timing, cost and the errors of cells that failed."""
    return (f"{step.stored} stored on time, {step.late} late, {step.starved} starved, {step.failed} failed, goodput "
            f"{', '.join(f'{g:.2f}' for g in step.goodput_mbps)} Mbit/s, lateness p99 "
            f"{', '.join(f'{v:.0f}' for v in step.lateness_p99_us)} us, run-queue p99 "
            f"{', '.join(f'{v:.0f}' for v in step.runqueue_p99_us)} us (threshold {step.threshold_us}), window "
            f"{step.window_us} us, {step.cpu_per_cell:.3f} cores per cell (emulator {step.emulator_share:.3f}), "
            f"machine {step.machine_busy:.2f} cores busy, load {step.load:.2f}"
            + "".join(f"\n  {error}" for error in step.errors))


def best_steps(steps: list[Step]) -> dict[str, Step | None]:
    """Per arm, the largest step that counts (None: not even one cell)."""
    out: dict[str, Step | None] = {}
    for arm in dict.fromkeys(s.arm for s in steps if not s.alone):
        good = [s for s in steps if s.arm == arm and s.counts]
        out[arm] = max(good, key=lambda s: s.cells) if good else None
    return out


def cells_per_core_rows(steps: list[Step]) -> list[tuple[str, str, str]]:
    """(measure, setting, result) rows for a table: cells per core that count, and CPU per cell."""
    cores = os.cpu_count() or 1
    measure = "cells per core at 100 Mbit/s, all stored on time, goodput as alone"
    rows = []
    for arm, best in best_steps(steps).items():
        capped = best is not None and all(s.counts for s in steps if s.arm == arm and not s.alone)
        if best is None:
            rows.append((measure, arm, "none: one cell alone did not count"))
            continue
        rows.append((measure, arm,
                     f"{best.cells / cores:.1f} ({best.cells} cells on {cores} cores"
                     f"{', the cap: more may fit' if capped else ''}; p99 up to {max(best.lateness_p99_us):.0f} us "
                     f"of {best.threshold_us:.0f})"))
        rows.append(("CPU per cell at 100 Mbit/s in total", arm,
                     f"{best.cpu_per_cell:.2f} cores (emulator {best.emulator_share:.2f}); machine "
                     f"{best.machine_busy / best.cells:.2f} cores per cell incl. softirq, at {best.cells} at once"))
    return rows


def cells_per_core_report(steps: list[Step], spreads: dict[str, AloneSpread], load: tuple[float, float]) -> str:
    cores = os.cpu_count() or 1
    during = [s.load for s in steps]  # reference runs included
    during_text = f", during {min(during):.2f}-{max(during):.2f} (at each step's end)" if during else ""
    lines = [f"# Cells per core at 100 Mbit/s by release window, {TODAY}", "",
             f"**Machine.** {cores}-vCPU KVM guest (Firecracker), Linux {platform.release()}, running as "
             f"{'root' if os.geteuid() == 0 else 'a user'}. Load average (1 min) before {load[0]:.2f}{during_text}, "
             f"after {load[1]:.2f}. {os.environ.get('BENCH_NOTE', '')}".rstrip(), "",
             f"**How.** `python -m benchmarks.density.bench --cells-per-core {' '.join(sys.argv[2:])}`".rstrip()
             + " (also printed by `make bench-emulator`): "
             "one cell (BBR, 100 Mbit/s, 100 ms RTT, 0.001% loss, droptail 1 BDP, 15 s flows unless "
             "`--seconds` said otherwise) alone `--reps` times for the reference spread of its goodput (the 95% "
             "prediction interval of one more alone run, mean +- t * sd * sqrt(1 + 1/n), t's quantile split over "
             "the N cells of a step so that all N fall in it together with 95% probability); then N copies of it at "
             "once, each a `ccsweep cell` process into a store of its own, started 1 s apart; N = 1, 2, ... until a "
             "step does not count. A step counts when every cell is stored, on time (neither late, by the emulator's "
             "packet lateness or its run-queue delay, nor starved), and "
             "with goodput within the alone band. CPU per cell: the cell's process tree (rusage) over its wall time; "
             "machine: busy cores from /proc/stat over the step, less the idle baseline before the arm.", ""]
    lines += ["| window | alone goodput (Mbit/s) | band for 1 cell (Mbit/s) | band for each of 8 (Mbit/s) |",
              "|---|---|---|---|"]
    for arm, alone in spreads.items():
        (low, high), (low8, high8) = alone.band(), alone.band(8)
        lines.append(f"| {arm} | {', '.join(f'{g:.2f}' for g in alone.goodput_mbps)} | {low:.2f}-{high:.2f} | "
                     f"{low8:.2f}-{high8:.2f} |")
    lines += ["", "| window | cells at once | stored on time | late | starved | failed | goodput (Mbit/s) | "
              "outside alone band | counts | lateness p99 (us) | run-queue p99 (us) | threshold (us) | window (us) | "
              "CPU per cell (cores) | emulator (cores) | machine busy (cores) | wall (s) | load (1 min) |",
              "|---" * 18 + "|"]
    for s in steps:
        goodput = f"{min(s.goodput_mbps):.2f}-{max(s.goodput_mbps):.2f}" if s.goodput_mbps else ""
        lines.append(f"| {s.arm} | {'1, alone (reference)' if s.alone else s.cells} | {s.stored} | {s.late} | "
                     f"{s.starved} | {s.failed} | {goodput} | {'' if s.alone else s.outside} | "
                     f"{'' if s.alone else 'yes' if s.counts else 'NO'} | "
                     f"{', '.join(f'{v:.0f}' for v in s.lateness_p99_us)} | "
                     f"{', '.join(f'{v:.0f}' for v in s.runqueue_p99_us)} | {s.threshold_us} | {s.window_us} | "
                     f"{s.cpu_per_cell:.3f} | {s.emulator_share:.3f} | {s.machine_busy:.2f} | {s.wall_s:.0f} | "
                     f"{s.load:.2f} |")
    errors = [(s, e) for s in steps for e in s.errors]
    if errors:
        lines += ["", "**Cells that failed or were starved** (their error text, which ended the search):", ""]
        lines += [f"- {s.arm}, {s.cells} at once: {e}" for s, e in errors]
    lines += ["", "| measure | window | result |", "|---|---|---|"]
    lines += [f"| {m} | {w} | {r} |" for m, w, r in cells_per_core_rows(steps)]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", default="quick", help="preset or spec file (default: quick)")
    parser.add_argument("--reps", type=int,
                        help="runs alone, 2 to 5 (default 3); with --cells-per-core 2 to 10 (default 5: the spread "
                             "that a step is held to needs a fair estimate of the run-to-run deviation, and five "
                             "close runs can understate it)")
    parser.add_argument("--quick", action="store_true", help="a two-cell spec of 4 s flows: checks the bench works")
    parser.add_argument("--out", type=Path, help="also write the table here (Markdown)")
    parser.add_argument("--cells-per-core", action="store_true",
                        help="measure cells per core at 100 Mbit/s (all stored on time, goodput as alone), "
                             "100 us vs per-cell window; --reps alone runs give the goodput reference")
    parser.add_argument("--max-cells", type=int, default=8, help="--cells-per-core: most cells at once")
    parser.add_argument("--first-cells", type=int, default=1,
                        help="--cells-per-core: cells at once of the first step (default 1)")
    parser.add_argument("--seconds", type=float, default=15.0, help="--cells-per-core: flow seconds of each cell")
    parser.add_argument("--windows", default=DEFAULT_WINDOWS,
                        help="--cells-per-core: release windows to compare, us or 'cell' (default: 100,cell)")
    options = parser.parse_args()
    if options.reps is None:
        options.reps = 5 if options.cells_per_core else 3
    most_reps = 10 if options.cells_per_core else 5
    if not 2 <= options.reps <= most_reps:
        parser.error(f"--reps: give 2 to {most_reps} (the spread needs at least two runs)")
    if not 1 <= options.first_cells <= options.max_cells:
        parser.error("--first-cells: give 1 to --max-cells")
    if options.cells_per_core and not overlapping(options.max_cells, options.seconds):
        parser.error(f"--max-cells: {options.max_cells} cells started {STAGGER_S:g} s apart do not all run at once "
                     f"with {options.seconds:g} s flows; give --seconds above {(options.max_cells - 1) * STAGGER_S:g}")
    if options.cells_per_core:
        if os.geteuid() != 0:
            sys.exit("run as root (network namespaces and TUN devices)")
        before = os.getloadavg()[0]
        steps, spreads = cells_per_core(options.max_cells, options.seconds, windows=options.windows,
                                        reps=options.reps, first_cells=options.first_cells)
        text = cells_per_core_report(steps, spreads, (before, os.getloadavg()[0]))
        print("\n" + text)
        if options.out:
            options.out.parent.mkdir(parents=True, exist_ok=True)
            options.out.write_text(text)
            print(f"written: {options.out}")
        return
    if os.geteuid() != 0:
        sys.exit("run as root (network namespaces and TUN devices)")
    with tempfile.TemporaryDirectory(prefix="ccsweep-density-") as tmp:
        spec = options.spec
        if options.quick:
            spec = str(Path(tmp) / "density-check.yaml")
            Path(spec).write_text(QUICK_SPEC)
        before = os.getloadavg()[0]
        concurrent = run_mode("concurrent", spec, Path(tmp) / "concurrent", [])
        alone = [run_mode(f"alone {i + 1}", spec, Path(tmp) / f"alone-{i + 1}", ["--jobs", "1"])
                 for i in range(options.reps)]
        text = report(concurrent, alone, Path(spec).stem, (before, os.getloadavg()[0]),
                      os.environ.get("BENCH_NOTE", ""))
    print("\n" + text)
    if options.out:
        options.out.parent.mkdir(parents=True, exist_ok=True)
        options.out.write_text(text)
        print(f"written: {options.out}")


if __name__ == "__main__":
    main()
