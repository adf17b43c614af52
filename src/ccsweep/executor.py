"""The local executor: run a sweep's cells on this machine, concurrently within a CPU budget.

Each cell runs as its own `ccsweep cell` process, the very entry point an Argo pod runs, so the
local and cluster paths share one cell implementation (cellrun.run_and_store, whose outcome the
process reports as one JSON line).  A process per cell also isolates
failures and lets Ctrl-C reach every cell, each of which cleans up its own namespaces.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO, cast

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from ccsweep.admission import Admission, refusal
from ccsweep.bpfcc import is_bpf
from ccsweep.bpfregister import BpfUnavailable, recover, registered, registered_digests
from ccsweep.cell import Cell
from ccsweep.cellrun import CellOutcome
from ccsweep.linkrules import small_writes_note, small_writes_rates
from ccsweep.manifest import SweepManifest
from ccsweep.metrics import SweepMetrics, publish_stored
from ccsweep.plan import CHUNK_SIZE, Survey, cells_to_run, store_plan, survey
from ccsweep.result import RERUN_STATUSES
from ccsweep.runner.api import CellUnavailable, check_runnable
from ccsweep.runner.hostcpu import BusyCores
from ccsweep.runner.links import host_refusal
from ccsweep.runner.netns import remove_leftovers
from ccsweep.runner.tcpinfo import available_congestion_controls
from ccsweep.spec import SweepSpec
from ccsweep.store import ResultStore, StoreError
from ccsweep.store.spool import FlushReport, Spool
from ccsweep.storeurls import NAMESPACE_ENV


def default_cpu_budget() -> float:
    """Cores the executor may fill: all but half a core, kept for the executor and the system."""
    return max(0.5, (os.cpu_count() or 1) - 0.5)


#: Runs of a cell at most: the first, then re-runs while it comes back late or starved.
DEFAULT_MAX_ATTEMPTS = 3
#: Runs a cell may take beyond those while its attempts are late only because the hypervisor stole
#: the CPU (result.LatenessCause `steal`): the machine's fault, which comes and goes, not the cell's.
STEAL_EXTRA_ATTEMPTS = 3
#: Seconds running cells get to stop and clean up after the sweep is interrupted, before they are killed.
CELL_STOP_TIMEOUT_S = 30.0


@dataclass
class SweepSummary:
    """What a run did, as counts: a run may try 100,000 cells (refused ones arrive all at once), so
    each ended cell is counted (`count`) and dropped, its Cell and measured record with it. What
    stays per cell is its id (`tried`), and a path for each result still waiting on this machine."""

    sweep: str
    store_url: str
    #: Cells this run ran, tried or could not run, by experiment then status (ok, late, unavailable, ...);
    #: those already stored are only counted (`cached`).
    ended: dict[str, Counter[str]] = field(default_factory=dict)
    #: Runs beyond each cell's first, by experiment: late and starved attempts run again.
    reruns_by: Counter[str] = field(default_factory=Counter)
    #: The id of each cell this run tried, with how it ended, in the order they ended: a cell that
    #: ended (failed, late) is not run again by a later adaptive round; it waits for the next run.
    tried: dict[str, str] = field(default_factory=dict)
    #: Results waiting in the local spool for the store (the store was unreachable): cell id -> experiment.
    spooled: dict[str, str] = field(default_factory=dict)
    #: Results neither stored nor spooled: the scratch folder holding each record, to say and keep.
    kept_in: list[Path] = field(default_factory=list)
    #: Cells stored before this run, by experiment: counts, as a stored sweep may have 100,000.
    cached: Counter[str] = field(default_factory=Counter)
    interrupted: bool = False
    #: Why cells were left unrun (the failure budget was spent), in one line; None when none were.
    stopped: str | None = None
    #: Rounds of running cells (more than 1 only with adaptive repetitions).
    rounds: int = 0

    def count(self, outcome: CellOutcome) -> None:
        """Count how a cell ended; nothing of `outcome` is held but its id and where its result waits."""
        experiment, status = outcome.cell.experiment, sys.intern(outcome.status)
        self.ended.setdefault(experiment, Counter())[status] += 1
        self.reruns_by[experiment] += outcome.attempts - 1
        self.tried[outcome.cell.id] = status
        if outcome.spooled is not None:
            self.spooled[outcome.cell.id] = experiment
        if outcome.kept_in is not None:
            self.kept_in.append(outcome.kept_in)

    def counts(self) -> Counter[str]:
        total = Counter(cached=self.cached.total())
        for statuses in self.ended.values():
            total.update(statuses)
        return total

    @property
    def reruns(self) -> int:
        """Runs beyond each cell's first: late and starved attempts run again."""
        return self.reruns_by.total()


