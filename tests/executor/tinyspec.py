"""The executor tests' small spec: one experiment of 3 s cells on a 10 Mbit/s, 20 ms path.

Each test names its sweep and overrides only what it is about (algorithms, loss rates, flow
length), so the tests differ where they mean to and nowhere else.

Tests of the executor's bookkeeping (resume, interrupts, spooling, registration) judge their
cells against a lateness threshold of 20 ms (BOOKKEEPING_THRESHOLD), not the cells' own 400 us: a
host whose hypervisor steals CPU makes these cells late (p99 2.6 ms at 14.5 % steal over a flow,
on the 2-core CI host), which is the lateness tests' subject (test_late_cells, test_starved_cells,
test_overload, tests/integration), not theirs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

#: `ccsweep run` and `ccsweep cell` options for a test about bookkeeping, not timing (see above).
BOOKKEEPING_THRESHOLD = ("--lateness-threshold-us", "20000")

DEFAULTS: dict[str, Any] = {
    "cc": ["bbr"], "loss_percent": [0], "rtt_ms": [20], "bandwidth_mbps": [10],
    "queue": [{"kind": "droptail", "bdp": 2, "min_bytes": 30000}], "duration_s": 3, "warmup_s": 1,
}


def tiny_spec(name: str, **fields: Any) -> dict[str, Any]:
    """A one-experiment sweep called `name`; a field given as None takes the spec's own default."""
    experiment = {"name": name, **DEFAULTS, **fields}
    return {"name": name, "experiments": [{k: v for k, v in experiment.items() if v is not None}]}


def write_tiny_spec(path: Path, name: str, **fields: Any) -> Path:
    """`tiny_spec` as the YAML file a user would write, at `path`."""
    path.write_text(yaml.safe_dump(tiny_spec(name, **fields), sort_keys=False))
    return path
