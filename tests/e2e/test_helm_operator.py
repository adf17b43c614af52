"""docs/install.md's commands, from a fresh `git clone` to a finished sweep and its report in MinIO.

The `release` fixture clones this repository into an empty folder (nothing beside it), then
runs the page's commands in order, read from the page: `make image ARCHIVE=...` builds the cell
image from images/cell/Dockerfile with buildah and `ctr images import` puts it into the node's
containerd; the namespace, its Pod Security label, the S3 Secret from an env file, `helm install`
of the clone's chart with the page's values. A command the page gains that this file does not know
fails the test, so the page and the test cannot drift. Not run, as the issue allows: pushing to a
registry (there is none; the page's archive path instead) and installing Argo (the session runs
Argo's controller itself); nor MinIO's chart (MinIO runs on the node and the chart is on the
network) or the optional node setup (a privileged DaemonSet changing the host's kernel). Laid over
the page's values: ci/e2e-values.yaml (the image's `registry: localhost`, the node's Pushgateway)
and a store prefix of this session's own. Then the page's step 6 (test_the_documented_sweep_...),
and the operator as the chart deploys it: a Sweep no node can run fails within 60 s in one line;
applying again runs no cell; deleting a running Sweep removes its Workflow and pods.
"""

from __future__ import annotations

import calendar
import json
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml

from ccsweep import __version__
from ccsweep.crd import store_name
from ccsweep.spec import KNOWN_CONGESTION_CONTROLS
from ccsweep.storeurls import namespace_store
from ccsweep_operator.nodeprobe import label_value
from support.chartlib import IMAGE_TAG_COMMAND, helm, install_doc
from support.clusterlib import CELL_IMAGE, REPO, NodeServices

if TYPE_CHECKING:  # the fixture's type; conftest is not imported at run time
    from conftest import TestCluster

pytestmark = pytest.mark.e2e

NAMESPACE = "ccsweep"  # the page's
RELEASE = "ccsweep"
EXAMPLE = "operator/examples/quick/sweep.yaml"  # in the clone
NODE = "ccsweep-node"
SWEEP_TIMEOUT_S = 600
#: The issue's bound: a Sweep no node can run ends within this many seconds of its creation.
FAIL_FAST_S = 60
#: docs/install.md's steps the test runs: the fixture the first three, the sweep test the last.
RUN_SECTIONS = ("1. The clone and the image", "4. The namespace and the S3 Secret", "5. The chart",
                "6. A sweep and its report")
#: docs/install.md's steps the test does not run, and why.
ASIDE_SECTIONS = {
    "From a release folder instead of a clone": "tests/e2e/test_release_chart.py installs the release's chart and "
                                                "image archive; no registry here for its push",
    "2. Argo Workflows": "the session runs Argo's controller itself (hack/cluster/argo.sh)",
    "3. The S3 store": "MinIO runs on the node (hack/cluster/services.sh); its chart is on the network",
}
ASIDE_COMMANDS = {
    ("make", "image", "REGISTRY=registry.example.org"): "no registry here: the page's archive path instead",
    ("helm", "upgrade"): "the optional node setup: a privileged DaemonSet changing the host's kernel",
    ("helm", "repo"): "the chart repositories are out of reach of the test machine",
    ("helm", "install", "kube-prometheus-stack"): "its chart repository is out of reach; the node runs Prometheus",
    ("helm", "install", "prometheus-pushgateway"): "its chart repository is out of reach; the node runs one",
}


