"""The Helm chart: lint, render every ci/ scenario, validate it offline for the pinned Kubernetes.

Kubernetes kinds are validated with kubernetes-validate's schemas of that release (strict: unknown
fields are errors); Argo's WorkflowTemplates against the pinned Argo's own JSON schema; the Sweep CRD is
compared with the generated one. Installing the chart on a real cluster is
tests/e2e/test_helm_operator.py; its RBAC against a real authorizer is tests/operator/test_rbac.py.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tarfile
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from ccsweep.crd import crd
from support.chartlib import CHART, KUBE_VERSION, REPO, render, run_helm
from support.versions import argo_module_dir

# Helm (bin/helm) and Argo's module source: both built or downloaded on first use.
pytestmark = pytest.mark.tools

SCENARIOS = sorted(p.name for p in (CHART / "ci").glob("*-values.yaml"))
SOURCE_TEMPLATES = {yaml.safe_load(p.read_text())["metadata"]["name"]: yaml.safe_load(p.read_text())
                    for p in sorted((REPO / "workflows/templates").glob("*.yaml"))}


@cache
def rendered(scenario: str) -> tuple[dict[str, Any], ...]:
    return tuple(render([CHART / "ci" / scenario]))


def by_kind(docs, kind: str) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


@cache
def argo_validator(kind: str) -> jsonschema.Draft202012Validator:
    """Argo's own JSON schema for `kind`. It types IntOrString as a string only, where Argo (and
    Kubernetes) take either: that one definition is widened back to what it means."""
    definitions = json.loads((argo_module_dir() / "api/jsonschema/schema.json").read_text())["definitions"]
    definitions["io.k8s.apimachinery.pkg.util.intstr.IntOrString"] = {"type": ["integer", "string"]}
    return jsonschema.Draft202012Validator({"$ref": f"#/definitions/io.argoproj.workflow.v1alpha1.{kind}",
                                            "definitions": definitions})


PROMETHEUS_OPERATOR_CRDS = Path(__file__).parent / "prometheus-operator-crds"


def strict(schema: Any) -> Any:
    """A CRD's structural schema that refuses unknown fields, as kubernetes-validate's strict mode
    does for built-in kinds: the API server would silently prune a misspelt field instead."""
    if isinstance(schema, dict):
        schema = {k: strict(v) for k, v in schema.items()}
        if "properties" in schema and "additionalProperties" not in schema \
                and not schema.get("x-kubernetes-preserve-unknown-fields"):
            schema["additionalProperties"] = False
    elif isinstance(schema, list):
        schema = [strict(s) for s in schema]
    return schema


@cache
def prometheus_operator_validator(kind: str) -> jsonschema.Draft7Validator:
    """The Prometheus Operator's own schema for `kind` (v1), from its CRDs vendored unmodified."""
    for path in PROMETHEUS_OPERATOR_CRDS.glob("*.yaml"):
        crd_doc = yaml.safe_load(path.read_text())
        if crd_doc["spec"]["names"]["kind"] == kind:
            version = next(v for v in crd_doc["spec"]["versions"] if v["name"] == "v1")
            return jsonschema.Draft7Validator(strict(version["schema"]["openAPIV3Schema"]))
    raise LookupError(f"no vendored Prometheus Operator CRD for {kind}")


def validation_errors(doc: dict[str, Any]) -> list[str]:
    """Every schema error of one rendered manifest, each with its field path."""
    group = doc["apiVersion"].split("/")[0]
    if group in ("argoproj.io", "monitoring.coreos.com"):
        schema = argo_validator if group == "argoproj.io" else prometheus_operator_validator
        validator = schema(doc["kind"])
        return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]
    try:
        kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return [str(exc).splitlines()[0]]
    return []


