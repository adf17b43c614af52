"""A ccsweep WorkflowTemplate's pod as Argo's controller makes it, without a controller.

`render` runs bin/argo-render (hack/tools/argo-render: the pinned Argo module's ProcessArgs, its
second pass over podSpecPatch, and ApplyPodSpecPatch, as the controller runs them) on one template
with the given arguments. `as_the_controller_creates` then adds what the controller adds to every
pod of the emissary executor (workflow/controller/workflowpod.go of the pinned release): the
executor's `init` and `wait` containers, `main`'s command behind `/var/run/argo/argoexec emissary
... --`, and the `var-run-argo` and `tmp-dir-argo` volumes. Imported by
tests/workflows/test_hostile_parameters.py and tests/operator/test_pod_admission.py, which send
such pods to a real API server; tests/e2e shows the controller's own pods admitted.
"""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
RENDER = REPO / "bin" / "argo-render"
TEMPLATE_FILES = sorted((REPO / "workflows/templates").glob("*.yaml"))
#: The values of a chart install with a node pool for its cells, and that pool (workflows.cell.nodeSelector,
#: which the chart's workflow-templates.yaml sets as each ccsweep-cell template's nodeSelector).
PLACEMENT_VALUES = REPO / "charts/ccsweep/ci/placement-values.yaml"
CHART_POOL: dict[str, str] = yaml.safe_load(PLACEMENT_VALUES.read_text())["workflows"]["cell"]["nodeSelector"]
#: The executor's log options the controller puts on each of its commands (getExecutorLogOpts).
EXECUTOR_LOG_OPTIONS = ["--loglevel", "info", "--log-format", "text", "--gloglevel", "0"]


def templates() -> dict[str, dict[str, Any]]:
    """Every template of ccsweep's WorkflowTemplates, by name."""
    return {t["name"]: t for path in TEMPLATE_FILES for t in yaml.safe_load(path.read_text())["spec"]["templates"]}


def workflow_parameters() -> dict[str, str]:
    """The sweep template's workflow parameters with their defaults."""
    sweep = yaml.safe_load((REPO / "workflows/templates/ccsweep-sweep.yaml").read_text())
    return {p["name"]: p["value"] for p in sweep["spec"]["arguments"]["parameters"]}


def fan_out_inputs(name: str, image: str) -> dict[str, str]:
    """What the sweep's fan-out gives template `name`: its defaults, and plan's values for the rest."""
    plain = {"sweep": "s", "id": "0123456789abcdef", "experiment": "e", "store": "s3://b/p", "image": image,
             "node-selector": '{"ccsweep.io/cc-bbr":"true"}', "deadline": "320", "chunk": "0"}
    inputs = templates()[name].get("inputs", {}).get("parameters", [])
    return {p["name"]: plain.get(p["name"], p.get("value", "plain")) for p in inputs}


def render(name: str, arguments: dict[str, str], globals_: dict[str, str], node_pool: dict[str, str] | None = None,
           retries: int = 0) -> dict[str, Any]:
    """bin/argo-render's answer for template `name`: {"pod": ..., "template": ...} or {"error": ...}.
    `node_pool`: the nodeSelector a chart puts on the template (workflows.cell.nodeSelector)."""
    template = templates()[name] if node_pool is None else {**templates()[name], "nodeSelector": node_pool}
    request = {"template": template, "arguments": arguments, "retries": str(retries),
               "globals": {f"workflow.parameters.{k}": v for k, v in globals_.items()}}
    done = subprocess.run([str(RENDER)], input=json.dumps(request), capture_output=True, text=True, timeout=60,
                          check=True)
    return json.loads(done.stdout)


def as_the_controller_creates(pod_spec: dict[str, Any], executor_image: str, name: str,
                              labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A Pod object of `pod_spec` (a rendered template's pod) with the emissary executor's additions."""
    spec = copy.deepcopy(pod_spec)
    var_run_argo = {"name": "var-run-argo", "mountPath": "/var/run/argo"}
    init = {**(spec.get("initContainers") or [{}])[0], "name": "init", "image": executor_image,
            "command": ["argoexec", "init", *EXECUTOR_LOG_OPTIONS], "volumeMounts": [var_run_argo]}
    (main,) = spec["containers"]
    # Argo mirrors every mount of main into wait under /mainctrfs, writable (addOutputArtifactsVolumes).
    mirrored = [{**mount, "mountPath": f"/mainctrfs{mount['mountPath']}", "readOnly": False}
                for mount in main.get("volumeMounts", [])]
    wait = {"name": "wait", "image": executor_image, "command": ["argoexec", "wait", *EXECUTOR_LOG_OPTIONS],
            "volumeMounts": [{"name": "tmp-dir-argo", "mountPath": "/tmp", "subPath": "0"}, var_run_argo, *mirrored]}
    main = {**main, "name": "main",
            "command": ["/var/run/argo/argoexec", "emissary", *EXECUTOR_LOG_OPTIONS, "--", *main["command"]],
            "volumeMounts": [*main.get("volumeMounts", []), var_run_argo]}
    spec.update(initContainers=[init], containers=[wait, main],
                volumes=[*spec.get("volumes", []), {"name": "var-run-argo", "emptyDir": {}},
                         {"name": "tmp-dir-argo", "emptyDir": {}}])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}}, "spec": spec}
