"""How long a sweep will take on a machine of N cores, before it starts.

A sweep's wall time on one machine is set by how many cells run at once, and that is set by
what each cell costs (cores) against the machine's CPU budget, how long each runs, and how the
local executor admits them (one start per stagger, the first cell alone, one more at once after
each on-time cell).  Rather than a formula that drifts from the executor, the estimate plays the
executor's own `Admission` on a simulated clock: every cell runs for its flow time plus the
measured set-up, costs the machine what it is given (the admission's prior, or costs measured on
this machine) while it runs, as the executor measures the machine's busy cores, and reports that
cost, as the executor's reaper would.  Late re-runs are not modelled: the estimate is
for a machine that keeps time, and says so.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ccsweep.admission import Admission, prior_cost, refusal, settles_at
from ccsweep.cell import Cell

#: Seconds a cell takes beyond its flow time (namespaces, emulator start, endpoints, collection):
#: one 15 s cell took 16 s of wall time in benchmarks/results/2026-11-23-cells-per-core.md.
CELL_SETUP_S = 1.0


def cpu_budget(cores: int) -> float:
    """Cores the local executor fills on a machine of `cores`: all but half a core (as its default)."""
    return max(0.5, cores - 0.5)


@dataclass(frozen=True)
class WallEstimate:
    """The simulated run of a sweep on one machine."""

    cores: int
    cells: int
    wall_s: float
    #: Most cells running at once, and the CPU they asked for in total (core-seconds).
    peak_cells: int
    cpu_core_s: float
    #: Cells the executor refuses on this machine (each needs more than its whole budget to keep
    #: time): not run, not in `wall_s`.
    refused: int = 0

    @property
    def mean_cores_busy(self) -> float:
        return self.cpu_core_s / self.wall_s if self.wall_s > 0 else 0.0


def cell_wall_s(cell: Cell) -> float:
    """Wall time of one cell: its flow time and the set-up around it."""
    return cell.params.duration_s + CELL_SETUP_S


def estimate_wall(cells: Sequence[Cell], cores: int, cost: Callable[[Cell], float] = prior_cost,
                  *, stagger_s: float | None = None) -> WallEstimate:
    """Simulates the local executor running `cells` in order on `cores` cores; cells it would refuse
    there (admission.refusal) are counted, not run.

    `cost` gives a cell's CPU (cores) as it would be measured; the admission starts from its
    prior and learns these, as it does from a real cell's rusage.
    """
    if cores < 1:
        raise ValueError(f"cores must be at least 1, got {cores}")
    admission = Admission(budget=cpu_budget(cores)) if stagger_s is None else Admission(
        budget=cpu_budget(cores), stagger_s=stagger_s)
    queue = [cell for cell in cells if refusal(cell, admission.budget) is None]
    if queue:
        admission.open_with(queue[0])
    running: list[tuple[float, int, Cell]] = []  # (end time, start order, cell): a heap by end time
    now = 0.0
    started = 0
    peak = 0
    cpu_core_s = 0.0
    while queue or running:
        # What the executor measures of the machine: the settled cells' costs, as `cost` gives them
        # (the settling ones the admission counts itself).
        busy = sum(cost(c) for end, _, c in running if settles_at(c, end - cell_wall_s(c)) <= now)
        while queue and admission.may_start(queue[0], [(c, False, 1) for _, _, c in running], now, busy=busy):
            cell = queue.pop(0)
            heapq.heappush(running, (now + cell_wall_s(cell), started, cell))
            admission.started(now, cell)
            started += 1
            peak = max(peak, len(running))
        next_start = admission.last_start + admission.stagger_s
        next_end = running[0][0] if running else float("inf")
        if queue and next_start < next_end and now < next_start:
            now = next_start  # the stagger, not the budget, held the next cell back
            continue
        end, _, cell = heapq.heappop(running)
        now = end
        wall = cell_wall_s(cell)
        cpu_core_s += cost(cell) * wall
        admission.observe(cell, cost(cell) * wall, wall, late=False)
    return WallEstimate(cores=cores, cells=len(cells), wall_s=now, peak_cells=peak, cpu_core_s=cpu_core_s,
                        refused=len(cells) - started)


def format_duration(seconds: float) -> str:
    """'3 h 05 min', '12 min 30 s' or '45 s': a wall time to read at a glance."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {secs:02d} s"
    return f"{secs} s"
