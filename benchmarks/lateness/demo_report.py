"""The README of a `demo_runs` folder, made from its CSVs alone: `python -m benchmarks.lateness.demo_report DIR`.

Every number in it comes from `runs.csv`, `attempts.csv` and `machine.csv` beside it; running it
again on the same files gives the same README, byte for byte. A section of prose written by hand
may follow the generated part, below its end marker, and is kept as it is.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

END = "<!-- end of the generated part: what follows is written by hand -->"
#: The whole study in one sitting on a quiet machine, whose numbers README.md's first paragraph quotes.
ONE_SITTING = Path(__file__).resolve().parents[1] / "results" / "2026-11-30-full-study-one-sitting"


def fmt(value: object, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "-"
    return f"{float(value):,.{digits}f}" if isinstance(value, (int, float)) else str(value)


@dataclass(frozen=True)
class Timing:
    """One run's time, from its attempts' own start and end times (seconds)."""

    span_s: float  # first attempt's start to the last one's end
    peak: int  # attempts running at once, at most
    attempt_s: float  # every attempt's own time, summed
    rerun_s: float  # of it, attempts that were run again (late, starved, failed)
    longest_s: float
    tail_s: float  # after the last attempt started: the run waited for its last cells

    @property
    def mean(self) -> float:
        """Attempts running at once on average over the span."""
        return self.attempt_s / self.span_s


def attempt_times(rows: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Each attempt's start and end, as times."""
    return (pd.to_datetime(rows["started_at"], format="ISO8601"),
            pd.to_datetime(rows["finished_at"], format="ISO8601"))


def timing(rows: pd.DataFrame) -> Timing:
    start, end = attempt_times(rows)
    seconds = (end - start).dt.total_seconds()
    edges = sorted([(t, 1) for t in start] + [(t, -1) for t in end], key=lambda e: (e[0], e[1]))
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return Timing(span_s=(end.max() - start.min()).total_seconds(), peak=peak, attempt_s=float(seconds.sum()),
                  rerun_s=float(seconds[rows["status"] != "ok"].sum()), longest_s=float(seconds.max()),
                  tail_s=(end.max() - start.max()).total_seconds())


def time_table(attempts: pd.DataFrame, machine: pd.DataFrame) -> list[str]:
    """Per run: how long its attempts spanned, how many ran at once (at most, and on average over
    the span: attempt time / span), how much attempt time went to attempts run again, the longest
    attempt, and how long the run went on after its last attempt started (its tail: no cell was
    left to start)."""
    lines = ["| run | span (s) | at once, max / mean | attempt time (s) | of it re-run (s) | longest attempt (s) | "
             "after the last start (s) | load, median |", "|---|---|---|---|---|---|---|---|"]
    for run, rows in attempts.groupby("run"):
        t = timing(rows)
        load = machine[machine["run"] == run]["load1"]
        lines.append(f"| {run} | {fmt(t.span_s)} | {t.peak} / {fmt(t.mean, 1)} | {fmt(t.attempt_s)} | "
                     f"{fmt(t.rerun_s)} | {fmt(t.longest_s)} | {fmt(t.tail_s)} | {fmt(load.median(), 2)} |")
    return lines


#: A run longer than this gets a table of its time in windows of OVER_TIME_WINDOW_S.
OVER_TIME_AFTER_S = 600
OVER_TIME_WINDOW_S = 120


def over_time(attempts: pd.DataFrame, machine: pd.DataFrame) -> list[str]:
    """Per window of a long run, each run's table after a blank line: attempts running (mean over
    the window's seconds), attempts that started and how many of those came back late or starved,
    and the machine's load (mean)."""
    lines: list[str] = []
    for run, rows in attempts.groupby("run"):
        start, end = attempt_times(rows)
        first = start.min()
        begin_s = (start - first).dt.total_seconds()
        end_s = (end - first).dt.total_seconds()
        if end_s.max() <= OVER_TIME_AFTER_S:
            continue
        seconds = machine[machine["run"] == run]
        seconds_s = seconds["time"] - first.timestamp()
        lines += ["", f"Run {run} over time, in windows of {OVER_TIME_WINDOW_S // 60} minutes from its first attempt:",
                  "",
                  "| minutes | attempts running, mean | started | of them late or starved | load, mean |",
                  "|---|---|---|---|---|"]
        for low in range(0, int(end_s.max()), OVER_TIME_WINDOW_S):
            high = low + OVER_TIME_WINDOW_S
            overlap = (end_s.clip(upper=high) - begin_s.clip(lower=low)).clip(lower=0).sum()
            started = rows[(begin_s >= low) & (begin_s < high)]
            load = seconds[(seconds_s >= low) & (seconds_s < high)]["load1"]
            lines.append(f"| {low // 60}-{high // 60} | {fmt(overlap / OVER_TIME_WINDOW_S, 1)} | {len(started)} | "
                         f"{int(started['status'].isin(['late', 'starved']).sum())} | {fmt(load.mean(), 1)} |")
    return lines


#: Shares of its link's rate a cell carried, for the cost table: (lowest, highest, label).
CARRIED_SHARES = ((0.0, 0.01, "under 1 %"), (0.01, 0.10, "1-10 %"), (0.10, 0.50, "10-50 %"),
                  (0.50, float("inf"), "50 % or more"))


