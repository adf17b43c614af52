"""Manifests written by earlier releases, read by this one: one explicit step per schema version.

A stored manifest is the statement of what a sweep is, and its cells' results outlive any release
of ccsweep. Each manifest carries `schema_version`; reading one brings it up to the version this
code writes by applying MIGRATIONS[N] (a pure function from a schema-N document to a schema-N+1
one) for each version between, so an operator and an image of different releases agree on what a
stored sweep is. Changing SweepManifest's fields means raising MANIFEST_SCHEMA_VERSION and adding
the step from the previous version here (tests/unit/test_migrations.py refuses a gap), with a
manifest the previous release wrote committed under tests/fixtures/ (tests/executor/test_upgrade.py).

What the spec inside a manifest means is not a schema question: fields the spec model gained later
take their defaults when the stored spec is compared (specload.normalised_spec), so no migration is
needed for a defaulted field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

#: The manifest schema this ccsweep writes. 3: a stored plan's cells stand in chunk objects beside
#: the manifest, which names them in `layout` (store/base.py); 2 held every cell in `cells`.
MANIFEST_SCHEMA_VERSION: Final = 3
#: The oldest schema it reads. Schema 1 (before any release) stored cells without their parameters,
#: which no function of the document alone can restore: such a sweep is planned again.
OLDEST_MANIFEST_SCHEMA: Final = 2

Migration = Callable[[dict[str, Any]], dict[str, Any]]


def _cells_stay_inline(document: dict[str, Any]) -> dict[str, Any]:
    """Schema 2 to 3: the cells stay in `cells`, with no `layout`, which schema 3 reads as they are
    (such a sweep was planned by a release whose pods parse the whole plan anyway: it is small)."""
    return {**document, "schema_version": 3}


#: MIGRATIONS[N] turns a schema-N manifest (as parsed JSON) into a schema-N+1 one.
MIGRATIONS: Final[Mapping[int, Migration]] = {2: _cells_stay_inline}


class ManifestSchemaError(ValueError):
    """A manifest whose schema this ccsweep cannot bring to its own; str() is one line."""


def migrate(document: dict[str, Any], migrations: Mapping[int, Migration] = MIGRATIONS,
            current: int = MANIFEST_SCHEMA_VERSION, oldest: int = OLDEST_MANIFEST_SCHEMA) -> dict[str, Any]:
    """The manifest `document` at schema `current`, by the registered steps from its own schema.

    A manifest from a newer ccsweep is refused, not guessed at: its fields may mean what this code
    does not know. `migrations`, `current` and `oldest` are parameters only so the chain can be
    tested before a second schema exists.
    """
    version = document.get("schema_version", 1)  # schema 1 had no version field
    if not isinstance(version, int) or isinstance(version, bool):
        raise ManifestSchemaError(f"schema_version {str(version)[:32]!r} is not a whole number")
    if version > current:
        raise ManifestSchemaError(f"written by a newer ccsweep (manifest schema {version}; this ccsweep reads "
                                  f"{oldest} to {current}): upgrade ccsweep to read it")
    if version < oldest:
        raise ManifestSchemaError(f"manifest schema {version} is older than any this ccsweep reads ({oldest} to "
                                  f"{current}): plan the sweep again under a new name")
    while version < current:
        step = migrations.get(version)
        if step is None:
            raise ManifestSchemaError(f"no migration from manifest schema {version} to {version + 1}")
        document = step(document)
        version += 1
        if document.get("schema_version") != version:
            raise ManifestSchemaError(f"the migration from schema {version - 1} wrote schema "
                                      f"{document.get('schema_version')!r}, not {version}")
    return document
