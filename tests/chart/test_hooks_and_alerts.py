"""The chart's `helm test` hooks and its alert rules, rendered.

The hooks run on a real cluster in tests/e2e/test_release_chart.py; here, what they are: one pod per
check, with a ServiceAccount that may only list Sweeps and read the operator's Deployment. The
alert rules are run by promtool (Prometheus' own rule unit tests) together with the recording
rules they read, on made-up sweeps: one stalled, one progressing, one with failing and late cells.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from support.chartlib import render
from test_chart import promtool

pytestmark = pytest.mark.tools  # Helm (bin/helm)


def hooks(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in docs
            if (d["metadata"].get("annotations") or {}).get("helm.sh/hook") == "test"}


def test_helm_test_runs_one_pod_per_check_with_a_narrow_identity():
    found = hooks(render())
    pods = {name: d for name, d in found.items() if name.startswith("Pod/")}
    assert set(pods) == {"Pod/rel-ccsweep-test-crd", "Pod/rel-ccsweep-test-store", "Pod/rel-ccsweep-test-operator",
                         "Pod/rel-ccsweep-test-strict"}
    commands = {name: d["spec"]["containers"][0]["command"] for name, d in pods.items()}
    assert commands["Pod/rel-ccsweep-test-operator"][-3:] == ["operator", "--deployment", "rel-ccsweep-operator"]
    assert commands["Pod/rel-ccsweep-test-crd"][-1] == "crd"
    assert commands["Pod/rel-ccsweep-test-strict"][-3:] == ["strict", "--image", "ccsweep/cell:0.1.0"]
    store_env = {e["name"]: e for e in pods["Pod/rel-ccsweep-test-store"]["spec"]["containers"][0]["env"]}
    assert store_env["CCSWEEP_STORE"]["value"] == "s3://ccsweep/results"
    assert store_env["CCSWEEP_S3_SECRET_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "ccsweep-s3"
    for name, pod in pods.items():
        # The store check writes as the cells do (their ServiceAccount, whose only rule is Argo's
        # task results); the others read with the test's own narrow one.
        identity = "ccsweep-workflow" if name == "Pod/rel-ccsweep-test-store" else "rel-ccsweep-test"
        assert pod["spec"]["serviceAccountName"] == identity
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    # The pods' RBAC is the release's own, not hooks: `helm test --logs` reads every test hook's logs
    # as a pod's, and fails on a ServiceAccount or Role.
    assert set(found) == set(pods)
    roles = {d["metadata"]["name"]: d for d in render() if d["kind"] == "Role"}
    rules = roles["rel-ccsweep-test"]["rules"]
    assert rules == [{"apiGroups": ["ccsweep.io"], "resources": ["sweeps"], "verbs": ["list"]},
                     {"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["rel-ccsweep-operator"],
                      "verbs": ["get"]},
                     {"apiGroups": ["argoproj.io"], "resources": ["workflows"], "verbs": ["create", "get", "delete"]}]
    # Without the strict check, no Workflow rule and no pod for it.
    unchecked = render(set_values=["tests.strictTemplateReferencing=false"])
    assert "Pod/rel-ccsweep-test-strict" not in hooks(unchecked)
    (role,) = [d for d in unchecked if d["kind"] == "Role" and d["metadata"]["name"] == "rel-ccsweep-test"]
    assert all("argoproj.io" not in rule["apiGroups"] for rule in role["rules"])


def test_no_hooks_when_tests_are_off_and_no_operator_check_without_an_operator():
    assert hooks(render(set_values=["tests.enabled=false"])) == {}
    assert "Pod/rel-ccsweep-test-operator" not in hooks(render(set_values=["operator.enabled=false"]))


def rule_groups(*settings: str) -> list[dict[str, Any]]:
    docs = render(set_values=list(settings))
    (config,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("recording-rules")]
    return yaml.safe_load(config["data"]["ccsweep-rules.yml"])["groups"]


def test_rule_groups_take_the_interval_and_the_prometheus_rule_the_same_groups():
    groups = rule_groups("metrics.rules.interval=30s")
    assert [g["name"] for g in groups] == ["ccsweep-sweep", "ccsweep-cell", "ccsweep-alerts"]
    assert {g["interval"] for g in groups} == {"30s"}
    docs = render(set_values=["metrics.rules.interval=30s", "prometheusRule.enabled=true"])
    (rule,) = [d for d in docs if d["kind"] == "PrometheusRule"]
    assert rule["spec"]["groups"] == groups
    assert all("interval" not in g for g in rule_groups())
    assert [g["name"] for g in rule_groups("metrics.alerts.enabled=false")] == ["ccsweep-sweep", "ccsweep-cell"]


#: promtool's rule unit test: three sweeps from the local executor, which pushes every count.
#: `stuck` finished 1 of 10 cells at once and nothing after; `moving` finishes one a minute;
#: `bad` failed 2 of its 4 cells and 1 was late.
ALERT_TEST = {
    "rule_files": ["rules.yml"],
    "evaluation_interval": "1m",
    "tests": [{
        "interval": "1m",
        "input_series": [
            *({"series": f'ccsweep_sweep_cells{{sweep="{sweep}",state="{state}"}}', "values": values}
              for sweep, counts in {
                  "stuck": {"total": "10x60", "cached": "0x60", "done": "1x60", "failed": "0x60", "running": "1x60"},
                  "moving": {"total": "100x60", "cached": "0x60", "done": "0+1x60", "failed": "0x60",
                             "running": "1x60"},
                  "bad": {"total": "4x60", "cached": "0x60", "done": "1x60", "failed": "2x60", "running": "1x60"},
              }.items() for state, values in counts.items()),
            *({"series": f'ccsweep_sweep_started_timestamp_seconds{{sweep="{sweep}"}}', "values": "0x60"}
              for sweep in ("stuck", "moving", "bad")),
            {"series": 'ccsweep_cell_result_late{sweep="bad",cell="b1"}', "values": "1x60"},
        ],
        "alert_rule_test": [
            {"eval_time": "20m", "alertname": "CcsweepSweepStalled", "exp_alerts": []},
            {"eval_time": "40m", "alertname": "CcsweepSweepStalled", "exp_alerts": [
                {"exp_labels": {"sweep": "stuck", "severity": "warning"},
                 "exp_annotations": {"summary": "Sweep stuck finished no cell in 30 minutes"}},
                {"exp_labels": {"sweep": "bad", "severity": "warning"},
                 "exp_annotations": {"summary": "Sweep bad finished no cell in 30 minutes"}}]},
            {"eval_time": "5m", "alertname": "CcsweepCellsFailing", "exp_alerts": [
                {"exp_labels": {"sweep": "bad", "severity": "warning"},
                 "exp_annotations": {"summary": "Sweep bad: 50% of its cells failed (threshold 0.1)"}}]},
            {"eval_time": "5m", "alertname": "CcsweepCellsLate", "exp_alerts": [
                {"exp_labels": {"sweep": "bad", "severity": "warning"},
                 "exp_annotations": {"summary": "Sweep bad: 25% of its cells ran late (threshold 0.1)"}}]},
        ],
    }],
}


def test_alerts_fire_for_a_stalled_sweep_and_for_failing_and_late_cells_only(tmp_path: Path):
    groups = rule_groups()
    for group in groups:  # promtool compares annotations exactly: the descriptions are not under test
        for rule in group["rules"]:
            rule.get("annotations", {}).pop("description", None)
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": groups}))
    (tmp_path / "test.yml").write_text(yaml.safe_dump(ALERT_TEST))
    assert promtool("check", "rules", str(tmp_path / "rules.yml")).returncode == 0
    done = promtool("test", "rules", str(tmp_path / "test.yml"))
    assert done.returncode == 0, done.stdout + done.stderr
    # The check can fail: expecting no stalled sweep at 40 min is contradicted by `stuck` and `bad`.
    contradicted = yaml.safe_load((tmp_path / "test.yml").read_text())
    contradicted["tests"][0]["alert_rule_test"] = [
        {"eval_time": "40m", "alertname": "CcsweepSweepStalled", "exp_alerts": []}]
    (tmp_path / "contradicted.yml").write_text(yaml.safe_dump(contradicted))
    assert promtool("test", "rules", str(tmp_path / "contradicted.yml")).returncode != 0
