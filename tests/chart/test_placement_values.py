"""The chart's values for real clusters render where they belong (ci/placement-values.yaml).

Cell pods: nodeSelector (beside the per-cell algorithm labels), tolerations, affinity,
priorityClassName and memory; every component: podAnnotations, podLabels, extraEnv; the
ServiceAccounts: annotations for cloud identity. test_chart.py validates the whole rendering
against the Kubernetes and Argo schemas; here each value is found in its place, and the chart's own
labels are not overridden by podLabels.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
import yaml

from support.chartlib import CHART, render

pytestmark = pytest.mark.tools  # Helm (bin/helm)

VALUES = yaml.safe_load((CHART / "ci/placement-values.yaml").read_text())


@cache
def docs() -> tuple[dict[str, Any], ...]:
    return tuple(render([CHART / "ci/placement-values.yaml"]))


def one(kind: str, name: str) -> dict[str, Any]:
    (found,) = [d for d in docs() if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def workflow_template(name: str) -> dict[str, Any]:
    return one("WorkflowTemplate", name)


def test_cell_pods_get_the_placement_priority_and_memory():
    cell = VALUES["workflows"]["cell"]
    pods = [t for t in workflow_template("ccsweep-cell")["spec"]["templates"] if "container" in t]
    assert {t["name"] for t in pods} >= {"cell", "cell-mahimahi"}
    for template in pods:
        assert template["nodeSelector"] == cell["nodeSelector"]
        assert template["tolerations"] == cell["tolerations"]
        assert template["affinity"] == cell["affinity"]
        assert template["priorityClassName"] == "experiments-low"
        # The algorithm labels still come per cell, merged by Argo into the same nodeSelector.
        assert "nodeSelector" in template["podSpecPatch"]
    params = {p["name"]: p.get("value") for p in workflow_template("ccsweep-sweep")["spec"]["arguments"]["parameters"]}
    assert params["cell-memory"] == "1Gi"
    # Only cell pods are placed so: the plan and figure steps run anywhere.
    for name in ("ccsweep-sweep", "ccsweep-figures"):
        for template in workflow_template(name)["spec"]["templates"]:
            assert "priorityClassName" not in template and "tolerations" not in template, (name, template["name"])


def test_unset_placement_adds_nothing_to_cell_pods():
    default = [d for d in render() if d["kind"] == "WorkflowTemplate" and d["metadata"]["name"] == "ccsweep-cell"]
    for template in default[0]["spec"]["templates"]:
        assert not {"nodeSelector", "tolerations", "affinity", "priorityClassName"} & set(template), template["name"]
    assert "podMetadata" not in default[0]["spec"]


def test_every_workflow_pod_gets_the_labels_annotations_and_environment():
    extra = VALUES["workflows"]
    for name in ("ccsweep-cell", "ccsweep-sweep", "ccsweep-figures"):
        spec = workflow_template(name)["spec"]
        assert spec["podMetadata"] == {"labels": extra["podLabels"], "annotations": extra["podAnnotations"]}
        for template in spec["templates"]:
            if "container" in template:
                assert template["container"]["env"][-1] == extra["extraEnv"][0], (name, template["name"])


@pytest.mark.parametrize(("kind", "name", "component", "container"), [
    ("Deployment", "rel-ccsweep-operator", "operator", "operator"),
    ("DaemonSet", "rel-ccsweep-node-probe", "nodeProbe", "probe"),
    ("DaemonSet", "rel-ccsweep-node-setup", "nodeSetup", "load-modules"),
])
def test_component_pods_get_labels_annotations_and_environment(kind: str, name: str, component: str, container: str):
    workload = one(kind, name)
    pod = workload["spec"]["template"]
    settings = VALUES[component]
    assert pod["metadata"]["annotations"] == settings["podAnnotations"]
    assert pod["metadata"]["labels"]["team"] == "netlab"
    # The selector's labels are the chart's, whatever podLabels say.
    for key, value in workload["spec"]["selector"]["matchLabels"].items():
        assert pod["metadata"]["labels"][key] == value
    (found,) = [c for c in pod["spec"].get("initContainers", []) + pod["spec"]["containers"] if c["name"] == container]
    assert found["env"][-1] == settings["extraEnv"][0]


def test_pod_labels_cannot_replace_the_charts_own():
    docs = render([CHART / "ci/placement-values.yaml"], ["operator.podLabels.app\\.kubernetes\\.io/component=evil"])
    (operator,) = [d for d in docs if d["kind"] == "Deployment"]
    assert operator["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] == "operator"


@pytest.mark.parametrize(("name", "component"), [
    ("rel-ccsweep-operator", "operator"), ("rel-ccsweep-node-probe", "nodeProbe"), ("ccsweep-workflow", "workflows")])
def test_service_accounts_carry_the_cloud_identity_annotations(name: str, component: str):
    assert one("ServiceAccount", name)["metadata"]["annotations"] == VALUES[component]["serviceAccount"]["annotations"]
