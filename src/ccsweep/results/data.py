"""A sweep's stored results, gathered per experiment through the ResultStore interface only.

Figures and reports never run anything: everything comes from the store (file:// or s3://), so
they can be rebuilt anywhere, any time.  Cells are grouped by the manifest, not by the experiment
named in a record, because one stored cell can serve two experiments or sweeps (content-addressed
ids).  Cells without a record are described from the manifest, which holds every planned cell's
parameters: nothing is expanded again, and no trace file is needed.  The records are held in a
local temporary file and parsed as each is read (`ccsweep.results.held`), and only the last few
time series read are kept, so what the step holds does not grow with the sweep's records.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from ccsweep.adaptive import PointRuns
from ccsweep.manifest import ManifestCell, SweepManifest
from ccsweep.result import CellResult, TimeSeries
from ccsweep.results.held import RecordFile, Results
from ccsweep.results.points import cell_summary
from ccsweep.spec import Experiment, SpecError
from ccsweep.specload import parse_spec
from ccsweep.store import ResultStore, StoreError
from ccsweep.storedplan import get_manifest, get_unplaceable
from ccsweep.sweep_status import CellStatus, chunk_statuses, judged_whole

SeriesLoader = Callable[[str], TimeSeries | None]
#: A file stored beside a cell's record, by cell id and file name (e.g. uplink.log.gz).
FileLoader = Callable[[str, str], bytes | None]


@dataclass
class FailedAttempt:
    """The latest failure record of a cell that has no result."""

    cell_id: str
    error: str


@dataclass
class MissingCell:
    """A planned cell without a stored result: what it is and, where the store tells, why."""

    cell_id: str
    summary: str
    reason: str


#: Time series kept once read: a figure and then a check read a cell's series in a row; a
#: series is about 1 MiB parsed (600 samples of a dozen numbers per flow), so not every one.
RECENT_SERIES = 8


@dataclass
class ExperimentData:
    """One experiment's spec and its stored results, with the last few time series read kept."""

    experiment: Experiment
    #: Parsed as each is reached (a `Results`), or records held in memory (a sweep built by hand).
    results: Sequence[CellResult]
    missing: list[MissingCell] = field(default_factory=list)
    load_series: SeriesLoader = lambda _cell_id: None
    #: Not cached, unlike the series: link logs are megabytes, and each figure reads a few once.
    load_file: FileLoader = lambda _cell_id, _name: None
    _series: OrderedDict[str, TimeSeries | None] = field(default_factory=OrderedDict, repr=False)

    @property
    def name(self) -> str:
        return self.experiment.name

    @property
    def title(self) -> str:
        return self.experiment.title or self.experiment.name

    def timeseries(self, cell_id: str) -> TimeSeries | None:
        if cell_id in self._series:
            self._series.move_to_end(cell_id)
            return self._series[cell_id]
        series = self._series[cell_id] = self.load_series(cell_id)
        if len(self._series) > RECENT_SERIES:
            self._series.popitem(last=False)
        return series


class PlannedEntry(NamedTuple):
    """One entry of the plan: a cell under the experiment that asked for it (a cell can serve several)."""

    cell_id: str
    experiment: str


#: Bytes of a cell id (16 hex digits: `cell.cell_id`, which every manifest entry is checked against).
ID_BYTES = 8


class PlanEntries(Iterable[PlannedEntry]):
    """The plan's entries as the figures step keeps them: each cell id as its 8 bytes and each
    experiment as an index to its name, 10 bytes an entry where a PlannedEntry of two strs is some
    140 (5 MiB of 40,000 cells); iterated as PlannedEntry."""

    def __init__(self, entries: Iterable[PlannedEntry] = ()) -> None:
        self._ids = bytearray()
        self._experiments = array("H")
        self._names: list[str] = []
        self._index: dict[str, int] = {}
        for entry in entries:
            self.append(entry.cell_id, entry.experiment)

    def append(self, cell_id: str, experiment: str) -> None:
        try:
            packed = bytes.fromhex(cell_id)
        except ValueError:
            packed = b""
        if len(packed) != ID_BYTES:
            raise ValueError(f"cell id {cell_id!r}: not {2 * ID_BYTES} hex digits")
        self._ids += packed
        if experiment not in self._index:
            self._index[experiment] = len(self._names)
            self._names.append(experiment)
        self._experiments.append(self._index[experiment])

    def __len__(self) -> int:
        return len(self._experiments)

    def cell_id(self, position: int) -> str:
        return self._ids[position * ID_BYTES:(position + 1) * ID_BYTES].hex()

    def __iter__(self) -> Iterator[PlannedEntry]:
        names = self._names
        for position, experiment in enumerate(self._experiments):
            yield PlannedEntry(self.cell_id(position), names[experiment])

    def positions(self, experiment: str) -> Iterator[int]:
        """The positions of an experiment's entries, in plan order."""
        number = self._index.get(experiment)
        return (i for i, e in enumerate(self._experiments) if e == number)


