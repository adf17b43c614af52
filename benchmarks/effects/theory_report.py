"""The quoted numbers of the effects-against-theory result's README, from its committed data alone.

    python -m benchmarks.effects.theory_report          # rewrite the numbers between the markers
    python -m benchmarks.effects.theory_report --check  # exit 1 if the README differs from its data

Each folder of FOLDERS (benchmarks/results/2026-11-30-effects-theory/; 2026-12-01-effects-theory/,
the same with the delay trace's row) holds what `python -m benchmarks.effects.theory` wrote:
`stats.csv` (per run and statistic: measured, expected, sigma), `runs.csv` (per run, the
emulator's counters) and `command.txt`. From them: per effect and statistic, the runs' median and
range beside the expectation, and, where the statistic is random, the runs pooled as a z-score
(the mean of the measured values less the mean expectation, over the standard error of that
mean); the TCP rows beside Mathis' formula, and the loss the emulator counted in them.
"""

from __future__ import annotations

import csv
import math
import statistics
from collections import defaultdict
from functools import partial
from pathlib import Path

from benchmarks.quoted import block, regenerate_all

REPO = Path(__file__).resolve().parents[2]
#: Each run's folder, oldest first.
FOLDERS = [REPO / "benchmarks/results/2026-11-30-effects-theory", REPO / "benchmarks/results/2026-12-01-effects-theory"]
#: A TCP row's one statistic; every other row is a probe row.
GOODPUT = "goodput"
STEP_FAR = "a disagreeing probe's wait from the step, largest"

Row = dict[str, str]


def number(value: float) -> str:
    """Four significant digits, without a trailing exponent for the small shares this table has."""
    return f"{value:.4g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.2e}"


def spread(values: list[float]) -> str:
    """median [min-max] of the runs, or the one value of a single run."""
    if len(values) == 1:
        return number(values[0])
    return f"{number(statistics.median(values))} [{number(min(values))} to {number(max(values))}]"


def pooled_z(runs: list[Row]) -> float | None:
    """(mean measured - mean expected) / (standard error of the mean), over runs with a sigma."""
    if not runs or any(not r["sigma"] for r in runs):
        return None
    difference = statistics.fmean(float(r["measured"]) - float(r["expected"]) for r in runs)
    error = math.sqrt(sum(float(r["sigma"]) ** 2 for r in runs)) / len(runs)
    return difference / error


def grouped(rows: list[Row]) -> dict[tuple[str, str], list[Row]]:
    """The runs of each (effect, statistic), in the order the bench ran them."""
    groups: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for row in rows:
        groups[row["row"], row["statistic"]].append(row)
    return groups


def probe_table(rows: list[Row]) -> list[str]:
    lines = ["| effect | statistic | unit | measured: median [range] of the runs | expected | z, runs pooled |",
             "|---|---|---|---|---|---|"]
    for (effect, stat), runs in grouped(rows).items():
        if stat == GOODPUT:
            continue
        z = pooled_z(runs)
        expectations = [float(r["expected"]) for r in runs]
        expected = number(expectations[0]) if len(set(expectations)) == 1 else spread(expectations)
        lines.append(f"| {effect} | {stat} | {runs[0]['unit']} | {spread([float(r['measured']) for r in runs])} "
                     f"| {expected} | {'–' if z is None else f'{z:+.2f}'} |")
    return lines


def tcp_medians(rows: list[Row]) -> dict[str, tuple[float, float]]:
    """Each TCP row's median goodput and its Mathis expectation (Mbit/s)."""
    return {effect: (statistics.median(float(r["measured"]) for r in runs), float(runs[0]["expected"]))
            for (effect, stat), runs in grouped(rows).items() if stat == GOODPUT}


def tcp_table(rows: list[Row]) -> list[str]:
    lines = ["| loss | goodput, Mbit/s: median [range] of the runs | Mathis, Mbit/s | median / Mathis |",
             "|---|---|---|---|"]
    medians = tcp_medians(rows)
    for (effect, stat), runs in grouped(rows).items():
        if stat == GOODPUT:
            median, mathis = medians[effect]
            lines.append(f"| {effect} | {spread([float(r['measured']) for r in runs])} | {mathis:.3g} "
                         f"| {median / mathis:.2f} |")
    return lines


def largest_z(rows: list[Row]) -> float:
    return max(abs(z) for runs in grouped(rows).values() if (z := pooled_z(runs)) is not None)


def measured(rows: list[Row], effect_prefix: str, stat: str) -> list[float]:
    """The runs' values of one statistic of the effects whose names start with `effect_prefix`."""
    return [float(r["measured"]) for r in rows if r["row"].startswith(effect_prefix) and r["statistic"] == stat]


def tcp_loss_percent(runs: list[Row]) -> list[float]:
    """The share of the TCP flows' data packets the emulator's loss stage dropped, per run (%)."""
    return [100 * float(r["drops_loss"]) / float(r["in_packets"]) for r in runs if r["row"].startswith("CUBIC")]


def compute(folder: Path = FOLDERS[-1]) -> dict[str, str]:
    """Every value a folder's README quotes."""
    with (folder / "stats.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    with (folder / "runs.csv").open() as handle:
        runs = list(csv.DictReader(handle))
    tcp_loss = tcp_loss_percent(runs)
    command, machine = (folder / "command.txt").read_text().splitlines()[:2]
    goodputs = list(tcp_medians(rows).values())
    bursty, independent = goodputs[0], goodputs[1]
    zs = [z for runs in grouped(rows).values() if (z := pooled_z(runs)) is not None]
    return {
        "theory.command": command,
        "theory.machine": machine.removeprefix("machine: "),
        "theory.reps": str(len({r["rep"] for r in rows})),
        "theory.table": block(probe_table(rows)),
        "theory.tcp-table": block(tcp_table(rows)),
        "theory.z-count": str(len(zs)),
        "theory.z-max": f"{largest_z(rows):.2f}",
        "theory.z-over-2": str(sum(1 for z in zs if abs(z) > 2)),
        "theory.floor-p50-us": f"{1000 * statistics.median(measured(rows, 'no effect', 'added delay p50')):.0f}",
        "theory.floor-p90-us": f"{1000 * statistics.median(measured(rows, 'no effect', 'added delay p90')):.0f}",
        "theory.floor-p90-max-us": f"{1000 * max(measured(rows, 'no effect', 'added delay p90')):.0f}",
        "theory.step-far-us": f"{1000 * max(measured(rows, 'step marker', STEP_FAR)):.0f}",
        "theory.slot-off": f"{max(measured(rows, 'slots', 'releases off what fell due by over 1')):.2g}",
        "theory.slot-left-out": f"{max(measured(rows, 'slots', 'releases after a stall of the sender, left out')):.2g}",
        "theory.tcp-loss": f"{min(tcp_loss):.2f} to {max(tcp_loss):.2f}",
        "theory.tcp-ratio": f"{bursty[0] / independent[0]:.2f}",
        "theory.tcp-mathis-ratio": f"{bursty[1] / independent[1]:.2f}",
    }


def main() -> None:
    regenerate_all([(folder / "README.md", partial(compute, folder)) for folder in FOLDERS], __doc__)


if __name__ == "__main__":
    main()