@dataclass
class FailureBudget:
    """--max-failed-cells: once more cells than `limit` have failed, no new cell starts.

    A broken kernel module, binary or store fails every cell alike; without a budget the sweep
    would run (and fail) each of them. Late and starved cells are not failures: the machine, not
    the cell, spoiled their attempts.
    """

    limit: int | None
    failed: int = 0

    def count(self, outcome: CellOutcome) -> None:
        self.failed += outcome.status == "failed"

    @property
    def spent(self) -> bool:
        return self.limit is not None and self.failed > self.limit

    def reason(self, not_run: int) -> str:
        return f"{self.failed} cells failed, more than --max-failed-cells {self.limit}: {not_run} cells not run"


@dataclass
class _Queued:
    cell: Cell
    attempt: int = 1
    #: What the attempt before this one was late for (result.LatenessCause; None: first, starved or unnamed).
    after: str | None = None


class _Queue(list[_Queued]):
    """The cells waiting to start, in plan order, re-runs first: filled a chunk at a time from
    `chunks` whenever it runs dry, so a sweep's cells to run are never all held."""

    def __init__(self, chunks: Iterator[list[Cell]]):
        super().__init__()
        self.more = chunks
        self.refill()

    def refill(self) -> None:
        if not self:
            self.extend(_Queued(c) for c in next(self.more, []))

    def pop_first(self) -> _Queued:
        item = self.pop(0)
        self.refill()
        return item


@dataclass
class _Running:
    cell: Cell
    attempt: int
    alone: bool  # the last attempt of a late cell: nothing runs beside it
    process: subprocess.Popen[str]
    started: float
    log: Path  # the cell's stderr


def run_sweep(spec: SweepSpec, store: ResultStore, *, workdir: Path, cpu_budget: float | None = None,
              jobs: int | None = None, pushgateway: str | None = None, console: Console | None = None,
              max_attempts: int = DEFAULT_MAX_ATTEMPTS, revise: bool = False,
              max_failed_cells: int | None = None, lateness_threshold_us: float | None = None) -> SweepSummary:
    """Run every cell of `spec` not yet in `store`; return what happened to each.

    `lateness_threshold_us` replaces every cell's own (linkrules.lateness_threshold_us); each
    result records the threshold it was judged by.

    The stored plan is read a chunk at a time, as the Argo steps read it (plan.survey, then
    plan.cells_to_run for each pass): what is held is the ids of the cells to run and one chunk's
    cells, however large the sweep; a sweep with adaptive repetitions is judged by a first pass
    keeping each run's id and value.
    """
    console = console or Console(stderr=True)
    for name in remove_leftovers():
        notice(console, f"removed namespace {name} left by a dead cell")
    _flush_spool(store, console)
    manifest = store_plan(spec, store, revise=revise)
    # From here to the end, SIGTERM unwinds as Ctrl-C does: what this run registered is unregistered.
    previous_term = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        with _bpf_registered(spec, console):
            return _run_planned(spec, store, manifest, workdir, cpu_budget, jobs, pushgateway, console, max_attempts,
                                max_failed_cells, lateness_threshold_us)
    finally:
        signal.signal(signal.SIGTERM, previous_term)


