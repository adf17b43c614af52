"""End-to-end tests against a real single-node Kubernetes cluster.

The session fixture `cluster` builds (or reuses) the pinned tools, brings the cluster up in its
own network namespace with hack/cluster/up.sh, and ALWAYS tears it down with down.sh: as a
fixture finalizer, at interpreter exit, and on SIGTERM/SIGHUP, also after a failed bring-up.
Needs root and Linux. Environment knobs:
  CCSWEEP_CACHE          caches (default ~/.cache/ccsweep)
  CCSWEEP_E2E_BASE/NS    cluster folder and netns (default $CCSWEEP_CACHE/e2e-cluster, ccsweep-e2e)
  CCSWEEP_E2E_KEEP=1     leave the cluster running after the session (debugging)
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("CCSWEEP_CACHE", Path.home() / ".cache" / "ccsweep"))
BASE = Path(os.environ.get("CCSWEEP_E2E_BASE", CACHE / "e2e-cluster"))
NS = os.environ.get("CCSWEEP_E2E_NS", "ccsweep-e2e")
TEST_NAMESPACE = "ccsweep-e2e"
CELL_IMAGE = "localhost/ccsweep/cell:local"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: a real Kubernetes cluster (root; builds pinned tools on first use)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


def _run(cmd: list[str], *, timeout: float, label: str) -> subprocess.CompletedProcess:
    """Run a setup step, streaming its output into the pytest log; fail with its tail."""
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    took = time.monotonic() - start
    sys.stderr.write(f"\n[e2e] {label}: exit {proc.returncode} in {took:.0f}s\n")
    if proc.returncode != 0:
        raise RuntimeError(f"{label} failed (exit {proc.returncode}):\n{proc.stdout[-4000:]}")
    return proc


class RssSampler(threading.Thread):
    """Samples the summed RSS of the cluster's daemons and shims every 2 s; keeps the peak."""

    def __init__(self, base: Path) -> None:
        super().__init__(daemon=True)
        self.base, self.peak_mb, self._stop = base, 0, threading.Event()

    def _pids(self) -> list[str]:
        pids = [p.read_text().strip() for p in (self.base / "pids").glob("*.pid")]
        sock = str(self.base / "containerd" / "containerd.sock")
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    if sock.encode() in (d / "cmdline").read_bytes() and b"shim" in (d / "cmdline").read_bytes():
                        pids.append(d.name)
                except OSError:
                    pass
        return pids

    def sample(self) -> int:
        total = 0
        for pid in self._pids():
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            except OSError:
                pass
        self.peak_mb = max(self.peak_mb, total // 1024)
        return total // 1024

    def run(self) -> None:
        while not self._stop.wait(2):
            self.sample()

    def stop(self) -> None:
        self._stop.set()


@dataclass
class Cluster:
    base: Path
    ns: str
    timings: dict[str, float] = field(default_factory=dict)
    _down: bool = False

    # -- lifecycle -------------------------------------------------------------------------
    def up(self) -> None:
        for tool in ("apt", "kubernetes", "argo"):
            start = time.monotonic()
            _run([str(REPO / "hack/tools" / f"{tool}.sh")], timeout=1800, label=f"hack/tools/{tool}.sh")
            self.timings[f"tools/{tool}"] = time.monotonic() - start
        start = time.monotonic()
        _run([str(REPO / "hack/cluster/up.sh"), str(self.base), self.ns], timeout=600, label="hack/cluster/up.sh")
        self.timings["up"] = time.monotonic() - start

    def down(self) -> None:
        if self._down:
            return
        self._down = True
        if os.environ.get("CCSWEEP_E2E_KEEP") == "1":
            sys.stderr.write(f"\n[e2e] CCSWEEP_E2E_KEEP=1: cluster left running; stop it with hack/cluster/down.sh {self.base} {self.ns}\n")
            return
        start = time.monotonic()
        proc = subprocess.run([str(REPO / "hack/cluster/down.sh"), str(self.base), self.ns],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
        self.timings["down"] = time.monotonic() - start
        sys.stderr.write(f"\n[e2e] down.sh exit {proc.returncode} in {self.timings['down']:.0f}s\n{proc.stdout[-2000:]}")

    # -- helpers for tests ----------------------------------------------------------------
    def kubectl(self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        proc = subprocess.run([str(self.base / "kubectl"), *args], input=input, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc

    def get_json(self, *args: str) -> dict:
        return json.loads(self.kubectl("get", "-o", "json", *args).stdout)

    def apply(self, manifest: dict) -> None:
        self.kubectl("apply", "-f", "-", input=json.dumps(manifest))

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

    def exec(self, pod: str, script: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return self.kubectl("exec", "-n", TEST_NAMESPACE, pod, "--", "sh", "-c", script, check=False, timeout=timeout)

    def delete_pod(self, name: str) -> None:
        self.kubectl("delete", "pod", "-n", TEST_NAMESPACE, name, "--grace-period=0", "--force",
                     "--wait=true", "--timeout=60s", check=False)


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest):
    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("e2e tests need Linux and root (network namespaces, containerd, kubelet)")
    c = Cluster(BASE, NS)
    # Teardown is registered BEFORE bring-up, so a half-started cluster is stopped too.
    request.addfinalizer(c.down)
    atexit.register(c.down)
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}

    def on_signal(signum, frame):  # turn SIGTERM/SIGHUP into an orderly pytest shutdown
        c.down()
        raise KeyboardInterrupt(f"signal {signum}")

    for s in previous:
        signal.signal(s, on_signal)
    sampler = RssSampler(BASE)
    try:
        c.up()
        sampler.start()
        yield c
    finally:
        sampler.stop()
        if sampler.is_alive():
            sampler.sample()
            sys.stderr.write(f"\n[e2e] timings {json.dumps({k: round(v) for k, v in c.timings.items()})}; "
                             f"peak cluster RSS {sampler.peak_mb} MB\n")
            (BASE / "state").mkdir(parents=True, exist_ok=True)
            (BASE / "state" / "e2e-peak-rss-mb").write_text(f"{sampler.peak_mb}\n")
        for s, handler in previous.items():
            signal.signal(s, handler)


@pytest.fixture(scope="session")
def cell_image(cluster: Cluster) -> str:
    """The cell image built with images/build-local.sh and imported into the cluster."""
    _run([str(REPO / "images/build-local.sh"), "--import", str(cluster.base / "containerd/containerd.sock"), "cell"],
         timeout=1200, label="images/build-local.sh cell")
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TEST_NAMESPACE}})
    cluster.kubectl("wait", "-n", TEST_NAMESPACE, "--for=create", "serviceaccount/default", "--timeout=60s")
    return CELL_IMAGE


@pytest.fixture
def pod_name(request: pytest.FixtureRequest, cluster: Cluster):
    """A unique pod name for this test; the pod is deleted afterwards."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    yield name
    cluster.delete_pod(name)
