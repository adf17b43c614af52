"""What a stored plan says, read back: its manifest, its spec, whether it has adaptive repetitions.

Below planning and status both (plan.py writes plans, sweep_status.py judges them), so neither
imports the other to read one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ccsweep.adaptive import PointRuns, judge_points
from ccsweep.manifest import SweepManifest
from ccsweep.spec import Experiment, SpecError, SweepSpec
from ccsweep.specload import parse_spec
from ccsweep.store import ResultStore, StoreError
from ccsweep.storedplan import get_manifest, manifest_chunks


def stored_manifest(store: ResultStore, sweep: str) -> SweepManifest:
    """A planned sweep's manifest, or StoreError when it was never planned in `store`."""
    manifest = get_manifest(store, sweep)
    if manifest is None:
        raise StoreError(f"sweep {sweep!r} has no manifest in {store.url} (run `ccsweep plan` first)")
    return manifest


def is_adaptive(manifest: SweepManifest) -> bool:
    """Whether a stored plan has adaptive repetitions (a setting's runs are judged together)."""
    return any(e.adaptive is not None for e in stored_spec(manifest).experiments)


def stored_spec(manifest: SweepManifest) -> SweepSpec:
    """The spec a stored plan was made from; one it no longer validates is a StoreError."""
    try:
        return parse_spec(manifest.spec, origin=f"sweep {manifest.name} manifest")
    except SpecError as exc:
        raise StoreError(str(exc)) from None


def judged_points(store: ResultStore, manifest: SweepManifest, experiments: Iterable[Experiment],
                  value_of: Callable[[str], float | None]) -> list[PointRuns]:
    """Every point of a stored plan's adaptive experiments, judged from each run's value
    (`value_of(id)`), the plan read a stored chunk at a time: what is held per run is its id and
    value, never the plan whole (plan.py's plan step and sweep_status.py's judged_whole share it)."""
    experiments = list(experiments)
    rules = {e.name for e in experiments if e.adaptive is not None}
    runs = (entry.to_cell(manifest.name) for chunk in manifest_chunks(store, manifest) for entry in chunk.entries
            if entry.experiment in rules)
    return judge_points(experiments, runs, value_of)
