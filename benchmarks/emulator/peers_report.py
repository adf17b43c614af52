"""The three-emulator table and the numbers its results README quotes, from the run's files alone.

    python -m benchmarks.emulator.peers_report          # rewrite the numbers between the markers
    python -m benchmarks.emulator.peers_report --check  # exit 1 if the README differs from its data

A peer run (peers.py, through bench.py) writes `runs.csv`, one row per run of one emulator at one
rate, and `run.json`, its settings, versions, machine and command. From them: per emulator and
rate, the median and range over the runs of the receiver's goodput, the emulator's CPU per
100 Mbit/s and the probes' p99 lateness, beside the unloaded p99; whether the emulator holds the
rate (the medians: goodput at least `carries_share` of the rate, p99 within `threshold_us`); and
the highest rate each holds with every lower one held too.
"""

from __future__ import annotations

import csv
import json
import statistics
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from benchmarks.quoted import block, regenerate_main

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "benchmarks/results/2026-11-30-emulator-peers"
README = FOLDER / "README.md"
#: Table order; an emulator the data does not name is left out.
EMULATORS = ("ccsweep-link", "mahimahi", "rattan")

Row = dict[str, str]


def read_runs(folder: Path) -> tuple[list[Row], dict]:
    with open(folder / "runs.csv", newline="") as table:
        rows = list(csv.DictReader(table))
    return rows, json.loads((folder / "run.json").read_text())


def by_cell(rows: list[Row]) -> dict[tuple[str, float], list[Row]]:
    """Every run of each (emulator, rate), failed ones too, in table order."""
    grouped: dict[tuple[str, float], list[Row]] = defaultdict(list)
    for row in rows:
        grouped[row["emulator"], float(row["rate_mbps"])].append(row)
    order = {name: at for at, name in enumerate(EMULATORS)}
    return dict(sorted(grouped.items(), key=lambda item: (order.get(item[0][0], len(order)), item[0][1])))


def values(runs: list[Row], field: str) -> list[float]:
    return [float(run[field]) for run in runs if run["status"] == "ok" and run[field] != ""]


def spread(numbers: list[float], show: Callable[[float], str]) -> str:
    """Median (range), or a dash without numbers."""
    if not numbers:
        return "–"
    if len(numbers) == 1:
        return show(numbers[0])
    return f"{show(statistics.median(numbers))} ({show(min(numbers))}-{show(max(numbers))})"


def verdict(runs: list[Row], rate: float, meta: dict) -> str:
    """'yes', or what is missing: the medians' goodput short of the rate, p99 over the threshold."""
    goodput, p99 = values(runs, "goodput_mbps"), values(runs, "lateness_p99_us")
    if not goodput or not p99:
        return "no: no run finished"
    short = statistics.median(goodput) < meta["carries_share"] * rate
    over = statistics.median(p99) > meta["threshold_us"]
    reasons = [r for r, bad in (("goodput short", short), ("p99 over", over)) if bad]
    return f"no: {', '.join(reasons)}" if reasons else "yes"


def held(rows: list[Row], meta: dict) -> dict[str, tuple[float | None, str]]:
    """Per emulator, the highest rate it holds with every lower rate held too (None: not even the
    lowest), and the first rate it does not hold, with why ('' when it holds every rate run)."""
    found: dict[str, tuple[float | None, str]] = {}
    for (emulator, rate), runs in by_cell(rows).items():  # each emulator's rates, lowest first
        highest, first_not = found.setdefault(emulator, (None, ""))
        if first_not:
            continue
        said = verdict(runs, rate, meta)
        found[emulator] = (rate, "") if said == "yes" else (highest, f"{rate:g} Mbit/s ({said.removeprefix('no: ')})")
    return found


def held_table(rows: list[Row], meta: dict) -> list[str]:
    lines = ["| emulator | highest rate held, Mbit/s | first rate not held |", "|---|---|---|"]
    for emulator, (highest, first_not) in held(rows, meta).items():
        lines.append(f"| {emulator} | {'none' if highest is None else f'{highest:g}'} | {first_not or '–'} |")
    return lines


