"""The packaged chart of `make release` installs on the test cluster, runs the released image, and
passes `helm test`.

As a user without a registry does with the release folder: `ctr images import` of the image's OCI
archive into the node's containerd, then `helm install` of the chart's .tgz, whose image is named
by the build's tag and pinned by the archive's manifest digest. The operator's pod must become
Ready running exactly that reference, so containerd resolved the digest the chart pins. The
release folder is built once by tests/releaselib.py (shared with tests/release). Laid over the
chart's values: the test cluster's (charts/ccsweep/ci/e2e-values.yaml, the imported image,
`registry: localhost`) and its MinIO's keys in a Secret the chart creates.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from releaselib import Release, build_release
from support.chartlib import helm
from support.clusterlib import REPO, NodeServices

if TYPE_CHECKING:  # the fixture's type; conftest is not imported at run time
    from conftest import TestCluster

NAMESPACE = "ccsweep-release"
RELEASE = "ccsweep-rel"


@pytest.fixture(scope="module")
def released() -> Release:
    return build_release()


def test_the_packaged_chart_installs_and_runs_the_archived_image(argo: TestCluster, node_services: NodeServices,
                                                                 released: Release, tmp_path: Path):
    cluster = argo
    sock = str(cluster.base / "containerd/containerd.sock")
    # --digests names the image by its manifest digest too: the chart pins TAG@DIGEST, and containerd
    # finds a digested reference only under such a name (without it, ErrImageNeverPull).
    imported = cluster.in_ns("ctr", "-a", sock, "-n", "k8s.io", "images", "import", "--digests",
                             "--base-name", "localhost/ccsweep/cell", str(released.image_archive), timeout=900)
    assert imported.returncode == 0, imported.stderr
    cluster.kubectl("create", "namespace", NAMESPACE)
    cluster.kubectl("label", "namespace", NAMESPACE, "pod-security.kubernetes.io/enforce=privileged")
    env = node_services.env

    def helm_run(*args: str, timeout: float = 600):
        return cluster.in_ns(str(helm()), f"--kubeconfig={cluster.base / 'admin.kubeconfig'}", *args,
                             timeout=timeout)

    try:
        # The store's keys in a values file (mode 600), never on a command line.
        values = tmp_path / "store-values.yaml"
        values.touch(mode=0o600)
        values.write_text(json.dumps({"store": {
            "url": f"s3://{node_services.bucket}/release-{uuid.uuid4().hex[:8]}",
            "s3": {"create": True, "endpoint": env["CCSWEEP_S3_ENDPOINT"], "accessKey": env["CCSWEEP_S3_ACCESS_KEY"],
                   "secretKey": env["CCSWEEP_S3_SECRET_KEY"]}}}))
        # One CRD per cluster: where another release (test_helm_operator's) installed it, this one
        # leaves it to that release, as docs/install.md says a second release must.
        crd_owned = cluster.kubectl("get", "crd", "sweeps.ccsweep.io", check=False).returncode == 0
        installed = helm_run("install", RELEASE, str(released.chart), "-n", NAMESPACE,
                             "-f", str(REPO / "charts/ccsweep/ci/e2e-values.yaml"), "-f", str(values),
                             *(["--set", "crds.install=false"] if crd_owned else []),
                             "--wait", "--timeout", "5m")
        assert installed.returncode == 0, installed.stderr + _not_ready(cluster)
        pinned = f"localhost/ccsweep/cell:{released.identity}@{released.image_digest()}"
        deployment = cluster.get_json("-n", NAMESPACE, "deployment", f"{RELEASE}-operator")
        assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == pinned
        assert deployment["status"].get("readyReplicas") == 1
        pods = cluster.get_json("-n", NAMESPACE, "pods", "-l", "app.kubernetes.io/component=operator")["items"]
        (status,) = [s for p in pods for s in p["status"]["containerStatuses"]]
        assert status["ready"] and status["imageID"].endswith(released.image_digest()), status
        version = cluster.kubectl("-n", NAMESPACE, "exec", f"deployment/{RELEASE}-operator", "--", "ccsweep",
                                  "--version").stdout
        assert version == f"ccsweep {released.identity}\n"
        # helm test: the chart's own checks (the CRD is served, the operator is ready, the store
        # takes a write, the controller refuses an inline Workflow), each a pod of the released image.
        tested = helm_run("test", RELEASE, "-n", NAMESPACE, "--logs", "--timeout", "5m")
        assert tested.returncode == 0, tested.stdout[-3000:] + tested.stderr[-3000:]
        for check in ("crd", "operator", "store", "strict"):
            assert f"ok {check}: " in tested.stdout, tested.stdout[-3000:]
    finally:
        helm_run("uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout=2m")
        cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)


def _not_ready(cluster: TestCluster) -> str:
    """What kept the release from being ready: its pods, their conditions and the namespace's events."""
    pods = cluster.kubectl("-n", NAMESPACE, "get", "pods", "-o", "wide", check=False).stdout
    described = cluster.kubectl("-n", NAMESPACE, "describe", "pods", check=False).stdout[-4000:]
    events = cluster.kubectl("-n", NAMESPACE, "get", "events", "--sort-by=.lastTimestamp", check=False).stdout[-3000:]
    return f"\n{pods}\n{described}\n{events}"
