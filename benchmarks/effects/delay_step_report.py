"""The quoted numbers of the delay-step result's README, from its two committed tables alone.

    python -m benchmarks.effects.delay_step_report          # rewrite the numbers between the markers
    python -m benchmarks.effects.delay_step_report --check  # exit 1 if the README differs from its data

FOLDER (benchmarks/results/2026-12-01-delay-step/) holds what `python -m benchmarks.effects.delay_step`
wrote: the runs of delay-step, delay-step-late and fixed-delay, and every BBR run's samples. From
them: each setting's median steady goodput, and per BBR run when its min_rtt estimate took the
longer path's RTT after the step, what it delivered in the first second and until then, and its
bandwidth estimate then, beside what a cwnd of twice its bandwidth times the old min_rtt allows
over the new RTT.
"""

from __future__ import annotations

import csv
import json
import statistics
from collections import defaultdict
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from benchmarks.cluster.argo_vs_local import read_cells
from benchmarks.effects.delay_step import CELLS_FILE, SERIES_FILE
from benchmarks.quoted import block, regenerate_main

FOLDER = Path(__file__).resolve().parents[2] / "benchmarks/results/2026-12-01-delay-step"
#: BBR's cwnd gain in ProbeBW (tcp_bbr.c's bbr_cwnd_gain, 2): inflight is capped at twice bw * min_rtt.
CWND_GAIN = 2.0
#: A min_rtt estimate counts as the new path's once within this share of the new RTT.
TAKEN_SHARE = 0.9

Row = dict[str, str]


@dataclass(frozen=True)
class Step:
    """A run's route change, from its cell's parameters."""

    at_s: float
    base_rtt_ms: float
    stepped_rtt_ms: float
    rate_mbps: float

    def cwnd_bound_mbps(self) -> float:
        """What a cwnd of CWND_GAIN * bw * old min_rtt delivers over the stepped RTT, at most the link."""
        return min(1.0, CWND_GAIN * self.base_rtt_ms / self.stepped_rtt_ms) * self.rate_mbps


@dataclass(frozen=True)
class Taken:
    """When a BBR run's min_rtt estimate took the stepped RTT, and what it delivered until then."""

    experiment: str
    loss: float
    repetition: int
    step: Step
    taken_s: float | None
    first_second_mbps: float | None
    delivered_mbps: float | None
    bw_when_taken_mbps: float | None

    @property
    def lag_s(self) -> float | None:
        return None if self.taken_s is None else self.taken_s - self.step.at_s


def step_of(row: Row) -> Step | None:
    schedule = json.loads(row["uplink_delay_schedule"] or "[]")
    if not schedule:
        return None
    base_delay = float(row["uplink_delay_ms"])
    rtt = float(row["rtt_ms"])
    return Step(at_s=schedule[0]["at_s"], base_rtt_ms=rtt, stepped_rtt_ms=rtt - base_delay + schedule[0]["delay_ms"],
                rate_mbps=float(row["uplink_rate_mbps"]))


def read_series(path: Path) -> dict[str, list[dict[str, float]]]:
    """Each cell's samples, in time order."""
    by_cell: dict[str, list[dict[str, float]]] = defaultdict(list)
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            by_cell[row["cell_id"]].append({k: float(v) for k, v in row.items() if k not in ("cell_id", "experiment")})
    return {cell: sorted(samples, key=lambda s: s["t"]) for cell, samples in by_cell.items()}


def taken(row: Row, samples: list[dict[str, float]]) -> Taken | None:
    """When the run's min_rtt reached TAKEN_SHARE of the stepped RTT after its step, BBR's bandwidth
    estimate then, and its median delivery rate from the step's first full round trip: over the
    first second, and until min_rtt took the new RTT (both None when that is under a second)."""
    step = step_of(row)
    if step is None:
        return None
    threshold = TAKEN_SHARE * step.stepped_rtt_ms
    after = [s for s in samples if s["t"] >= step.at_s]
    first = next((s for s in after if s["bbr_min_rtt_ms"] >= threshold), None)
    taken_s = None if first is None else first["t"]
    settled = step.at_s + step.stepped_rtt_ms / 1000
    if taken_s is None or taken_s - settled < 1.0:
        return Taken(row["experiment"], float(row["loss"]), int(row["repetition"]), step, taken_s, None, None,
                     None if first is None else first["bbr_bw_mbps"])
    meanwhile = [s for s in after if settled <= s["t"] < taken_s]
    return Taken(row["experiment"], float(row["loss"]), int(row["repetition"]), step, taken_s,
                 statistics.median(s["delivery_rate_mbps"] for s in meanwhile if s["t"] < settled + 1.0),
                 statistics.median(s["delivery_rate_mbps"] for s in meanwhile), first["bbr_bw_mbps"])