class DocRunner:
    """Runs docs/install.md's command lines as a user types them, on the session's cluster: kubectl,
    argo and helm with its kubeconfig inside its network namespace, ctr at its containerd."""

    def __init__(self, cluster: TestCluster, workdir: Path, overlays: list[str]) -> None:
        self.cluster, self.cwd, self.overlays = cluster, workdir, overlays
        self.clone: Path | None = None

    def aside(self, argv: list[str]) -> str | None:
        return next((why for start, why in ASIDE_COMMANDS.items() if tuple(argv[:len(start)]) == start), None)

    def run(self, argv: list[str], timeout: float = 900) -> str:
        """One command line; its standard output. Fails the test with its output when it fails."""
        cmd = self.translate(argv)
        if cmd is None:
            return ""
        started = time.monotonic()
        done = subprocess.run(cmd, cwd=self.cwd, capture_output=True, text=True, timeout=timeout)
        sys.stderr.write(f"[install.md] {' '.join(argv)[:100]}: exit {done.returncode} in "
                         f"{time.monotonic() - started:.0f}s\n")
        assert done.returncode == 0, f"{' '.join(argv)}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
        return done.stdout

    def translate(self, argv: list[str]) -> list[str] | None:
        base = self.cluster.base
        match argv:
            case ["git", "clone", url]:
                self.clone = self.cwd / url.rstrip("/").rsplit("/", 1)[-1]
                return ["git", "clone", "-q", "--no-hardlinks", str(REPO), str(self.clone)]
            case ["cd", folder]:
                self.cwd = self.cwd / folder
                return None
            case ["make", "image", *_]:
                # No registry here, Docker Hub's base images neither (made from a local root file
                # system); Mahimahi's pinned source is the clone's third_party/mahimahi/.
                return ["make", *argv[1:], "LOCAL_BASE=1"]
            case ["ctr", *rest]:
                return ["ctr", "-a", str(base / "containerd/containerd.sock"), *rest]
            case ["kubectl", *rest]:
                return [str(base / "kubectl"), *rest]
            case ["argo", *rest]:
                # The shell's $(cat FILE), as the page writes a spec file's content into a parameter.
                rest = [re.sub(r"\$\(cat (\S+)\)", lambda m: (self.cwd / m[1]).read_text(), a) for a in rest]
                return [str(base / "argo"), *rest]
            case ["helm", "install", *rest]:
                # The shell's $(make -s image-tag): the clone's build identity, its image's tag.
                tag = subprocess.run(["make", "-s", "image-tag"], cwd=self.cwd, capture_output=True, text=True,
                                     check=True, timeout=60).stdout.strip()
                rest = [a.replace(IMAGE_TAG_COMMAND, tag) for a in rest]
                return ["nsenter", f"--net=/run/netns/{self.cluster.ns}", str(helm()),
                        f"--kubeconfig={base / 'admin.kubeconfig'}", "install", *rest, *self.overlays]
        raise AssertionError(f"docs/install.md has a command this test does not run: {argv}; "
                             "run it in DocRunner.translate, or say in ASIDE_COMMANDS why not")

    def section(self, title: str) -> None:
        """Every command of one of the page's steps, in order."""
        for argv in install_doc().sections[title]:
            why = self.aside(argv)
            if why:
                sys.stderr.write(f"[install.md] not run: {' '.join(argv)}: {why}\n")
            else:
                self.run(argv)


class Release:
    """The installed chart and how to look at what it runs."""

    def __init__(self, cluster: TestCluster, services: NodeServices, prefix: str, doc: DocRunner) -> None:
        self.cluster, self.services, self.prefix, self.doc = cluster, services, prefix, doc

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

    def wait_for(self, what: str, probe: Callable[[], object], timeout: float = 120, every: float = 2) -> object:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = probe()
            if value:
                return value
            time.sleep(every)
        logs = self.cluster.kubectl("-n", NAMESPACE, "logs", f"deployment/{RELEASE}-operator", "--tail=40",
                                    check=False).stdout
        raise AssertionError(f"{what}: not reached in {timeout:.0f}s\noperator log tail:\n{logs}")

    def sweep_phase(self, name: str, *phases: str) -> dict | None:
        sweep = self.get("sweep", name)
        return sweep if sweep and (sweep.get("status") or {}).get("phase") in phases else None

    def node_labels(self) -> dict | None:
        """The node's labels once the node probe has put its own there."""
        found = self.cluster.get_json("node", NODE)["metadata"]["labels"]
        return found if "ccsweep.io/kernel" in found else None


