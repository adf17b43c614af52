"""Admission for the local executor: when the next cell may start, sized by what cells measurably cost.

A cell's numbers are only as good as its emulator's timing, and on a small machine the timing
suffers first when cells crowd each other: interpreters, namespaces and slow start all land in
the same second, and a 2-vCPU VM's host takes the CPU away now and then.  So:

- cells start one at a time, `stagger_s` apart, never together;
- the number of cells at once follows their lateness: one more after each on-time cell, and
  after a late one fewer by what its record measured (result.LatenessCause): a quarter fewer
  when the link waited on a run queue (cells crowded the machine), one fewer when the link was
  late with its run queue idle (its timer or its writes: crowding may have a part in it), and
  no fewer when the hypervisor stole the CPU (no number of cells at once would have helped). It
  opens with as many cells as fill half the budget by their prior cost (`open_with`: the prior is
  fitted on this kind of machine, the other half is headroom against its error until a cell has
  measured it; one at a time, the demo's 8 cells took two minutes where they fit in one), or at the
  user's --jobs, which also caps it;
- what a cell costs comes from measurement, per link backend: the CPU time the finished cells'
  processes used over their wall time corrects the prior model (`prior_cost`: rate, and the
  link's own cost, measured for each backend and held by its descriptor's cost model
  (linkdesc.LinkCost): ccsweep-link's wake-ups, which its release window sets, and its packets;
  Mahimahi's shells per 100 Mbit/s), per kind of cell (backend, rate and window) as soon as
  one of that kind has finished, for kinds not yet seen by the average over the backend's
  finished cells, and only before any of its cells finished by the average over all, so the
  budget fills with what each backend's cells cost on this machine rather than with a constant;
- a cell running again after a late attempt asks for more: each attempt counts its cost once
  more (a second attempt twice its cost), so it does not meet the same crowding; its last
  attempt runs alone, with the whole machine as headroom;
- where the machine's busy cores are measured (`may_start(busy=...)`, /proc/stat over the last few
  seconds), they stand for the running cells instead of the model, and only the cells still
  settling (started within SETTLE_S of now, or before their last flow's start) count at their
  modelled cost beside them. What a cell costs follows what it carries: in the quiet study's first
  sitting (benchmarks/results/2026-11-30-full-study-quiet) the emulator of a 100 Mbit/s cell that
  carried under 1 % of its rate used 0.011 cores (median of 43 attempts), one that carried half of
  it or more 0.227 (of 27). The model then priced a cell by its link's rate, and one correction
  per kind of cell averaged the two: 10-12 cells at once, near line rate, were let in on two
  cores, and 7 of the 9 started then ran late. The machine's own count holds whatever the mix is;
  the limit on cells at once then bounds what the measurement has not seen (a cell's growth after
  it settled), and lateness lowers it. The prior now prices a cell by what it is expected to carry
  (carried.py), so a kind's correction no longer averages cells that carry the line rate with cells
  that carry a hundredth of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ccsweep.carried import expected_carried_mbps
from ccsweep.cell import Cell
from ccsweep.linkdesc import FixedTickCost, TimedReleaseCost, descriptor
from ccsweep.linkrules import release_window_for

#: Seconds between two cell starts: a cell's set-up and slow start should not share their second.
START_STAGGER_S = 1.0
#: Weight of the newest measurement in the cost correction (an exponential moving average).
COST_EWMA_WEIGHT = 0.3
#: Share of the budget the first cells may fill by their prior cost, before any cell has finished,
#: and the most cells that opening allows: cheap cells' start-up (interpreters, namespaces, slow
#: start) costs more than their prior says, and 9 small cells at once on 2 cores ran late.
OPENING_SHARE = 0.5
OPENING_MAX_CELLS = 4
#: Seconds a started cell counts at its modelled cost beside the machine's measured busy cores, after
#: its last flow's start: its set-up, and the slow start of a 250 ms flow to 100 Mbit/s (about 2 s),
#: are not in a measurement over the last seconds yet.
SETTLE_S = 5.0


#: The prior's parts, fitted on the 2-vCPU KVM guest to ccsweep-link cells with TUN offloads
#: (`--offload tso`, the default), as each cell's process tree (rusage) over its wall time
#: (benchmarks/results/2026-11-26-offloads.md): a 100 Mbit/s, 100 ms cell (250 us window) took
#: 0.170 cores (0.160-0.192, 5 runs), its emulator 0.098; a 1 Gbit/s, 50 ms cell (125 us
#: window) 0.56 (0.53-0.59, 6 runs alone and beside a 100 Mbit/s cell), its emulator 0.31. The
#: model gives 0.168 and 0.558.
#:
#: What is not the link: the runner and the endpoints' interpreters, a floor, and the endpoints'
#: kernel TCP per 100 Mbit/s: 0.072 cores at 100 Mbit/s and 0.25 at 1 Gbit/s, a line of
#: 0.053 + 0.019 per 100 Mbit/s. The same with offloads off (0.076 and 0.25): the endpoints'
#: cost is not an offload gain, so it holds for either link backend.
BASE_CORES = 0.05
TCP_CORES_PER_100MBIT = 0.02
#: The link's own part is its descriptor's cost model (linkdesc): ccsweep-link's, fitted to the
#: emulator's share of the same two cells (0.098 and 0.31 cores), gives 0.168 and 0.558 with the above.

#: Packets the emulator releases per second and Mbit/s: 1500-byte data packets and about one
#: ACK per two of them.
RELEASES_PER_MBIT = 1e6 / 12_000 * 1.5


def release_window(cell: Cell) -> float:
    """The window (us) the cell's link will serve its releases in: its wake-ups are at most one per
    window (a fixed-tick link's tick)."""
    cost = descriptor(cell.params.link).cost
    if isinstance(cost, FixedTickCost):
        return cost.tick_us
    return release_window_for(cell)


def prior_cost(cell: Cell) -> float:
    """Cores a cell is expected to keep busy before anything is measured.

    The endpoints' kernel TCP scales with the rate the cell is expected to carry (carried.py: a
    loss-based algorithm at a high loss rate carries a small part of its link's), above the floor
    of the Python runner and endpoints. The link: ccsweep-link's timed wake-ups, its largest cost
    at 100 Mbit/s, follow the packets it carries until the release window caps them at one per
    window, and its per-packet work the rate it carries; Mahimahi's shells cost what they measured
    per 100 Mbit/s of their link's rate (measured at full load only, so priced as if full).
    Measurements scale this shape per kind of cell (see Admission.observe).
    """
    rate = min(cell.params.uplink.rate_mbps or 50.0, 2000.0)
    carried = expected_carried_mbps(cell, rate)
    return BASE_CORES + carried / 100 * TCP_CORES_PER_100MBIT + link_cost(cell, rate, carried)


def link_cost(cell: Cell, rate: float, carried: float) -> float:
    """Cores the cell's link itself keeps busy at `rate` Mbit/s carrying `carried`, by its
    descriptor's cost model."""
    match descriptor(cell.params.link).cost:
        case FixedTickCost(cores_per_100mbit=cores):
            return rate / 100 * cores
        case TimedReleaseCost(wakeup_cpu_s=wakeup, packet_cores_per_100mbit=per_packet):
            wakeups = min(carried * RELEASES_PER_MBIT, 1e6 / release_window(cell))
            return wakeups * wakeup + carried / 100 * per_packet[cell.params.link_offload]


def refusal(cell: Cell, budget: float) -> str | None:
    """Why a machine that gives cells `budget` cores cannot run `cell` on time; None if it can.

    A cell whose expected cost exceeds the whole budget would run late even alone (its emulator,
    endpoints and the kernel's TCP contend with each other), so it is refused before it runs
    rather than run late and re-run late; a larger machine, or a larger --cpu-budget for a user
    who knows better, runs it.
    """
    need = prior_cost(cell)
    if need <= budget:
        return None
    rate = cell.params.uplink.rate_mbps
    return (f"a {rate:g} Mbit/s cell needs about {need:.1f} cores to keep time, more than the {budget:g} this "
            f"machine gives cells (--cpu-budget); it runs on time on a machine of {math.ceil(need + 0.5)} cores "
            "or more")


#: What makes cells cost alike: link backend, offloads, bottleneck rate and release window.
CostClass = tuple[str, str, float | None, float]


def cost_class(cell: Cell) -> CostClass:
    """Cells that cost alike: the same link backend and offloads, bottleneck rate and release window."""
    return (cell.params.link, cell.params.link_offload, cell.params.uplink.rate_mbps, release_window(cell))


@dataclass
class Admission:
    """How many cells may run at once, and whether the next one may start now."""

    budget: float
    max_cells: int | None = None  # --jobs: an upper bound the user set
    stagger_s: float = START_STAGGER_S
    limit: int = 1  # cells at once now (open_with raises it for the first cells)
    correction: float = 1.0  # measured cost / prior cost, averaged over finished cells
    measured: int = 0
    last_start: float = field(default=float("-inf"))
    #: The cells started lately: when each starts counting in the measured busy cores, and its cost.
    settling: list[tuple[float, float]] = field(default_factory=list)
    #: The same, per cost_class: a measured kind of cell is sized by its own measurements.
    corrections: dict[CostClass, float] = field(default_factory=dict)
    #: The same, per link backend: a kind not measured yet is sized by its backend's measurements.
    backend_corrections: dict[str, float] = field(default_factory=dict)

    def cost(self, cell: Cell) -> float:
        fallback = self.backend_corrections.get(cell.params.link, self.correction)
        return prior_cost(cell) * self.corrections.get(cost_class(cell), fallback)

    def may_start(self, cell: Cell, running: list[tuple[Cell, bool, int]], now: float, *, alone: bool = False,
                  attempt: int = 1, busy: float | None = None) -> bool:
        """Whether attempt `attempt` of `cell` may start at `now` beside `running` (each a cell, whether
        it runs alone, and its attempt: an attempt counts its cell's cost `attempt` times); `busy`: the
        machine's busy cores as measured over the last seconds, None where not measured."""
        if now - self.last_start < self.stagger_s:
            return False
        if alone or any(exclusive for _, exclusive, _ in running):
            return not running
        if not running:
            return True
        if len(running) >= self.limit or (self.max_cells is not None and len(running) >= self.max_cells):
            return False
        if busy is None:
            held = sum(self.cost(c) * tries for c, _, tries in running)
        else:
            held = busy + sum(cost for until, cost in self.settling if until > now)
        return held + self.cost(cell) * attempt <= self.budget

    def open_with(self, cell: Cell) -> None:
        """Before any cell has finished, without --jobs: allow as many cells like `cell` at once as
        fill OPENING_SHARE of the budget by its prior cost (at least one, at most OPENING_MAX_CELLS)."""
        if self.measured == 0 and self.max_cells is None:
            opening = min(OPENING_MAX_CELLS, int(self.budget * OPENING_SHARE / prior_cost(cell)))
            self.limit = max(self.limit, opening)

    def started(self, now: float, cell: Cell, attempt: int = 1) -> None:
        """Attempt `attempt` of `cell` started at `now`: it counts at its cost until it settles."""
        self.last_start = now
        self.settling = [(until, cost) for until, cost in self.settling if until > now]
        self.settling.append((settles_at(cell, now), self.cost(cell) * attempt))

    def observe(self, cell: Cell, cpu_seconds: float | None, wall_seconds: float, late: bool,
                cause: str | None = None) -> None:
        """Learn from a finished cell: its measured CPU share, whether its emulator kept time, and if
        not, what its record put that down to (`cause`, a result.LatenessCause; None for a starved
        attempt or a record without one, taken as crowding)."""
        if cpu_seconds is not None and wall_seconds > 0:
            ratio = (cpu_seconds / wall_seconds) / prior_cost(cell)
            weight = 1.0 if self.measured == 0 else COST_EWMA_WEIGHT
            self.correction = (1 - weight) * self.correction + weight * ratio
            self.measured += 1
            kind, link = cost_class(cell), cell.params.link
            self.corrections[kind] = _averaged(self.corrections.get(kind), ratio)
            self.backend_corrections[link] = _averaged(self.backend_corrections.get(link), ratio)
        if late:
            self.limit = max(1, self.limit - _backoff(self.limit, cause))
        else:
            self.limit = min(self.limit + 1, self.ceiling())

    def ceiling(self) -> int:
        """The most cells at once: --jobs, or as many as the budget holds at a cell's floor (BASE_CORES:
        its runner and endpoints); what they cost above it the budget's check holds, cell by cell."""
        return max(1, self.max_cells if self.max_cells is not None else int(self.budget / BASE_CORES))


def settles_at(cell: Cell, started_at: float) -> float:
    """When a cell started at `started_at` has settled: SETTLE_S after its last flow's start."""
    return started_at + SETTLE_S + max((flow.start_s for flow in cell.params.flows), default=0.0)


def _backoff(limit: int, cause: str | None) -> int:
    """How many fewer cells at once after a late attempt put down to `cause` (see the module docstring)."""
    if cause == "steal":
        return 0
    if cause in (None, "run-queue"):
        return max(1, limit // 4)
    return 1


def _averaged(previous: float | None, ratio: float) -> float:
    """A correction with one more measurement in it (the first one is taken as it is)."""
    return ratio if previous is None else (1 - COST_EWMA_WEIGHT) * previous + COST_EWMA_WEIGHT * ratio
