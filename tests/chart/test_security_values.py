"""The chart's security settings: NetworkPolicies that confine workflow pods, and the allowlists of
images, stores and Pushgateways a Sweep may name.

Rendered with the real Helm (ci/networkpolicy-values.yaml and the defaults); the policies' shape
is validated against Kubernetes' schemas with every other scenario in test_chart.py. The allowlist
the chart renders is read back by the operator's own settings, so chart and operator agree.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
import yaml

from ccsweep.storeurls import NAMESPACE_ENV
from ccsweep_operator.reconcile import OperatorSettings
from support.chartlib import CHART, render

pytestmark = pytest.mark.tools  # Helm (bin/helm)
APP_VERSION = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]


@cache
def policies(values: str | None = "networkpolicy-values.yaml") -> dict[str, dict[str, Any]]:
    docs = render([CHART / "ci" / values] if values else [])
    return {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "NetworkPolicy"}


def test_no_network_policy_unless_asked():
    assert policies(None) == {}


def test_workflow_pods_take_no_connections_and_reach_only_dns_api_s3_and_pushgateway():
    spec = policies()["rel-ccsweep-workflow-pods"]
    workflow_pods = {"matchExpressions": [{"key": "workflows.argoproj.io/workflow", "operator": "Exists"}]}
    assert spec["podSelector"] == workflow_pods
    assert spec["policyTypes"] == ["Ingress", "Egress"] and spec["ingress"] == []
    for rule in spec["egress"]:
        assert rule["to"], f"an egress rule without peers opens every address: {rule}"
    ports = sorted((p["protocol"], p["port"]) for rule in spec["egress"] for p in rule["ports"])
    assert ports == [("TCP", 53), ("TCP", 6443), ("TCP", 9000), ("TCP", 9091), ("UDP", 53)]
    s3 = next(r for r in spec["egress"] if r["ports"] == [{"protocol": "TCP", "port": 9000}])
    assert s3["to"] == [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "minio"}}}]


def test_only_workflow_pods_and_prometheus_reach_the_pushgateway():
    spec = policies()["rel-ccsweep-pushgateway"]
    assert spec["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "prometheus-pushgateway"}}
    assert spec["policyTypes"] == ["Ingress"]
    [rule] = spec["ingress"]
    assert rule["from"] == [
        {"podSelector": policies()["rel-ccsweep-workflow-pods"]["podSelector"]},
        {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}]
    assert rule["ports"] == [{"protocol": "TCP", "port": 9091}]


@pytest.mark.parametrize("missing", ["apiServer", "s3"])
def test_policies_without_the_stores_address_are_refused_naming_the_key(missing: str):
    given = {"apiServer": "networkPolicy.apiServer.to[0].ipBlock.cidr=10.0.0.1/32",
             "s3": "networkPolicy.s3.to[0].ipBlock.cidr=192.0.2.1/32"}
    with pytest.raises(AssertionError, match=rf"networkPolicy\.{missing}\.to: give the"):
        render(set_values=["networkPolicy.enabled=true", *(v for k, v in given.items() if k != missing)])


def allowlist(*set_values: str) -> OperatorSettings:
    """The operator's settings from the environment the chart gives its Deployment."""
    [deployment] = [d for d in render(set_values=set_values) if d["kind"] == "Deployment"]
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    return OperatorSettings.from_env({e["name"]: e["value"] for e in env if "value" in e})


def test_sweeps_may_name_only_the_charts_image_unless_more_are_allowed():
    default = allowlist()
    assert default.allowed_images == (f"ccsweep/cell:{APP_VERSION}",)
    assert not default.image_allowed("ccsweep/cell:latest")
    more = allowlist("image.tag=0.2.0", "operator.allowedImages={registry.example.org/lab/*}")
    assert more.allowed_images == ("ccsweep/cell:0.2.0", "registry.example.org/lab/*")
    assert more.image_allowed("registry.example.org/lab/cell:1")
    assert not more.image_allowed(f"ccsweep/cell:{APP_VERSION}")


def test_sweeps_may_name_only_the_charts_store_and_pushgateway_unless_more_are_allowed():
    default = allowlist()
    assert (default.store, default.allowed_stores, default.allowed_pushgateways) == (
        "s3://ccsweep/results", ("s3://ccsweep/results",), ())
    more = allowlist("operator.allowedStores={s3://ccsweep/teams/*,s3://lab/b}", "workflows.pushgateway=pg:9091",
                     "operator.allowedPushgateways={pg.monitoring:9091}")
    assert more.allowed_stores == ("s3://ccsweep/results", "s3://ccsweep/teams/*", "s3://lab/b")
    assert more.allowed_pushgateways == ("pg:9091", "pg.monitoring:9091")  # the chart's own first


@pytest.mark.parametrize(("value", "key"), [("operator.allowedStores={s3://a/b c}", "allowedStores"),
                                            ("operator.allowedPushgateways={a:1 b:2}", "allowedPushgateways"),
                                            ("operator.allowedStores={https://evil.example}", "allowedStores")])
def test_an_allowlist_entry_that_is_not_one_store_or_address_is_refused(value: str, key: str):
    """The lists reach the operator joined by ',' (which --set itself splits on): an entry with a space
    or another scheme is refused by values.schema.json before anything is rendered."""
    with pytest.raises(AssertionError, match=rf"at '/operator/{key}/0': .* does not match pattern"):
        render(set_values=[value])


def test_every_workflow_pod_gets_the_lists_its_store_and_pushgateway_options_are_checked_against():
    """A Workflow submitter gives `store` and `pushgateway` as parameters; every workflow container
    (plan, cells, figures, verdict) carries the chart's lists, which its ccsweep checks them against
    (tests/unit/test_sweep_names.py::test_in_a_charts_pod_a_store_or_pushgateway_off_the_list_exits_2)."""
    docs = render(set_values=["operator.allowedStores={s3://ccsweep/teams/*}", "workflows.pushgateway=pg:9091"])
    containers = [t["container"] for d in docs if d["kind"] == "WorkflowTemplate"
                  for t in d["spec"]["templates"] if "container" in t]
    assert len(containers) >= 5
    for container in containers:
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        assert env["CCSWEEP_ALLOWED_STORES"] == "s3://ccsweep/results,s3://ccsweep/teams/*", container["name"]
        assert env["CCSWEEP_ALLOWED_PUSHGATEWAYS"] == "pg:9091", container["name"]


def test_every_workflow_pod_reads_its_namespace_from_the_api_as_the_templates_say():
    """The chart keeps the templates' CCSWEEP_NAMESPACE (the pod's own namespace, from the downward
    API): each pod's store is that namespace's folder of --store and its metric groups carry it."""
    docs = render(set_values=["workflows.extraEnv[0].name=X", "workflows.extraEnv[0].value=y"])
    containers = [t["container"] for d in docs if d["kind"] == "WorkflowTemplate"
                  for t in d["spec"]["templates"] if "container" in t]
    assert len(containers) >= 5
    for container in containers:
        (entry,) = [e for e in container["env"] if e["name"] == NAMESPACE_ENV]
        assert entry == {"name": NAMESPACE_ENV, "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}
