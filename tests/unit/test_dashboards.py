"""The committed dashboards are exactly what dashboards/generate.py writes, and read back with the SDK."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path
from types import ModuleType

import pytest
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models.dashboard import Dashboard

DASHBOARDS = Path(__file__).resolve().parents[2] / "dashboards"


@pytest.fixture(scope="module")
def generate() -> ModuleType:
    """dashboards/generate.py as a module (it is a script beside the JSON it writes, not a package)."""
    spec = importlib.util.spec_from_file_location("generate_dashboards", DASHBOARDS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_json_is_the_generators_output(generate: ModuleType):
    assert sorted(generate.DASHBOARDS) == sorted(p.name for p in DASHBOARDS.glob("*.json"))
    for name, build in generate.DASHBOARDS.items():
        assert (DASHBOARDS / name).read_text() == generate.render(build), \
            f"dashboards/{name} is stale: run python dashboards/generate.py"
    assert generate.main(["--check"]) == 0


def test_check_fails_on_an_edited_dashboard(generate: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]):
    for path in DASHBOARDS.glob("*.json"):
        shutil.copy(path, tmp_path / path.name)
    edited = tmp_path / "cell-detail.json"
    edited.write_text(edited.read_text().replace("Cell detail", "Cell details"))
    monkeypatch.setattr(generate, "HERE", tmp_path)
    assert generate.main(["--check"]) == 1
    assert "dashboards/cell-detail.json differs" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["sweeps.json", "sweep-overview.json", "cell-detail.json"])
def test_every_panel_reads_back_with_prometheus_targets(name: str):
    """Dashboard.from_json decodes each target as a Prometheus query (what tests/services evaluates)."""
    register_default_plugins()
    board = Dashboard.from_json(json.loads((DASHBOARDS / name).read_text()))
    targets = [t for p in board.panels or [] if p.type_val != "row" for t in p.targets or []]
    assert targets and all(type(t).__module__.endswith("models.prometheus") and t.expr for t in targets)


def board_links(name: str) -> list[str]:
    """Every link URL of a dashboard: its own links and each panel's data links."""
    board = json.loads((DASHBOARDS / name).read_text())
    urls = [link["url"] for link in board.get("links", [])]
    for panel in board["panels"]:
        urls += [link["url"] for link in ((panel.get("fieldConfig") or {}).get("defaults") or {}).get("links", [])]
    return urls


def test_links_lead_from_all_sweeps_to_a_sweep_to_a_cell_and_back():
    uids = {json.loads(p.read_text())["uid"]: p.name for p in DASHBOARDS.glob("*.json")}
    targets = {name: {re.match(r"/d/([\w-]+)", url)[1] for url in board_links(name) if url.startswith("/d/")}
               for name in uids.values()}
    assert targets == {"sweeps.json": {"ccsweep-sweep-overview"},
                       "sweep-overview.json": {"ccsweep-sweeps", "ccsweep-cell-detail"},
                       "cell-detail.json": {"ccsweep-sweep-overview", "ccsweep-sweeps"}}
    assert all(uid in uids for linked in targets.values() for uid in linked)
    # The clicked row's or series' own sweep and cell go along, and the variables naming where the
    # Argo UI and the reports are.
    sweeps = board_links("sweeps.json")
    assert any("var-sweep=${__data.fields.sweep}" in url for url in sweeps)
    overview = board_links("sweep-overview.json")
    assert any("var-cell=${__field.labels.cell}" in url and "var-sweep=$sweep" in url for url in overview)
    for name in ("sweeps.json", "sweep-overview.json"):
        urls = board_links(name)
        assert any(url.startswith("${argo_url}/workflows/${namespace}?label=ccsweep.io%2Fsweep%3D") for url in urls)
        assert any(url.startswith("${report_url}/sweeps/") and url.endswith("/report.html") for url in urls)
    for url in (u for name in uids.values() for u in board_links(name) if u.startswith("/d/")):
        assert "var-argo_url=${argo_url}" in url and "var-report_url=${report_url}" in url, url