@dataclass
class SweepData:
    #: The stored manifest without its cells: `plan` holds what the figures need of them.
    manifest: SweepManifest
    description: str
    experiments: list[ExperimentData]
    failures: list[FailedAttempt]
    #: Per cell without an on-time result, its latest attempt measured while the emulator ran late:
    #: shown (greyed) in the report, never in figures or claims.
    late: list[CellResult] = field(default_factory=list)
    #: Per cell without a result, late attempt or failure, its latest attempt the machine starved.
    starved: list[CellResult] = field(default_factory=list)
    #: Each setting of the experiments with adaptive repetitions: its runs and why it stopped.
    points: list[PointRuns] = field(default_factory=list)
    #: Cells no node could run when the sweep was planned (never submitted), each with why.
    unplaceable: list[MissingCell] = field(default_factory=list)
    #: Every entry of the plan, in plan order (PlanEntries from `load_sweep`).
    plan: Iterable[PlannedEntry] = field(default_factory=list)
    #: Each stored cell once, in manifest order, as `load_sweep` found them; None in a sweep built
    #: by hand, whose experiments' records are then gathered.
    stored: Sequence[CellResult] | None = None
    #: The link backends (ccsweep-link, mahimahi) of the stored cells, as `load_sweep` found them;
    #: None in a sweep built by hand. The both-links section needs both, and reads its records only then.
    links: set[str] | None = None

    @property
    def name(self) -> str:
        return self.manifest.name

    def distinct_results(self) -> Sequence[CellResult]:
        """Each stored cell once, in manifest order."""
        if self.stored is not None:
            return self.stored
        seen: dict[str, CellResult] = {}
        for exp in self.experiments:
            for result in exp.results:
                seen.setdefault(result.cell.id, result)
        return Results.of(seen.values())


def load_sweep(store: ResultStore, sweep: str) -> SweepData:
    """Read a sweep's manifest and every result it names; missing cells are listed, not fatal.

    The plan is read a stored chunk at a time and only each entry's id and experiment are kept
    (a cell's parameters are in its record, or in its MissingCell), and each record goes to a
    temporary file as it is read (`RecordFile`), parsed again when a figure reaches it. A sweep
    with adaptive repetitions is judged whole, as `status` judges it (its wanted runs depend on
    each other), from a first pass over the plan that keeps a number a run.
    """
    manifest = get_manifest(store, sweep)
    if manifest is None:
        known = ", ".join(store.list_sweeps()) or "none"
        raise StoreError(f"sweep {sweep!r} has no manifest in {store.url} (stored sweeps: {known})")
    try:
        spec = parse_spec(manifest.spec, origin=f"sweep {sweep} manifest")
    except SpecError as exc:
        raise StoreError(str(exc)) from None
    found = _Gathered(get_unplaceable(store, sweep))
    points: list[PointRuns] = []
    if any(exp.adaptive is not None for exp in spec.experiments):
        # Runs an adaptive rule has not asked for are planned, not missing.
        points, chunks = judged_whole(store, manifest, found.set_aside, spec.experiments)
    else:
        chunks = chunk_statuses(store, manifest, found.set_aside)
    for chunk, chunk_cells in chunks:
        found.add(chunk.entries, chunk_cells)
        del chunk, chunk_cells  # not held while the next one is read: one parsed chunk at a time
    found.resolve_repeats()
    why = _MissingReasons(found)
    experiments = []
    plan, rows = found.plan, found.rows
    for exp in spec.experiments:
        counted = dict.fromkeys(rows[p] for p in plan.positions(exp.name) if rows[p] >= 0)
        absent = dict.fromkeys(plan.cell_id(p) for p in plan.positions(exp.name) if rows[p] < 0)
        experiments.append(ExperimentData(experiment=exp, results=Results(found.records, counted),
                                          missing=why.describe(i for i in absent if i in found.absent),
                                          load_series=store.get_timeseries, load_file=store.get_cell_file))
    unplaceable = [cell_id for cell_id in found.set_aside if cell_id in found.without_record]
    return SweepData(manifest=manifest.model_copy(update={"cells": []}), description=spec.description,
                     experiments=experiments, failures=list(found.failures.values()), late=list(found.late.values()),
                     starved=list(found.starved.values()), points=points, unplaceable=why.describe(unplaceable),
                     plan=plan, stored=Results(found.records, range(len(found.records))), links=found.links)