@contextmanager
def _bpf_registered(spec: SweepSpec, console: Console) -> Iterator[None]:
    """Register the BPF congestion controls `spec` names for the run, and unregister what this run
    registered when it ends, however it ends; first unregister what a killed run left registered.
    One that cannot be registered is said in one line, and its cells are counted unavailable."""
    names = [group.cc for exp in spec.experiments for mix in exp.flow_mixes() for group in mix if is_bpf(group.cc)]
    with ExitStack() as registrations:
        try:
            for name in recover():
                notice(console, f"unregistered BPF congestion control {name}, left registered by a ccsweep run "
                                "that died")
            mine = registrations.enter_context(registered(names))
            if mine:
                console.print(f"registered BPF congestion control(s) {', '.join(mine)} for this run", soft_wrap=True)
        except (BpfUnavailable, OSError) as exc:
            notice(console, f"BPF congestion controls not registered: {exc}")
        yield


def _run_planned(spec: SweepSpec, store: ResultStore, manifest: SweepManifest, workdir: Path,
                 cpu_budget: float | None, jobs: int | None, pushgateway: str | None, console: Console,
                 max_attempts: int, max_failed_cells: int | None,
                 lateness_threshold_us: float | None) -> SweepSummary:
    """run_sweep once the sweep is planned and its algorithms registered."""
    found = survey(store, manifest, CHUNK_SIZE)
    summary = SweepSummary(sweep=spec.name, store_url=store.url, cached=found.stored)
    cores_for_cells = cpu_budget if cpu_budget is not None else default_cpu_budget()
    todo = _Round.counted(store, manifest, found, frozenset(), _Machine(cores_for_cells), summary, console)
    console.print(f"sweep [bold]{spec.name}[/bold]: {found.wanted} cells, {found.cached} already stored, "
                  f"{todo.cells} to run, store {store.url}" + _rounds_note(found), soft_wrap=True)
    if todo.small_writes:
        notice(console, todo.small_writes)
    warning_log = WarningLog(console)
    warnings = cast(TextIO, warning_log)  # a text stream to the metrics pushers, like stderr
    metrics = SweepMetrics(pushgateway, spec.name, err=warnings) if pushgateway else None
    admission = Admission(budget=cores_for_cells, max_cells=jobs, limit=jobs or 1)
    budget = FailureBudget(max_failed_cells)
    try:
        if metrics:
            metrics.update(total=found.wanted, **_progress(summary))
        for round_number in range(1, found.rounds + 1):
            if not todo.cells:
                break
            summary.interrupted = _run_cells(todo, store, workdir, admission, max_attempts,
                                             cell_command_options(pushgateway, lateness_threshold_us), summary,
                                             console, warning_log, metrics, budget)
            summary.rounds = round_number
            if summary.interrupted or summary.stopped or round_number == found.rounds:
                break
            # Adaptive repetitions: judge every setting from what is stored now, and run what it wants next.
            # A cell that ended this run (failed, late) waits for the next `ccsweep run`, as without rounds.
            found = survey(store, manifest, CHUNK_SIZE)
            todo = _Round.counted(store, manifest, found, frozenset(summary.tried), todo.machine,
                                  summary, console)
            if todo.cells:
                console.print(f"round {round_number + 1} of at most {found.rounds}: {todo.cells} more runs for "
                              f"{sum(p.state == 'needs more runs' for p in found.points)} settings whose interval is "
                              "wider than the target", soft_wrap=True)
    finally:
        if metrics:
            metrics.update(**_progress(summary))
            metrics.finish()
    left = set(_flush_spool(store, console).remaining)
    summary.spooled = {cell_id: e for cell_id, e in summary.spooled.items() if cell_id in left}  # the rest uploaded
    if pushgateway and not summary.interrupted:
        try:
            publish_stored(pushgateway, store, spec.name, err=warnings)
        except StoreError as exc:
            warning_log.warn(f"ccsweep: warning: final metrics not published ({exc})")
    return summary


class HostCannotRun(RuntimeError):
    """This machine can run no cell of a link the sweep names (its tools missing or out of reach):
    said once, before the first cell, rather than by every cell."""