def test_scenarios_exist():
    assert {"default-values.yaml", "minimal-values.yaml", "full-values.yaml",
            "prometheus-operator-values.yaml"} <= set(SCENARIOS)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_lint_is_clean(scenario: str):
    done = run_helm("lint", "--strict", str(CHART), "-f", str(CHART / "ci" / scenario),
                    "--kube-version", KUBE_VERSION, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[WARNING]" not in done.stdout and "[ERROR]" not in done.stdout, done.stdout


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_manifest_validates_offline(scenario: str):
    docs = rendered(scenario)
    assert docs
    for doc in docs:
        where = f"{doc['kind']}/{doc['metadata']['name']}"
        assert validation_errors(doc) == [], where
        assert doc["metadata"].get("namespace", "ccsweep") == "ccsweep", where


def test_crd_is_the_generated_one():
    rendered_crd = by_kind(rendered("default-values.yaml"), "CustomResourceDefinition")["sweeps.ccsweep.io"]
    meta = rendered_crd.pop("metadata")
    assert rendered_crd == {k: v for k, v in crd().items() if k != "metadata"}
    assert meta["annotations"] == {"helm.sh/resource-policy": "keep"}
    assert meta["labels"]["app.kubernetes.io/component"] == "crd"
    kept = by_kind(render(set_values=["crds.keep=false"]), "CustomResourceDefinition")["sweeps.ccsweep.io"]
    assert "annotations" not in kept["metadata"]


ALLOWLIST_ENV = ("CCSWEEP_ALLOWED_STORES", "CCSWEEP_ALLOWED_PUSHGATEWAYS")


def test_workflow_templates_are_the_repositorys_own(tmp_path: Path):
    """One source: the chart ships workflows/templates/ unchanged but for installation settings."""
    templates = by_kind(rendered("full-values.yaml"), "WorkflowTemplate")
    assert sorted(templates) == sorted(SOURCE_TEMPLATES)
    for name, source in SOURCE_TEMPLATES.items():
        spec, want = json.loads(json.dumps(templates[name]["spec"])), json.loads(json.dumps(source["spec"]))
        for s in (spec, want):
            s.pop("serviceAccountName", None)
            for t in s.get("templates") or []:
                t.pop("serviceAccountName", None)
                if t.get("container"):  # the chart adds the lists of stores and Pushgateways to every container
                    kept = [e for e in t["container"].get("env") or [] if e["name"] not in ALLOWLIST_ENV]
                    t["container"].pop("env", None)
                    t["container"] |= {"env": kept} if kept else {}
                for e in (t.get("container") or {}).get("env") or []:
                    e.pop("value", None) if e["name"] == "CCSWEEP_ALLOWED_IMAGES" else None
                    e.get("valueFrom", {}).get("secretKeyRef", {}).pop("name", None)
                (t.get("container") or {}).pop("image", None)
            for p in (s.get("arguments") or {}).get("parameters") or []:
                p.pop("value", None)
        assert spec == want, name
        assert source["metadata"]["labels"].items() <= templates[name]["metadata"]["labels"].items()


def test_sweep_template_defaults_come_from_values():
    sweep = by_kind(rendered("full-values.yaml"), "WorkflowTemplate")["ccsweep-sweep"]
    args = {p["name"]: p["value"] for p in sweep["spec"]["arguments"]["parameters"]}
    assert args["image"] == "registry.example.org/ccsweep/cell:0.1.0"
    assert args["image-pull-policy"] == "Always"
    assert args["store"] == "s3://experiments/ccsweep"
    assert args["cell-cpu"] == "2"
    assert args["lateness-threshold-us"] == "2000"  # given as a number, passed as text the cells check
    assert args["pushgateway"] == "prometheus-pushgateway.monitoring.svc:9091"
    assert sweep["spec"]["serviceAccountName"] == "ccsweep-workflow"
    default = by_kind(rendered("default-values.yaml"), "WorkflowTemplate")["ccsweep-sweep"]
    assert {p["name"]: p["value"] for p in default["spec"]["arguments"]["parameters"]}["image"] == "ccsweep/cell:0.1.0"


def test_no_workflow_parameter_names_an_image_or_a_secret():
    """What no Workflow parameter may choose, the chart fixes: the S3 Secret's name and the image of
    every pod that holds the S3 keys; a cell's image only when the chart's allowlist names it."""
    templates = by_kind(render([CHART / "ci" / "full-values.yaml"],
                               set_values=["operator.allowedImages={registry.example.org/lab/*}"]), "WorkflowTemplate")
    allowed = "registry.example.org/ccsweep/cell:0.1.0,registry.example.org/lab/*"
    seen = set()
    for workflow_template in templates.values():
        for t in workflow_template["spec"]["templates"]:
            container = t.get("container")
            if container is None:
                continue
            seen.add(t["name"])
            refs = {e["valueFrom"]["secretKeyRef"]["name"] for e in container.get("env", [])
                    if "secretKeyRef" in e.get("valueFrom", {})}
            assert refs <= {"experiments-s3"}, t["name"]
            if t["name"].startswith("cell"):
                assert container["image"] == (
                    "{{=inputs.parameters.image matches '^(registry[.]example[.]org/ccsweep/cell:0[.]1[.]0"
                    "|registry[.]example[.]org/lab/.*)$' ? inputs.parameters.image : "
                    "'image-not-allowed.invalid/ccsweep'}}")
            else:
                assert container["image"] == "registry.example.org/ccsweep/cell:0.1.0", t["name"]
            env = {e["name"]: e.get("value") for e in container.get("env", [])}
            if t["name"].startswith("plan"):
                assert env["CCSWEEP_ALLOWED_IMAGES"] == allowed
    assert {"cell", "cell-mahimahi", "plan", "plan-chunk", "plan-round", "verdict", "figures"} <= seen


@pytest.mark.parametrize("schema", [True, False])
def test_an_allowlist_pattern_that_is_not_an_image_fails_the_install(schema: bool):
    """The values schema refuses it; without the schema the template does, before it can reach the
    cell template's image expression (where a quote would end its string)."""
    done = run_helm("template", "rel", str(CHART), "--kube-version", KUBE_VERSION,
                    "--set", "operator.allowedImages={evil'image}", *([] if schema else ["--skip-schema-validation"]),
                    check=False)
    assert done.returncode != 0
    assert ("/operator/allowedImages/0" if schema else "operator.allowedImages: \"evil'image\"") in done.stderr


def test_operator_deployment_runs_the_handlers_with_the_store():
    deployment = by_kind(rendered("full-values.yaml"), "Deployment")["sweeps-operator"]
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["command"][:2] == ["kopf", "run"]
    assert "--namespace=ccsweep" in container["command"] and "--standalone" in container["command"]
    assert container["command"][-2:] == ["-m", "ccsweep_operator.handlers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["CCSWEEP_STORE"]["value"] == "s3://experiments/ccsweep"
    assert env["CCSWEEP_S3_SECRET_KEY"]["valueFrom"]["secretKeyRef"] == {"name": "experiments-s3", "key": "secretKey"}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert pod["imagePullSecrets"] == [{"name": "registry-credentials"}]
    secret = by_kind(rendered("full-values.yaml"), "Secret")["experiments-s3"]
    assert sorted(secret["stringData"]) == ["accessKey", "endpoint", "secretKey"]


def _containers(doc: dict) -> list[dict]:
    """Every container a rendered object runs: a pod template's, or each WorkflowTemplate step's."""
    if doc["kind"] == "WorkflowTemplate":
        return [t["container"] for t in doc["spec"]["templates"] if "container" in t]
    pod = doc["spec"]["template"]["spec"] if "template" in doc.get("spec", {}) else doc.get("spec", {})
    return [*pod.get("initContainers", []), *pod.get("containers", [])]


def test_without_a_secret_every_store_pod_has_the_endpoint_and_its_cloud_identity():
    """store.s3.secretName "": no pod refers to a Secret; the keys come from the provider chain
    (the ServiceAccounts' IRSA annotations), the endpoint from store.s3.endpoint."""
    docs = rendered("cloud-identity-values.yaml")
    assert "Secret" not in {d["kind"] for d in docs}
    store_users = []
    for doc in docs:
        for container in _containers(doc):
            env = {e["name"]: e for e in container.get("env", [])}
            assert not any("secretKeyRef" in e.get("valueFrom", {}) for e in env.values()), doc["metadata"]["name"]
            assert "CCSWEEP_S3_ACCESS_KEY" not in env and "CCSWEEP_S3_SECRET_KEY" not in env
            if "CCSWEEP_S3_ENDPOINT" in env:
                assert env["CCSWEEP_S3_ENDPOINT"] == {"name": "CCSWEEP_S3_ENDPOINT",
                                                      "value": "https://s3.eu-west-1.amazonaws.com"}
                store_users.append(doc["metadata"]["name"])
    # The operator, the helm test's store check, and the plan, cell, figures and verdict steps.
    assert {"rel-ccsweep-operator", "ccsweep-cell", "ccsweep-figures", "ccsweep-sweep"} <= set(store_users)
    accounts = by_kind(docs, "ServiceAccount")
    assert accounts["ccsweep-workflow"]["metadata"]["annotations"] == {
        "eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/ccsweep-workflows"}
    # helm test's store check writes with that identity, as the cells do.
    assert by_kind(docs, "Pod")["rel-ccsweep-test-store"]["spec"]["serviceAccountName"] == "ccsweep-workflow"


@pytest.mark.parametrize("settings, message", [
    (["store.s3.secretName="], "store.s3.endpoint: required when store.s3.secretName is empty"),
    (["store.s3.secretName=", "store.s3.create=true", "store.s3.endpoint=http://minio:9000",
      "store.s3.accessKey=a", "store.s3.secretKey=b"], "store.s3.create needs store.s3.secretName"),
])
def test_no_secret_needs_an_endpoint_and_creates_nothing(settings: list[str], message: str):
    done = run_helm("template", "rel", str(CHART), "--kube-version", KUBE_VERSION,
                    *[arg for setting in settings for arg in ("--set", setting)], check=False)
    assert done.returncode == 1
    assert message in done.stderr, done.stderr


def rules(docs, kind: str, name: str) -> list[tuple[str, str, str]]:
    """(apiGroup, resource, verb) triples a Role or ClusterRole grants."""
    return sorted((g, r, v) for rule in by_kind(docs, kind)[name]["rules"]
                  for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"])


def test_rbac_is_least_privilege():
    docs = rendered("default-values.yaml")
    for doc in docs:
        for rule in doc.get("rules", []):
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], doc["metadata"]["name"]
    assert rules(docs, "Role", "rel-ccsweep-operator") == sorted([
        ("ccsweep.io", "sweeps", v) for v in ("get", "list", "watch", "patch")] + [
        ("ccsweep.io", "sweeps/status", "get"), ("ccsweep.io", "sweeps/status", "patch"),
        ("ccsweep.io", "sweeps/finalizers", "update")] + [
        ("argoproj.io", "workflows", v) for v in ("get", "list", "watch", "create", "patch", "delete")] + [
        ("", "events", "create")])
    # The operator's one cluster-wide right: list nodes, to fail a Sweep no node can run.
    assert sorted(by_kind(docs, "ClusterRole")) == ["rel-ccsweep-node-probe", "rel-ccsweep-operator-nodes",
                                                    "rel-ccsweep-workflow-nodes"]
    assert rules(docs, "ClusterRole", "rel-ccsweep-operator-nodes") == [("", "nodes", "list")]
    assert by_kind(docs, "ClusterRoleBinding")["rel-ccsweep-operator-nodes"]["subjects"][0]["name"] == \
        "rel-ccsweep-operator"
    assert "rel-ccsweep-operator-nodes" not in by_kind(render(set_values=["operator.checkNodes=false"]), "ClusterRole")
    assert rules(docs, "ClusterRole", "rel-ccsweep-node-probe") == [("", "nodes", "get"), ("", "nodes", "patch")]
    assert rules(docs, "Role", "ccsweep-workflow") == [
        ("argoproj.io", "workflowtaskresults", "create"), ("argoproj.io", "workflowtaskresults", "patch")]
    # The plan step's one cluster-wide right: list nodes, to set aside cells no node can run.
    assert rules(docs, "ClusterRole", "rel-ccsweep-workflow-nodes") == [("", "nodes", "list")]
    assert by_kind(docs, "ClusterRoleBinding")["rel-ccsweep-workflow-nodes"]["subjects"] == [
        {"kind": "ServiceAccount", "name": "ccsweep-workflow", "namespace": "ccsweep"}]
    # Only a large sweep's chunk pods create Workflows (one per chunk) and read them, as their own identity.
    assert rules(docs, "Role", "ccsweep-workflow-chunks") == [
        ("argoproj.io", "workflows", "create"), ("argoproj.io", "workflows", "get"),
        ("argoproj.io", "workflowtaskresults", "create"), ("argoproj.io", "workflowtaskresults", "patch")]
    sweep = by_kind(docs, "WorkflowTemplate")["ccsweep-sweep"]["spec"]
    assert {t["name"]: t.get("serviceAccountName") for t in sweep["templates"]
            if t.get("serviceAccountName")} == {"chunk": "ccsweep-workflow-chunks"}
    # Each binding names the ServiceAccount its pods run as.
    deployment = by_kind(docs, "Deployment")["rel-ccsweep-operator"]["spec"]["template"]["spec"]
    binding = by_kind(docs, "RoleBinding")["rel-ccsweep-operator"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": deployment["serviceAccountName"],
                                    "namespace": "ccsweep"}]


def test_node_probe_runs_everywhere_with_its_node_name():
    daemonset = by_kind(rendered("default-values.yaml"), "DaemonSet")["rel-ccsweep-node-probe"]
    pod = daemonset["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["command"] == ["python3", "-m", "ccsweep_operator.nodeprobe", "--interval", "300",
                                    "--modules", "/host/lib/modules"]
    assert container["volumeMounts"] == [{"name": "modules", "mountPath": "/host/lib/modules", "readOnly": True}]
    assert pod["volumes"] == [{"name": "modules", "hostPath": {"path": "/lib/modules", "type": "Directory"}}]
    assert container["env"] == [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
    assert pod["tolerations"] == [{"operator": "Exists"}]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_node_setup_is_off_by_default_and_privileged_only_where_it_loads_modules():
    assert "rel-ccsweep-node-setup" not in by_kind(rendered("default-values.yaml"), "DaemonSet")
    setup = by_kind(rendered("full-values.yaml"), "DaemonSet")["sweeps-node-setup"]["spec"]["template"]["spec"]
    (init,), (main,) = setup["initContainers"], setup["containers"]
    assert init["command"] == ["python3", "-m", "ccsweep_operator.nodesetup", "--", "tcp_bbr", "tcp_vegas"]
    assert init["securityContext"]["privileged"] is True
    assert init["volumeMounts"] == [{"name": "modules", "mountPath": "/lib/modules", "readOnly": True}]
    assert main["securityContext"]["capabilities"] == {"drop": ["ALL"]} and main["securityContext"]["runAsNonRoot"]
    assert setup["automountServiceAccountToken"] is False  # it needs no API access


@pytest.mark.parametrize("values_file, setting", [(None, "nodeSetup.idleWakeUs=0"), ("idle-wake.yaml", None)])
def test_node_setup_holds_the_idle_wake_bound_in_a_privileged_main_container_when_set(
        tmp_path: Path, values_file: str | None, setting: str | None):
    """The bound reaches the holder as one argument, a whole number (a values file's YAML number is
    a float to Helm), and with no modules listed there is no init container and no /lib/modules."""
    files = [CHART / "ci/full-values.yaml"]
    if values_file:
        (tmp_path / values_file).write_text("nodeSetup:\n  idleWakeUs: 0\n  modules: []\n")
        files.append(tmp_path / values_file)
    docs = render(files, [setting] if setting else [])
    setup = by_kind(docs, "DaemonSet")["sweeps-node-setup"]["spec"]["template"]["spec"]
    (holder,) = setup["containers"]
    assert holder["name"] == "idle-wake"
    assert holder["command"] == ["python3", "-m", "ccsweep_operator.idlewake", "0"]
    assert holder["securityContext"] == {"privileged": True, "runAsUser": 0}
    if values_file:
        assert "initContainers" not in setup and "volumes" not in setup
    else:
        assert [c["name"] for c in setup["initContainers"]] == ["load-modules"]


def test_node_setup_registers_the_listed_bpf_congestion_controls_in_a_container_that_holds_them():
    """Each name one argument after `--` to `ccsweep bpf hold`, privileged, with the node's
    /run/ccsweep/node for its state and the digests cell pods read; time to unregister on SIGTERM."""
    docs = render([CHART / "ci/full-values.yaml"], ["nodeSetup.bpfAlgorithms={bbr_bpf,aimd_bpf}"])
    setup = by_kind(docs, "DaemonSet")["sweeps-node-setup"]["spec"]["template"]["spec"]
    (bpf,) = [c for c in setup["containers"] if c["name"] == "bpf"]
    assert bpf["command"] == ["ccsweep", "bpf", "hold", "--", "bbr_bpf", "aimd_bpf"]
    assert bpf["securityContext"] == {"privileged": True, "runAsUser": 0}
    assert bpf["volumeMounts"] == [{"name": "bpf-state", "mountPath": "/run/ccsweep/node"}]
    assert {"name": "CCSWEEP_BPF_STATE", "value": "/run/ccsweep/node/bpf-registrations.json"} in bpf["env"]
    assert {"name": "bpf-state", "hostPath": {"path": "/run/ccsweep/node", "type": "DirectoryOrCreate"}} in \
        setup["volumes"]
    assert [c["name"] for c in setup["containers"]] == ["bpf"]  # it keeps the pod; no sleeper beside it
    assert setup["terminationGracePeriodSeconds"] == 30
    without = by_kind(rendered("full-values.yaml"), "DaemonSet")["sweeps-node-setup"]["spec"]["template"]["spec"]
    assert [c["name"] for c in without["containers"]] == ["loaded"] and without["terminationGracePeriodSeconds"] == 2
    assert all(v["name"] != "bpf-state" for v in without["volumes"])


def test_minimal_scenario_installs_only_the_workflow_templates():
    docs = rendered("minimal-values.yaml")
    kinds = sorted({d["kind"] for d in docs})
    # Beside the templates and their identity, the pod policy that admits their privileged pods only
    # as the chart defines them (templates/workflows/admission-policy.yaml).
    assert kinds == ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount",
                     "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "WorkflowTemplate"]
    # The one cluster-wide right: the plan step lists the nodes, to set aside cells none can run.
    assert sorted(by_kind(docs, "ClusterRole")) == ["rel-ccsweep-workflow-nodes"]


def test_dashboards_are_configmaps_for_grafanas_sidecar():
    sources = sorted((REPO / "dashboards").glob("*.json")) if (REPO / "dashboards").is_dir() else []
    maps = {n: d for n, d in by_kind(rendered("full-values.yaml"), "ConfigMap").items() if "-dashboard-" in n}
    assert len(maps) == len(sources)
    for source in sources:
        cm = maps[f"sweeps-dashboard-{source.stem}"[:63].rstrip("-")]
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert cm["metadata"]["annotations"] == {"grafana_folder": "ccsweep"}
        assert json.loads(cm["data"][source.name]) == json.loads(source.read_text())


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    """Prometheus' own checker (Debian's package, installed by hack/tools/apt.sh when missing)."""
    if shutil.which("promtool") is None:
        subprocess.run([str(REPO / "hack/tools/apt.sh")], check=True, timeout=1800)
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=60)


def test_pushgateway_scrape_job_is_valid_prometheus_config(tmp_path: Path):
    scrape = by_kind(rendered("full-values.yaml"), "ConfigMap")["sweeps-pushgateway-scrape"]
    jobs = yaml.safe_load(scrape["data"]["pushgateway-scrape.yaml"])
    assert jobs == [{"job_name": "ccsweep-pushgateway", "honor_labels": True, "scrape_interval": "5s",
                     "static_configs": [{"targets": ["prometheus-pushgateway.monitoring.svc:9091"]}]}]
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump({"global": {"scrape_interval": "15s"}, "scrape_configs": jobs}))
    done = promtool("check", "config", str(config))
    assert done.returncode == 0, done.stdout + done.stderr
    # Without a Pushgateway there is nothing to scrape, and no ConfigMap.
    assert "rel-ccsweep-pushgateway-scrape" not in by_kind(rendered("default-values.yaml"), "ConfigMap")