@pytest.fixture(scope="module")
def release(argo: TestCluster, node_services: NodeServices, tmp_path_factory) -> Release:
    cluster = argo
    workdir = tmp_path_factory.mktemp("install")
    assert not (workdir.parent / "shared").exists()  # a clone as a new user has it
    # The probe must put its labels back: the kernel's and the algorithms' (which the sweep
    # fixtures set by hand, as the probe would).
    available = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    cluster.kubectl("label", "node", NODE, "ccsweep.io/kernel-", *[f"ccsweep.io/cc-{cc}-" for cc in available])
    prefix = f"helm-e2e-{uuid.uuid4().hex[:8]}"
    env = node_services.env
    with_commands = {title for title, commands in install_doc().sections.items() if commands}
    assert with_commands == {*RUN_SECTIONS, *ASIDE_SECTIONS}, "a step of the page this test neither runs nor sets aside"
    doc = DocRunner(cluster, workdir, [])
    doc.section("1. The clone and the image")
    assert doc.clone is not None and doc.cwd == doc.clone, "the page clones, then works in the clone"
    for title, why in ASIDE_SECTIONS.items():
        sys.stderr.write(f"[install.md] not run: {title}: {why}\n")
    # The page's s3.env (mode 600, keys never on a command line), for this cluster's MinIO.
    s3_env = doc.cwd / "s3.env"
    s3_env.touch(mode=0o600)
    s3_env.write_text(f"endpoint={env['CCSWEEP_S3_ENDPOINT']}\naccessKey={env['CCSWEEP_S3_ACCESS_KEY']}\n"
                      f"secretKey={env['CCSWEEP_S3_SECRET_KEY']}\n")
    doc.section("4. The namespace and the S3 Secret")
    (doc.cwd / "ccsweep-values.yaml").write_text(install_doc().values)
    doc.overlays = ["-f", str(doc.cwd / "charts/ccsweep/ci/e2e-values.yaml"),
                    "--set", f"store.url=s3://{node_services.bucket}/{prefix}"]
    doc.section("5. The chart")
    rel = Release(cluster, node_services, prefix, doc)
    yield rel
    rel.helm("uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout=2m")
    cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)


def test_the_chart_runs_the_image_the_clone_built(release: Release):
    """`make image` built images/cell/Dockerfile (Mahimahi's setuid shells are in no other image) and
    the chart's pods run it from the node's containerd."""
    sock = str(release.cluster.base / "containerd/containerd.sock")
    images = release.cluster.in_ns("ctr", "-a", sock, "-n", "k8s.io", "images", "ls", "-q").stdout.split()
    assert release.doc.clone is not None
    # The clone's HEAD, clean: its build identity, whatever this work tree holds beside HEAD.
    commit = subprocess.run(["git", "-C", str(release.doc.clone), "rev-parse", "--short=12", "HEAD"],
                            capture_output=True, text=True, check=True).stdout.strip()
    built = CELL_IMAGE.split(":")[0] + f":{__version__}-g{commit}"
    assert built in images, images
    operator = release.get("deployment", f"{RELEASE}-operator")["spec"]["template"]["spec"]["containers"][0]
    assert operator["image"] == built
    shell = release.cluster.kubectl("-n", NAMESPACE, "exec", f"deployment/{RELEASE}-operator", "--", "stat", "-c",
                                    "%U %A", "/opt/ccsweep/mahimahi/bin/mm-link", check=False)
    assert shell.returncode == 0 and shell.stdout.split()[0] == "root" and shell.stdout.split()[1][3] == "s", shell


def test_chart_components_run(release: Release):
    crd = release.cluster.get_json("crd", "sweeps.ccsweep.io")
    assert {c["type"]: c["status"] for c in crd["status"]["conditions"]}["Established"] == "True"
    templates = json.loads(release.kubectl("get", "workflowtemplates", "-o", "json"))["items"]
    names = {w["metadata"]["name"] for w in templates}
    assert names == {"ccsweep-cell", "ccsweep-figures", "ccsweep-sweep"}
    deployment = release.get("deployment", f"{RELEASE}-operator")
    assert deployment["status"].get("availableReplicas") == 1
    # `helm install --wait` does not wait for this one: helm counts a DaemonSet ready when its ready
    # pods reach desired less maxUnavailable, 1 - 1 = 0 on a one-node cluster. So the test waits.
    release.wait_for("the node probe's pod ready", lambda: _ready_daemonset(release, f"{RELEASE}-node-probe"),
                     timeout=120)


def _ready_daemonset(release: Release, name: str) -> bool:
    status = (release.get("daemonset", name) or {}).get("status", {})
    return status.get("numberReady") == status.get("desiredNumberScheduled") == 1


