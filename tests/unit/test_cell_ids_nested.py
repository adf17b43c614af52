"""A field added inside a nested model keeps every stored cell's id, as a top-level one does.

canonical_json once stripped defaults of CellParams' own later fields only: a new field inside
DirectionParams (or a flow, or a queue) would have been hashed in every cell, and every stored
result orphaned. Here the models gain such fields the way a change to cell.py would add them,
and every preset's cells must keep the ids pinned in tests/fixtures/preset_cell_ids.json.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import pytest

from ccsweep.cell import CellParams, DirectionParams, FlowParams, QueueParams, canonical_json, cell_id
from ccsweep.expand import expand
from ccsweep.specload import PACKAGED_PRESETS, load_spec


class QueueWithRed(QueueParams):
    red_min_bytes: int = 0
    added_after_schema_1: ClassVar[Mapping[str, object]] = {**QueueParams.added_after_schema_1, "red_min_bytes": 0}


class DirectionWithJitter(DirectionParams):
    jitter_ms: float = 0.0
    queue: QueueWithRed = QueueWithRed()
    added_after_schema_1: ClassVar[Mapping[str, object]] = {**DirectionParams.added_after_schema_1,
                                                            "jitter_ms": 0.0}


class FlowWithPacing(FlowParams):
    pacing: str | None = None
    added_after_schema_1: ClassVar[Mapping[str, object]] = {**FlowParams.added_after_schema_1, "pacing": None}


class CellWithNewFields(CellParams):
    """CellParams with a later field at each depth: a direction, its queue, a flow in the tuple."""

    flows: tuple[FlowWithPacing, ...]
    uplink: DirectionWithJitter
    downlink: DirectionWithJitter


def with_new_fields(params: CellParams, **uplink: object) -> CellWithNewFields:
    data = params.model_dump()
    data["uplink"].update(uplink)
    return CellWithNewFields.model_validate(data)


@pytest.mark.parametrize("preset", sorted(p.stem for p in PACKAGED_PRESETS.glob("*.yaml")))
def test_new_nested_fields_at_their_defaults_keep_every_preset_id(preset):
    for cell in expand(load_spec(preset)):
        extended = with_new_fields(cell.params)
        assert extended.uplink.jitter_ms == 0.0 and extended.flows[0].pacing is None
        assert cell_id(extended) == cell.id, canonical_json(extended)


def test_a_new_nested_field_set_is_hashed():
    cell = expand(load_spec("quick"))[0]
    jittered = with_new_fields(cell.params, jitter_ms=2.0)
    assert '"jitter_ms":2.0' in canonical_json(jittered)
    assert cell_id(jittered) != cell.id
    red = with_new_fields(cell.params, queue={**cell.params.uplink.queue.model_dump(), "red_min_bytes": 3000})
    assert '"red_min_bytes":3000' in canonical_json(red) and cell_id(red) != cell.id
