"""What a stored plan says, read back: its manifest, its spec, whether it has adaptive repetitions.

Below planning and status both (plan.py writes plans, sweep_status.py judges them), so neither
imports the other to read one.
"""

from __future__ import annotations

from ccsweep.spec import SpecError, SweepSpec, parse_spec
from ccsweep.store import ResultStore, StoreError, SweepManifest


def stored_manifest(store: ResultStore, sweep: str) -> SweepManifest:
    """A planned sweep's manifest, or StoreError when it was never planned in `store`."""
    manifest = store.get_manifest(sweep)
    if manifest is None:
        raise StoreError(f"sweep {sweep!r} has no manifest in {store.url} (run `ccsweep plan` first)")
    return manifest


def is_adaptive(manifest: SweepManifest) -> bool:
    """Whether a stored plan has adaptive repetitions (judged from all its runs: planned whole)."""
    return any(e.adaptive is not None for e in stored_spec(manifest).experiments)


def stored_spec(manifest: SweepManifest) -> SweepSpec:
    """The spec a stored plan was made from; one it no longer validates is a StoreError."""
    try:
        return parse_spec(manifest.spec, origin=f"sweep {manifest.name} manifest")
    except SpecError as exc:
        raise StoreError(str(exc)) from None
