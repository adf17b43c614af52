"""A sweep's stored results, gathered per experiment through the ResultStore interface only.

Figures and reports never run anything: everything comes from the store (file:// or s3://), so
they can be rebuilt anywhere, any time.  Cells are grouped by the manifest, not by the experiment
named in a record, because one stored cell can serve two experiments or sweeps (content-addressed
ids).  Cells without a record are described from the manifest, which holds every planned cell's
parameters: nothing is expanded again, and no trace file is needed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ccsweep.adaptive import PointRuns
from ccsweep.cell import Cell
from ccsweep.figures.points import cell_summary
from ccsweep.result import CellResult, TimeSeries
from ccsweep.spec import Experiment, SpecError, parse_spec
from ccsweep.store import ResultStore, StoreError, SweepManifest
from ccsweep.sweep_status import cell_statuses, mark_unwanted

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


@dataclass
class ExperimentData:
    """One experiment's spec and its stored results, with time series fetched on first use."""

    experiment: Experiment
    results: list[CellResult]
    missing: list[MissingCell] = field(default_factory=list)
    load_series: SeriesLoader = lambda _cell_id: None
    #: Not cached, unlike the series: link logs are megabytes, and each figure reads a few once.
    load_file: FileLoader = lambda _cell_id, _name: None
    _series: dict[str, TimeSeries | None] = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        return self.experiment.name

    @property
    def title(self) -> str:
        return self.experiment.title or self.experiment.name

    def timeseries(self, cell_id: str) -> TimeSeries | None:
        if cell_id not in self._series:
            self._series[cell_id] = self.load_series(cell_id)
        return self._series[cell_id]


@dataclass
class SweepData:
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

    @property
    def name(self) -> str:
        return self.manifest.name

    def distinct_results(self) -> list[CellResult]:
        """Each stored cell once, in manifest order."""
        seen: dict[str, CellResult] = {}
        for exp in self.experiments:
            for result in exp.results:
                seen.setdefault(result.cell.id, result)
        return list(seen.values())


def load_sweep(store: ResultStore, sweep: str) -> SweepData:
    """Read a sweep's manifest and every result it names; missing cells are listed, not fatal."""
    manifest = store.get_manifest(sweep)
    if manifest is None:
        known = ", ".join(store.list_sweeps()) or "none"
        raise StoreError(f"sweep {sweep!r} has no manifest in {store.url} (stored sweeps: {known})")
    try:
        spec = parse_spec(manifest.spec, origin=f"sweep {sweep} manifest")
    except SpecError as exc:
        raise StoreError(str(exc)) from None
    manifest = store.with_cells(manifest)  # figures draw every cell: this step holds the whole plan
    set_aside = store.get_unplaceable(sweep)
    statuses = list(cell_statuses(store, manifest, set_aside))
    # Runs an adaptive rule has not asked for are planned, not missing.
    points = mark_unwanted(spec.experiments, [c.to_cell(sweep) for c in manifest.cells], statuses)
    results = {s.cell.id: s.result for s in statuses if s.state == "stored" and s.result is not None}
    # Records flagged late by an earlier version first, then the late attempts of cells without one.
    late = {s.cell.id: s.attempt for s in sorted(statuses, key=lambda s: s.result is None)
            if s.attempt_kind == "late" and s.attempt is not None}
    failures = {s.cell.id: FailedAttempt(s.cell.id, s.attempt.error or "failed" if s.attempt else
                                         "failed (unreadable failure record)")
                for s in statuses if s.attempt_kind == "failed"}
    starved = {s.cell.id: s.attempt for s in statuses if s.attempt_kind == "starved" and s.attempt is not None}
    without_record = {s.cell.id for s in statuses if s.result is None}
    unplaceable = {cell_id: reason for cell_id, reason in set_aside.items() if cell_id in without_record}
    why = _MissingReasons([s.result for s in statuses if s.result is not None], failures, late, starved, unplaceable)
    unwanted = {s.cell.id for s in statuses if s.state == "unwanted"}
    experiments = []
    for exp in spec.experiments:
        cells = {c.id: c.to_cell(sweep) for c in manifest.cells if c.experiment == exp.name}
        found = [results[i] for i in cells if i in results]
        absent = [cell for cell_id, cell in cells.items() if cell_id not in results and cell_id not in unwanted]
        experiments.append(ExperimentData(experiment=exp, results=found, missing=why.describe(absent),
                                          load_series=store.get_timeseries, load_file=store.get_cell_file))
    planned = {c.id: c.to_cell(sweep) for c in manifest.cells}
    return SweepData(manifest=manifest, description=spec.description, experiments=experiments,
                     failures=list(failures.values()), late=list(late.values()), starved=list(starved.values()),
                     points=points, unplaceable=why.describe([planned[cell_id] for cell_id in unplaceable]))


class _MissingReasons:
    """Why planned cells have no result, from what the store holds.

    An algorithm that no stored cell's kernel offered explains a cell the executor skipped, a late
    attempt one whose every run had its emulator late, a failure record one that failed, and a
    starved attempt one the machine did not give the CPU to finish in time.
    Nothing stored says why any other cell is missing: it has not run yet, or its run was
    interrupted.
    """

    def __init__(self, stored: list[CellResult], failures: dict[str, FailedAttempt], late: dict[str, CellResult],
                 starved: dict[str, CellResult], unplaceable: dict[str, str]):
        self.available = sorted({cc for r in stored for cc in r.environment.available_cc})
        self.kernels = {r.environment.kernel for r in stored}
        self.failures = failures
        self.late = late
        self.starved = starved
        self.unplaceable = unplaceable

    def describe(self, cells: list[Cell]) -> list[MissingCell]:
        return [MissingCell(c.id, cell_summary(c.params), self._reason(c.id, [f.cc for f in c.params.flows]))
                for c in cells]

    def _reason(self, cell_id: str, ccs: list[str]) -> str:
        if cell_id in self.unplaceable:
            return f"unplaceable, not submitted: {self.unplaceable[cell_id]}"
        lacking = sorted({cc for cc in ccs if cc not in self.available})
        if lacking and self.kernels:
            where = "this kernel" if len(self.kernels) == 1 else "the kernels of the stored cells"
            return f"{', '.join(lacking)} unavailable on {where} (available: {', '.join(self.available)})"
        if cell_id in self.late:
            return f"late: {late_reason(self.late[cell_id])}; left out of figures and checks"
        if cell_id in self.failures:
            return f"failed: {self.failures[cell_id].error}"
        if cell_id in self.starved:
            return f"starved by the machine on attempt {self.starved[cell_id].attempt}: {self.starved[cell_id].error}"
        return "no result stored: not run yet, or interrupted"


def late_reason(result: CellResult) -> str:
    """Why an attempt does not count: its link's p99 lateness against the cell's threshold."""
    check = result.link.selfcheck if result.link else None
    if check is None:
        return "link ran late"
    return f"link ran late: {check.measured_text()} (attempt {result.attempt})"
