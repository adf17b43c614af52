"""What the fan-out submits and what its plan pods report: the user's Workflow, the plan's items
and argoexec's cut of them, computed without a cluster (tests/workflows/test_fanout_bench.py checks
them offline against the templates and `ccsweep plan`).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml

from ccsweep.plan import CHUNK_SIZE

REPO = Path(__file__).resolve().parents[2]
PRESET = "full-sweep"
RESULT_LIMIT = 256 * 1024   # argoexec keeps the last 256 KiB of a step's stdout as its result
#: The image every fan-out names for its cell pods (none is pulled: KWOK runs no container).
CELL_IMAGE = "localhost/ccsweep/cell:local"


def plan_items(cells: int, workdir: Path) -> list[dict]:
    """The full-sweep preset's fan-out items (`ccsweep plan`, the real plan step's output, with
    the image, CPU and memory fields the cell step reads), repeated with an index suffix on the id
    until there are `cells` of them."""
    done = subprocess.run([str(REPO / ".venv/bin/ccsweep"), "plan", f"--store={workdir / 'plan-store'}",
                           f"--image={CELL_IMAGE}", f"--allowed-images={CELL_IMAGE}", PRESET],
                          capture_output=True, text=True, check=True, cwd=workdir)
    planned = json.loads(done.stdout)
    items = []
    for n in range(cells):
        item = dict(planned[n % len(planned)])
        if n >= len(planned):
            item["id"] = f"{item['id']}-{n // len(planned)}"
        items.append(item)
    return items


def sweep_workflow(parallelism: int) -> dict:
    """workflows/full-sweep.yaml as a user submits it, with the run's parallelism in the Workflow."""
    workflow = yaml.safe_load((REPO / "workflows/full-sweep.yaml").read_text())
    workflow["spec"]["parallelism"] = parallelism
    return workflow


def plan_output(items: list[dict]) -> tuple[str, bool]:
    """What the plan pod's argoexec would report as outputs.result for these items: `ccsweep plan`'s
    stdout without its last newline, cut to its last 256 KiB as argoexec cuts a step's result
    (workflow/executor/executor.go); and whether it was cut."""
    out = json.dumps(items)
    return out[-RESULT_LIMIT:], len(out) > RESULT_LIMIT


def chunk_list(items: list[dict], size: int = CHUNK_SIZE) -> list[dict]:
    """What `ccsweep plan --chunks-file` writes for these items, none stored: [] when they fit one
    Workflow, else every chunk of `size` with its count."""
    if len(items) <= size:
        return []
    return [{"chunk": n, "cells": len(items[start:start + size])} for n, start in enumerate(range(0, len(items), size))]


def plan_outputs(items: list[dict], chunk: str | None, sweep: str) -> tuple[dict, bool]:
    """The outputs a plan pod's argoexec reports, every parameter its template declares: for the
    sweep's own plan step (`ccsweep plan --chunks-file`) the items or [] with the chunk list, the
    rounds (1: the preset has no adaptive repetitions) and the sweep's name; for a chunk Workflow's
    (`ccsweep plan --chunk I`) that chunk's items and the sweep's name. And whether the result was cut."""
    parameters = []
    if chunk is None:
        chunks = chunk_list(items)
        result, cut = plan_output([] if chunks else items)
        parameters += [{"name": "chunks", "value": json.dumps(chunks), "valueFrom": {"path": "/tmp/chunks.json"}},
                       {"name": "rounds", "value": "1", "valueFrom": {"path": "/tmp/rounds.txt"}}]
    else:
        start = int(chunk) * CHUNK_SIZE
        result, cut = plan_output(items[start:start + CHUNK_SIZE])
    parameters.append({"name": "sweep", "value": sweep, "valueFrom": {"path": "/tmp/sweep"}})
    return {"parameters": parameters, "result": result}, cut


def fanout_workflow(items: list[dict], parallelism: int) -> dict:
    """The sweep's own fan-out step (ccsweep-sweep.yaml), fed from a parameter instead of the plan pod."""
    template = yaml.safe_load((REPO / "workflows/templates/ccsweep-sweep.yaml").read_text())
    spec = template["spec"]
    steps = next(t for t in spec["templates"] if t["name"] == "sweep")["steps"]
    cell = next(group[0] for group in steps if group[0]["name"] == "cell")
    cell["withParam"] = "{{workflow.parameters.items}}"
    for argument in cell.get("arguments", {}).get("parameters", []):  # no plan step here to name the sweep
        if argument.get("value") == "{{steps.plan.outputs.parameters.sweep}}":
            argument["value"] = "{{workflow.parameters.sweep}}"
    parameters = [p for p in spec["arguments"]["parameters"]]
    overrides = {"sweep": "fanout", "image": CELL_IMAGE, "image-pull-policy": "Never"}
    for p in parameters:
        p["value"] = overrides.get(p["name"], p["value"])
    parameters.append({"name": "items", "value": json.dumps(items, separators=(",", ":"))})
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
            "metadata": {"generateName": "fanout-"},
            "spec": {"entrypoint": "fanout", "serviceAccountName": spec["serviceAccountName"],
                     "parallelism": parallelism, "podGC": spec["podGC"],
                     "activeDeadlineSeconds": spec["activeDeadlineSeconds"],
                     "arguments": {"parameters": parameters},
                     "templates": [{"name": "fanout", "steps": [[cell]]}]}}
