"""Stored manifests across releases: schema versions, explicit migrations, and specs compared as
today's model reads them (store/migrations.py, specload.normalised_spec).

The manifest under tests/fixtures/upgrade-3748187 was written by ccsweep at 3748187, the previous
release; tests/executor/test_upgrade.py runs its missing cell and draws it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ccsweep.specload import load_spec, normalised_spec
from ccsweep.store import StoreError, open_store
from ccsweep.store.migrations import (
    MANIFEST_SCHEMA_VERSION,
    MIGRATIONS,
    OLDEST_MANIFEST_SCHEMA,
    ManifestSchemaError,
    migrate,
)
from ccsweep.storedplan import get_manifest
from wholeplan import plan_sweep

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "upgrade-3748187"
STORED, MISSING = "75b91f9f80f3dc79", "3d18b2c568e60620"


def fixture_store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    shutil.copytree(FIXTURE / "store", store)
    return store


def manifest_path(store: Path) -> Path:
    return store / "sweeps" / "upgrade" / "manifest.json"


def test_every_schema_this_ccsweep_reads_has_its_step_to_the_next():
    """Raising MANIFEST_SCHEMA_VERSION without a migration from the previous schema fails here."""
    assert set(MIGRATIONS) == set(range(OLDEST_MANIFEST_SCHEMA, MANIFEST_SCHEMA_VERSION))


def test_the_previous_release_s_manifest_is_a_schema_this_ccsweep_reads(tmp_path: Path):
    document = json.loads(manifest_path(FIXTURE / "store").read_text())
    assert OLDEST_MANIFEST_SCHEMA <= document["schema_version"] <= MANIFEST_SCHEMA_VERSION
    manifest = get_manifest(open_store(str(fixture_store(tmp_path))), "upgrade")
    assert manifest is not None and manifest.schema_version == MANIFEST_SCHEMA_VERSION
    assert [c.id for c in manifest.distinct_cells()] == [STORED, MISSING]


def test_migrations_run_in_order_one_schema_at_a_time():
    """The chain with two steps registered (the real registry has one, 2 to 3, so far)."""
    seen: list[int] = []

    def two_to_three(doc: dict[str, Any]) -> dict[str, Any]:
        seen.append(doc["schema_version"])
        return {**doc, "schema_version": 3, "owner": None}

    def three_to_four(doc: dict[str, Any]) -> dict[str, Any]:
        seen.append(doc["schema_version"])
        assert "owner" in doc  # the previous step's output
        return {**{k: v for k, v in doc.items() if k != "owner"}, "schema_version": 4, "owners": []}

    document = json.loads(manifest_path(FIXTURE / "store").read_text())
    migrated = migrate(document, {2: two_to_three, 3: three_to_four}, current=4)
    assert seen == [2, 3] and migrated["schema_version"] == 4 and migrated["owners"] == []
    assert migrated["cells"] == document["cells"]
    assert migrate(migrated, {}, current=4) is migrated  # a current manifest is left as it is


@pytest.mark.parametrize(("steps", "message"), [
    ({}, "no migration from manifest schema 2 to 3"),
    ({2: lambda doc: {**doc, "schema_version": 5}}, "the migration from schema 2 wrote schema 5, not 3"),
])
def test_a_gap_or_a_wrong_step_in_the_chain_is_one_line(steps: dict[int, Any], message: str):
    document = json.loads(manifest_path(FIXTURE / "store").read_text())
    with pytest.raises(ManifestSchemaError, match=message):
        migrate(document, steps, current=3)


@pytest.mark.parametrize(("version", "message"), [
    (MANIFEST_SCHEMA_VERSION + 1, rf"written by a newer ccsweep \(manifest schema {MANIFEST_SCHEMA_VERSION + 1}; "
                                  rf"this ccsweep reads {OLDEST_MANIFEST_SCHEMA} to {MANIFEST_SCHEMA_VERSION}\): "
                                  "upgrade ccsweep"),
    (None, "manifest schema 1 is older than any this ccsweep reads"),  # no version field, cells without params
    ("2", "schema_version '2' is not a whole number"),
])
def test_a_manifest_no_migration_reaches_is_a_one_line_store_error(tmp_path: Path, version: Any, message: str):
    store = fixture_store(tmp_path)
    document = json.loads(manifest_path(store).read_text())
    if version is None:  # as schema 1 was written: no version field, and cells without their parameters
        del document["schema_version"]
        document["cells"] = [{k: v for k, v in c.items() if k != "params"} for c in document["cells"]]
    else:
        document["schema_version"] = version
    manifest_path(store).write_text(json.dumps(document))
    with pytest.raises(StoreError, match=message) as raised:
        get_manifest(open_store(str(store)), "upgrade")
    assert "\n" not in str(raised.value) and "manifest.json" in str(raised.value)


def older_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """The fixture's stored spec as a release before `time_scale`, `kernels` and `published` wrote it."""
    experiments = [{k: v for k, v in e.items() if k not in ("kernels", "published")} for e in spec["experiments"]]
    return {**{k: v for k, v in spec.items() if k != "time_scale"}, "experiments": experiments}


def test_defaults_added_to_the_spec_model_later_compare_equal(tmp_path: Path):
    """Exact comparison called this stored sweep "different" (time_scale) or re-planned it as a
    revision (published): neither happens, and nothing is written."""
    store = fixture_store(tmp_path)
    document = json.loads(manifest_path(store).read_text())
    document["spec"] = older_spec(document["spec"])
    manifest_path(store).write_text(json.dumps(document, indent=1))
    before = manifest_path(store).read_bytes()
    plan = plan_sweep(load_spec(str(FIXTURE / "tiny.yaml")), open_store(str(store)))
    assert [c.id for c in plan.cached] == [STORED] and [c.id for c in plan.pending] == [MISSING]
    assert manifest_path(store).read_bytes() == before
    assert not (store / "sweeps" / "upgrade" / "revisions").exists()


def test_a_real_change_still_conflicts_with_an_older_stored_spec(tmp_path: Path):
    store = fixture_store(tmp_path)
    document = json.loads(manifest_path(store).read_text())
    document["spec"] = older_spec(document["spec"])
    manifest_path(store).write_text(json.dumps(document, indent=1))
    changed = load_spec(str(FIXTURE / "tiny.yaml"))
    changed = changed.model_copy(update={"experiments": [
        e.model_copy(update={"loss_percent": [1.0]}) for e in changed.experiments]})
    with pytest.raises(StoreError, match="already stored .* with a different spec"):
        plan_sweep(changed, open_store(str(store)))


def test_a_stored_spec_today_s_rules_refuse_is_compared_as_it_was():
    refused = {"name": "old", "experiments": [{"name": "e", "cc": ["bbr", "bbr"]}]}  # duplicates: refused now
    assert normalised_spec(refused) is refused