class _Gathered:
    """What the figures keep of each planned cell's status, taken a chunk of the plan at a time:
    the plan's (id, experiment) entries, the records, the attempts, and for a cell without a
    counted record the one line that names it."""

    NO_RECORD = -1
    REPEATED = -2

    def __init__(self, set_aside: dict[str, str]):
        #: Cells no node could run when the sweep was planned, each with why.
        self.set_aside = set_aside
        self.plan = PlanEntries()
        #: Every counted record, each once, in plan order: read back by row.
        self.records = RecordFile()
        #: Per entry of `plan`, its cell's row in `records`: NO_RECORD, or (until resolve_repeats)
        #: REPEATED for a cell an entry of an earlier chunk has (its state was decided there).
        self.rows = array("l")
        self._repeated: set[str] = set()
        self.flagged_late: dict[str, CellResult] = {}
        self.late_attempts: dict[str, CellResult] = {}
        self.failures: dict[str, FailedAttempt] = {}
        self.starved: dict[str, CellResult] = {}
        #: Cells without a counted record and wanted: (summary, algorithms) for their MissingCell.
        self.absent: dict[str, tuple[str, list[str]]] = {}
        #: Cells without any record: (summary, algorithms) of those set aside as unplaceable.
        self.without_record: dict[str, tuple[str, list[str]]] = {}
        #: Algorithms and kernels of every stored record, counted or not (_MissingReasons).
        self.available: set[str] = set()
        self.kernels: set[str] = set()
        #: Link backends of the counted records.
        self.links: set[str] = set()

    @property
    def late(self) -> dict[str, CellResult]:
        """Each cell's late attempt: records flagged late by an earlier version first, then the late
        attempts of cells without a record."""
        return {**self.flagged_late, **self.late_attempts}

    def add(self, entries: Iterable[ManifestCell], statuses: Iterable[CellStatus]) -> None:
        """One chunk of the plan: its entries, and the states of the cells it has first."""
        decided: dict[str, int] = {}  # this chunk's cells: their rows (a chunk's worth)
        for status in statuses:
            cell_id, result, attempt = status.cell.id, status.result, status.attempt
            decided[cell_id] = self.NO_RECORD
            if result is not None:
                self.available.update(result.environment.available_cc)
                self.kernels.add(result.environment.kernel)
            if status.state == "stored" and result is not None:
                decided[cell_id] = self.records.add(result)
                self.links.add(result.cell.params.link)
            if status.attempt_kind == "late" and attempt is not None:
                (self.flagged_late if result is not None else self.late_attempts)[cell_id] = attempt
            elif status.attempt_kind == "failed":
                self.failures[cell_id] = FailedAttempt(cell_id, attempt.error or "failed" if attempt else
                                                       "failed (unreadable failure record)")
            elif status.attempt_kind == "starved" and attempt is not None:
                self.starved[cell_id] = attempt
            wanted_absent = status.state not in ("stored", "unwanted")
            unplaceable = result is None and cell_id in self.set_aside
            if wanted_absent or unplaceable:
                named = (cell_summary(status.cell.params), [f.cc for f in status.cell.params.flows])
                if wanted_absent:
                    self.absent[cell_id] = named
                if unplaceable:
                    self.without_record[cell_id] = named
        for entry in entries:
            self.plan.append(entry.id, entry.experiment)
            self.rows.append(decided.get(entry.id, self.REPEATED))
            if entry.id not in decided:
                self._repeated.add(entry.id)

    def resolve_repeats(self) -> None:
        """Give each entry of a cell first met in an earlier chunk that cell's row."""
        if not self._repeated:
            return
        first: dict[str, int] = {}
        for position, row in enumerate(self.rows):
            if row != self.REPEATED and (cell_id := self.plan.cell_id(position)) in self._repeated:
                first.setdefault(cell_id, row)
        for position, row in enumerate(self.rows):
            if row == self.REPEATED:
                self.rows[position] = first.get(self.plan.cell_id(position), self.NO_RECORD)
        self._repeated.clear()


class _MissingReasons:
    """Why planned cells have no result, from what the store holds.

    An algorithm that no stored cell's kernel offered explains a cell the executor skipped, a late
    attempt one whose every run had its emulator late, a failure record one that failed, and a
    starved attempt one the machine did not give the CPU to finish in time.
    Nothing stored says why any other cell is missing: it has not run yet, or its run was
    interrupted.
    """

    def __init__(self, found: _Gathered):
        self.found = found
        self.available = sorted(found.available)
        self.late = found.late
        self.named = {**found.without_record, **found.absent}

    def describe(self, cell_ids: Iterable[str]) -> list[MissingCell]:
        return [MissingCell(cell_id, self.named[cell_id][0], self._reason(cell_id, self.named[cell_id][1]))
                for cell_id in cell_ids]

    def _reason(self, cell_id: str, ccs: list[str]) -> str:
        found = self.found
        if cell_id in found.set_aside and cell_id in found.without_record:
            return f"unplaceable, not submitted: {found.set_aside[cell_id]}"
        lacking = sorted({cc for cc in ccs if cc not in found.available})
        if lacking and found.kernels:
            where = "this kernel" if len(found.kernels) == 1 else "the kernels of the stored cells"
            return f"{', '.join(lacking)} unavailable on {where} (available: {', '.join(self.available)})"
        if cell_id in self.late:
            return f"late: {late_reason(self.late[cell_id])}; left out of figures and checks"
        if cell_id in found.failures:
            return f"failed: {found.failures[cell_id].error}"
        if cell_id in found.starved:
            return f"starved by the machine on attempt {found.starved[cell_id].attempt}: {found.starved[cell_id].error}"
        return "no result stored: not run yet, or interrupted"


def late_reason(result: CellResult) -> str:
    """Why an attempt does not count: its link's p99 lateness against the cell's threshold."""
    check = result.link.selfcheck if result.link else None
    if check is None:
        return "link ran late"
    return f"link ran late: {check.measured_text()} (attempt {result.attempt})"
