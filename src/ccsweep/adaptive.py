"""Adaptive repetitions: which runs of each cell are wanted now, from the runs already stored.

An experiment with `repetitions: {min, max, target}` plans `max` runs of every setting (a *point*:
cells that differ only in repetition and seed), each its own content-addressed cell with seed
`seed + index`, so run i of an adaptive experiment is the same cell as run i of `repetitions: n`,
and a stored run is never run again.  Which of them run is decided here, after each round, from
the stored results alone:

- fewer than `min` runs stored: the first `min` are wanted;
- else the point's interval (95 % bootstrap CI of its median goodput) is compared with the
  target: met, the point stops ("target met"); `max` runs stored, it stops ("max reached");
  otherwise it wants more, as many as the interval's width says it needs if runs shrink it as
  1/√n, at least half again as many and at most twice as many as it has, never above `max`.

A stricter target later (a revised spec) only adds runs: the cells are the same, so everything
stored counts.  The same function decides for every executor (the local one, each round of the
Argo workflow, the operator), so they agree on what is wanted.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ccsweep.cell import Cell, CellParams, PackedParams
from ccsweep.result import CellResult
from ccsweep.spec import AdaptiveRepetitions, Experiment, PrecisionTarget
from ccsweep.stats import Interval, median_ci

#: The quantity a ci target judges: the goodput over the whole flow (Figure 8's y axis).
TARGET_QUANTITY = "goodput_mbps"


@dataclass(frozen=True)
class PointRuns:
    """One point of an adaptive experiment after a round: its runs, its interval, what it wants next."""

    experiment: str
    #: The setting: its first run's parameters, held as JSON (cell.PackedParams) and parsed by `params`.
    setting: PackedParams
    #: Every planned run's cell id, by repetition: ids, not cells, as a sweep of 100,000 runs is
    #: judged whole by `status` and the figures step, and a Cell is kilobytes of parameters.
    ids: tuple[str, ...]
    values: tuple[float, ...]  # the stored runs' goodput (Mbit/s)
    wanted: int  # runs this point should have: the first `wanted` cells
    state: str  # "target met", "max reached", "needs more runs", "below min"
    reason: str  # the numbers behind the state, one line
    rule: AdaptiveRepetitions

    @property
    def params(self) -> CellParams:
        return self.setting.parsed()

    @property
    def runs(self) -> int:
        return len(self.values)

    @property
    def settled(self) -> bool:
        return self.state in ("target met", "max reached")


def point_of(cell: Cell) -> str:
    """The point a cell belongs to: its parameters without repetition and seed."""
    data = cell.params.model_dump(mode="json")
    data.pop("repetition"), data.pop("seed")
    return f"{cell.experiment}\n{sorted(data.items())}"


def next_count(runs: int, relative: float, target: float, maximum: int) -> int:
    """Runs a point should have next: enough if the interval shrinks as 1/√n, between 1.5x and 2x, <= max."""
    estimate = math.ceil(runs * (relative / target) ** 2) if math.isfinite(relative) else 2 * runs
    return min(maximum, max(runs + math.ceil(runs / 2), min(2 * runs, estimate)))


def round_bound(rule: AdaptiveRepetitions) -> int:
    """Rounds an adaptive experiment needs at most: the first, then one per growth step from min to max."""
    rounds, runs = 1, rule.min
    while runs < rule.max:
        runs = min(rule.max, runs + math.ceil(runs / 2))
        rounds += 1
    return rounds


def target_met(target: PrecisionTarget, interval: Interval) -> bool:
    """Whether the interval is as narrow as the target asks: relative to the median, or in Mbit/s."""
    half = interval.half_width
    if half is None:
        return False
    return interval.relative_half_width <= target.ci_relative or (
        target.ci_absolute_mbps is not None and half <= target.ci_absolute_mbps)


def judge(rule: AdaptiveRepetitions, values: list[float]) -> tuple[int, str, str]:
    """(runs wanted, state, reason) for a point with these stored runs."""
    if len(values) < rule.min:
        return rule.min, "below min", f"{len(values)} of min {rule.min} runs stored"
    target = rule.target
    interval = median_ci(values)
    half = interval.half_width or 0.0
    relative = interval.relative_half_width
    met = target_met(target, interval)
    numbers = (f"median {interval.text()} Mbit/s ({interval.label}), half-width {half:.3g} = "
               f"{relative * 100:.3g} % of the median, target {target.ci_relative * 100:g} %"
               + (f" or {target.ci_absolute_mbps:g} Mbit/s" if target.ci_absolute_mbps is not None else ""))
    if met:
        return len(values), "target met", numbers
    if len(values) >= rule.max:
        return len(values), "max reached", numbers
    return next_count(len(values), relative, target.ci_relative, rule.max), "needs more runs", numbers


def judge_points(experiments: Iterable[Experiment], cells: Iterable[Cell],
                 value_of: Callable[[str], float | None]) -> list[PointRuns]:
    """Every point of the adaptive experiments, judged from each run's value (`value_of(id)`, asked
    only for runs of an adaptive experiment). `cells` is read once, one at a time: what is held per
    run is its id, repetition and value, so a plan read a chunk at a time is never held whole."""
    rules = {e.name: e.adaptive for e in experiments if e.adaptive is not None}
    # By a digest of the point's key (its parameters, 1 KiB): (experiment, first repetition, its
    # parameters, the runs).
    points: dict[bytes, tuple[str, int, PackedParams, list[tuple[int, str, float | None]]]] = {}
    for cell in cells:
        if cell.experiment not in rules:
            continue
        key = hashlib.sha256(point_of(cell).encode()).digest()
        repetition = cell.params.repetition
        known = points.get(key)
        if known is None or repetition < known[1]:  # the setting's first run stands for it
            runs = known[3] if known is not None else []
            known = points[key] = (cell.experiment, repetition, PackedParams.of(cell.params), runs)
        known[3].append((repetition, cell.id, value_of(cell.id)))
    out = []
    for experiment, _, setting, runs in points.values():
        runs.sort(key=lambda run: run[0])
        rule = rules[experiment]
        values = [value for _, _, value in runs if value is not None]
        wanted, state, reason = judge(rule, values)
        out.append(PointRuns(experiment, setting, tuple(cell_id for _, cell_id, _ in runs), tuple(values), wanted,
                             state, reason, rule))
    return out


def target_value(result: CellResult | None) -> float | None:
    """The quantity a ci target judges, of a stored run (None: no run, failed, or not a number)."""
    if result is None or result.status != "ok":
        return None
    value = getattr(result, TARGET_QUANTITY)
    return float(value) if value is not None and math.isfinite(value) else None


def unwanted_ids(points: Iterable[PointRuns]) -> set[str]:
    """Cells of adaptive points that no round has asked for (yet): planned, not to be run or missed."""
    return {cell_id for point in points for cell_id in point.ids[point.wanted:]}