def test_recording_rules_ship_with_the_chart_and_pass_promtool(tmp_path: Path):
    """The dashboards read recorded series: the chart carries monitoring/rules.yml itself."""
    rules = by_kind(rendered("full-values.yaml"), "ConfigMap")["sweeps-recording-rules"]["data"]["ccsweep-rules.yml"]
    # monitoring/rules.yml's groups as they are, then the alert group (tests/chart/test_hooks_and_alerts.py).
    recording = yaml.safe_load((REPO / "monitoring/rules.yml").read_text())["groups"]
    assert yaml.safe_load(rules)["groups"][:len(recording)] == recording
    (tmp_path / "rules.yml").write_text(rules)
    done = promtool("check", "rules", str(tmp_path / "rules.yml"))
    assert done.returncode == 0, done.stdout + done.stderr

@pytest.mark.parametrize("setting, message", [
    ("workflows.cellCpu=1", "at '/workflows/cellCpu': got number, want string"),
    ("workflows.latenessThresholdUs=0", "at '/workflows/latenessThresholdUs': 'anyOf' failed"),
    ("store.url=http://minio:9000", "at '/store/url': 'http://minio:9000' does not match pattern"),
    ("operatr.enabled=false", "additional properties 'operatr' not allowed"),
    ("nodeProbe.intervalSeconds=1", "at '/nodeProbe/intervalSeconds': minimum: got 1, want 10"),
    ("store.s3.create=true", "store.s3.create needs store.s3.accessKey, store.s3.secretKey and store.s3.endpoint"),
    ("store.s3.endpoint=minio:9000", "at '/store/s3/endpoint': 'minio:9000' does not match pattern"),
    ("image.digest=latest", "at '/image/digest': 'latest' does not match pattern"),
    ("image.registry=https://registry.example.org", "at '/image/registry'"),
    ("nodeSetup.modules={tcp_bbr,bbr}", "at '/nodeSetup/modules/1': 'bbr' does not match pattern"),
    ("nodeSetup.idleWakeUs=10001", "at '/nodeSetup/idleWakeUs': 'anyOf' failed"),
    ("nodeSetup.idleWakeUs=-1", "at '/nodeSetup/idleWakeUs': 'anyOf' failed"),
    ("nodeSetup.idleWakeUs=0;reboot", "at '/nodeSetup/idleWakeUs': 'anyOf' failed"),
    ("nodeSetup.bpfAlgorithms={bbr_bpf,/tmp/evil.o}",
     "at '/nodeSetup/bpfAlgorithms/1': value must be one of 'aimd_bpf', 'bbr_bpf', 'bbr_unpaced'"),
    ("nodeSetup.bpfAlgorithms={bbr}", "at '/nodeSetup/bpfAlgorithms/0': value must be one of"),
    ("nodeSetup.bpfAlgorithms={bbr_bpf,bbr_bpf}", "at '/nodeSetup/bpfAlgorithms': items at 0 and 1 are equal"),
])
def test_bad_values_are_refused_with_the_key(setting: str, message: str):
    done = run_helm("template", "rel", str(CHART), "--kube-version", KUBE_VERSION, "--set", setting,
                    check=False)
    assert done.returncode == 1
    assert message in done.stderr, done.stderr


