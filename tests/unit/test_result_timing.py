"""A record's timing: `late` is a claim only where something measured it, in old records too."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from ccsweep.cell import CellParams, cell_id
from ccsweep.figures.report import _cell_row, _selfcheck_summary
from ccsweep.metrics import CellMetrics
from ccsweep.result import CellResult
from ccsweep.sweep_status import counts

FIXTURE = next(Path(__file__).parents[1].glob("fixtures/loss-table/cells/*/result.json"))


def record(link: str, late: bool, not_measured: list[str], p99: float | None) -> CellResult:
    """A stored ccsweep-link record turned into the given link's, as its JSON would be stored."""
    data = json.loads(FIXTURE.read_text())
    data["cell"]["params"]["link"] = link
    data["cell"]["id"] = cell_id(CellParams.model_validate(data["cell"]["params"]))
    data["link"]["backend"] = link
    data["link"]["not_measured"] = not_measured
    data["link"]["selfcheck"].update(late=late, lateness_p99_us=p99, lateness_p50_us=p99, lateness_max_us=p99)
    data["link"]["selfcheck"].pop("lateness_from", None)  # as records before this field
    return CellResult.model_validate(data)


def old_mahimahi() -> CellResult:
    """A Mahimahi record as every one was stored before its lateness was measured."""
    return record("mahimahi", False, ["lateness", "drops_loss", "queue_bytes_max"], None)


def test_an_old_mahimahi_record_that_said_false_reads_as_unmeasured():
    result = old_mahimahi()
    assert result.late is None and result.timing == "unmeasured"
    assert json.loads(result.model_dump_json())["link"]["selfcheck"]["late"] is None


@pytest.mark.parametrize(("late", "timing"), [(False, "on time"), (True, "late")])
def test_a_measured_record_keeps_its_verdict(late, timing):
    result = record("ccsweep-link", late, [], 300.0)
    assert (result.late, result.timing) == (late, timing)


def test_reports_count_unmeasured_apart_and_never_as_on_time():
    rows = _selfcheck_summary([old_mahimahi(), record("ccsweep-link", False, [], 300.0)])
    unmeasured = next(r for r in rows if r["window"] == "lateness not measured")
    assert (unmeasured["cells"], unmeasured["late"], unmeasured["unmeasured"]) == (1, 0, 1)
    row = _cell_row(old_mahimahi())
    assert row["late"] is None and row["timing"] == "unmeasured"


def test_an_unmeasured_record_still_counts_as_data_but_a_late_one_does_not():
    assert counts(old_mahimahi())
    assert not counts(record("ccsweep-link", True, [], 3000.0))


def test_metrics_publish_no_late_gauge_without_a_measurement():
    def late_gauges(result: CellResult) -> list[float]:
        metrics = CellMetrics.__new__(CellMetrics)  # its collector only: no Pushgateway behind it
        metrics.cell, metrics.labels, metrics._lock = result.cell, {"cell": result.cell.id}, threading.Lock()
        metrics._sample, metrics._result, metrics._finished_at = None, result, 0.0
        return [m.samples[0].value for m in metrics.collect() if m.name == "ccsweep_cell_result_late"]

    assert late_gauges(old_mahimahi()) == []
    assert late_gauges(record("ccsweep-link", True, [], 3000.0)) == [1]
