"""Raw runs kept as JSON beside a benchmark's Markdown results, so the results can be re-analysed
without running a cell again (`--from-json`).

Shared by the benchmarks that run many real cells one at a time and judge them afterwards
(lateness/threshold.py, window/fidelity.py): the runs are measured or read back, with the
meta data of the run that measured them (date, machine, load, wall time, command, grid).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def measured_or_stored(from_json: Path | None, out: Path, run_type: type, measure: Callable[[], list[Any]],
                       script: str, grid: str, machine: str) -> tuple[list[Any], dict[str, Any]]:
    """The runs and their meta: read from `from_json`, or measured now (as root) and written to
    `out` with the suffix .json."""
    if from_json:
        stored = json.loads(from_json.read_text())
        return [run_type(**r) for r in stored["runs"]], stored["meta"]
    if os.geteuid() != 0:
        sys.exit("run as root (network namespaces and TUN devices)")
    load_before = round(os.getloadavg()[0], 2)
    started = time.monotonic()
    runs = measure()
    meta = {"date": datetime.now(UTC).strftime("%Y-%m-%d"), "machine": machine, "load_before": load_before,
            "load_after": round(os.getloadavg()[0], 2), "wall_s": time.monotonic() - started,
            "command": f"python {script} " + " ".join(sys.argv[1:]), "grid": grid,
            "json": str(out.with_suffix(".json")), "note": os.environ.get("BENCH_NOTE", "")}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "runs": [asdict(r) for r in runs]}, indent=1) + "\n")
    return runs, meta
