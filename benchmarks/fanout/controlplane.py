"""The control plane the fan-out runs against, all real: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, Argo's workflow-controller and KWOK (and, for @operator,
the ccsweep operator), on 127.0.0.1 inside a network namespace of the bench's own, so nothing
listens outside it. Every process is recorded and stopped by its PID.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from benchmarks.fanout.kwok import fake_node, pod_stages
from support.versions import ARGO_WORKFLOWS_VERSION

REPO = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("CCSWEEP_BIN", REPO / "bin"))
NETNS = "ccsweep-fanout"
NAMESPACE = "ccsweep-fanout"
ARGO_NAMESPACE = "argo"
DAEMONS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "workflow-controller", "kwok",
           "operator")


def in_ns(cmd: list[str]) -> list[str]:
    """CMD inside the bench's network namespace (nsenter execs it: the PID is the program's own)."""
    return ["nsenter", f"--net=/run/netns/{NETNS}", *cmd]


def argo_setup() -> list[dict]:
    """The Argo namespace with its controller's configuration, and the sweep namespace with the
    workflows' identities and S3 Secret (unused: no cell writes). The configuration is the local
    cluster's (hack/cluster/argo.sh): executor resources decide the cell pods' requests, so the
    scheduler packs the nodes as it would there."""
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ARGO_NAMESPACE}},
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "workflow-controller-configmap", "namespace": ARGO_NAMESPACE},
         "data": {"executor": "imagePullPolicy: Never\nresources:\n  requests: {cpu: 100m, memory: 128Mi}\n"
                              "  limits: {cpu: 100m, memory: 128Mi}\n",
                  "metricsConfig": "enabled: true\nport: 9095\nsecure: false\n"}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "ccsweep-workflow",
                                                                   "namespace": NAMESPACE}},
        # The chunk pods' own identity (the chart's NAME-chunks), which creates the chunk Workflows.
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "ccsweep-workflow-chunks",
                                                                   "namespace": NAMESPACE}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "ccsweep-s3", "namespace": NAMESPACE},
         "stringData": {"accessKey": "unused", "secretKey": "unused", "endpoint": "http://127.0.0.1:9"}},
    ]


@dataclass
class ControlPlane:
    """etcd, kube-apiserver, kube-controller-manager, kube-scheduler, Argo's controller and KWOK, on
    127.0.0.1 inside NETNS, state in `workdir`; every process recorded and stopped by its PID."""

    workdir: Path
    cell_ms: int
    controller_qps: float
    controller_burst: int
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    netns_made: bool = False

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    def kubectl_cmd(self) -> list[str]:
        return in_ns([str(BIN / "kubectl"), f"--kubeconfig={self.kubeconfig}"])

    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                timeout: float = 300) -> subprocess.CompletedProcess:
        done = subprocess.run([*self.kubectl_cmd(), *args], input=input, capture_output=True, text=True,
                              timeout=timeout)
        if check and done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args[:3])}: {done.stderr.strip()[:500]}")
        return done

    def _spawn(self, name: str, cmd: list[str], env: dict[str, str] | None = None) -> None:
        log = open(self.workdir / f"{name}.log", "wb")
        self.procs[name] = subprocess.Popen(in_ns(cmd), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True, env={**os.environ, **(env or {})})

    def _wait(self, what: str, ready: Callable[[], bool], timeout: float = 120) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    tail = (self.workdir / f"{name}.log").read_text(errors="replace").splitlines()[-15:]
                    raise RuntimeError(f"{name} exited ({proc.returncode}):\n" + "\n".join(tail))
            if ready():
                return
            time.sleep(0.5)
        raise RuntimeError(f"{what} not ready after {timeout:.0f}s")

    def start(self) -> None:
        if Path(f"/run/netns/{NETNS}").exists():
            raise RuntimeError(f"network namespace {NETNS} exists: another run, or one that was not torn down")
        shutil.rmtree(self.workdir, ignore_errors=True)
        self.workdir.mkdir(parents=True)
        subprocess.run(["ip", "netns", "add", NETNS], check=True)
        self.netns_made = True
        subprocess.run(["ip", "-n", NETNS, "link", "set", "lo", "up"], check=True)
        self._start_api()
        self._start_controllers()
        self._start_argo()
        self._start_kwok()

    def _start_api(self) -> None:
        w = self.workdir
        self._spawn("etcd", ["etcd", "--name", "fanout", "--data-dir", str(w / "etcd"),
                             "--listen-client-urls", "http://127.0.0.1:2379",
                             "--advertise-client-urls", "http://127.0.0.1:2379",
                             "--listen-peer-urls", "http://127.0.0.1:2380",
                             "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
                             "--initial-cluster", "fanout=http://127.0.0.1:2380", "--log-level", "warn"])
        subprocess.run(["openssl", "genrsa", "-out", str(w / "sa.key"), "2048"], check=True, capture_output=True)
        token = os.urandom(16).hex()
        (w / "tokens.csv").write_text(f"{token},admin,admin-uid,system:masters\n")
        os.chmod(w / "tokens.csv", 0o600)
        self._spawn("kube-apiserver", [
            str(BIN / "kube-apiserver"), "--etcd-servers=http://127.0.0.1:2379", "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1", "--secure-port=6443", f"--cert-dir={w / 'certs'}",
            f"--token-auth-file={w / 'tokens.csv'}", "--authorization-mode=Node,RBAC",
            "--service-cluster-ip-range=10.96.0.0/16", "--service-account-issuer=https://fanout.local",
            f"--service-account-key-file={w / 'sa.key'}", f"--service-account-signing-key-file={w / 'sa.key'}",
            "--allow-privileged=true"])
        cluster = {"server": "https://127.0.0.1:6443", "certificate-authority": str(w / "certs/apiserver.crt")}
        config = {"apiVersion": "v1", "kind": "Config", "current-context": "fanout",
                  "clusters": [{"name": "fanout", "cluster": cluster}],
                  "users": [{"name": "admin", "user": {"token": token}}],
                  "contexts": [{"name": "fanout", "context": {"cluster": "fanout", "user": "admin"}}]}
        self.kubeconfig.write_text(yaml.safe_dump(config))
        os.chmod(self.kubeconfig, 0o600)
        self._wait("kube-apiserver",
                   lambda: self.kubectl("get", "--raw", "/readyz", check=False).stdout.strip() == "ok")

    def _start_controllers(self) -> None:
        kc = f"--kubeconfig={self.kubeconfig}"
        self._spawn("kube-controller-manager", [
            str(BIN / "kube-controller-manager"), kc, "--leader-elect=false", "--bind-address=127.0.0.1",
            f"--service-account-private-key-file={self.workdir / 'sa.key'}",
            f"--root-ca-file={self.workdir / 'certs/apiserver.crt'}", "--service-cluster-ip-range=10.96.0.0/16"])
        self._spawn("kube-scheduler", [str(BIN / "kube-scheduler"), kc, "--leader-elect=false",
                                       "--bind-address=127.0.0.1"])
        self._wait("default service account",
                   lambda: self.kubectl("get", "serviceaccount", "default", check=False).returncode == 0)

    def _start_argo(self) -> None:
        crds = Path(os.path.realpath(BIN / "argo")).parent / "crds"
        self.kubectl("apply", "--server-side", "-f", str(crds))
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(crds))
        self.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": argo_setup()}))
        self.kubectl("apply", "-n", NAMESPACE, "-f", str(REPO / "workflows/templates"))
        self._spawn("workflow-controller", [
            str(BIN / "workflow-controller"), f"--kubeconfig={self.kubeconfig}", f"--namespace={ARGO_NAMESPACE}",
            f"--executor-image=localhost/ccsweep/argoexec:{ARGO_WORKFLOWS_VERSION}",
            "--executor-image-pull-policy=Never", f"--qps={self.controller_qps:g}",
            f"--burst={self.controller_burst}", "--loglevel=info"], env={"LEADER_ELECTION_DISABLE": "true"})
        self._wait("workflow-controller", lambda: subprocess.run(
            in_ns(["curl", "-sf", "-o", "/dev/null", "http://127.0.0.1:9095/metrics"])).returncode == 0)

    def _start_kwok(self) -> None:
        stages = self.workdir / "kwok-stages.yaml"
        stages.write_text(yaml.safe_dump_all(pod_stages(self.cell_ms)))
        self._spawn("kwok", [str(BIN / "kwok"), f"--kubeconfig={self.kubeconfig}", f"--config={stages}",
                             "--manage-all-nodes=true", "--cidr=10.0.0.1/16", "--node-ip=10.0.255.254",
                             "--node-lease-duration-seconds=40", "--server-address=127.0.0.1:10247"])
        time.sleep(2)
        self._wait("kwok", lambda: True)   # still running after 2 s: its configuration was taken

    def start_operator(self) -> None:
        """The ccsweep operator (kopf, as the chart runs it) watching NAMESPACE, its store a folder here."""
        if "operator" in self.procs:
            return
        self.kubectl("apply", "--server-side", "-f", str(REPO / "charts/ccsweep/files/crds/sweeps.ccsweep.io.yaml"))
        established = "jsonpath={.status.conditions[?(@.type=='Established')].status}"
        self._wait("the Sweep CRD", lambda: self.kubectl("get", "crd/sweeps.ccsweep.io", "-o", established,
                                                        check=False).stdout == "True")
        self._spawn("operator", [str(REPO / ".venv/bin/kopf"), "run", "--standalone", f"--namespace={NAMESPACE}",
                                 "-m", "ccsweep_operator.handlers"],
                    env={"KUBECONFIG": str(self.kubeconfig), "CCSWEEP_STORE": f"file://{self.workdir / 'store'}"})
        time.sleep(5)
        self._wait("operator", lambda: True)   # still running after 5 s: logged in, handlers registered

    def grow_nodes(self, total: int, cores: int, kernel: str, algorithms: list[str]) -> float:
        """Fake nodes kwok-0000 ... up to `total`; the seconds until all of them are Ready."""
        have = len(self.kubectl("get", "nodes", "-o", "name").stdout.split())
        start = time.monotonic()
        for first in range(have, total, 100):
            batch = [fake_node(f"kwok-{n:04d}", cores, kernel, algorithms)
                     for n in range(first, min(first + 100, total))]
            self.kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": batch}))
        query = '{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\\n"}{end}'
        self._wait(f"{total} nodes", lambda: self.kubectl("get", "nodes", "-o", f"jsonpath={query}")
                   .stdout.split().count("True") >= total, timeout=300)
        return time.monotonic() - start

    def pids(self) -> dict[str, int]:
        return {name: proc.pid for name, proc in self.procs.items()}

    def stop(self) -> None:
        """Stop every daemon we started by its PID, clients before the API server before etcd
        (SIGTERM, SIGKILL after 15 s); delete NETNS and etcd's data (the logs stay in workdir)."""
        clients = [n for n in reversed(DAEMONS[2:]) if n in self.procs]
        for group in (clients, ["kube-apiserver"], ["etcd"]):
            self._reap([n for n in group if n in self.procs])
        self.procs.clear()
        if self.netns_made:
            subprocess.run(["ip", "netns", "delete", NETNS], check=False)
            self.netns_made = False
        shutil.rmtree(self.workdir / "etcd", ignore_errors=True)

    def stop_one(self, name: str) -> None:
        self._reap([name])
        del self.procs[name]

    def restart_controller(self, qps: float, burst: int) -> None:
        """Argo's workflow-controller again with another --qps and --burst (its setup applied again,
        unchanged)."""
        self.stop_one("workflow-controller")
        self.controller_qps, self.controller_burst = qps, burst
        self._start_argo()

    def _reap(self, names: list[str]) -> None:
        for name in names:
            if self.procs[name].poll() is None:
                self.procs[name].terminate()
        for name in names:
            proc = self.procs[name]
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