def estimates_until_taken(row: Row, samples: list[dict[str, float]]) -> list[float]:
    """BBR's bandwidth estimate at the step, then each time it fell by 5 % or more, until min_rtt
    took the new RTT: how the filter came down while the cwnd held delivery down."""
    run = taken(row, samples)
    if run is None or run.taken_s is None:
        return []
    seen: list[float] = []
    for sample in samples:
        if run.step.at_s <= sample["t"] <= run.taken_s and (not seen or sample["bbr_bw_mbps"] <= 0.95 * seen[-1]):
            seen.append(sample["bbr_bw_mbps"])
    return seen


def runs_taken(rows: list[Row], series: dict[str, list[dict[str, float]]]) -> list[Taken]:
    found = [taken(row, series[row["cell_id"]]) for row in rows if row["cc"] == "bbr" and row["cell_id"] in series]
    return sorted((t for t in found if t is not None), key=lambda t: (t.experiment, t.loss, t.repetition))


def setting(row: Row) -> str:
    step = step_of(row)
    if step is None:
        return f"delay {float(row['uplink_delay_ms']):g} ms fixed"
    return f"RTT {step.base_rtt_ms:g} → {step.stepped_rtt_ms:g} ms at {step.at_s:g} s"


def goodputs_by_setting(rows: list[Row]) -> dict[tuple[str, str, str, float], list[float]]:
    """Each setting's steady goodputs: (experiment, path, algorithm, loss) -> its runs'."""
    grouped: dict[tuple[str, str, str, float], list[float]] = defaultdict(list)
    for row in rows:
        key = row["experiment"], setting(row), row["cc"], float(row["loss"])
        grouped[key].append(float(row["goodput_steady_mbps"]))
    return grouped


def goodput_table(grouped: dict[tuple[str, str, str, float], list[float]]) -> list[str]:
    lines = ["| experiment | path | algorithm | loss % | median steady goodput, Mbit/s (runs) | range |",
             "|---|---|---|---|---|---|"]
    for (experiment, path, cc, loss), goodputs in sorted(grouped.items()):
        lines.append(f"| {experiment} | {path} | {cc} | {loss * 100:.3g} | {statistics.median(goodputs):.3g} "
                     f"({len(goodputs)}) | {min(goodputs):.3g}-{max(goodputs):.3g} |")
    return lines


def taken_table(found: list[Taken]) -> list[str]:
    lines = ["| experiment | loss % | run | step at, s | min_rtt took the new RTT at, s | after the step, s "
             "| delivery rate, first second, Mbit/s | delivery rate until taken, Mbit/s "
             "| BBR's bw estimate then, Mbit/s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for run in found:
        at = "never" if run.taken_s is None else f"{run.taken_s:.1f}"
        lag = "–" if run.lag_s is None else f"{run.lag_s:.1f}"
        rates = " | ".join(shown(v) for v in (run.first_second_mbps, run.delivered_mbps, run.bw_when_taken_mbps))
        lines.append(f"| {run.experiment} | {run.loss * 100:.3g} | {run.repetition} | {run.step.at_s:g} | {at} | {lag} "
                     f"| {rates} |")
    return lines


def shown(value: float | None) -> str:
    return "–" if value is None else f"{value:.3g}"


def median_of(values: list[float | None]) -> str:
    present = [v for v in values if v is not None]
    return shown(statistics.median(present)) if present else "–"


def compute(folder: Path = FOLDER) -> dict[str, str]:
    """Every value the folder's README quotes."""
    rows = read_cells(folder / CELLS_FILE)
    series = read_series(folder / SERIES_FILE)
    found = runs_taken(rows, series)
    by_setting = goodputs_by_setting(rows)
    values = {"delay-step.runs": str(len(rows)), "delay-step.goodput": block(goodput_table(by_setting)),
              "delay-step.taken": block(taken_table(found))}
    for experiment in ("delay-step", "delay-step-late"):
        mine = [t for t in found if t.experiment == experiment]
        values[f"delay-step.{experiment}.lag-median"] = median_of([t.lag_s for t in mine])
        values[f"delay-step.{experiment}.first-second-median"] = median_of([t.first_second_mbps for t in mine])
        values[f"delay-step.{experiment}.delivered-median"] = median_of([t.delivered_mbps for t in mine])
        values[f"delay-step.{experiment}.bw-when-taken-median"] = median_of([t.bw_when_taken_mbps for t in mine])
    example = next(row for row in rows if (row["experiment"], row["cc"], float(row["loss"]), row["repetition"])
                   == ("delay-step-late", "bbr", 0.0, "0"))
    values["delay-step.example-estimates"] = ", ".join(f"{bw:.3g}" for bw in estimates_until_taken(
        example, series[example["cell_id"]]))
    values["delay-step.cwnd-bound"] = f"{found[0].step.cwnd_bound_mbps():.3g}" if found else "–"
    values.update({f"delay-step.goodput.{experiment}.{cc}.{loss * 100:g}": shown(statistics.median(runs))
                   for (experiment, _, cc, loss), runs in by_setting.items()})
    return values


def main() -> None:
    regenerate_main(FOLDER / "README.md", partial(compute, FOLDER), __doc__)


if __name__ == "__main__":
    main()