@dataclass
class _Machine:
    """What this machine can run: the algorithms its kernel offers, the links its tools serve, and
    cells that keep time within the `cpu_budget` it gives cells (admission.refusal)."""

    cpu_budget: float
    available: list[str] = field(default_factory=available_congestion_controls)
    #: Each link and set of algorithms checked once (runner.links.host_refusal).
    hosts_checked: set[tuple[str, tuple[str, ...]]] = field(default_factory=set)
    #: The BPF congestion controls ccsweep registered here, by name, with their digests (bpfregister).
    bpf_registered: dict[str, str] = field(default_factory=registered_digests)

    def refusal(self, cell: Cell) -> str | None:
        """Why this machine cannot run `cell` (an algorithm or kernel it lacks, more CPU than its
        budget); None if it can. HostCannotRun if no cell of its link can run here."""
        try:
            check_runnable(cell, self.available, self.bpf_registered)
        except CellUnavailable as exc:
            return str(exc)
        host = (cell.params.link, tuple(sorted({f.cc for f in cell.params.flows})))
        if host not in self.hosts_checked:
            why = host_refusal(host[0], list(host[1]))
            if why is not None:
                raise HostCannotRun(why)
            self.hosts_checked.add(host)
        return refusal(cell, self.cpu_budget)


@dataclass
class _Round:
    """A round's cells to run on this machine, counted by a first pass over the plan's chunks and read
    again chunk by chunk as they start (`chunks`): never all held at once."""

    store: ResultStore
    manifest: SweepManifest
    found: Survey
    #: Cells this run already ran or could not run: a cell that failed waits for the next `ccsweep run`.
    tried: frozenset[str]
    machine: _Machine
    cells: int = 0
    #: Seconds of flows the cells to run take, for the progress bar.
    work_s: float = 0.0
    small_writes: str | None = None

    @classmethod
    def counted(cls, store: ResultStore, manifest: SweepManifest, found: Survey, tried: frozenset[str],
                machine: _Machine, summary: SweepSummary, console: Console) -> _Round:
        """The round's cells to run, counted; those this machine cannot run are counted `unavailable` in
        `summary`, each distinct reason said once."""
        todo = cls(store, manifest, found, tried, machine)
        reasons: set[str] = set()

        def runnable() -> Iterator[Cell]:
            for chunk in cells_to_run(store, manifest, found):
                for cell in chunk:
                    if cell.id in tried:
                        continue
                    why = machine.refusal(cell)
                    if why is not None:
                        summary.count(CellOutcome(cell, "unavailable", error=why))
                        reasons.add(why)
                        continue
                    todo.cells += 1
                    todo.work_s += cell.params.duration_s
                    yield cell

        # Reads every chunk once, counting as it goes.
        todo.small_writes = small_writes_note(small_writes_rates(runnable()))
        for reason in sorted(reasons):
            console.print(f"[yellow]skipping cells: {escape(reason)}[/yellow]", soft_wrap=True)
        return todo

    def chunks(self) -> Iterator[list[Cell]]:
        """The cells `counted` counted, read again a stored chunk at a time, in plan order."""
        for chunk in cells_to_run(self.store, self.manifest, self.found):
            cells = [c for c in chunk if c.id not in self.tried and self.machine.refusal(c) is None]
            if cells:
                yield cells


def _rounds_note(found: Survey) -> str:
    """', adaptive repetitions: ...' for a sweep with them, else ''."""
    if not found.points:
        return ""
    return (f"; adaptive repetitions: {sum(p.settled for p in found.points)} of {len(found.points)} settings settled, "
            f"up to {found.rounds} rounds")


def _progress(summary: SweepSummary, running: int = 0) -> dict[str, int]:
    """Cell counts for the sweep's metrics; skipped (unavailable) and interrupted cells count as failed."""
    counts = summary.counts()
    return {"cached": counts["cached"], "running": running, "done": counts["ok"],
            "failed": counts["failed"] + counts["late"] + counts["starved"] + counts["unavailable"]
            + counts["interrupted"]}


def _flush_spool(store: ResultStore, console: Console) -> FlushReport:
    """Upload results spooled by cells while this store was unreachable (see store/spool.py)."""
    spool = Spool()
    if not spool.pending(store.url):
        return FlushReport(store.url)
    report = spool.flush(store)
    if report.uploaded:
        console.print(f"uploaded {len(report.uploaded)} spooled cell result(s) to {store.url}", soft_wrap=True)
    if report.remaining:
        notice(console, f"{len(report.remaining)} cell result(s) stay in the spool {spool.root} ({report.error}); "
                        f"`ccsweep upload-spool --store {store.url}` or the next `ccsweep run` uploads them")
    return report