def test_node_probe_labels_the_node(release: Release):
    available = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()

    found = release.wait_for("node probe labels", release.node_labels, timeout=90)
    assert found["ccsweep.io/kernel"] == label_value(Path("/proc/sys/kernel/osrelease").read_text().strip())
    assert {f"ccsweep.io/cc-{cc}" for cc in available} <= {k for k, v in found.items() if v == "true"}


def test_a_sweep_no_node_can_run_fails_within_60_s_in_one_line(release: Release):
    """The issue's bound, on the real cluster with the operator the chart deploys: a Sweep asking for an
    algorithm no labelled node offers is Failed within 60 s of its creation, in one line naming the
    algorithm and the node's kernel, and no Workflow or cell pod is ever made for it.

    Without the check its cell pods would sit Pending until their deadline (minutes). 60 s is the
    requirement, not what the check costs: the operator decides on the Sweep's create event from
    the node labels it lists, after one plan against the store, so a few seconds here. Measured
    from before `kubectl apply` (so it includes the creation) to the first poll (every 0.5 s) that
    sees the phase, and also on the server's clock (creation to the condition's transition)."""
    labels = release.wait_for("node probe labels", release.node_labels, timeout=90)  # before the clock starts
    offered = {k.removeprefix("ccsweep.io/cc-") for k, v in labels.items() if k.startswith("ccsweep.io/cc-")
               and v == "true"}
    missing = next(cc for cc in ("vegas", "westwood", "bic", "htcp", "illinois") if cc not in offered)
    assert missing in KNOWN_CONGESTION_CONTROLS
    body = yaml.safe_load((release.doc.cwd / EXAMPLE).read_text())
    name = body["metadata"]["name"] = "no-node-offers"
    body["spec"]["experiments"][0]["cc"] = [missing]
    started = time.monotonic()
    release.kubectl("apply", "-f", "-", input=json.dumps(body))
    sweep = release.wait_for(f"Sweep {name} finished", lambda: release.sweep_phase(name, "Failed", "Succeeded",
                                                                                  "Invalid"),
                             timeout=FAIL_FAST_S + 30, every=0.5)
    elapsed = time.monotonic() - started
    sys.stderr.write(f"\n[fail-fast] {name} ({missing}) Failed {elapsed:.1f}s after kubectl apply\n")
    status = sweep["status"]
    assert status["phase"] == "Failed", json.dumps(status, indent=1)
    assert elapsed <= FAIL_FAST_S, f"{elapsed:.1f}s"
    message = status["message"]
    assert "\n" not in message and message.startswith(
        f"no node offers congestion control {missing}; nodes: {NODE} {labels['ccsweep.io/kernel']}"), message
    (planned,) = [c for c in status["conditions"] if c["type"] == "Planned"]
    assert (planned["status"], planned["reason"], planned["message"]) == ("False", "NoNodeOffers", message)
    created = calendar.timegm(time.strptime(sweep["metadata"]["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ"))
    decided = calendar.timegm(time.strptime(planned["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ"))
    assert 0 <= decided - created <= FAIL_FAST_S, (sweep["metadata"]["creationTimestamp"], planned)
    assert status.get("workflow") is None
    assert release.items("workflows", f"ccsweep.io/owner={name}") == []
    assert release.items("pods", f"ccsweep.io/sweep={store_name(NAMESPACE, name)}") == []
    pods = json.loads(release.kubectl("get", "pods", "-o", "json"))["items"]
    since = sweep["metadata"]["creationTimestamp"]
    assert [p["metadata"]["name"] for p in pods if p["metadata"]["creationTimestamp"] >= since] == []
    row = [line.split() for line in release.kubectl("get", "sweeps").splitlines() if line.startswith(name)]
    assert row and row[0][1] == "Failed", row
    release.kubectl("delete", "sweep", name, "--wait=true", "--timeout=60s")


def test_the_documented_sweep_finishes_with_results_and_report_in_minio(release: Release):
    """The page's step 6 as written: apply the quick example, wait for Succeeded, read the report's
    place; then the same spec as an Argo workflow from a spec file of one's own."""
    doc = release.doc
    commands = install_doc().sections[RUN_SECTIONS[-1]]
    apply, wait, report, submit = commands
    assert apply[-1] == EXAMPLE and wait[3:5] == ["wait", "sweep/quick-e2e"] and submit[:2] == ["argo", "submit"]
    doc.run(apply)
    doc.run(wait, timeout=15 * 60 + 60)  # the page's --timeout=15m, and kubectl's own exit
    location = doc.run(report).strip()
    sweep = release.get("sweep", "quick-e2e")
    status = sweep["status"]
    assert status["phase"] == "Succeeded", json.dumps(status, indent=1)
    assert status["cells"] == {"total": 2, "cached": 0, "running": 0, "done": 2, "failed": 0}
    stored = store_name(NAMESPACE, "quick-e2e")  # the page's report path names it
    assert status["sweep"] == stored
    # The namespace's folder of the chart's store: the operator plans there, and the Workflow's pods,
    # given the chart's store.url, derive the same from their own namespace.
    folder = namespace_store(release.prefix, NAMESPACE)
    assert status["store"] == f"s3://{release.services.bucket}/{folder}"
    assert location == status["report"] == f"s3://{release.services.bucket}/{folder}/sweeps/{stored}/report.html"
    assert status["startedAt"] <= status["finishedAt"]
    manifest = json.loads(release.services.s3_get(f"{folder}/sweeps/{stored}/manifest.json"))
    keys = set(release.services.s3_keys(f"{release.prefix}/"))
    for cell in manifest["cells"]:
        assert f"{folder}/cells/{cell['id']}/result.json" in keys, sorted(keys)
    assert f"{folder}/sweeps/{stored}/report.html" in keys
    assert not [k for k in keys if not k.startswith(f"{folder}/")], sorted(keys)
    table = release.kubectl("get", "sweeps").splitlines()
    assert table[1].split()[:7] == ["quick-e2e", "Succeeded", "2", "0", "0", "2", "0"], table
    # The page's `my-sweep.yaml`: the quick example's spec as a spec file (a name, no `run`).
    example = yaml.safe_load((doc.cwd / EXAMPLE).read_text())["spec"]
    spec = {"name": "my-sweep", **{k: v for k, v in example.items() if k != "run"}}
    (doc.cwd / "my-sweep.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    doc.run(submit, timeout=SWEEP_TIMEOUT_S)
    keys = set(release.services.s3_keys(f"{release.prefix}/"))
    assert f"{folder}/sweeps/my-sweep/report.html" in keys, sorted(keys)
    mine = json.loads(release.services.s3_get(f"{folder}/sweeps/my-sweep/manifest.json"))
    assert {c["id"] for c in mine["cells"]} == {c["id"] for c in manifest["cells"]}  # the same cells, stored once
    for cell in mine["cells"]:
        assert f"{folder}/cells/{cell['id']}/result.json" in keys


def test_applying_again_runs_no_cell(release: Release):
    first = release.get("sweep", "quick-e2e")
    assert first and first["status"]["phase"] == "Succeeded", "needs test_the_documented_sweep_finishes_..."
    # The same object again: nothing changes, not even the generation.
    release.kubectl("apply", "-f", str(release.doc.cwd / EXAMPLE))
    assert release.get("sweep", "quick-e2e")["metadata"]["generation"] == first["metadata"]["generation"]
    # A new Sweep object with the same spec: planned against the store, every cell is there.
    release.kubectl("delete", "sweep", "quick-e2e", "--wait=true", "--timeout=60s")
    release.wait_for("quick-e2e's Workflow deleted with it",
                     lambda: release.items("workflows", "ccsweep.io/owner=quick-e2e") == [], timeout=60)
    started = time.time()
    release.kubectl("apply", "-f", str(release.doc.cwd / EXAMPLE))
    sweep = release.wait_for("cached Sweep Succeeded", lambda: release.sweep_phase("quick-e2e", "Succeeded"),
                             timeout=60)
    status = sweep["status"]
    assert status["cells"]["cached"] == 2 and status["cells"]["done"] == 0
    assert status.get("workflow") is None
    assert status["conditions"][-1]["reason"] == "AllCellsCached"
    assert release.items("workflows", "ccsweep.io/owner=quick-e2e") == []
    pods = release.items("pods", f"ccsweep.io/sweep={store_name(NAMESPACE, 'quick-e2e')}")
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))
    assert not [p for p in pods if p["metadata"]["creationTimestamp"] >= since]


def test_deleting_a_running_sweep_removes_its_workflow_and_pods(release: Release):
    body = yaml.safe_load((release.doc.cwd / EXAMPLE).read_text())
    body["metadata"]["name"] = "delete-me"
    body["spec"]["experiments"][0] |= {"cc": ["bbr"], "duration_s": 300}
    release.kubectl("apply", "-f", "-", input=json.dumps(body))

    def running_cell() -> list[dict]:
        # Pods carry the sweep's name in the store, derived from the Sweep's namespace and name.
        return [p for p in release.items("pods", f"ccsweep.io/sweep={store_name(NAMESPACE, 'delete-me')}")
                if p["status"].get("phase") == "Running"
                and p["metadata"]["labels"].get("app.kubernetes.io/component") == "cell"]

    release.wait_for("a running cell pod of delete-me", running_cell, timeout=240)
    workflow = release.get("sweep", "delete-me")["status"]["workflow"]
    release.kubectl("delete", "sweep", "delete-me", "--wait=true", "--timeout=60s")
    release.wait_for(f"Workflow {workflow} deleted", lambda: release.get("workflow", workflow) is None, timeout=60)
    release.wait_for("delete-me's pods deleted",
                     lambda: release.items("pods", f"workflows.argoproj.io/workflow={workflow}") == [], timeout=120)


#: What the chart's pod policy says for each refusal below (templates/workflows/admission-policy.yaml).
POLICY_DENIED = "denied request"


def test_the_pod_policy_refuses_what_the_chart_did_not_define(release: Release):
    """The release's ValidatingAdmissionPolicy on the real API server, beneath the pods' own checks:
    a bare privileged Pod of the chart's own image is refused, and the `cell` template named
    directly with 60 cores or a tebibyte gets no pod at all (the controller's create is denied, the
    node ends in Error with the policy's line). The chart's own cell pods pass: every sweep above."""
    defaults = {p["name"]: p.get("value", "") for p in
                release.get("workflowtemplate", "ccsweep-sweep")["spec"]["arguments"]["parameters"]}
    bare = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare-privileged"},
            "spec": {"containers": [{"name": "main", "image": defaults["image"], "imagePullPolicy": "Never",
                                     "command": ["sleep", "60"], "securityContext": {"privileged": True}}]}}
    done = release.cluster.kubectl("-n", NAMESPACE, "create", "-f", "-", input=json.dumps(bare), check=False)
    assert done.returncode != 0 and POLICY_DENIED in done.stderr, done.stderr
    assert "must run `ccsweep cell`" in done.stderr, done.stderr  # the chart's own image, another command

    base = {"sweep": "policy-e2e", "id": "0123456789abcdef", "experiment": "e", "store": defaults["store"],
            "image": defaults["image"], "image-pull-policy": "Never", "pushgateway": "",
            "node-selector": "{}", "cpu": "500m", "retry-cpu": "1", "lateness-threshold-us": ""}
    # Out of bounds: the install's node pool is empty (ci/e2e-values.yaml), so a node selector off it
    # is tests/operator/test_pod_admission.py's, where the pool is set.
    cases = {"sixty-cores": ({"cpu": "60", "retry-cpu": "60"}, "must request 100m to 16 CPUs"),
             "a-tebibyte": ({"memory": "1Ti", "retry-memory": "1Ti"}, "must request 100m to 16 CPUs")}
    started = {}
    for case, (values, _) in cases.items():
        parameters = [{"name": k, "value": v} for k, v in {**base, **values}.items()]
        workflow = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
                    "metadata": {"generateName": f"policy-{case}-", "namespace": NAMESPACE},
                    "spec": {"workflowTemplateRef": {"name": "ccsweep-cell"}, "entrypoint": "cell",
                             "arguments": {"parameters": parameters}}}
        started[case] = release.kubectl("create", "-o", "name", "-f", "-", input=json.dumps(workflow)).strip()
    for case, (_, message) in cases.items():
        name = started[case].split("/")[-1]
        release.cluster.argo("wait", "-n", NAMESPACE, name, timeout=180, check=False)
        ended = release.get("workflow", name)
        assert ended["status"]["phase"] in ("Failed", "Error"), ended["status"]
        messages = [n.get("message", "") for n in ended["status"].get("nodes", {}).values() if n["type"] == "Pod"]
        assert messages and all(POLICY_DENIED in m and message in m for m in messages), messages
        assert release.items("pods", f"workflows.argoproj.io/workflow={name}") == []
