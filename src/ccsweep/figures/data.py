"""A sweep's stored results, gathered per experiment through the ResultStore interface only.

Figures and reports never run anything and never read a trace file: everything comes from the
store (file:// or s3://), so they can be rebuilt anywhere, any time.  Cells are grouped by the
manifest, not by the experiment named in a record, because one stored cell can serve two
experiments or sweeps (content-addressed ids).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ccsweep.result import CellResult, TimeSeries
from ccsweep.spec import Experiment, SpecError, parse_spec
from ccsweep.store import ResultStore, StoreError, SweepManifest

SeriesLoader = Callable[[str], TimeSeries | None]


@dataclass
class FailedAttempt:
    """The latest failure record of a cell that has no result."""

    cell_id: str
    error: str


@dataclass
class ExperimentData:
    """One experiment's spec and its stored results, with time series fetched on first use."""

    experiment: Experiment
    results: list[CellResult]
    missing: list[str] = field(default_factory=list)
    load_series: SeriesLoader = lambda _cell_id: None
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
    results: dict[str, CellResult | None] = {}
    for cell in manifest.cells:
        if cell.id not in results:
            results[cell.id] = store.get_result(cell.id)
    failures = [_latest_failure(store, cell_id) for cell_id, result in results.items() if result is None]
    experiments = []
    for exp in spec.experiments:
        ids = list(dict.fromkeys(c.id for c in manifest.cells if c.experiment == exp.name))
        found = [r for r in (results[i] for i in ids) if r is not None and r.status == "ok"]
        experiments.append(ExperimentData(experiment=exp, results=found,
                                          missing=[i for i in ids if results[i] is None],
                                          load_series=store.get_timeseries))
    return SweepData(manifest=manifest, description=spec.description, experiments=experiments,
                     failures=[f for f in failures if f is not None])


def _latest_failure(store: ResultStore, cell_id: str) -> FailedAttempt | None:
    keys = store.list_keys(f"cells/{cell_id}/failed/")
    if not keys:
        return None
    data = store.read_bytes(keys[-1])
    if data is None:
        return None
    try:
        error = CellResult.model_validate_json(data).error or "failed"
    except ValueError:
        error = "failed (unreadable failure record)"
    return FailedAttempt(cell_id=cell_id, error=error)