def test_prometheus_operator_resources_carry_the_scrape_and_the_rules():
    docs = rendered("prometheus-operator-values.yaml")
    monitor = by_kind(docs, "ServiceMonitor")["rel-ccsweep-pushgateway"]
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["monitoring"]}
    assert monitor["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] == "prometheus-pushgateway"
    assert monitor["spec"]["endpoints"] == [{"port": "http", "interval": "2s", "honorLabels": True}]
    rule = by_kind(docs, "PrometheusRule")["rel-ccsweep-recording-rules"]
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    recording = yaml.safe_load((REPO / "monitoring/rules.yml").read_text())["groups"]
    assert rule["spec"]["groups"][:len(recording)] == recording
    assert [g["name"] for g in rule["spec"]["groups"][len(recording):]] == ["ccsweep-alerts"]
    off = rendered("default-values.yaml")
    assert not by_kind(off, "ServiceMonitor") and not by_kind(off, "PrometheusRule")


@pytest.mark.parametrize("kind, field, value", [
    ("ServiceMonitor", "honorLabel", True),         # misspelt: the API server would drop it silently
    ("ServiceMonitor", "interval", "2 seconds"),     # not a Prometheus duration
    ("PrometheusRule", "record", 7),
])
def test_prometheus_operator_schema_refuses_a_bad_field(kind: str, field: str, value: object):
    """The CRD check can fail: the vendored schemas see into endpoints and rules."""
    doc = json.loads(json.dumps(next(d for d in rendered("prometheus-operator-values.yaml") if d["kind"] == kind)))
    assert validation_errors(doc) == []
    target = doc["spec"]["endpoints"][0] if kind == "ServiceMonitor" else doc["spec"]["groups"][0]["rules"][0]
    target[field] = value
    assert validation_errors(doc), f"{kind} with {field}={value!r} passed its schema"


@pytest.mark.parametrize("settings, image", [
    ([], "ccsweep/cell:0.1.0"),
    (["image.registry=registry.example.org:5000", "image.tag=0.2.0"], "registry.example.org:5000/ccsweep/cell:0.2.0"),
    ([f"image.digest=sha256:{'ab' * 32}"], f"ccsweep/cell:0.1.0@sha256:{'ab' * 32}"),
])
def test_image_reference_is_registry_repository_tag_digest(settings: list[str], image: str):
    docs = render(set_values=settings)
    pods = [by_kind(docs, "Deployment")["rel-ccsweep-operator"], by_kind(docs, "DaemonSet")["rel-ccsweep-node-probe"]]
    assert {d["spec"]["template"]["spec"]["containers"][0]["image"] for d in pods} == {image}
    sweep = by_kind(docs, "WorkflowTemplate")["ccsweep-sweep"]
    assert {p["name"]: p.get("value") for p in sweep["spec"]["arguments"]["parameters"]}["image"] == image


def test_dashboards_select_the_datasource_of_the_values():
    maps = {n: d for n, d in by_kind(rendered("prometheus-operator-values.yaml"), "ConfigMap").items()
            if "-dashboard-" in n}
    assert maps
    for cm in maps.values():
        (name, text), = cm["data"].items()
        dashboard = json.loads(text)
        variable = next(v for v in dashboard["templating"]["list"] if v["name"] == "datasource")
        assert variable.pop("current") == {"selected": True, "text": "Prometheus", "value": "Prometheus"}
        assert dashboard == json.loads((REPO / "dashboards" / name).read_text())


def test_chart_installs_from_a_clone_without_dependencies():
    """`helm install charts/ccsweep` needs no `helm dependency build` and no network."""
    assert "dependencies" not in yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert not (CHART / "charts").exists() and not (CHART / "Chart.lock").exists()
    assert render(), "helm template of the clone's chart rendered nothing"


def helm_docs_flags() -> list[str]:
    """The flags `make chart-readme` runs helm-docs with (the Makefile's HELM_DOCS_FLAGS)."""
    (line,) = [ln for ln in (REPO / "Makefile").read_text().splitlines() if ln.startswith("HELM_DOCS_FLAGS :=")]
    return line.split(":=", 1)[1].split()


def test_readme_is_helm_docs_output_and_lists_every_value():
    helm_docs = REPO / "bin/helm-docs"
    if not helm_docs.exists():
        subprocess.run([str(REPO / "hack/tools/helm-docs.sh")], check=True, timeout=1800)
    done = subprocess.run([str(helm_docs), *helm_docs_flags(), "--dry-run"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    readme = (CHART / "README.md").read_text()
    assert done.stdout.strip() == readme.strip(), "charts/ccsweep/README.md is stale: run make chart-readme"
    documented = re.findall(r"^\| ([\w.\[\]/-]+) \| \w+ \|", readme, flags=re.M)

    def leaves(node: Any, prefix: str = "") -> list[str]:
        if isinstance(node, dict) and node and prefix not in documented:
            return [leaf for k, v in node.items() for leaf in leaves(v, f"{prefix}.{k}" if prefix else k)]
        return [prefix]

    values = yaml.safe_load((CHART / "values.yaml").read_text())
    undocumented = [leaf for leaf in leaves(values)
                    if not any(leaf == d or leaf.startswith(d + ".") for d in documented)]
    assert undocumented == []


def test_packaged_chart_carries_the_workflow_templates_as_files(tmp_path: Path):
    """Helm follows the files/ symlinks when packaging: the .tgz holds real copies."""
    run_helm("package", str(CHART), "-d", str(tmp_path))
    with tarfile.open(next(tmp_path.glob("ccsweep-*.tgz"))) as tgz:
        members = {m.name: m for m in tgz.getmembers()}
        for name in SOURCE_TEMPLATES:
            member = members[f"ccsweep/files/workflows/{name}.yaml"]
            assert member.isfile()
            assert yaml.safe_load(tgz.extractfile(member).read()) == SOURCE_TEMPLATES[name]
        assert "ccsweep/ci/default-values.yaml" not in members and "ccsweep/README.md.gotmpl" not in members


def test_the_strict_scenario_binds_submitters_to_workflows_and_sweeps_only():
    """ci/strict-values.yaml: submitters create Workflows and Sweeps; no verb on pods but reading, no
    Secret, no WorkflowTemplate of their own (docs/security.md, "Who may submit what")."""
    docs = rendered("strict-values.yaml")
    role = by_kind(docs, "Role")["rel-ccsweep-submitter"]
    grants = {(group, resource): set(rule["verbs"]) for rule in role["rules"]
              for group in rule["apiGroups"] for resource in rule["resources"]}
    assert "create" in grants[("argoproj.io", "workflows")] and "create" in grants[("ccsweep.io", "sweeps")]
    assert grants[("argoproj.io", "workflowtemplates")] == {"get", "list", "watch"}
    assert grants[("", "pods")] == grants[("", "pods/log")] == {"get", "list", "watch"}
    assert not any(resource in ("secrets", "pods/exec", "workflowtaskresults", "cronworkflows")
                   for _, resource in grants)
    binding = by_kind(docs, "RoleBinding")["rel-ccsweep-submitter"]
    assert binding["roleRef"]["name"] == "rel-ccsweep-submitter"
    assert binding["subjects"] == [{"kind": "Group", "name": "experimenters", "apiGroup": "rbac.authorization.k8s.io"}]
    assert "rel-ccsweep-submitter" not in by_kind(rendered("default-values.yaml"), "Role")