def notice(console: Console, text: str) -> None:
    """Print a line as it is, in yellow and unwrapped: paths, URLs and commands stay whole in logs."""
    console.print(text, style="yellow", markup=False, highlight=False, soft_wrap=True)


class WarningLog(io.TextIOBase):
    """The console's warning lines: each distinct one printed once.

    A cell's stderr goes to its cell.log (its folder vanishes with the run's temporary workdir),
    so its `ccsweep: warning:` lines are copied here when it ends.  An outage makes every cell,
    and the executor's own metrics pusher (which writes here as a stream), warn the same line:
    the console says it once.
    """

    PREFIX = "ccsweep: warning:"

    def __init__(self, console: Console):
        self.console = console
        self.seen: set[str] = set()

    def write(self, text: str) -> int:
        for line in text.splitlines():
            self.warn(line)
        return len(text)

    def warn(self, line: str) -> None:
        if line.strip() and line not in self.seen:
            self.seen.add(line)
            notice(self.console, line)

    def from_log(self, log: Path) -> None:
        for line in _log_lines(log):
            if line.startswith(self.PREFIX):
                self.warn(line)


def _log_lines(log: Path) -> list[str]:
    try:
        return log.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return []


def _run_cells(todo: _Round, store: ResultStore, workdir: Path, admission: Admission, max_attempts: int,
               cell_options: Sequence[str], summary: SweepSummary, console: Console, warning_log: WarningLog,
               metrics: SweepMetrics | None = None, budget: FailureBudget | None = None) -> bool:
    """Start cells as admission allows; run late and starved ones again, alone; returns True if interrupted.

    The cells join the queue a chunk at a time, the next chunk when the queue runs dry, so what
    is held is a chunk's cells and those running. Once the failure budget is spent no cell
    starts; running ones finish and are counted, and `summary.stopped` says why the rest did not run.
    """
    budget = budget or FailureBudget(None)
    queue = _Queue(todo.chunks())
    if queue:
        admission.open_with(queue[0].cell)
    running: list[_Running] = []
    machine = BusyCores()  # what the running cells cost now, whatever admission's model says
    work_total = todo.work_s
    done_work = 0.0
    finished = 0
    previous_term = signal.signal(signal.SIGTERM, _raise_interrupt)
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[cells]}"),
               TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
    try:
        with Progress(*columns, console=console, transient=False) as progress:
            task = progress.add_task("cells", total=work_total, cells=f"0/{todo.cells}")
            while (queue and not budget.spent) or running:
                now = time.monotonic()
                busy = machine.read(now)
                alone = bool(queue) and runs_alone(queue[0].attempt, max_attempts, queue[0].after)
                if queue and not budget.spent and admission.may_start(
                        queue[0].cell, [(r.cell, r.alone, r.attempt) for r in running], now, alone=alone,
                        attempt=queue[0].attempt, busy=busy):
                    started = queue.pop_first()
                    running.append(_start(started, store, workdir, cell_options, alone))
                    admission.started(now, started.cell, started.attempt)
                time.sleep(0.2)
                for ended, cpu_s in _reap(running):
                    running.remove(ended)
                    warning_log.from_log(ended.log)
                    outcome = _outcome(ended)
                    wall_s = time.monotonic() - ended.started
                    spoiled = outcome.status in RERUN_STATUSES  # by the machine: run again, fewer at once
                    admission.observe(ended.cell, cpu_s, wall_s, late=spoiled, cause=outcome.late_cause)
                    done_work += ended.cell.params.duration_s
                    if spoiled and ended.attempt < attempts_allowed(outcome.late_cause, max_attempts):
                        alone_next = runs_alone(ended.attempt + 1, max_attempts, outcome.late_cause)
                        progress.console.print(f"[yellow]cell {ended.cell.id}: {_spoiled_by(outcome)}; attempt "
                                               f"{ended.attempt} kept under {outcome.status}/, running it again"
                                               f"{' alone' if alone_next else ''}; "
                                               f"{admission.limit} cell(s) at once from now[/yellow]",
                                               soft_wrap=True)
                        queue.insert(0, _Queued(ended.cell, ended.attempt + 1, outcome.late_cause))
                        work_total += ended.cell.params.duration_s
                        progress.update(task, total=work_total)
                        continue
                    summary.count(outcome)
                    budget.count(outcome)
                    finished += 1
                    if not progress.console.is_terminal:
                        progress.console.print(progress_line(finished, todo.cells, len(running), done_work,
                                                             work_total), soft_wrap=True, highlight=False)
                    if outcome.status == "failed":
                        progress.console.print(f"[red]cell {ended.cell.id} failed: {escape(outcome.error or '')}[/red]",
                                               soft_wrap=True)
                    elif spoiled:
                        progress.console.print(f"[red]cell {ended.cell.id}: {outcome.status} on all {ended.attempt} "
                                               f"attempts ({_spoiled_by(outcome)}); no result counted[/red]",
                                               soft_wrap=True)
                in_flight = sum(min(time.monotonic() - r.started, r.cell.params.duration_s) for r in running)
                progress.update(task, completed=done_work + in_flight, cells=f"{finished}/{todo.cells}")
                if metrics:
                    metrics.update(**_progress(summary, len(running)))
        if queue:
            summary.stopped = budget.reason(todo.cells - finished)
        return False
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted: stopping {len(running)} running cell(s); "
                      "every finished result is kept[/yellow]")
        # SIGTERM, not SIGINT: a run started in the background (nohup, `&`) passes SIGINT's "ignore"
        # on to its cells, and a cell that never stops is killed without cleaning up its namespaces.
        for item in running:
            if item.process.poll() is None:
                item.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + CELL_STOP_TIMEOUT_S  # one wait for all: they stop side by side
        for item in running:
            try:
                item.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                item.process.kill()
                item.process.wait()
            warning_log.from_log(item.log)
            summary.count(CellOutcome(item.cell, "interrupted", attempts=item.attempt))
        return True
    finally:
        signal.signal(signal.SIGTERM, previous_term)


