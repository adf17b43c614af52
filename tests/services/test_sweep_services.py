"""The issue's end-to-end check: a real sweep against real MinIO, Pushgateway and Prometheus.

`ccsweep run SPEC --store s3://... --pushgateway ...` runs four short real cells (BBR and CUBIC at
two loss rates).  Then: results, figures and report are in the bucket and `ccsweep figures`
rebuilds them from the bucket alone; every query of every dashboard (read with
grafana-foundation-sdk, as dashboards/generate.py writes them) returns series from the Prometheus
that scraped the Pushgateway during the run, with the committed recording rules loaded.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models.dashboard import Dashboard, Panel, RowPanel, VariableModel, VariableType
from grafana_foundation_sdk.models.prometheus import Dataquery

from ccsweep.metrics import cell_labels
from ccsweep.result import CellResult
from ccsweep.store import ResultStore
from ccsweep.store.s3 import S3Store
from ccsweep.store.s3config import load_settings
from ccsweep.storedplan import get_manifest, with_cells
from prom import label_values, query, query_range, wait_for
from servers import REPO, Server, s3_env
from support.bookkeeping import BOOKKEEPING_THRESHOLD
from sweeps import ccsweep, needs_root, stored_cells, sweep_env, write_spec

pytestmark = [pytest.mark.integration, needs_root]

SWEEP = "svc-sweep"
LABEL_VALUES = re.compile(r"label_values\((?P<match>.+),\s*(?P<label>\w+)\)")


def panels(board: Dashboard) -> Iterator[Panel]:
    for panel in board.panels or []:
        if isinstance(panel, RowPanel):
            yield from panel.panels  # a collapsed row carries its panels
        else:
            yield panel


def substitute(text: str, values: dict[str, str]) -> str:
    """Grafana's variable interpolation ($name and ${name}); an unknown variable fails the test."""
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: values[m.group(1) or m.group(2)], text)


def regex_escape(value: str) -> str:
    """Grafana's prometheusSpecialRegexEscape: a regex metacharacter gets a backslash that survives
    the PromQL string literal (written as two)."""
    return re.sub(r"[$^*{}\[\]'+?.()|]", lambda m: "\\\\" + m.group(0), value.replace("\\", "\\\\\\\\"))


def interpolated(variables: list[VariableModel], run: dict[str, list[str]]) -> dict[str, str]:
    """Each variable set to the run's values, formatted as Grafana sends them to Prometheus
    (a multi-value selection becomes an escaped regex alternation)."""
    values = {}
    for var in variables:
        # The text variables (the Argo UI, the store over HTTP) appear only in links, never in queries.
        if var.type_val in (VariableType.DATASOURCE, VariableType.TEXTBOX):
            continue
        chosen = run[var.name]
        values[var.name] = "(" + "|".join(map(regex_escape, chosen)) + ")" if var.multi else chosen[0]
    return values


@dataclass
class SweepRun:
    store: ResultStore
    env: dict[str, str]
    stderr: str
    start: float  # wall clock around the run: the dashboards' time range
    end: float
    results: list[CellResult]