def cost_table(attempts: pd.DataFrame) -> list[str]:
    """What a cell's emulator cost against what it carried, per link rate and share of that rate
    carried (every attempt of every run; none for folders written before the columns were kept)."""
    if "carried_mbps" not in attempts.columns:
        return []
    measured = attempts.dropna(subset=["rate_mbps", "carried_mbps", "emulator_cpu_share"])
    lines = ["", "## What a cell costs against what it carries", "",
             "The emulator's CPU share (its CPU time over its wall time) by the Mbit/s its link took in over the "
             "flows' time, as a share of the link's rate; every attempt.", "",
             "| link rate (Mbit/s) | carried | attempts | emulator CPU, median (cores) | range |",
             "|---|---|---|---|---|"]
    share = measured["carried_mbps"] / measured["rate_mbps"]
    for rate, rows in measured.groupby("rate_mbps"):
        for low, high, label in CARRIED_SHARES:
            cpu = rows[(share[rows.index] >= low) & (share[rows.index] < high)]["emulator_cpu_share"]
            if len(cpu):
                lines.append(f"| {rate:g} | {label} | {len(cpu)} | {fmt(cpu.median(), 3)} | "
                             f"{fmt(cpu.min(), 3)}-{fmt(cpu.max(), 3)} |")
    return lines


def report(folder: Path) -> str:
    runs = pd.read_csv(folder / "runs.csv")
    attempts = pd.read_csv(folder / "attempts.csv")
    machine = pd.read_csv(folder / "machine.csv")
    command = (folder / "command.txt").read_text().strip().splitlines()
    spoiled = attempts[attempts["status"].isin(["late", "starved"])]
    spec = command[0].split("--spec ", 1)[1].split()[0]
    lines = [f"# `ccsweep run {spec}` from an empty store, {len(runs)} run{'s' if len(runs) > 1 else ''}", "",
             f"Command: `{command[0]}`", "", f"Machine: {command[1].removeprefix('machine: ')}.", "",
             "## Runs", "", "| run | exit | wall (s) | cells | attempts | late or starved | load, max | "
             "steal, worst second (%) |", "|---|---|---|---|---|---|---|---|"]
    for run in runs.itertuples():
        seconds = machine[machine["run"] == run.run]
        lines.append(f"| {run.run} | {run.exit} | {fmt(run.wall_s)} | {run.cells} | {run.attempts} | "
                     f"{run.late_or_starved} | {fmt(seconds['load1'].max(), 2)} | "
                     f"{fmt(seconds['steal_pct'].max(), 1)} |")
    total = len(attempts)
    lines += ["", f"{len(spoiled)} of {total} attempts were late or starved; wall time median "
              f"{fmt(runs['wall_s'].median())} s (range {fmt(runs['wall_s'].min())}-{fmt(runs['wall_s'].max())} s)."]
    lines += ["", "## Where the time goes", "", *time_table(attempts, machine), *over_time(attempts, machine)]
    lines += cost_table(attempts)
    lines += ["", "## Every late or starved attempt, with what its record measured", ""]
    if spoiled.empty:
        lines.append("None.")
    else:
        lines += ["| run | cell | cc | loss | attempt | p99 / threshold (us) | max (us) | run queue p99 (us) | "
                  "steal, flow / worst s (%) | softirq worst s (%) | overshoot p99 / max (us) | write max (us) | "
                  "cause |", "|" + "---|" * 13]
        for a in spoiled.itertuples():
            lines.append(f"| {a.run} | {a.cell} | {a.cc} | {fmt(a.loss * 100, 3)} % | {a.attempt} | "
                         f"{fmt(a.lateness_p99_us)} / {fmt(a.threshold_us)} | {fmt(a.lateness_max_us)} | "
                         f"{fmt(a.runqueue_p99_us)} | {fmt(a.steal_pct, 1)} / {fmt(a.steal_max_window_pct, 1)} | "
                         f"{fmt(a.softirq_max_window_pct, 1)} | "
                         f"{fmt(a.overshoot_p99_us)} / {fmt(a.overshoot_max_us)} | "
                         f"{fmt(a.write_max_us)} | {a.late_cause} |")
        causes = Counter(str(c) for c in spoiled["late_cause"])
        lines += ["", "Causes: " + ", ".join(f"{cause} {n}" for cause, n in causes.most_common()) + "."]
    on_time = attempts[attempts["status"] == "ok"]
    lines += ["", "## The on-time attempts, for comparison", "",
              f"{len(on_time)} attempts: lateness p99 median {fmt(on_time['lateness_p99_us'].median())} us "
              f"(max {fmt(on_time['lateness_p99_us'].max())}); sleep overshoot p99 median "
              f"{fmt(on_time['overshoot_p99_us'].median())} us, its maximum per attempt median "
              f"{fmt(on_time['overshoot_max_us'].median())} us; steal in the worst second median "
              f"{fmt(on_time['steal_max_window_pct'].median(), 1)} %.", "", END, ""]
    return "\n".join(lines)


def compute(folder: Path = ONE_SITTING) -> dict[str, str]:
    """The values README.md quotes of the one-sitting study (benchmarks.rebbr.report fills them in):
    its cells, its wall time as demo_runs timed it, and how many attempts ran at once."""
    (run,) = pd.read_csv(folder / "runs.csv").itertuples()
    t = timing(pd.read_csv(folder / "attempts.csv"))
    return {"quiet.cells": str(run.cells), "quiet.wall-min": f"{run.wall_s / 60:.1f}",
            "quiet.mean-at-once": f"{t.mean:.1f}", "quiet.peak": str(t.peak)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a folder demo_runs wrote")
    args = parser.parse_args(argv)
    readme = args.folder / "README.md"
    kept = readme.read_text().split(END, 1)[1] if readme.exists() and END in readme.read_text() else "\n"
    readme.write_text(report(args.folder) + kept.removeprefix("\n"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