def progress_line(finished: int, cells: int, running: int, done_s: float, total_s: float) -> str:
    """One line per finished cell where the progress bar cannot redraw (a log file, a pipe): a run
    of hours started with nohup would otherwise show nothing until its end."""
    share = done_s / total_s if total_s else 1.0
    return (f"{time.strftime('%H:%M:%S')} {finished}/{cells} cells done, {running} running, "
            f"{share:.0%} of the flow time")


def runs_alone(attempt: int, max_attempts: int, after: str | None = None) -> bool:
    """A cell's last attempt after late or starved ones runs alone, and so does every one after it
    (steal's extra attempts): the whole machine as headroom. Earlier re-runs run beside others,
    asking for more (admission.Admission.may_start).

    Not after an attempt late from its timer or its loop's own work (`after`, the cause its record
    named): an idle link's sleeps returning late is no crowding, nor is the emulator's own work, and
    alone the machine is idler still. In the quiet study
    four cells late from the timer ran their last attempt alone, 427 s with one cell on the machine,
    and all four were late again (benchmarks/results/2026-11-30-full-study-one-sitting)."""
    return 1 < max_attempts <= attempt and after not in ("timer", "loop")


def attempts_allowed(late_cause: str | None, max_attempts: int = DEFAULT_MAX_ATTEMPTS) -> int:
    """How many runs a cell may take after a spoiled attempt whose record names `late_cause`:
    `max_attempts`, and STEAL_EXTRA_ATTEMPTS more when it is steal (none when one attempt was asked for)."""
    return max_attempts + (STEAL_EXTRA_ATTEMPTS if late_cause == "steal" and max_attempts > 1 else 0)


