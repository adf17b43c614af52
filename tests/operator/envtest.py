"""A real API server for tests, as controller-runtime's envtest: etcd + kube-apiserver, nothing else.

No kubelet, scheduler or controllers: objects are stored, validated against their CRDs, watched
and authorized (RBAC) for real, but no pod ever runs and nothing garbage-collects. Both daemons
listen on 127.0.0.1 on free ports, keep their data in a temporary folder, and are stopped by
their PIDs. The admin identity is a static token in group system:masters; `as_user` gives a
client that impersonates another identity, so RBAC rules can be checked against the real
authorizer.

    with EnvTest(kube_apiserver=Path("bin/kube-apiserver")) as env:
        env.apply_file(Path("charts/ccsweep/files/crds/sweeps.ccsweep.io.yaml"))
        env.kubeconfig  # a file for kubectl, kopf and the kubernetes client
"""

from __future__ import annotations

import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml


class EnvTestError(RuntimeError):
    """The API server could not be started (its log tail is in the message)."""


def free_port() -> int:
    """A port free on 127.0.0.1 now (the daemons bind it a moment later)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class EnvTest:
    """etcd and kube-apiserver started together; a context manager that always stops both."""

    def __init__(self, kube_apiserver: Path, etcd: str = "etcd", workdir: Path | None = None) -> None:
        self.kube_apiserver, self.etcd = kube_apiserver, etcd
        self._own_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="ccsweep-envtest-"))
        self.token = secrets.token_hex(16)
        self.port = 0
        self._procs: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    def __enter__(self) -> EnvTest:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, name: str, cmd: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.workdir / f"{name}.log", "wb")
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self._procs.append(proc)
        return proc

    def _tail(self, name: str) -> str:
        path = self.workdir / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-15:]) if path.exists() else ""

    def start(self, timeout: float = 60) -> None:
        client, peer, self.port = free_port(), free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{client}"
        self._spawn("etcd", [self.etcd, "--name", "envtest", "--data-dir", str(self.workdir / "etcd"),
                             "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
                             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                             "--initial-cluster", f"envtest=http://127.0.0.1:{peer}", "--log-level", "warn"])
        key = self.workdir / "sa.key"
        subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
        (self.workdir / "tokens.csv").write_text(f"{self.token},admin,admin-uid,system:masters\n")
        self._spawn("kube-apiserver", [
            str(self.kube_apiserver), "--etcd-servers", etcd_url, "--bind-address", "127.0.0.1",
            "--advertise-address", "127.0.0.1", "--secure-port", str(self.port),
            "--cert-dir", str(self.workdir / "certs"), "--token-auth-file", str(self.workdir / "tokens.csv"),
            "--authorization-mode", "RBAC", "--service-cluster-ip-range", "10.0.0.0/24",
            "--service-account-issuer", "https://envtest.local", "--service-account-key-file", str(key),
            "--service-account-signing-key-file", str(key), "--disable-admission-plugins", "ServiceAccount",
            "--enable-priority-and-fairness=false", "--allow-privileged=true"])
        self._write_kubeconfig()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for proc, name in zip(self._procs, ("etcd", "kube-apiserver"), strict=True):
                if proc.poll() is not None:
                    raise EnvTestError(f"{name} exited ({proc.returncode}):\n{self._tail(name)}")
            if self.kubectl("get", "--raw", "/readyz", check=False).stdout.strip() == "ok":
                return
            time.sleep(0.5)
        raise EnvTestError(f"kube-apiserver not ready after {timeout:.0f}s:\n{self._tail('kube-apiserver')}")

    def _write_kubeconfig(self) -> None:
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "envtest",
            # The API server's self-signed serving certificate (written into --cert-dir at start).
            "clusters": [{"name": "envtest", "cluster": {
                "server": self.url, "certificate-authority": str(self.workdir / "certs/apiserver.crt")}}],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [{"name": "envtest",
                          "context": {"cluster": "envtest", "user": "admin", "namespace": "default"}}],
        }
        self.kubeconfig.write_text(yaml.safe_dump(config))

    def stop(self) -> None:
        """SIGTERM both (API server first), SIGKILL what is still there after 10 s; remove the data."""
        for proc in reversed(self._procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
        self._procs.clear()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- helpers ------------------------------------------------------------------------------
    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                as_user: str | None = None) -> subprocess.CompletedProcess[str]:
        """kubectl (next to kube-apiserver) against this server; `as_user` impersonates."""
        cmd = [str(self.kube_apiserver.with_name("kubectl")), f"--kubeconfig={self.kubeconfig}", *args]
        if as_user:
            cmd.append(f"--as={as_user}")
        proc = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=60)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {proc.stderr.strip()}")
        return proc

    def apply_docs(self, docs: Iterable[dict[str, Any]], *, wait_crds: bool = True) -> None:
        """Server-side apply; waits until applied CRDs are Established."""
        docs = [d for d in docs if d]
        self.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(docs))
        crds = [f"crd/{d['metadata']['name']}" for d in docs if d["kind"] == "CustomResourceDefinition"]
        if wait_crds and crds:
            self.kubectl("wait", "--for=condition=Established", "--timeout=60s", *crds)

    def apply_file(self, path: Path) -> None:
        self.apply_docs(yaml.safe_load_all(path.read_text()))

    def client(self, as_user: str | None = None) -> Any:
        """A kubernetes ApiClient for this server (optionally impersonating `as_user`)."""
        import kubernetes

        config = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(str(self.kubeconfig), client_configuration=config)
        api = kubernetes.client.ApiClient(config)
        if as_user:
            api.set_default_header("Impersonate-User", as_user)
        return api