@pytest.fixture(scope="module")
def sweep_run(tmp_path_factory: pytest.TempPathFactory, minio: Server, pushgateway: Server,
              prometheus: Server) -> SweepRun:
    """One real sweep, stored in MinIO and pushed to the Pushgateway that Prometheus scrapes."""
    tmp = tmp_path_factory.mktemp("sweep")
    spec = write_spec(tmp / "sweep.yaml", SWEEP, cc=["bbr", "cubic"], loss_percent=[0.1, 1], duration_s=6)
    store = S3Store.from_url(f"s3://ccsweep-tests/{SWEEP}-{time.time_ns()}", load_settings(s3_env(minio)))
    env = sweep_env(s3_env(minio), tmp / "spool")
    started = time.time()
    done = ccsweep("run", str(spec), "--store", store.url, *BOOKKEEPING_THRESHOLD, "--pushgateway", pushgateway.address,
                   "--jobs", "2", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    # Prometheus holds the final state once the sweep's counts and every cell's result are recorded.
    assert wait_for(prometheus, f'sweep:ccsweep_cells:done{{sweep="{SWEEP}"}} == 4')
    assert wait_for(prometheus, f'count(sweep_algorithm_loss:ccsweep_cell_result_goodput_bits_per_second:avg'
                                f'{{sweep="{SWEEP}"}}) == 4')
    manifest = get_manifest(store, SWEEP)
    assert manifest is not None
    manifest = with_cells(store, manifest)
    assert len(manifest.cells) == 4
    results = [r for r in (store.get_result(c.id) for c in manifest.cells) if r is not None]
    assert len(results) == 4, "every cell of the manifest has a record"
    return SweepRun(store, env, done.stderr, started, time.time(), results)


def test_results_figures_and_report_are_in_the_bucket(sweep_run: SweepRun):
    store = sweep_run.store
    assert stored_cells(store) == sorted(r.cell.id for r in sweep_run.results)
    for result in sweep_run.results:
        assert result.status == "ok" and result.goodput_mbps > 0, result
        assert {"timeseries.json.gz", "uplink.log.gz"} <= set(result.artifacts)
        assert store.get_timeseries(result.cell.id).flows, "the time series is readable beside its record"
        assert store.get_cell_file(result.cell.id, "uplink.log.gz")
    keys = store.list_keys(f"sweeps/{SWEEP}/")
    assert f"sweeps/{SWEEP}/report.html" in keys and f"sweeps/{SWEEP}/rebbr.csv" in keys
    assert any(k.endswith(".png") for k in keys) and any(k.endswith(".svg") for k in keys), keys
    assert f"wrote {store.url}/sweeps/{SWEEP}/report.html" in sweep_run.stderr


def test_figures_are_rebuilt_from_the_bucket_alone(sweep_run: SweepRun, tmp_path: Path):
    store = sweep_run.store
    outputs = sorted(store.sweep_file_names(SWEEP))   # figures, report, exports: not the plan
    for name in outputs:
        store.delete(f"sweeps/{SWEEP}/{name}")
    assert store.sweep_file_names(SWEEP) == [] and get_manifest(store, SWEEP) is not None
    done = ccsweep("figures", "--store", store.url, "--sweep", SWEEP, env=sweep_run.env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(store.sweep_file_names(SWEEP)) == outputs
    assert b"<html" in store.read_bytes(f"sweeps/{SWEEP}/report.html").lower()
    assert list(tmp_path.iterdir()) == [], "nothing is read from or written to the working folder"


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "dashboards").glob("*.json")))
def test_every_dashboard_query_returns_series(name: str, sweep_run: SweepRun, prometheus: Server):
    register_default_plugins()  # so that targets decode as Prometheus queries
    board = Dashboard.from_json(json.loads((REPO / "dashboards" / name).read_text()))
    variables = board.templating.list_val or []
    results = sweep_run.results
    shown = next(r for r in results if r.cell.params.cc_label == "bbr" and r.cell.params.loss == 0.01)
    labels = cell_labels(shown.cell)
    run = {"sweep": [SWEEP], "cell": [shown.cell.id],
           **{label: [labels[label]] for label in ("experiment", "rtt", "bandwidth")}}
    values = interpolated(variables, run)
    start, end = sweep_run.start, sweep_run.end

    assert [v.query for v in variables if v.type_val == VariableType.DATASOURCE] == ["prometheus"]
    for var in (v for v in variables if v.type_val == VariableType.QUERY):
        parsed = LABEL_VALUES.fullmatch(var.query)
        assert parsed, f"{var.name}: {var.query}"
        listed = label_values(prometheus, parsed["label"], substitute(parsed["match"], values), start, end)
        expected = [r.cell.id for r in results] if var.name == "cell" else run[var.name]
        assert set(expected) <= set(listed), f"variable {var.name}: {listed}"

    empty, evaluated = [], 0
    for panel in panels(board):
        for target in panel.targets or []:
            assert isinstance(target, Dataquery), panel.title
            assert target.datasource == {"type": "prometheus", "uid": "${datasource}"}, panel.title
            expr = substitute(target.expr, values)
            series = query(prometheus, expr, at=end) if target.instant else query_range(prometheus, expr, start, end)
            evaluated += 1
            if not series:
                empty.append(f"{panel.title} [{target.ref_id}]: {expr}")
    least = 5 if name == "sweeps.json" else 10  # the list of sweeps is one table of five columns
    assert evaluated >= least and not empty, \
        f"{len(empty)} of {evaluated} queries returned nothing:\n" + "\n".join(empty)


def test_goodput_vs_loss_has_one_bar_per_cell_with_its_stored_goodput(sweep_run: SweepRun, prometheus: Server):
    """The overview's bar chart query: one row per (loss, series) holding the stored result's goodput."""
    board = json.loads((REPO / "dashboards" / "sweep-overview.json").read_text())
    chart = next(p for p in board["panels"] if p["type"] == "barchart")
    grouping = next(t["options"] for t in chart["transformations"] if t["id"] == "groupingToMatrix")
    results = sweep_run.results
    labels = cell_labels(results[0].cell)
    values = {"sweep": SWEEP, **{k: regex_escape(labels[k]) for k in ("experiment", "rtt", "bandwidth")}}
    rows = query(prometheus, substitute(chart["targets"][0]["expr"], values), at=sweep_run.end)
    bars = {(r["metric"][grouping["rowField"]], r["metric"][grouping["columnField"]]): float(r["value"][1])
            for r in rows}
    assert len(bars) == len(rows) == 4, rows
    expected = {(cell_labels(r.cell)["loss"],
                 f"{r.cell.params.cc_label} {labels['rtt']} {labels['bandwidth']} {SWEEP}"): r.goodput_mbps * 1e6
                for r in results}
    assert bars == pytest.approx(expected)
