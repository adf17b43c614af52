"""Fixtures for the operator's tests: a real API server (envtest) with the Sweep and Argo CRDs.

The session's API server is etcd (Debian's etcd-server) plus bin/kube-apiserver, both built or
installed by hack/tools on first use and stopped by PID at the end of the session. Tests using it
are marked `envtest` and `tools` (tests/conftest.py), so `make test-unit` leaves them out. kopf runs
in-process against it (kopf.testing.KopfRunner); nothing runs pods, so Workflows are created and
checked but never executed here (tests/e2e/test_helm_operator.py runs them on a real cluster).
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from envtest import EnvTest
from support.versions import argo_module_dir

REPO = Path(__file__).resolve().parents[2]
CRD_FILE = REPO / "charts/ccsweep/files/crds/sweeps.ccsweep.io.yaml"


def _tool(script: str, binary: Path) -> Path:
    """A pinned tool from hack/tools (a no-op when cached)."""
    if not binary.exists():
        subprocess.run([str(REPO / "hack/tools" / script)], check=True, timeout=1800)
    return binary


@pytest.fixture(scope="session")
def envtest() -> Iterator[EnvTest]:
    if sys.platform != "linux":
        pytest.skip("envtest needs Linux (etcd and kube-apiserver binaries)")
    if not Path("/usr/bin/etcd").exists():
        subprocess.run([str(REPO / "hack/tools/apt.sh")], check=True, timeout=1800)
    apiserver = _tool("kubernetes.sh", REPO / "bin/kube-apiserver")
    with EnvTest(kube_apiserver=apiserver) as env:
        env.apply_file(CRD_FILE)
        for crd in sorted((argo_module_dir() / "manifests/base/crds/minimal").glob("argoproj.io_*.yaml")):
            env.apply_file(crd)
        yield env


@pytest.fixture
def namespace(envtest: EnvTest) -> Iterator[str]:
    """A fresh namespace per test; deleted afterwards (envtest has no namespace controller, so
    its objects are deleted first)."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    envtest.kubectl("create", "namespace", name)
    yield name
    for kind in ("sweeps.ccsweep.io", "workflows.argoproj.io"):
        envtest.kubectl("delete", kind, "--all", "-n", name, "--wait=false", check=False)
    envtest.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def operator_env(envtest: EnvTest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Environment for an in-process operator: this API server, a file store in tmp_path."""
    import kubernetes

    store = tmp_path / "store"
    monkeypatch.setenv("KUBECONFIG", str(envtest.kubeconfig))
    # kopf's login reads the kubernetes client's default, which the client fixed at its import.
    monkeypatch.setattr(kubernetes.config.kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(envtest.kubeconfig))
    monkeypatch.setenv("CCSWEEP_STORE", f"file://{store}")
    return store
