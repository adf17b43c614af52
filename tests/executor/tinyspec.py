"""The executor tests' small spec: one experiment of 3 s cells on a 10 Mbit/s, 20 ms path.

Each test names its sweep and overrides only what it is about (algorithms, loss rates, flow
length), so the tests differ where they mean to and nowhere else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

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
