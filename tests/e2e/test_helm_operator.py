"""The chart installed with the real Helm on the real cluster, and a Sweep run by its operator.

`helm install` as docs/install.md says (its command and values read from the page, with
ci/e2e-values.yaml and a store prefix of this session's own laid over them) brings the CRD, the
operator, the node probe and the WorkflowTemplates; Argo's real controller, MinIO and the
Pushgateway come from the session fixtures. Then, as a user would: `kubectl apply` the quick
example, wait for Succeeded, find the results in MinIO; apply it again and see no cell run;
delete a running Sweep and see its Workflow and pods go (ownerReferences, garbage collector).
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml

from clusterlib import CELL_IMAGE, NODE_IP, REPO, NodeServices

sys.path.insert(0, str(REPO / "tests/chart"))
from ccsweep_operator.nodeprobe import label_value  # noqa: E402
from chartlib import CHART, helm, install_doc  # noqa: E402

if TYPE_CHECKING:  # the fixture's type; conftest is not imported at run time
    from conftest import TestCluster

pytestmark = pytest.mark.e2e

NAMESPACE = "ccsweep-helm"
RELEASE = "ccsweep"
EXAMPLE = REPO / "operator/examples/quick/sweep.yaml"
NODE = "ccsweep-node"
SWEEP_TIMEOUT_S = 600


class Release:
    """The installed chart and how to look at what it runs."""

    def __init__(self, cluster: TestCluster, services: NodeServices, prefix: str) -> None:
        self.cluster, self.services, self.prefix = cluster, services, prefix

    def kubectl(self, *args: str, **kwargs) -> str:
        return self.cluster.kubectl("-n", NAMESPACE, *args, **kwargs).stdout

    def get(self, kind: str, name: str) -> dict | None:
        done = self.cluster.kubectl("-n", NAMESPACE, "get", kind, name, "-o", "json", check=False)
        return json.loads(done.stdout) if done.returncode == 0 else None

    def items(self, kind: str, selector: str) -> list[dict]:
        return json.loads(self.kubectl("get", kind, "-l", selector, "-o", "json"))["items"]

    def helm(self, *args: str, timeout: float = 600) -> str:
        done = self.cluster.in_ns(str(helm()), f"--kubeconfig={self.cluster.base / 'admin.kubeconfig'}", *args,
                                  timeout=timeout)
        assert done.returncode == 0, f"helm {' '.join(args)}: {done.stderr}"
        return done.stdout

    def wait_for(self, what: str, probe: Callable[[], object], timeout: float = 120) -> object:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = probe()
            if value:
                return value
            time.sleep(2)
        logs = self.cluster.kubectl("-n", NAMESPACE, "logs", f"deployment/{RELEASE}-operator", "--tail=40",
                                    check=False).stdout
        raise AssertionError(f"{what}: not reached in {timeout:.0f}s\noperator log tail:\n{logs}")

    def sweep_phase(self, name: str, *phases: str) -> dict | None:
        sweep = self.get("sweep", name)
        return sweep if sweep and (sweep.get("status") or {}).get("phase") in phases else None


def with_namespace(argv: list[str], after: str) -> list[str]:
    """A documented command with this test's namespace in place of the page's (the word after `after`)."""
    i = argv.index(after) + 1
    return [*argv[:i], NAMESPACE, *argv[i + 1:]]


def image_has_the_operator(cluster: TestCluster) -> str | None:
    """None when the cell image can run the operator; else why not (its import error)."""
    name = f"probe-{uuid.uuid4().hex[:6]}"
    done = cluster.kubectl("run", name, "-n", NAMESPACE, "--rm", "-i", "--restart=Never", f"--image={CELL_IMAGE}",
                           "--image-pull-policy=Never", "--command", "--", "python3", "-c",
                           "import kopf, ccsweep_operator.handlers", check=False, timeout=180)
    return None if done.returncode == 0 else (done.stderr or done.stdout).strip().splitlines()[-1]


@pytest.fixture(scope="module")
def release(argo: TestCluster, cell_image: str, node_services: NodeServices, tmp_path_factory) -> Release:
    cluster = argo
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    cluster.kubectl("wait", "-n", NAMESPACE, "--for=create", "serviceaccount/default", "--timeout=60s")
    missing = image_has_the_operator(cluster)
    if missing:
        pytest.skip(f"the cell image cannot run the operator ({missing}): images/build-local.sh must install "
                    "ccsweep[operator] including operator/")
    # The probe must put its labels back: the kernel's and the algorithms' (which the sweep
    # fixtures set by hand, as the probe would).
    available = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    cc_labels = [f"ccsweep.io/cc-{cc}-" for cc in available]
    cluster.kubectl("label", "node", NODE, "ccsweep.io/kernel-", *cc_labels)
    prefix = f"helm-e2e-{uuid.uuid4().hex[:8]}"
    env = node_services.env
    rel = Release(cluster, node_services, prefix)
    chart = CHART
    # The keys go to helm in a values file only this user may read, never on its command line.
    keys = tmp_path_factory.mktemp("helm-values") / "s3-values.yaml"
    keys.touch(mode=0o600)
    keys.write_text(yaml.safe_dump({"store": {"s3": {"accessKey": env["CCSWEEP_S3_ACCESS_KEY"],
                                                     "secretKey": env["CCSWEEP_S3_SECRET_KEY"],
                                                     "endpoint": env["CCSWEEP_S3_ENDPOINT"]}}}))
    # docs/install.md's own commands: its namespace label, its helm install with its values, this
    # cluster's image, store and Pushgateway laid over them (the registry host aside).
    doc = install_doc()
    cluster.kubectl(*with_namespace(doc.label_namespace, "namespace"))
    values = keys.parent / "ccsweep-values.yaml"
    values.write_text(doc.values)
    install = [str(values) if a == "ccsweep-values.yaml" else str(chart) if a == "charts/ccsweep" else a
               for a in with_namespace(doc.helm_install, "-n")]
    assert install[:3] == ["install", RELEASE, str(chart)], install
    rel.helm(*install, "-f", str(chart / "ci/e2e-values.yaml"), "-f", str(keys),
             "--set", f"store.url=s3://{node_services.bucket}/{prefix}",
             "--set", f"workflows.pushgateway={NODE_IP}:9091")
    yield rel
    rel.helm("uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout=2m")
    cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)


def test_chart_components_run(release: Release):
    crd = release.cluster.get_json("crd", "sweeps.ccsweep.io")
    assert {c["type"]: c["status"] for c in crd["status"]["conditions"]}["Established"] == "True"
    templates = json.loads(release.kubectl("get", "workflowtemplates", "-o", "json"))["items"]
    names = {w["metadata"]["name"] for w in templates}
    assert names == {"ccsweep-cell", "ccsweep-figures", "ccsweep-sweep"}
    deployment = release.get("deployment", f"{RELEASE}-operator")
    assert deployment["status"].get("availableReplicas") == 1
    probe = release.get("daemonset", f"{RELEASE}-node-probe")
    assert probe["status"]["numberReady"] == probe["status"]["desiredNumberScheduled"] == 1


def test_node_probe_labels_the_node(release: Release):
    available = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()

    def labels() -> dict | None:
        found = release.cluster.get_json("node", NODE)["metadata"]["labels"]
        return found if "ccsweep.io/kernel" in found else None

    found = release.wait_for("node probe labels", labels, timeout=90)
    assert found["ccsweep.io/kernel"] == label_value(Path("/proc/sys/kernel/osrelease").read_text().strip())
    assert {f"ccsweep.io/cc-{cc}" for cc in available} <= {k for k, v in found.items() if v == "true"}


def test_applied_sweep_succeeds_with_results_in_minio(release: Release):
    release.kubectl("apply", "-f", str(EXAMPLE))
    sweep = release.wait_for("Sweep quick-e2e Succeeded or Failed",
                             lambda: release.sweep_phase("quick-e2e", "Succeeded", "Failed", "Invalid"),
                             timeout=SWEEP_TIMEOUT_S)
    status = sweep["status"]
    assert status["phase"] == "Succeeded", json.dumps(status, indent=1)
    assert status["cells"] == {"total": 2, "cached": 0, "running": 0, "done": 2, "failed": 0}
    assert status["report"] == f"s3://{release.services.bucket}/{release.prefix}/sweeps/quick-e2e/report.html"
    assert status["startedAt"] <= status["finishedAt"]
    manifest = json.loads(release.services.s3_get(f"{release.prefix}/sweeps/quick-e2e/manifest.json"))
    keys = set(release.services.s3_keys(f"{release.prefix}/"))
    for cell in manifest["cells"]:
        assert f"{release.prefix}/cells/{cell['id']}/result.json" in keys, sorted(keys)
    assert f"{release.prefix}/sweeps/quick-e2e/report.html" in keys
    table = release.kubectl("get", "sweeps").splitlines()
    assert table[1].split()[:7] == ["quick-e2e", "Succeeded", "2", "0", "0", "2", "0"], table


def test_applying_again_runs_no_cell(release: Release):
    first = release.get("sweep", "quick-e2e")
    assert first and first["status"]["phase"] == "Succeeded", "needs test_applied_sweep_succeeds_with_results_in_minio"
    # The same object again: nothing changes, not even the generation.
    release.kubectl("apply", "-f", str(EXAMPLE))
    assert release.get("sweep", "quick-e2e")["metadata"]["generation"] == first["metadata"]["generation"]
    # A new Sweep object with the same spec: planned against the store, every cell is there.
    release.kubectl("delete", "sweep", "quick-e2e", "--wait=true", "--timeout=60s")
    release.wait_for("quick-e2e's Workflow deleted with it",
                     lambda: release.items("workflows", "ccsweep.io/owner=quick-e2e") == [], timeout=60)
    started = time.time()
    release.kubectl("apply", "-f", str(EXAMPLE))
    sweep = release.wait_for("cached Sweep Succeeded", lambda: release.sweep_phase("quick-e2e", "Succeeded"),
                             timeout=60)
    status = sweep["status"]
    assert status["cells"]["cached"] == 2 and status["cells"]["done"] == 0
    assert status.get("workflow") is None
    assert status["conditions"][-1]["reason"] == "AllCellsCached"
    assert release.items("workflows", "ccsweep.io/owner=quick-e2e") == []
    pods = release.items("pods", "ccsweep.io/sweep=quick-e2e")
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))
    assert not [p for p in pods if p["metadata"]["creationTimestamp"] >= since]


def test_deleting_a_running_sweep_removes_its_workflow_and_pods(release: Release):
    body = yaml.safe_load(EXAMPLE.read_text())
    body["metadata"]["name"] = "delete-me"
    body["spec"]["experiments"][0] |= {"cc": ["bbr"], "duration_s": 300}
    release.kubectl("apply", "-f", "-", input=json.dumps(body))

    def running_cell() -> list[dict]:
        return [p for p in release.items("pods", "ccsweep.io/sweep=delete-me") if p["status"].get("phase") == "Running"
                and p["metadata"]["labels"].get("app.kubernetes.io/component") == "cell"]

    release.wait_for("a running cell pod of delete-me", running_cell, timeout=240)
    workflow = release.get("sweep", "delete-me")["status"]["workflow"]
    release.kubectl("delete", "sweep", "delete-me", "--wait=true", "--timeout=60s")
    release.wait_for(f"Workflow {workflow} deleted", lambda: release.get("workflow", workflow) is None, timeout=60)
    release.wait_for("delete-me's pods deleted",
                     lambda: release.items("pods", f"workflows.argoproj.io/workflow={workflow}") == [], timeout=120)
