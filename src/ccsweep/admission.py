"""Admission for the local executor: when the next cell may start, sized by what cells measurably cost.

A cell's numbers are only as good as its emulator's timing, and on a small machine the timing
suffers first when cells crowd each other: interpreters, namespaces and slow start all land in
the same second, and a 2-vCPU VM's host takes the CPU away now and then.  So:

- cells start one at a time, `stagger_s` apart, never together;
- the number of cells at once follows their lateness, additive increase and multiplicative
  decrease as TCP does: one more after each on-time cell, half as many after a late one; it
  starts at one cell (a clean first measurement), or at the user's --jobs, which also caps it;
- what a cell costs comes from measurement: the CPU time the finished cells' processes used over
  their wall time corrects the prior model (rate-proportional, see `prior_cost`), so the budget
  fills with what cells cost on this machine rather than with a constant;
- a cell running again after a late attempt runs alone, with the whole machine as headroom.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ccsweep.cell import Cell

#: Seconds between two cell starts: a cell's set-up and slow start should not share their second.
START_STAGGER_S = 1.0
#: Weight of the newest measurement in the cost correction (an exponential moving average).
COST_EWMA_WEIGHT = 0.3


def prior_cost(cell: Cell) -> float:
    """Cores a cell is expected to keep busy before anything is measured.

    Kernel TCP through two TUN devices plus the emulator scale with the packet rate (about 0.4 of
    a core at 100 Mbit/s on the machines this was first measured on), with a floor for the Python
    endpoints and sampling. Measurements scale this shape (see Admission.observe).
    """
    rate = cell.params.uplink.rate_mbps or 50.0
    return 0.1 + min(rate, 2000.0) / 330.0


@dataclass
class Admission:
    """How many cells may run at once, and whether the next one may start now."""

    budget: float
    max_cells: int | None = None  # --jobs: an upper bound the user set
    stagger_s: float = START_STAGGER_S
    limit: int = 1  # cells at once now: the first cell runs alone, a clean first measurement
    correction: float = 1.0  # measured cost / prior cost, averaged over finished cells
    measured: int = 0
    last_start: float = field(default=float("-inf"))

    def cost(self, cell: Cell) -> float:
        return prior_cost(cell) * self.correction

    def may_start(self, cell: Cell, running: list[tuple[Cell, bool]], now: float, *, alone: bool = False) -> bool:
        """Whether `cell` may start at `now` beside `running` (each a cell and whether it runs alone)."""
        if now - self.last_start < self.stagger_s:
            return False
        if alone or any(exclusive for _, exclusive in running):
            return not running
        if not running:
            return True
        if len(running) >= self.limit or (self.max_cells is not None and len(running) >= self.max_cells):
            return False
        return sum(self.cost(c) for c, _ in running) + self.cost(cell) <= self.budget

    def started(self, now: float) -> None:
        self.last_start = now

    def observe(self, cell: Cell, cpu_seconds: float | None, wall_seconds: float, late: bool) -> None:
        """Learn from a finished cell: its measured CPU share, and whether its emulator kept time."""
        if cpu_seconds is not None and wall_seconds > 0:
            ratio = (cpu_seconds / wall_seconds) / prior_cost(cell)
            weight = 1.0 if self.measured == 0 else COST_EWMA_WEIGHT
            self.correction = (1 - weight) * self.correction + weight * ratio
            self.measured += 1
        if late:
            self.limit = max(1, self.limit // 2)
        else:
            ceiling = self.max_cells if self.max_cells is not None else max(1, int(self.budget / self.cost(cell)))
            self.limit = min(self.limit + 1, max(1, ceiling))
