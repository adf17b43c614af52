"""The container CPU sampler's summary reads each pod's last sample against the pod's life."""

from __future__ import annotations

import csv
from pathlib import Path

from benchmarks.cluster.container_cpu import Sample, summary


def test_each_pod_counts_once_at_its_last_sample(tmp_path: Path) -> None:
    samples = tmp_path / "samples.csv"
    rows = [Sample("2026-12-01T00:00:10+00:00", "n", "pod-a", "2026-12-01T00:00:00Z", "wait", 0.05),
            Sample("2026-12-01T00:00:10+00:00", "n", "pod-a", "2026-12-01T00:00:00Z", "main", 1.0),
            Sample("2026-12-01T00:00:20+00:00", "n", "pod-a", "2026-12-01T00:00:00Z", "wait", 0.06),
            Sample("2026-12-01T00:00:20+00:00", "n", "pod-a", "2026-12-01T00:00:00Z", "main", 4.0),
            Sample("2026-12-01T00:00:20+00:00", "n", "pod-b", "2026-12-01T00:00:10Z", "wait", 0.02)]
    with samples.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(Sample.__dataclass_fields__))
        writer.writeheader()
        writer.writerows(vars(row) for row in rows)
    table = summary(samples)
    # main: one pod, 4 s of CPU over its 20 s: 200 millicores; wait: pods a (0.06 s / 20 s) and b (0.02 / 10).
    assert "| main | 1 | 4.00 / 4.00 / 4.00 | 200.0 / 200.0 / 200.0 |" in table
    assert "| wait | 2 | 0.04 / 0.06 / 0.06 | 2.5 / 3.0 / 3.0 |" in table
