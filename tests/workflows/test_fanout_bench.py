"""The simulated fan-out (benchmarks/fanout/) submits what users submit, and its stand-in for
the plan pod reports what argoexec would: checked offline, so a template change that the bench no
longer follows fails here and not 20 minutes into `make bench-fanout`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from benchmarks.fanout.kwok import fake_node, pod_stages
from benchmarks.fanout.workload import (
    PRESET,
    chunk_list,
    fanout_workflow,
    plan_items,
    plan_output,
    plan_outputs,
    sweep_workflow,
)
from ccsweep.plan import CHUNK_SIZE
from test_lint import TEMPLATES, WORKFLOWS, lint
from test_lint import argo as argo  # noqa: F401  (the fixture: skips without bin/argo)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def items(tmp_path_factory) -> list[dict]:
    return plan_items(3900, tmp_path_factory.mktemp("plan"))


def test_the_sweep_mode_submits_the_full_sweep_workflow():
    submitted = sweep_workflow(390)
    assert submitted["spec"]["workflowTemplateRef"] == yaml.safe_load(
        (WORKFLOWS / "full-sweep.yaml").read_text())["spec"]["workflowTemplateRef"]
    assert submitted["spec"]["parallelism"] == 390


def test_the_items_mode_workflow_lints_and_runs_the_real_cell_step(items, argo, tmp_path: Path):
    workflow = fanout_workflow(items[:390], 390)
    path = tmp_path / "fanout.yaml"
    path.write_text(yaml.safe_dump(workflow))
    done = lint(argo, path, *TEMPLATES)
    assert done.returncode == 0, done.stdout + done.stderr
    step = workflow["spec"]["templates"][0]["steps"][0][0]
    assert step["templateRef"] == {"name": "ccsweep-cell", "template": "cell"}
    assert len(json.loads(next(p["value"] for p in workflow["spec"]["arguments"]["parameters"]
                               if p["name"] == "items"))) == 390


def test_the_plan_of_390_cells_fits_a_step_result_and_of_3900_does_not(items):
    """argoexec keeps the last 256 KiB of a step's stdout: the full sweep's plan fits, ten times it is cut
    into JSON the fan-out cannot read."""
    result, cut = plan_output(items[:390])
    assert not cut and len(json.loads(result)) == 390
    result, cut = plan_output(items)
    assert cut and len(result) == 256 * 1024
    with pytest.raises(json.JSONDecodeError):
        json.loads(result)


def test_fake_nodes_carry_the_node_probes_labels():
    labels = fake_node("kwok-0000", 16, "6.1.0", ["bbr", "cubic"])["metadata"]["labels"]
    assert labels["ccsweep.io/cc-bbr"] == labels["ccsweep.io/cc-cubic"] == "true"
    assert labels["ccsweep.io/kernel"] == "6.1.0"


def test_the_stand_in_lists_chunks_as_ccsweep_plan_does(items, tmp_path: Path):
    """Past CHUNK_SIZE cells the sweep fans out through chunk Workflows: the stand-in's chunk list is
    the one `ccsweep plan --chunks-file` writes, and each chunk's items fit a step result."""
    import subprocess

    chunks_file = tmp_path / "chunks.json"
    done = subprocess.run([str(REPO / ".venv/bin/ccsweep"), "plan", f"--store={tmp_path / 'store'}", "--chunk-size=100",
                           f"--chunks-file={chunks_file}", PRESET], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == []
    assert chunk_list(items[:364], 100) == json.loads(chunks_file.read_text())
    assert chunk_list(items[:390]) == []   # the full sweep: one Workflow, as before
    chunks = chunk_list(items)
    assert sum(c["cells"] for c in chunks) == 3900 and len(chunks) == -(-3900 // CHUNK_SIZE)
    for c in chunks:
        start = c["chunk"] * CHUNK_SIZE
        result, cut = plan_output(items[start:start + CHUNK_SIZE])
        assert not cut and len(json.loads(result)) == c["cells"]


def test_kwok_leaves_chunk_pods_to_the_stand_in():
    """A chunk pod ends when its chunk Workflow does, not after the simulated cell time."""
    complete = next(s for s in pod_stages(20000) if s["metadata"]["name"] == "pod-complete")
    assert {"key": '.metadata.labels["ccsweep.io/chunk"]', "operator": "DoesNotExist"} in \
        complete["spec"]["selector"]["matchExpressions"]
    chunk = yaml.safe_load((REPO / "workflows/templates/ccsweep-sweep.yaml").read_text())
    template = next(t for t in chunk["spec"]["templates"] if t["name"] == "chunk")
    assert "ccsweep.io/chunk" in template["metadata"]["labels"]


def test_the_stand_in_reports_every_output_the_plan_templates_declare(items):
    """The workflow reads each output a plan pod declares: one the stand-in leaves out holds the
    fan-out at the first step that reads it (the sweep's name, when the plan step gained it)."""
    templates = {t["name"]: t for t in yaml.safe_load(
        (REPO / "workflows/templates/ccsweep-sweep.yaml").read_text())["spec"]["templates"]}
    for template, chunk in (("plan", None), ("plan-chunk", "0")):
        outputs, _ = plan_outputs(items, chunk, "fanout")
        declared = {p["name"] for p in templates[template]["outputs"]["parameters"]}
        assert {p["name"] for p in outputs["parameters"]} == declared, template


def test_the_items_carry_every_field_the_cell_steps_read(items):
    """A cell step names its pod's image, CPU and memory from the plan's item fields: an item
    without one fails the whole fan-out at once ('failed to resolve {{item.image}}')."""
    text = (REPO / "workflows/templates/ccsweep-sweep.yaml").read_text()
    read = set(re.findall(r"\{\{item\.(\w+)\}\}", text)) - {"chunk"}   # chunk: the chunk step's own items
    assert read and read <= items[0].keys()
