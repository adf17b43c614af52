"""The saturating 100 Mbit/s cell the density measurements run, defined once.

`make bench-density --cells-per-core` (benchmarks/density/) stacks copies of it, and the emulator's
cost benches (benchmarks/emulator/cell_cost.py, gigabit.py) run it as the cell they price or run
beside: the same cell id everywhere, so their numbers compare.
"""

from __future__ import annotations

import yaml

from ccsweep.expand import expand
from ccsweep.specload import parse_spec

#: The cell of the cells-per-core measurement: a saturating 100 Mbit/s BBR flow on ReBBR's path.
DENSITY_SPEC = """name: cells-per-core
experiments:
  - name: cells-per-core
    cc: [bbr]
    loss_percent: [0.001]
    rtt_ms: [100]
    bandwidth_mbps: [100]
    queue:
      - {kind: droptail, bdp: 1, min_bytes: 30000}
    duration_s: {seconds}
    warmup_s: 1
"""


def density_cell(seconds: float) -> dict[str, object]:
    """The cell with flows of `seconds`, as the JSON `ccsweep cell` reads."""
    spec = yaml.safe_load(DENSITY_SPEC.replace("{seconds}", f"{seconds:g}"))
    (cell,) = expand(parse_spec(spec))
    return cell.model_dump(mode="json")