def _spoiled_by(outcome: CellOutcome) -> str:
    """What spoiled a late or starved attempt, in words."""
    if outcome.status == "late":
        return f"link ran late ({escape(outcome.error or '')})"
    return f"the machine starved it ({escape(outcome.error or '')})"


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _reap(running: list[_Running]) -> list[tuple[_Running, float | None]]:
    """The cells whose process ended, each with the CPU seconds its process tree used.

    os.wait4 gives the rusage of the cell process including every child it waited for (the
    emulator and the flow endpoints): what the cell cost, for admission to learn from.
    """
    ended: list[tuple[_Running, float | None]] = []
    for item in running:
        try:
            pid, status, usage = os.wait4(item.process.pid, os.WNOHANG)
        except ChildProcessError:  # already reaped (by Popen.poll elsewhere)
            if item.process.poll() is not None:
                ended.append((item, None))
            continue
        if pid:
            item.process.returncode = os.waitstatus_to_exitcode(status)
            ended.append((item, usage.ru_utime + usage.ru_stime))
    return ended


def cell_command_options(pushgateway: str | None, lateness_threshold_us: float | None) -> list[str]:
    """The options every `ccsweep cell` of this run takes beyond its own cell, store and attempt."""
    options = ["--pushgateway", pushgateway] if pushgateway else []
    if lateness_threshold_us is not None:
        options += ["--lateness-threshold-us", repr(lateness_threshold_us)]
    return options


def _start(item: _Queued, store: ResultStore, workdir: Path, cell_options: Sequence[str], alone: bool) -> _Running:
    cell = item.cell
    cell_dir = workdir / cell.id / f"attempt-{item.attempt}"
    cell_dir.mkdir(parents=True, exist_ok=True)
    cell_file = cell_dir / "cell.json"
    cell_file.write_text(cell.model_dump_json())
    cmd = [sys.executable, "-m", "ccsweep", "cell", "--cell", f"@{cell_file}", "--store", store.url,
           "--workdir", str(cell_dir), "--executor", "local", "--attempt", str(item.attempt), *cell_options]
    log = cell_dir / "cell.log"
    # `store.url` is already where the cell belongs: a child that read $CCSWEEP_NAMESPACE (set where
    # `ccsweep run` runs in a pod) would put it in a namespace's folder of that folder.
    env = {name: value for name, value in os.environ.items() if name != NAMESPACE_ENV}
    with open(log, "w") as stderr:
        process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)
    return _Running(cell, item.attempt, alone, process, time.monotonic(), log)


def _outcome(item: _Running) -> CellOutcome:
    """Read the one JSON line `ccsweep cell` prints on stdout."""
    out = item.process.stdout.read() if item.process.stdout else ""
    try:
        report = json.loads(out.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        last = next((line for line in reversed(_log_lines(item.log)) if line.strip()), "no output")
        return CellOutcome(item.cell, "failed", error=f"ccsweep cell exited {item.process.returncode} without a "
                                                      f"report: {last}", attempts=item.attempt)
    outcome = CellOutcome.from_report(item.cell, report, item.attempt)
    if outcome.status == "late":
        outcome.error = report.get("timing")
    return outcome


def summary_table(summary: SweepSummary) -> Table:
    """Per experiment: how many cells ran, came from the store, were late, failed or were skipped.

    `late` cells have no counted result: every attempt ran with the emulator late; `starved`
    ones neither: every attempt had a wait on its processes run out. `re-runs` counts the extra
    attempts late and starved cells took. `spooled` counts results still in the local spool
    (the store was unreachable): safe on this machine, not yet in the store; the line before the
    table says where and how to upload them.
    """
    table = Table(title=f"sweep {summary.sweep}")
    statuses = ["ok", "cached", "late", "starved", "failed", "unavailable", "interrupted"]
    table.add_column("experiment")
    for status in statuses:
        table.add_column(status, justify="right")
    table.add_column("re-runs", justify="right")
    table.add_column("spooled", justify="right")
    per_exp: dict[str, Counter[str]] = {experiment: Counter(cached=n) for experiment, n in summary.cached.items()}
    for experiment, ended in summary.ended.items():
        per_exp.setdefault(experiment, Counter()).update(ended)
    spooled = Counter(summary.spooled.values())
    for exp, counts in per_exp.items():
        table.add_row(exp, *[str(counts[s]) for s in statuses], str(summary.reruns_by[exp]), str(spooled[exp]))
    return table
