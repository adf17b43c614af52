"""One attempt at a cell as the lifecycle (run.py) and its link share it: CellRun and the Link protocol.

run.py owns the order of work, the same for every link. A link is asked, at fixed points of that
order, only what it alone knows: what it must check and write before the namespaces exist, how it
comes up between them, where the endpoints run across it, when its clock started, how it ends and
what it measured. Adding a link is one module implementing Link (and its name in runner/links.py
when cells can name it); run.py does not change.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import ParamSpec, Protocol, TypeVar

from ccsweep.cell import Cell
from ccsweep.linkrules import DIRECTIONS
from ccsweep.result import Environment, LinkSummary
from ccsweep.runner.live import LiveFeed
from ccsweep.runner.netns import CellNamespaces, deferred_interrupts
from ccsweep.runner.procs import Child, Wait
from ccsweep.runner.runqueue import RunQueueSummary

P = ParamSpec("P")
C = TypeVar("C", bound=Child)

#: Time the link, receiver and sender may each take to come up.
READY_TIMEOUT_S = 20.0
#: Time past the flows' end allowed for the endpoints' last words before the cell fails.
END_GRACE_S = 15.0


def link_files(workdir: Path) -> dict[str, Path]:
    """The logs a link leaves in the workdir, one per direction in Mahimahi's format (ccsweep-link
    writes it too): the record's bottleneck numbers are read from them, and they are stored."""
    return {f"{d}.log": workdir / f"{d}.log" for d in DIRECTIONS}


@dataclass
class CellRun:
    """One attempt at a cell as far as it got: its processes, the flows' start and the waits on them.

    The lifecycle and the link fill it in as they go; the result is collected from it, a failed
    attempt's as well as a finished one's, so a failure keeps what was measured before it.
    """

    cell: Cell
    workdir: Path
    environment: Environment
    started_at: str
    attempt: int
    #: The link's p99 lateness (us) above which a measured result is `late`.
    threshold_us: float
    #: The CPU the cell was given, in millicores (a cell pod's request), or None where nobody
    #: gave it a share (the local executor): it sizes the emulator's deadline reservation.
    cpu_milli: int | None = None
    #: Processes in start order; stop_all stops them in reverse (senders first, emulator last).
    started: list[Child] = field(default_factory=list)
    receiver: Child | None = None
    sender: Child | None = None
    #: The link's own process, if it has one: its statistics (`stats` events) describe the link,
    #: and its run-queue delay is sampled. Mahimahi's is the sender's too.
    link: Child | None = None
    #: The flows' common start on CLOCK_MONOTONIC, once `go` was sent, and on the wall clock (ns).
    t0_ns: int | None = None
    t0_wall_ns: int | None = None
    flows_started_at: str | None = None
    #: The flows' t0 on the clock of the link's logs (seconds), once known.
    offset_s: float | None = None
    summary: LinkSummary | None = None
    #: Waits not on one child (the flows), beside the children's own.
    waits: list[Wait] = field(default_factory=list)
    #: The CPU-latency bound (us) held while the cell ran (runner.wakelatency); None: none asked.
    idle_wake_us: int | None = None

    def start(self, kind: Callable[P, C], *args: P.args, **kwargs: P.kwargs) -> C:
        """Start a process of the cell (`kind(*args, **kwargs)`, a Child) and list it for stop_all.

        One step no signal splits: a Ctrl-C or SIGTERM that arrived while the process was forked
        (inside Popen) or before it was listed would leave it running unlisted, in a session of its
        own that the signal never reaches, and the emulator, so orphaned, would create the
        namespaces the runner deletes again. The interrupt is raised once the child is listed.
        """
        with deferred_interrupts():
            child = kind(*args, **kwargs)
            self.started.append(child)
        return child

    def stop_all(self) -> None:
        with deferred_interrupts():
            for child in reversed(self.started):
                child.stop()

    def go(self, t0_ns: int, *children: Child) -> None:
        """Send every endpoint the flows' start (t0 on CLOCK_MONOTONIC)."""
        for child in children:
            child.send(f"go {t0_ns}\n")
        self.t0_ns = t0_ns
        self.t0_wall_ns = time.time_ns() + t0_ns - time.monotonic_ns()
        self.flows_started_at = datetime.fromtimestamp(self.t0_wall_ns / 1e9, UTC).isoformat(timespec="milliseconds")

    def waits_text(self) -> str:
        """Every wait so far in the order they ended, e.g. `ccsweep-link ready 0.41 s, ...`."""
        waits = sorted([*self.waits, *(w for child in self.started for w in child.waits)], key=lambda w: w.ended_ns)
        return ", ".join(map(str, waits))


@dataclass(frozen=True)
class LinkClock:
    """A link's own clock: started at `origin_ns` (CLOCK_MONOTONIC), the zero of its logs; the flows
    must start `lead_s` after it (a rate schedule's lead), or whenever they are ready when 0."""

    origin_ns: int
    lead_s: float = 0.0


class Link(Protocol):
    """What run.py's lifecycle asks of a link, in the order it asks; one object per attempt.

    prepare; the namespaces are made; start; receiver_argv, start_sender; the receiver listens;
    ready; the sender is ready, `go` is sent, the flows end; end. Then, on every path, once the
    cell's processes are stopped and its namespaces deleted: stop.
    """

    #: Names (prefixes) of the link's processes under run.link whose run-queue delay is sampled.
    process_names: tuple[str, ...]

    def prepare(self, run: CellRun) -> None:
        """Before any namespace: refuse a cell or a host the link cannot run, and write the files it reads."""

    def start(self, run: CellRun, ns: CellNamespaces, live: LiveFeed) -> None:
        """Bring the link up between the namespaces, before the endpoints (run.start each process it starts)."""

    def receiver_argv(self, run: CellRun, ns: CellNamespaces) -> list[str]:
        """The receiver's command line: where across the link it listens (runner.endpoints)."""

    def start_sender(self, run: CellRun, ns: CellNamespaces, live: LiveFeed) -> Child:
        """Start the sender on its side of the link (run.start it): in its namespace, or inside the link."""

    def ready(self, run: CellRun) -> LinkClock | None:
        """Once the receiver listens, before the sender is awaited: finish what needs the endpoints
        running; the link's clock if the flows must meet it (None: they start whenever ready)."""

    def end(self, run: CellRun) -> dict[str, list[int]]:
        """After the flows ended: the link ends, or a ChildError says why not; returns the socket
        sysctls where the flows ran (netns.RECORDED_SYSCTLS), for the record's environment."""

    def stop(self, run: CellRun, run_queue: RunQueueSummary | None) -> LinkSummary | None:
        """On every path, last: remove what prepare and start left, and return the link's summary and
        self-check (`run_queue`: its processes' run-queue delay over the flow time, if sampled);
        None where there is none to give, a failed attempt's included where the link cannot say.
        A link whose logs tell their clock only once finished sets run.offset_s here (Mahimahi)."""
