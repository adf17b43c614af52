"""Every shipped preset keeps the cell ids it had: results already stored under them stay found.

tests/fixtures/preset_cell_ids.json was written from the presets' expansion before adaptive
repetitions existed; a change to the spec model, expansion or CellParams that moves any id fails
here, naming the preset. One preset was re-pinned on purpose since: loss-table, when its sender
began writing iperf3's 128 KiB (message_bytes 131072), as ThousandEyes' iperf3 did (2026-11-26); and
link-effects, never run before, when it gained its jitter and ACK-aggregation experiments (its
first 48 cells kept their ids; 2026-11-29), its ECN experiment (its first 96 kept theirs;
2026-11-30), its delay-step experiment with its control (its first 120 kept theirs; 2026-12-01), and the
same step 5 s later (its first 144 kept theirs; 2026-12-01); and figure8-bursty, when it gained CUBIC's
independent-loss experiment (its first 1,248 kept theirs; 2026-12-01).

A cell of a BPF congestion control is pinned to its object's digest, which the machine's clang and
kernel BTF decide; so the ids here are those of fixed stand-in objects (STAND_INS), and what is
pinned is the expansion, not the build.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ccsweep.bpfcc import OBJECTS_ENV, PROGRAMS
from ccsweep.expand import expand
from ccsweep.specload import PACKAGED_PRESETS, load_spec

PINNED = json.loads((Path(__file__).parents[1] / "fixtures" / "preset_cell_ids.json").read_text())


def test_every_preset_is_pinned():
    assert sorted(PINNED) == sorted(p.stem for p in PACKAGED_PRESETS.glob("*.yaml"))


@pytest.fixture
def stand_in_objects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every shipped BPF object as a fixed stand-in: the same digests on every machine."""
    for name in PROGRAMS:
        (tmp_path / f"{name}.bpf.o").write_bytes(f"stand-in object of {name}".encode())
    monkeypatch.setenv(OBJECTS_ENV, str(tmp_path))


@pytest.mark.parametrize("preset", sorted(PINNED))
def test_preset_cell_ids_are_unchanged(preset, stand_in_objects):
    ids = [c.id for c in expand(load_spec(preset))]
    pinned = PINNED[preset]
    assert (len(ids), ids[0], ids[-1]) == (pinned["cells"], pinned["first"], pinned["last"])
    assert hashlib.sha256("\n".join(ids).encode()).hexdigest() == pinned["sha256"]
