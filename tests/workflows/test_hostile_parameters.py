"""No workflow parameter widens a pod: every template rendered by Argo's own code with hostile values.

Whoever may submit a Workflow may name any template of ccsweep's WorkflowTemplates and give any
parameter any value (templateReferencing: Strict limits them to that, docs/security.md). Each
template is rendered here by bin/argo-render (hack/tools/argo-render: the pinned Argo module's
ProcessArgs, its second pass over podSpecPatch, and ApplyPodSpecPatch, as the controller runs them)
with one parameter at a time set to a hostile value, and the pod spec that results must be the
template's own: the same security context, volumes, Secret and image (or an image that cannot be
pulled), resources of cpu and memory only, a node selector of labels only. A value that breaks
the patch fails the pod (an error here), which widens nothing.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from support.argorender import CHART_POOL, RENDER, fan_out_inputs, templates, workflow_parameters
from support.argorender import render as argo_render
from support.stored_cell import SWEEP, planned_stored_cell

ALLOWED_IMAGE = "ccsweep/cell:0.1.0"
REFUSED_IMAGE = "image-not-allowed.invalid/ccsweep"
SECRET = "ccsweep-s3"
HOSTILE = [
    '1", "hostPID": true, "x": "',
    '1"}}], "hostPID": true, "containers": [{"name": "main", "securityContext": {"privileged": true}, "x": {"y": "',
    '{"hostPID": true}',
    "{{=toJson({'hostPID': true})}}",
    "{{='\"}}], \"hostPID\": true, \"x\": [{\"y\": {\"z\": \"'}}",
    "{{workflow.parameters.image}}",
    "evil.example/root:latest",
    f"{ALLOWED_IMAGE}x",
    f"{ALLOWED_IMAGE} ",
    "x\ny",
]
#: The node selector is an object in the patch: hostile objects too.
HOSTILE_SELECTORS = [
    '{"a": "b", "hostPID": true}',
    '{"a": {"b": "c"}}',
    '{"a": "{{=toJson(1)}}"}',
    '{"a": "b"}, "hostPID": true, "x": {',
    "[]",
]
POD_FIELDS = {"containers", "initContainers", "volumes", "nodeSelector", "securityContext"}


POD_TEMPLATES = sorted(name for name, t in templates().items() if "container" in t)


@pytest.fixture(scope="module")
def render() -> Any:
    if not RENDER.exists():
        pytest.skip("bin/argo-render missing: run `make tools` (hack/tools/argo-render.sh)")
    return argo_render


def benign_inputs(name: str) -> dict[str, str]:
    return fan_out_inputs(name, ALLOWED_IMAGE)


def cases() -> list[tuple[str, str, str, str]]:
    """(template, where: inputs|workflow, parameter, value): every parameter of every pod template."""
    found = []
    names = workflow_parameters()
    for name in POD_TEMPLATES:
        text = json.dumps(templates()[name])
        for where, params in (("inputs", benign_inputs(name)), ("workflow", names)):
            for param in params:
                if f"{where}.parameters.{param}" in text or f"{where}.parameters['{param}']" in text:
                    values = HOSTILE_SELECTORS + HOSTILE if param == "node-selector" else HOSTILE
                    found += [(name, where, param, value) for value in values]
    return found


def assert_no_wider(name: str, rendered: dict[str, Any], case: str) -> None:
    """The pod spec Argo made is the template's own, whatever the value: or no pod at all."""
    if "error" in rendered:
        return  # the controller fails the node: no pod is created
    template, pod = templates()[name], rendered["pod"]
    assert set(pod) <= POD_FIELDS, (case, set(pod) - POD_FIELDS)
    assert pod.get("securityContext") == template.get("securityContext"), case
    assert pod.get("volumes") == template.get("volumes"), case
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in (pod.get("nodeSelector") or {}).items()), case
    (main,) = pod["containers"]
    assert main["securityContext"] == template["container"]["securityContext"], case
    assert main["image"] in (ALLOWED_IMAGE, REFUSED_IMAGE), (case, main["image"])
    assert main.get("volumeMounts") == template["container"].get("volumeMounts"), case
    assert main["command"] == template["container"]["command"], case
    sources = [e["valueFrom"] for e in main.get("env", []) if "valueFrom" in e]
    refs = [source["secretKeyRef"]["name"] for source in sources if "secretKeyRef" in source]
    assert set(refs) <= {SECRET}, (case, refs)
    # Besides the Secret: only the pod's own namespace, CPU request and memory limit (the downward API),
    # whatever a parameter says: the namespace names the pod's folder of the store and its metric groups.
    assert all(source == {"fieldRef": {"fieldPath": "metadata.namespace"}} or (
               set(source) == {"resourceFieldRef"} and source["resourceFieldRef"]["containerName"] == "main")
               for source in sources if "secretKeyRef" not in source), (case, sources)
    assert {"name": "CCSWEEP_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}} in main["env"]
    assert set(main) <= {"name", "image", "imagePullPolicy", "command", "args", "env", "securityContext",
                         "volumeMounts", "resources"}, (case, set(main))
    assert set(main.get("resources") or {}) <= {"requests", "limits"}, case
    for quantities in (main.get("resources") or {}).values():
        assert set(quantities) <= {"cpu", "memory"}, case
    (init,) = pod["initContainers"]
    assert set(init) <= {"name", "resources"}, (case, init)


@pytest.mark.parametrize("name", POD_TEMPLATES)
def test_every_pod_template_renders_with_the_values_a_sweep_gives_it(render: Any, name: str):
    """Without this, a template Argo cannot render at all would pass every hostile case (no pod)."""
    rendered = render(name, benign_inputs(name), workflow_parameters())
    assert "error" not in rendered, rendered
    assert_no_wider(name, rendered, f"{name} benign")
    assert rendered["pod"]["containers"][0]["image"] == ALLOWED_IMAGE


@pytest.mark.parametrize(("name", "where", "param", "value"), cases(),
                         ids=lambda x: x if len(x) < 24 and "\n" not in x else f"{x[:20]}...")
def test_a_hostile_parameter_does_not_widen_the_pod(render: Any, name: str, where: str, param: str, value: str):
    inputs, globals_ = benign_inputs(name), workflow_parameters()
    (inputs if where == "inputs" else globals_)[param] = value
    assert_no_wider(name, render(name, inputs, globals_), f"{name} {where}.{param}={value!r}")


def test_every_pod_template_and_every_parameter_is_tried():
    tried = {(name, param) for name, _, param, _ in cases()}
    assert {name for name, _ in tried} == set(POD_TEMPLATES) >= {"cell", "cell-mahimahi", "plan", "plan-chunk",
                                                               "verdict", "figures"}
    assert {("cell", p) for p in ("image", "cpu", "memory", "retry-cpu", "retry-memory", "node-selector", "sweep",
                                  "id")} <= tried


def test_the_cell_pod_from_plans_values(render: Any):
    """The benign case: plan's item values give the pod its resources, node selector and image."""
    inputs = {**benign_inputs("cell"), "cpu": "900m", "memory": "1Gi"}
    rendered = render("cell", inputs, workflow_parameters())
    assert "error" not in rendered, rendered
    pod = rendered["pod"]
    assert pod["nodeSelector"] == {"ccsweep.io/cc-bbr": "true"}
    (main,) = pod["containers"]
    assert main["image"] == ALLOWED_IMAGE
    # A CPU limit's CFS quota would stall the emulator (docs/kubernetes.md); memory stays capped.
    assert main["resources"] == {"requests": {"cpu": "900m", "memory": "1Gi"}, "limits": {"memory": "1Gi"}}
    (init,) = pod["initContainers"]
    assert init["resources"] == {"requests": {"cpu": "900m"}, "limits": {"cpu": "900m"}}


@pytest.mark.parametrize("retries", [1, 2])
def test_a_retried_cell_pod_asks_for_the_plans_retry_requests(render: Any, retries: int):
    """A cell retried after running late or starved must not meet the same crowding: its pod asks
    for the plan's retry_cpu and retry_memory (ccsweep.podrequests.retry_requests), still no CPU limit."""
    inputs = {**benign_inputs("cell"), "cpu": "224m", "memory": "320Mi", "retry-cpu": "448m", "retry-memory": "640Mi"}
    rendered = render("cell", inputs, workflow_parameters(), retries=retries)
    assert "error" not in rendered, rendered
    (main,) = rendered["pod"]["containers"]
    assert main["resources"] == {"requests": {"cpu": "448m", "memory": "640Mi"}, "limits": {"memory": "640Mi"}}
    (init,) = rendered["pod"]["initContainers"]
    assert init["resources"] == {"requests": {"cpu": "448m"}, "limits": {"cpu": "448m"}}
    assert f"--attempt={retries + 1}" in main["args"]


@pytest.mark.parametrize("image", ["evil.example/root:latest", f"{ALLOWED_IMAGE}-x", "docker.io/ccsweep/cell:0.1.0"])
def test_a_cell_template_named_directly_with_another_image_gets_one_that_cannot_be_pulled(render: Any, image: str):
    rendered = render("cell", {**benign_inputs("cell"), "image": image}, workflow_parameters())
    assert rendered["pod"]["containers"][0]["image"] == REFUSED_IMAGE


@pytest.mark.parametrize("value", ['1", "hostPID": true, "x": "', "{{='\\\"'}}"])
def test_a_quote_in_cpu_no_longer_adds_fields(render: Any, value: str):
    """The shape the review found: a quote in `cpu` pasted into the patch's JSON text added hostPID."""
    rendered = render("cell", {**benign_inputs("cell"), "cpu": value}, workflow_parameters())
    assert "error" in rendered or "hostPID" not in rendered["pod"], rendered


#: Values the issue found a Workflow naming the cell template directly could give (issue 39, item 3).
OFF_POOL_SELECTORS = [{"$patch": "replace"}, {key: "elsewhere" for key in CHART_POOL},
                      {"$patch": "replace", "ccsweep.io/cc-bbr": "true"}]
OUT_OF_BOUNDS = [{"cpu": "60"}, {"memory": "1Ti"}, {"cpu": "60", "memory": "1Ti"}, {"cpu": "50m"}]


@pytest.fixture(scope="module")
def planned_cell(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A real planned cell, stored already, in a file store: the inputs of a cell pod that reaches its
    node selector check, and that ends at "cached" (running nothing) once every check passes."""
    store = f"file://{tmp_path_factory.mktemp('store')}"
    return {"sweep": SWEEP, "id": planned_stored_cell(store).id, "store": store}


def pod_refuses(pod: dict[str, Any]) -> str | None:
    """What the pod's own `ccsweep cell` says of the pod it runs in (its one line, exit 2), or None when
    it accepts it. The downward API's values come from the rendered pod's resources, as the kubelet
    gives them (millicores of the request, bytes of the limit)."""
    from click.testing import CliRunner

    from ccsweep.cli import main
    from ccsweep.podspec import cpu_milli, memory_bytes

    (container,) = pod["containers"]
    resources = container["resources"]
    downward = {"requests.cpu": int(cpu_milli(resources["requests"]["cpu"])),
                "limits.memory": int(memory_bytes(resources["limits"]["memory"]))}
    env = {e["name"]: str(downward[e["valueFrom"]["resourceFieldRef"]["resource"]]) for e in container["env"]
           if "resourceFieldRef" in e.get("valueFrom", {})}
    assert container["command"] == ["ccsweep", "cell"]
    # --attempt counts the controller's `retries`, which it sets per attempt, not the renderer.
    args = [arg for arg in container["args"] if not arg.startswith("--attempt=")]
    done = CliRunner().invoke(main, ["cell", *args], env=env)
    if done.exit_code == 2:
        return done.output
    assert done.exit_code == 0 and "cached" in done.output, done.output  # accepted: the stored cell found
    return None


def cell_inputs(planned_cell: dict[str, str], **values: str) -> dict[str, str]:
    return {**benign_inputs("cell"), **planned_cell, "pushgateway": "", **values}


@pytest.mark.parametrize("name", ["cell", "cell-mahimahi"])
@pytest.mark.parametrize("selector", OFF_POOL_SELECTORS, ids=json.dumps)
def test_a_node_selector_leaving_the_charts_pool_is_refused(render: Any, planned_cell: dict[str, str], name: str,
                                                            selector: dict[str, str]):
    """A strategic merge patch whose key overrides the pool's, or `$patch: replace`, moves the pod off
    the pool: the render fails (no pod), or the pod's own check stops it before it runs anything."""
    rendered = render(name, cell_inputs(planned_cell, **{"node-selector": json.dumps(selector)}),
                      workflow_parameters(), node_pool=CHART_POOL)
    if "error" in rendered:
        return  # no pod
    refusal = pod_refuses(rendered["pod"])
    assert refusal is not None and "not the node selector the plan gives" in refusal, (selector, refusal)


@pytest.mark.parametrize("name", ["cell", "cell-mahimahi"])
@pytest.mark.parametrize("sizes", OUT_OF_BOUNDS, ids=json.dumps)
def test_resources_outside_the_bounds_are_refused(render: Any, planned_cell: dict[str, str], name: str,
                                                  sizes: dict[str, str]):
    rendered = render(name, cell_inputs(planned_cell, **sizes), workflow_parameters(), node_pool=CHART_POOL)
    if "error" in rendered:
        return
    refusal = pod_refuses(rendered["pod"])
    assert refusal is not None and "must be" in refusal, (sizes, refusal)


def test_the_planned_cell_in_the_charts_pool_is_accepted(render: Any, planned_cell: dict[str, str]):
    """Without this, a pod refusing everything would pass the two tests above."""
    from ccsweep.plan import node_selector, planned_cells
    from ccsweep.store import open_store

    cell = next(c for c in planned_cells(open_store(planned_cell["store"]), SWEEP) if c.id == planned_cell["id"])
    inputs = cell_inputs(planned_cell, **{"node-selector": json.dumps(node_selector(cell))})
    rendered = render("cell", inputs, workflow_parameters(), node_pool=CHART_POOL)
    assert "error" not in rendered, rendered
    assert rendered["pod"]["nodeSelector"] == {**CHART_POOL, **node_selector(cell)}
    assert pod_refuses(rendered["pod"]) is None
    env = {e["name"]: e["valueFrom"]["resourceFieldRef"] for e in rendered["pod"]["containers"][0]["env"]
           if "resourceFieldRef" in e.get("valueFrom", {})}
    assert env == {"CCSWEEP_POD_CPU_MILLI": {"containerName": "main", "resource": "requests.cpu", "divisor": "1m"},
                   "CCSWEEP_POD_MEMORY_BYTES": {"containerName": "main", "resource": "limits.memory", "divisor": "1"}}