def table(rows: list[Row], meta: dict) -> list[str]:
    lines = ["| emulator | rate, Mbit/s | runs ok | goodput, Mbit/s | CPU per 100 Mbit/s, % of a core | "
             "p99 lateness, us | p50 lateness, us | unloaded p99, us | own p99, us | holds the rate |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for (emulator, rate), runs in by_cell(rows).items():
        ok = sum(run["status"] == "ok" for run in runs)
        lines.append(" | ".join([
            f"| {emulator}", f"{rate:g}", f"{ok} of {len(runs)}",
            spread(values(runs, "goodput_mbps"), lambda v: f"{v:.0f}"),
            spread([v * 100 for v in values(runs, "cpu_per_100mbit")], lambda v: f"{v:.1f}"),
            spread(values(runs, "lateness_p99_us"), lambda v: f"{v:.0f}"),
            spread(values(runs, "lateness_p50_us"), lambda v: f"{v:.0f}"),
            spread(values(runs, "idle_p99_us"), lambda v: f"{v:.0f}"),
            spread(values(runs, "self_p99_us"), lambda v: f"{v:.0f}"),
            verdict(runs, rate, meta) + " |"]))
    return lines


def median_at(rows: list[Row], emulator: str, rate: float, field: str) -> float | None:
    found = values(by_cell(rows).get((emulator, rate), []), field)
    return statistics.median(found) if found else None


def compute(folder: Path = FOLDER) -> dict[str, str]:
    rows, meta = read_runs(folder)
    wall = datetime.fromisoformat(meta["ended_utc"]) - datetime.fromisoformat(meta["started_utc"])
    quoted = {
        "peers.runs": str(len(rows)),
        "peers.ok": str(sum(row["status"] == "ok" for row in rows)),
        "peers.reps": str(meta["reps"]),
        "peers.rates": ", ".join(f"{rate:g}" for rate in meta["rates_mbps"]),
        "peers.threshold": f"{meta['threshold_us']:.0f}",
        "peers.minutes": f"{wall.total_seconds() / 60:.0f}",
        "peers.started": meta["started_utc"],
        "peers.load": "-".join(f"{f(float(row['load1']) for row in rows):.1f}" for f in (min, max)),
        "peers.machine": meta["machine"],
        "peers.command": f"`{meta['command']}`",
        "peers.versions": ", ".join(f"{name} {version.removeprefix(name).strip(' -')}"
                                    for name, version in meta["versions"].items()),
        "peers.table": block(table(rows, meta)),
        "peers.held": block(held_table(rows, meta)),
    }
    for emulator in EMULATORS:
        for rate in meta["rates_mbps"]:
            cpu = median_at(rows, emulator, rate, "cpu_per_100mbit")
            p99 = median_at(rows, emulator, rate, "lateness_p99_us")
            quoted[f"peers.{emulator}.cpu.{rate:g}"] = "–" if cpu is None else f"{cpu * 100:.1f}"
            goodput = median_at(rows, emulator, rate, "goodput_mbps")
            own = median_at(rows, emulator, rate, "self_p99_us")
            cores = median_at(rows, emulator, rate, "cpu_cores")
            quoted[f"peers.{emulator}.cores.{rate:g}"] = "–" if cores is None else f"{cores:.2f}"
            quoted[f"peers.{emulator}.p99.{rate:g}"] = "–" if p99 is None else f"{p99:.0f}"
            quoted[f"peers.{emulator}.goodput.{rate:g}"] = "–" if goodput is None else f"{goodput:.0f}"
            quoted[f"peers.{emulator}.own-p99.{rate:g}"] = "–" if own is None else f"{own:.0f}"
    return quoted


def summary(folder: Path) -> list[str]:
    """The two tables, for the bench's console."""
    rows, meta = read_runs(folder)
    return [*table(rows, meta), "", *held_table(rows, meta)]


def main() -> None:
    regenerate_main(README, compute, __doc__)


if __name__ == "__main__":
    main()
