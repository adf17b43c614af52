"""End-to-end tests against a real Kubernetes cluster of one node (test_nodes.py adds a second for
its module, and removes it).

The session fixture `cluster` builds (or reuses) the pinned tools, brings the cluster up in its
own network namespace with hack/cluster/up.sh, and ALWAYS tears it down with down.sh (which stops
every daemon and add-on by its recorded PID): as a fixture finalizer, at interpreter exit, and on
SIGTERM/SIGHUP, also after a failed bring-up. Further session fixtures add, once each:
`cell_image` (images/cell/Dockerfile built with buildah, imported), `argo` (CRDs + the real workflow-controller),
`node_services` (MinIO, Pushgateway, Prometheus on the node) and `sweep_namespace` (RBAC,
WorkflowTemplates and the S3 Secret in the test namespace). Needs root and Linux.
Environment knobs:
  CCSWEEP_CACHE          caches (default ~/.cache/ccsweep)
  CCSWEEP_E2E_BASE/NS    cluster folder and netns (default $CCSWEEP_CACHE/e2e-cluster, ccsweep-e2e)
  CCSWEEP_E2E_KEEP=1     leave the cluster running after the session (debugging)
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
import uuid
from pathlib import Path

import pytest

from support.bookkeeping import BOOKKEEPING_THRESHOLD_US
from support.clusterlib import CACHE, CELL_IMAGE, Cluster, NodeServices, RssSampler

BASE = Path(os.environ.get("CCSWEEP_E2E_BASE", CACHE / "e2e-cluster"))
NS = os.environ.get("CCSWEEP_E2E_NS", "ccsweep-e2e")
TEST_NAMESPACE = "ccsweep-e2e"
#: The controller's requeue time for the tests (hack/cluster/argo.sh, CCSWEEP_ARGO_REQUEUE_S).
ARGO_REQUEUE_S = 1


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: a real Kubernetes cluster (root; builds pinned tools on first use)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests here e2e, and run them last: the cluster they share stays up until the end of
    the session, and the emulator's and cells' timing tests must not share 2 cores with it."""
    here = Path(__file__).parent
    ours = [item for item in items if here in Path(str(item.fspath)).parents]
    for item in ours:
        item.add_marker(pytest.mark.e2e)
    items[:] = [item for item in items if item not in ours] + ours


class TestCluster(Cluster):
    """The cluster plus pod helpers for tests in TEST_NAMESPACE."""

    __test__ = False  # not a test class

    def run_pod(self, name: str, *, container_extra: dict | None = None, pod_extra: dict | None = None,
                image: str = CELL_IMAGE, timeout: int = 120) -> str:
        """Start a pod that sleeps, wait until it is Ready, return its name."""
        container = {"name": "main", "image": image, "imagePullPolicy": "Never",
                     "command": ["sleep", "infinity"], **(container_extra or {})}
        spec = {"containers": [container], "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 0, **(pod_extra or {})}
        self.apply({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": TEST_NAMESPACE}, "spec": spec})
        wait = self.kubectl("wait", "-n", TEST_NAMESPACE, "--for=condition=Ready", f"pod/{name}",
                            f"--timeout={timeout}s", check=False, timeout=timeout + 30)
        if wait.returncode != 0:
            described = self.kubectl("describe", "pod", "-n", TEST_NAMESPACE, name, check=False).stdout
            raise AssertionError(f"pod {name} not Ready: {wait.stderr}\n{described[-3000:]}")
        return name

    def exec(self, pod: str, script: str, timeout: float = 60):
        return self.kubectl("exec", "-n", TEST_NAMESPACE, pod, "--", "sh", "-c", script, check=False, timeout=timeout)

    def delete_pod(self, name: str) -> None:
        self.kubectl("delete", "pod", "-n", TEST_NAMESPACE, name, "--grace-period=0", "--force",
                     "--wait=true", "--timeout=60s", check=False)


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest):
    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("e2e tests need Linux and root (network namespaces, containerd, kubelet)")
    c = TestCluster(BASE, NS)
    # Teardown is registered BEFORE bring-up, so a half-started cluster is stopped too.
    request.addfinalizer(c.down)
    atexit.register(c.down)
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}

    def on_signal(signum, frame):  # turn SIGTERM/SIGHUP into an orderly pytest shutdown
        c.down()
        raise KeyboardInterrupt(f"signal {signum}")

    for s in previous:
        signal.signal(s, on_signal)
    sampler: RssSampler | None = None
    try:
        c.build_tools("apt", "kubernetes", "argo", "minio")
        c.up()
        sampler = RssSampler(BASE)
        yield c
    finally:
        if sampler is not None:
            sampler.stop()
            sampler.sample()
            c.down()  # now, so its time is in the report (the finalizer then does nothing)
            sys.stderr.write(f"\n[e2e] timings {json.dumps({k: round(v) for k, v in c.timings.items()})}; "
                             f"peak cluster RSS {sampler.peak_mb} MB\n")
            (BASE / "state").mkdir(parents=True, exist_ok=True)
            (BASE / "state" / "e2e-peak-rss-mb").write_text(f"{sampler.peak_mb}\n")
        for s, handler in previous.items():
            signal.signal(s, handler)


@pytest.fixture(scope="session")
def cell_image(cluster: TestCluster) -> str:
    """The cell image built from images/cell/Dockerfile with buildah (images/build.sh, as users build
    it) and imported into the node's containerd."""
    cluster.import_image("cell")
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TEST_NAMESPACE}})
    cluster.kubectl("wait", "-n", TEST_NAMESPACE, "--for=create", "serviceaccount/default", "--timeout=60s")
    return CELL_IMAGE


@pytest.fixture(scope="session")
def argo(cluster: TestCluster) -> TestCluster:
    """Argo's CRDs and the real workflow-controller (on the node), with the executor image imported.
    It looks at a running Workflow again every ARGO_REQUEUE_S, not upstream's 10 s: a sweep's steps
    (plan, cells, figures, verdict) each waited for that tick, and the tests run many short sweeps."""
    cluster.start_argo(requeue_s=ARGO_REQUEUE_S)
    return cluster


@pytest.fixture(scope="session")
def node_services(cluster: TestCluster) -> NodeServices:
    """MinIO, Pushgateway and Prometheus on the node, reachable from pods at the node's address."""
    return cluster.start_services()


@pytest.fixture(scope="session")
def sweep_namespace(argo: TestCluster, cell_image: str, node_services: NodeServices) -> str:
    """TEST_NAMESPACE ready for sweeps: RBAC, the WorkflowTemplates, the S3 Secret, labelled node."""
    # The tests are about the cluster path, not timing: the bookkeeping tests' lateness threshold.
    argo.prepare_sweep_namespace(TEST_NAMESPACE, node_services, BOOKKEEPING_THRESHOLD_US)
    return TEST_NAMESPACE


@pytest.fixture
def pod_name(request: pytest.FixtureRequest, cluster: TestCluster):
    """A unique pod name for this test; the pod is deleted afterwards."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    yield name
    cluster.delete_pod(name)
