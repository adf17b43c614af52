"""Simulated fan-out: the real control plane and Argo controller fanning a sweep out to KWOK's fake nodes.

Run as root (`make bench-fanout`). Users run sweeps on clusters of tens to hundreds of nodes; this
machine has one. KWOK (sigs.k8s.io/kwok, hack/tools/kwok.sh) fakes Node heartbeats and Pod status
against a real API server, so everything that decides how fast a fan-out goes runs for real: etcd,
kube-apiserver, kube-controller-manager, kube-scheduler and Argo's workflow-controller, all on
127.0.0.1 inside a network namespace of this bench's own (nothing listens outside it). Only the
kubelets and the pods' work are simulated: KWOK marks a bound pod Running at once and Succeeded
--cell-seconds later, which Argo takes as a finished step (a step without outputs needs no
executor's report), so the whole workflow, pod GC included, completes. With `@operator` the Workflow comes from a
Sweep object through the real ccsweep operator (kopf, as the chart runs it), and the bench also
measures how long a cell's success takes to show in the Sweep's status.

What is submitted is workflows/full-sweep.yaml itself (the ccsweep-sweep and ccsweep-cell
templates: plan, one pod per cell with its podSpecPatch, retries and pod GC, figures, verdict).
No executor runs in a fake pod, so the bench does what argoexec would in the two kinds of pods
whose work the workflow depends on (class StandIn):
- a plan pod: report its outputs (a WorkflowTaskResult): the plan's JSON, computed here with
  `ccsweep plan` on the full-sweep preset and repeated to the cell count, cut to its last 256 KiB
  as argoexec cuts any step's result, and the chunks file. With more cells than `chunk-size`
  (ccsweep.plan.CHUNK_SIZE) the plan prints [] and lists chunks, as `ccsweep plan --chunks-file`
  does; a chunk Workflow's plan pod reports its chunk's items (`ccsweep plan --chunk I`);
- a chunk pod (a resource template): create the chunk Workflow its template names (with the
  owner reference the controller put in), read it every 5 s (argoexec's
  RESOURCE_STATE_CHECK_INTERVAL) and finish when it has. KWOK leaves these pods Running.
`@items` still feeds the `cell` step from a Workflow parameter: the old way past 2,100 cells, kept
to compare. Fake nodes carry the node probe's labels (ccsweep.io/cc-bbr, -cubic,
ccsweep.io/kernel), so the cells' node selectors are honoured as on a real cluster.

Measured per run: submit -> first cell pod, -> every cell pod bound, -> workflow done; pods created
per second (average and best second); CPU seconds, peak CPU and peak RSS of each daemon from
/proc/PID; the size of the Workflow object and of the largest chunk Workflow; the client-side
throttling the controller logged.
Everything is stopped by its PID and the namespace deleted, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import yaml

from ccsweep.plan import CC_LABEL_PREFIX, CHUNK_SIZE, KERNEL_LABEL, chunk_parallelism
from ccsweep_operator.nodeprobe import label_value
from support.procstat import ProcSampler, machine
from support.versions import ARGO_WORKFLOWS_VERSION

REPO = Path(__file__).resolve().parents[2]

BIN = Path(os.environ.get("CCSWEEP_BIN", REPO / "bin"))
CACHE = Path(os.environ.get("CCSWEEP_CACHE", Path.home() / ".cache" / "ccsweep"))
NETNS = "ccsweep-fanout"
NAMESPACE = "ccsweep-fanout"
ARGO_NAMESPACE = "argo"
PRESET = "full-sweep"
RESULT_LIMIT = 256 * 1024   # argoexec keeps the last 256 KiB of a step's stdout as its result
DAEMONS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "workflow-controller", "kwok",
           "operator")


def in_ns(cmd: list[str]) -> list[str]:
    """CMD inside the bench's network namespace (nsenter execs it: the PID is the program's own)."""
    return ["nsenter", f"--net=/run/netns/{NETNS}", *cmd]


# -- KWOK's pod stages: Running once bound, Succeeded after the simulated cell time, then gone ----------
def pod_stages(cell_ms: int) -> list[dict]:
    """KWOK's 'fast' pod stages, with completion for any pod (Argo's too, not only a Job's) after
    `cell_ms` (up to 20% more, so cells do not all finish in the same instant)."""
    now = "{{ $now := Now }}\n"
    ready = now + """
conditions:
- {lastTransitionTime: {{ $now | Quote }}, status: "True", type: Initialized}
- {lastTransitionTime: {{ $now | Quote }}, status: "True", type: Ready}
- {lastTransitionTime: {{ $now | Quote }}, status: "True", type: ContainersReady}
containerStatuses:
{{ range .spec.containers }}
- {image: {{ .image | Quote }}, name: {{ .name | Quote }}, ready: true, restartCount: 0,
   state: {running: {startedAt: {{ $now | Quote }}}}}
{{ end }}
initContainerStatuses:
{{ range .spec.initContainers }}
- {image: {{ .image | Quote }}, name: {{ .name | Quote }}, ready: true, restartCount: 0,
   state: {terminated: {exitCode: 0, reason: Completed, startedAt: {{ $now | Quote }}, finishedAt: {{ $now | Quote }}}}}
{{ end }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
podIP: {{ PodIPWith .spec.nodeName false ( or .metadata.uid "" ) ( or .metadata.name "" ) \
( or .metadata.namespace "" ) | Quote }}
phase: Running
startTime: {{ $now | Quote }}
"""
    complete = now + """
containerStatuses:
{{ range .spec.containers }}
- {image: {{ .image | Quote }}, name: {{ .name | Quote }}, ready: false, restartCount: 0, started: false,
   state: {terminated: {exitCode: 0, reason: Completed, startedAt: {{ $now | Quote }}, finishedAt: {{ $now | Quote }}}}}
{{ end }}
phase: Succeeded
"""
    alive = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}
    pod = {"apiGroup": "v1", "kind": "Pod"}

    def stage(name: str, selector: list[dict], nxt: dict, delay: dict | None = None) -> dict:
        spec = {"resourceRef": pod, "selector": {"matchExpressions": selector}, "next": nxt}
        if delay:
            spec["delay"] = delay
        return {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": name}, "spec": spec}

    return [
        stage("pod-ready", [alive, {"key": ".status.podIP", "operator": "DoesNotExist"}], {"statusTemplate": ready}),
        # A chunk pod (label ccsweep.io/chunk) runs until its chunk Workflow is done: StandIn finishes it.
        stage("pod-complete", [alive, {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                               {"key": '.metadata.labels["ccsweep.io/chunk"]', "operator": "DoesNotExist"}],
              {"statusTemplate": complete},
              {"durationMilliseconds": cell_ms, "jitterDurationMilliseconds": int(cell_ms * 1.2)}),
        stage("pod-delete", [{"key": ".metadata.deletionTimestamp", "operator": "Exists"}],
              {"finalizers": {"empty": True}, "delete": True}),
    ]


def fake_node(name: str, cores: int, kernel: str, algorithms: list[str]) -> dict:
    """A Node as a kubelet would register it, with the labels the chart's node probe writes for a
    kernel offering `algorithms`."""
    resources = {"cpu": str(cores), "memory": f"{cores * 4}Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "type": "kwok", KERNEL_LABEL: kernel, **{f"{CC_LABEL_PREFIX}{cc}": "true" for cc in algorithms}}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels,
                         "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"}},
            "status": {"allocatable": resources, "capacity": resources}}   # KWOK fills in nodeInfo


def plan_items(cells: int, workdir: Path) -> list[dict]:
    """The full-sweep preset's fan-out items (`ccsweep plan`, the real plan step's output),
    repeated with an index suffix on the id until there are `cells` of them."""
    done = subprocess.run([str(REPO / ".venv/bin/ccsweep"), "plan", f"--store={workdir / 'plan-store'}", PRESET],
                          capture_output=True, text=True, check=True, cwd=workdir)
    planned = json.loads(done.stdout)
    items = []
    for n in range(cells):
        item = dict(planned[n % len(planned)])
        if n >= len(planned):
            item["id"] = f"{item['id']}-{n // len(planned)}"
        items.append(item)
    return items


def sweep_workflow(parallelism: int) -> dict:
    """workflows/full-sweep.yaml as a user submits it, with the run's parallelism in the Workflow."""
    workflow = yaml.safe_load((REPO / "workflows/full-sweep.yaml").read_text())
    workflow["spec"]["parallelism"] = parallelism
    return workflow


def plan_output(items: list[dict]) -> tuple[str, bool]:
    """What the plan pod's argoexec would report as outputs.result for these items: `ccsweep plan`'s
    stdout without its last newline, cut to its last 256 KiB as argoexec cuts a step's result
    (workflow/executor/executor.go); and whether it was cut."""
    out = json.dumps(items)
    return out[-RESULT_LIMIT:], len(out) > RESULT_LIMIT


def fanout_workflow(items: list[dict], parallelism: int) -> dict:
    """The sweep's own fan-out step (ccsweep-sweep.yaml), fed from a parameter instead of the plan pod."""
    template = yaml.safe_load((REPO / "workflows/templates/ccsweep-sweep.yaml").read_text())
    spec = template["spec"]
    steps = next(t for t in spec["templates"] if t["name"] == "sweep")["steps"]
    cell = next(group[0] for group in steps if group[0]["name"] == "cell")
    cell["withParam"] = "{{workflow.parameters.items}}"
    for argument in cell.get("arguments", {}).get("parameters", []):  # no plan step here to name the sweep
        if argument.get("value") == "{{steps.plan.outputs.parameters.sweep}}":
            argument["value"] = "{{workflow.parameters.sweep}}"
    parameters = [p for p in spec["arguments"]["parameters"]]
    overrides = {"sweep": "fanout", "image": "localhost/ccsweep/cell:local", "image-pull-policy": "Never"}
    for p in parameters:
        p["value"] = overrides.get(p["name"], p["value"])
    parameters.append({"name": "items", "value": json.dumps(items, separators=(",", ":"))})
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
            "metadata": {"generateName": "fanout-"},
            "spec": {"entrypoint": "fanout", "serviceAccountName": spec["serviceAccountName"],
                     "parallelism": parallelism, "podGC": spec["podGC"],
                     "activeDeadlineSeconds": spec["activeDeadlineSeconds"],
                     "arguments": {"parameters": parameters},
                     "templates": [{"name": "fanout", "steps": [[cell]]}]}}


class PodTimes(threading.Thread):
    """`kubectl get pods --watch` printing name, node and phase per event; first times kept locally
    (the API's own timestamps have one-second resolution). The API server ends a watch after its
    request timeout or when the watch falls too far behind (thousands of pods, as with chunked
    sweeps), and kubectl then exits: the watch is started again, and its first listing only fills
    in pods it has not seen (a time once kept stays). `restarts` says how often that happened."""

    def __init__(self, kubectl: list[str]) -> None:
        super().__init__(daemon=True)
        self.created: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.done: dict[str, float] = {}
        self.restarts = 0
        template = '{.metadata.name} {.spec.nodeName} {.status.phase}{"\\n"}'
        self._cmd = [*kubectl, "get", "pods", "-n", NAMESPACE, "--watch",
                     "-l", "app.kubernetes.io/component=cell", "-o", f"jsonpath={template}"]
        self._stopping = threading.Event()
        self._proc = self._spawn()

    def _spawn(self) -> subprocess.Popen:
        return subprocess.Popen(self._cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def run(self) -> None:
        while True:
            assert self._proc.stdout is not None
            for line in self._proc.stdout:
                self._seen(line, time.time())
            self._proc.wait()
            if self._stopping.is_set():
                return
            self.restarts += 1
            time.sleep(0.5)
            self._proc = self._spawn()
            if self._stopping.is_set():   # stop() came between the check above and the spawn
                self._proc.terminate()

    def _seen(self, line: str, now: float) -> None:
        parts = line.split()
        if not parts:
            return
        name = parts[0]
        self.created.setdefault(name, now)
        if len(parts) >= 2 and parts[1] not in ("Pending", "Running", "Succeeded", "Failed", "Unknown"):
            self.bound.setdefault(name, now)
        if parts[-1] in ("Succeeded", "Failed"):
            self.done.setdefault(name, now)

    def stop(self) -> None:
        self._stopping.set()
        self._proc.terminate()   # kubectl ends on SIGTERM at once
        self._proc.wait(timeout=30)
        self.join(timeout=5)


# -- the control plane ------------------------------------------------------------------------------
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

    def _wait(self, what: str, ready, timeout: float = 120) -> None:
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
        # The local cluster's controller configuration (hack/cluster/argo.sh): executor resources
        # decide the cell pods' requests, so the scheduler packs the nodes as it would there.
        setup = [
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
        self.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": setup}))
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


# -- one measured fan-out ---------------------------------------------------------------------------
@dataclass
class Run:
    nodes: int
    cells: int
    parallelism: int
    qps: float
    burst: int
    mode: str = "sweep"   # sweep: workflows/full-sweep.yaml; items: the cell step fed from a parameter
    results: dict = field(default_factory=dict)


def chunk_list(items: list[dict], size: int = CHUNK_SIZE) -> list[dict]:
    """What `ccsweep plan --chunks-file` writes for these items, none stored: [] when they fit one
    Workflow, else every chunk of `size` with its count."""
    if len(items) <= size:
        return []
    return [{"chunk": n, "cells": len(items[start:start + size])} for n, start in enumerate(range(0, len(items), size))]


def owner_uid(pod: dict) -> str:
    """The uid of the Workflow that owns a workflow pod (the controller sets the owner reference)."""
    return next(o["uid"] for o in pod["metadata"].get("ownerReferences", []) if o.get("kind") == "Workflow")


class StandIn(threading.Thread):
    """argoexec's part in the pods KWOK runs no executor in (module docstring): plan pods report
    their outputs, chunk pods create their chunk Workflow and end when it does, figures pods report
    that they have no outputs (else the controller waits minutes for its fallback before it counts
    them done). Polls the few pods labelled plan, chunk or figures every 0.5 s; what it did, and
    when, is kept for the report."""

    def __init__(self, plane: ControlPlane, items: list[dict]) -> None:
        super().__init__(daemon=True)
        self.plane, self.items = plane, items
        self.plan_reported: dict[str, float] = {}          # plan pod -> when its outputs were reported
        self.chunk_of_pod: dict[str, str] = {}             # chunk pod -> its chunk Workflow
        self.chunk_done: dict[str, tuple[float, str]] = {}  # chunk pod -> (when, the Workflow's phase)
        self.figures_reported: set[str] = set()
        self.cut = False
        self.errors: list[str] = []
        self._stop_event = threading.Event()
        self._last_check = 0.0

    def run(self) -> None:
        while not self._stop_event.wait(0.5):
            try:
                self._pass()
            except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError, KeyError, StopIteration) as exc:
                self.errors.append(f"{time.strftime('%H:%M:%S')} {exc}"[:300])

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=30)

    def _pass(self) -> None:
        listed = self.plane.kubectl("get", "pods", "-n", NAMESPACE, "-o", "json", "-l",
                                    "app.kubernetes.io/component in (plan,chunk,figures)", timeout=60).stdout
        for pod in json.loads(listed)["items"]:
            meta = pod["metadata"]
            name, component = meta["name"], meta["labels"].get("app.kubernetes.io/component")
            if component == "plan" and name not in self.plan_reported:
                self._report_plan(pod)
            elif component == "chunk" and name not in self.chunk_of_pod:
                self._start_chunk(pod)
            elif component == "figures" and name not in self.figures_reported:
                self._task_result(pod, owner_uid(pod), {})
                self.figures_reported.add(name)
        if time.monotonic() - self._last_check >= 5:   # argoexec's RESOURCE_STATE_CHECK_INTERVAL
            self._last_check = time.monotonic()
            for pod, workflow in self.chunk_of_pod.items():
                if pod not in self.chunk_done:
                    self._check_chunk(pod, workflow)

    def _report_plan(self, pod: dict) -> None:
        """The plan pod's WorkflowTaskResult (named after its node), marked complete, as argoexec's."""
        meta = pod["metadata"]
        workflow = meta["labels"]["workflows.argoproj.io/workflow"]
        got = json.loads(self.plane.kubectl("get", "workflow", "-n", NAMESPACE, workflow, "-o", "json").stdout)
        chunk = got["metadata"].get("labels", {}).get("ccsweep.io/chunk")
        outputs: dict = {}
        if chunk is None:   # the sweep's own plan step: ccsweep plan --chunks-file
            chunks = chunk_list(self.items)
            result, self.cut = plan_output([] if chunks else self.items)
            outputs["parameters"] = [{"name": "chunks", "value": json.dumps(chunks),
                                      "valueFrom": {"path": "/tmp/chunks.json"}}]
        else:               # a chunk Workflow's: ccsweep plan --chunk I
            start = int(chunk) * CHUNK_SIZE
            result, _ = plan_output(self.items[start:start + CHUNK_SIZE])
        outputs["result"] = result
        self._task_result(pod, got["metadata"]["uid"], outputs)
        self.plan_reported[meta["name"]] = time.time()

    def _task_result(self, pod: dict, workflow_uid: str, outputs: dict) -> None:
        """The pod's WorkflowTaskResult (named after its node), marked complete, as argoexec writes it:
        the controller counts a pod's node done only once its task result is complete."""
        meta = pod["metadata"]
        workflow = meta["labels"]["workflows.argoproj.io/workflow"]
        task_result = {
            "apiVersion": "argoproj.io/v1alpha1", "kind": "WorkflowTaskResult",
            "metadata": {"name": meta["annotations"]["workflows.argoproj.io/node-id"], "namespace": NAMESPACE,
                         "labels": {"workflows.argoproj.io/workflow": workflow,
                                    "workflows.argoproj.io/report-outputs-completed": "true"},
                         "ownerReferences": [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
                                              "name": workflow, "uid": workflow_uid}]},
            "outputs": outputs}
        self.plane.kubectl("create", "-f", "-", input=json.dumps(task_result))

    def _start_chunk(self, pod: dict) -> None:
        """`argoexec resource create`: the manifest of the pod's template (ARGO_TEMPLATE, in which the
        controller already set the owner reference to the sweep's Workflow)."""
        env = {e["name"]: e.get("value") for c in pod["spec"].get("initContainers", []) for e in c.get("env", [])}
        manifest = json.loads(env["ARGO_TEMPLATE"])["resource"]["manifest"]
        created = self.plane.kubectl("create", "-n", NAMESPACE, "-o", "name", "-f", "-",
                                     input=json.dumps(yaml.safe_load(manifest)))
        self.chunk_of_pod[pod["metadata"]["name"]] = created.stdout.strip().split("/")[-1]

    def _check_chunk(self, pod: str, workflow: str) -> None:
        """The resource template's success/failure condition on status.phase; then the pod ends."""
        phase = self.plane.kubectl("get", "workflow", "-n", NAMESPACE, workflow, "-o", "jsonpath={.status.phase}",
                                   check=False).stdout.strip()
        if phase not in ("Succeeded", "Failed", "Error"):
            return
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        got = json.loads(self.plane.kubectl("get", "pod", "-n", NAMESPACE, pod, "-o", "json").stdout)
        self._task_result(got, owner_uid(got), {})
        code = 0 if phase == "Succeeded" else 1
        terminated = {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                      "startedAt": got["status"].get("startTime", now), "finishedAt": now}
        status = {"phase": "Succeeded" if code == 0 else "Failed",
                  "containerStatuses": [{"name": c["name"], "image": c["image"], "ready": False, "restartCount": 0,
                                         "imageID": "", "started": False, "state": {"terminated": terminated}}
                                        for c in got["spec"]["containers"]]}
        self.plane.kubectl("patch", "pod", "-n", NAMESPACE, pod, "--subresource=status", "--type=merge",
                           "-p", json.dumps({"status": status}))
        self.chunk_done[pod] = (time.time(), phase)


def submit(plane: ControlPlane, workflow: dict, *parameters: str) -> str:
    """`argo submit` of `workflow` (written to a file: a 3,900-item parameter is too long for argv)."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=plane.workdir) as manifest:
        manifest.write(yaml.safe_dump(workflow))
        manifest.flush()
        extra = [arg for p in parameters for arg in ("-p", p)]
        done = subprocess.run(in_ns([str(BIN / "argo"), f"--kubeconfig={plane.kubeconfig}", "submit", "-n",
                                     NAMESPACE, manifest.name, "-o", "name", *extra]),
                              capture_output=True, text=True, check=True)
    return done.stdout.strip()


def create_sweep(plane: ControlPlane, name: str, parallelism: int) -> str:
    """A Sweep of the full-sweep preset, as a user applies one; the name of the Workflow the operator makes."""
    spec = yaml.safe_load((REPO / "src/ccsweep/presets" / f"{PRESET}.yaml").read_text())
    spec.pop("name")
    spec["run"] = {"parallelism": parallelism}
    plane.kubectl("create", "-n", NAMESPACE, "-f", "-", input=json.dumps(
        {"apiVersion": "ccsweep.io/v1alpha1", "kind": "Sweep", "metadata": {"name": name}, "spec": spec}))
    end = time.monotonic() + 120
    while time.monotonic() < end:
        workflow = plane.kubectl("get", "sweep", "-n", NAMESPACE, name, "-o", "jsonpath={.status.workflow}").stdout
        if workflow:
            return workflow
        time.sleep(0.3)
    raise RuntimeError(f"the operator made no Workflow for Sweep {name} in 120 s")


class SweepStatus(threading.Thread):
    """The Sweep's status.cells.done and phase every 0.5 s, time-stamped: what a user watching it sees."""

    def __init__(self, plane: ControlPlane, name: str) -> None:
        super().__init__(daemon=True)
        self.plane, self.name = plane, name
        self.seen: list[tuple[float, int, str]] = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(0.5):
            got = self.plane.kubectl("get", "sweep", "-n", NAMESPACE, self.name, "-o",
                                     "jsonpath={.status.cells.done} {.status.phase}", check=False).stdout.split()
            if len(got) == 2 and got[0].isdigit():
                self.seen.append((time.time(), int(got[0]), got[1]))
            elif len(got) == 1:
                self.seen.append((time.time(), 0, got[0]))

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=10)

    def lags(self, done_times: list[float]) -> list[float]:
        """For the k-th cell pod to succeed: seconds until the Sweep counted k cells done."""
        out = []
        for k, t in enumerate(sorted(done_times), start=1):
            shown = next((at for at, done, _ in self.seen if done >= k and at >= t), None)
            if shown is not None:
                out.append(shown - t)
        return out

    def phase_at(self, phase: str) -> float | None:
        return next((at for at, _, p in self.seen if p == phase), None)


def measure(plane: ControlPlane, run: Run, items: list[dict], timeout: float) -> None:
    watch = PodTimes(plane.kubectl_cmd())
    watch.start()
    sampler = ProcSampler(plane.pids())
    controller_log = plane.workdir / "workflow-controller.log"
    log_start = controller_log.stat().st_size
    time.sleep(1)   # the watch is established
    sampler.start()
    t0 = time.time()
    sweep_status, stand_in = None, None
    chunks = chunk_list(items)
    share = chunk_parallelism(run.parallelism, len(chunks))
    if run.mode in ("sweep", "operator"):
        stand_in = StandIn(plane, items)
        stand_in.start()
        if run.mode == "sweep":   # each chunk Workflow gets its share of the parallelism, as the operator gives it
            name = submit(plane, sweep_workflow(run.parallelism), "image=localhost/ccsweep/cell:local",
                          "image-pull-policy=Never", "sweep=fanout", "store=s3://ccsweep/fanout",
                          f"chunk-parallelism={share}")
        else:
            sweep_name = f"fanout-{run.nodes}-{run.cells}"
            name = create_sweep(plane, sweep_name, run.parallelism)
            sweep_status = SweepStatus(plane, sweep_name)
            sweep_status.start()
    else:
        name = submit(plane, fanout_workflow(items, run.parallelism))
    # Asking for completed workflows only (Argo's label) returns nothing until one is done, so polling
    # costs the API server little, unlike reading a Workflow of thousands of nodes each second.
    done_query = (f"/apis/argoproj.io/v1alpha1/namespaces/{NAMESPACE}/workflows"
                  "?labelSelector=workflows.argoproj.io%2Fcompleted%3Dtrue")
    end = t0 + timeout
    while time.time() < end:
        listed = plane.kubectl("get", "--raw", done_query, check=False).stdout
        if listed and any(w["metadata"]["name"] == name for w in json.loads(listed).get("items", [])):
            break
        time.sleep(1)
    t_done = time.time()
    if sweep_status:
        time.sleep(5)   # the operator's last word on a finished Workflow
        sweep_status.stop()
    if stand_in:
        stand_in.stop()
    sampler.stop()
    time.sleep(1)
    watch.stop()
    children = json.loads(plane.kubectl("get", "workflows", "-n", NAMESPACE, "-l", f"ccsweep.io/parent={name}",
                                        "-o", "json", timeout=120).stdout)["items"]
    body = plane.kubectl("get", "workflow", "-n", NAMESPACE, name, "-o", "json").stdout
    status = json.loads(body).get("status", {})
    phase = status.get("phase", "")
    all_bound = max(watch.bound.values()) if len(watch.bound) >= run.cells else None
    created = sorted(watch.created.values())
    per_second: dict[int, int] = {}
    for t in created:
        per_second[int(t - t0)] = per_second.get(int(t - t0), 0) + 1
    span = (created[-1] - created[0]) if len(created) > 1 else 0.0
    with controller_log.open("rb") as f:
        f.seek(log_start)
        log = f.read().decode(errors="replace")
    run.results = {
        "workflow": name, "mode": run.mode, "phase": phase or "(timeout)", "message": status.get("message", ""),
        "plan_result_bytes": len(json.dumps(items)), "plan_result_cut": bool(stand_in and stand_in.cut),
        "plan_reported_s": (min(stand_in.plan_reported.values()) - t0) if stand_in and stand_in.plan_reported
        else None,
        "chunks": len(chunks) if run.mode != "items" else 0, "chunk_parallelism": share if chunks else None,
        "chunk_workflows": len(children),
        "chunk_phases": sorted((w.get("status") or {}).get("phase", "") for w in children),
        "chunk_bytes_max": max((len(json.dumps(w)) for w in children), default=0),
        "chunk_compressed": any((w.get("status") or {}).get("compressedNodes") for w in children),
        "stand_in_errors": stand_in.errors[:5] if stand_in else [],
        "pods_seen": len(created), "bound": len(watch.bound), "succeeded": len(watch.done),
        "watch_restarts": watch.restarts,
        "first_pod_s": created[0] - t0 if created else None,
        "all_created_s": created[-1] - t0 if len(created) >= run.cells else None,
        "all_bound_s": (all_bound - t0) if all_bound else None,
        "fan_out_s": (all_bound - created[0]) if all_bound and created else None,
        "done_s": t_done - t0,
        "pods_per_s": (len(created) - 1) / span if span else None,
        "best_second": max(per_second.values()) if per_second else 0,
        "workflow_bytes": len(body.encode()),
        "compressed_nodes": bool(status.get("compressedNodes")),
        "status_nodes": len(status.get("nodes", {})),
        "throttled_logs": log.count("client-side throttling"),
        "too_large_logs": log.count("maximum allowed size"),
        "usage": {n: vars(u) for n, u in sampler.usage.items()},
    }
    if sweep_status:
        lags = sweep_status.lags(list(watch.done.values()))
        final = sweep_status.phase_at(phase) if phase else None
        run.results["sweep_status"] = {
            "counted": max((done for _, done, _ in sweep_status.seen), default=0),
            "lag_median_s": statistics.median(lags) if lags else None, "lag_max_s": max(lags) if lags else None,
            "final_phase_lag_s": (final - t_done) if final else None}
    if run.mode == "operator":
        plane.kubectl("delete", "sweeps", "--all", "-n", NAMESPACE, "--wait=true", timeout=600)
    plane.kubectl("delete", "workflows", "--all", "-n", NAMESPACE, "--wait=true", timeout=600)
    cleared = time.monotonic() + 300
    while time.monotonic() < cleared and plane.kubectl("get", "pods", "-n", NAMESPACE, "-o", "name").stdout.strip():
        time.sleep(2)


# -- report -----------------------------------------------------------------------------------------
def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def report(runs: list[Run], args: argparse.Namespace, node_ready_s: dict[int, float]) -> str:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                            text=True).stdout.strip()
    lines = [
        f"# Simulated fan-out with KWOK, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "",
        f"**Machine.** {machine()}. Real etcd (Debian), kube-apiserver, kube-controller-manager, "
        "kube-scheduler, Argo's workflow-controller and KWOK at the releases versions.env pins "
        f"(commit {commit}), all on this machine's cores, in network namespace {NETNS}.",
        "",
        f"**How.** `benchmarks/fanout/bench.py` (`make bench-fanout`). Fake nodes of {args.node_cores} cores, "
        "labelled as the node probe labels them. Mode *sweep*: `workflows/full-sweep.yaml` as submitted "
        "(plan, fan-out, figures, verdict; with more than "
        f"{CHUNK_SIZE} cells one chunk Workflow per {CHUNK_SIZE} cells, each given its share of the parallelism), "
        f"the plan pods' outputs standing in for `ccsweep plan` on the {PRESET} preset (repeated to the cell "
        "count) and the chunk pods' work for argoexec's (create the chunk Workflow, wait for it); mode "
        "*operator*: the same Workflow made by the ccsweep operator from a Sweep of that preset; mode "
        "*items*: the same `cell` step fed the items from a Workflow parameter. KWOK finishes each pod "
        f"{args.cell_seconds:g}-{args.cell_seconds * 1.2:g} s after it starts (the plan pods too). Times in "
        "seconds from the submission; fan-out = first cell pod created -> every cell pod bound.",
        "",
        "| nodes | cells | mode | parallelism | controller qps/burst | plan result | chunk Workflows | "
        "first cell pod | fan-out | all bound | pods/s (avg, best 1 s) | workflow done | phase | Workflow object | "
        "largest chunk Workflow | controller CPU s (peak cores) / RSS MB | apiserver CPU s / RSS MB | "
        "etcd CPU s / RSS MB | scheduler CPU s | KWOK CPU s | throttled |",
        "|" + "---|" * 21,
    ]
    for r in runs:
        x = r.results
        if not x:
            continue
        u = x["usage"]
        wc, api, etcd = u["workflow-controller"], u["kube-apiserver"], u["etcd"]
        size = f"{x['workflow_bytes'] / 1024:.0f} KiB" + (" (nodes compressed)" if x["compressed_nodes"] else "")
        plan = (f"{x['plan_result_bytes'] / 1024:.0f} KiB" if not x["chunks"] else "[] + chunks") + (
            " (cut)" if x["plan_result_cut"] else "")
        chunks = (f"{x['chunk_workflows']} of {x['chunks']} x {x['chunk_parallelism']} at once"
                  f" ({', '.join(sorted(set(x['chunk_phases'])))})" if x["chunks"] else "-")
        largest = (f"{x['chunk_bytes_max'] / 1024:.0f} KiB" + (" (compressed)" if x["chunk_compressed"] else "")
                   if x["chunk_workflows"] else "-")
        lines.append(
            f"| {r.nodes} | {r.cells} | {r.mode} | {r.parallelism} | {r.qps:g}/{r.burst} | "
            f"{plan if r.mode != 'items' else '-'} | {chunks} | {fmt(x['first_pod_s'])} | {fmt(x['fan_out_s'])} | "
            f"{fmt(x['all_bound_s'])} | {fmt(x['pods_per_s'])}, {x['best_second']} | {fmt(x['done_s'])} | "
            f"{x['phase']} | {size} | {largest} | "
            f"{wc['cpu_s']:.0f} ({wc['peak_cpu']:.2f}) / {wc['peak_rss_mb']:.0f} | "
            f"{api['cpu_s']:.0f} / {api['peak_rss_mb']:.0f} | {etcd['cpu_s']:.0f} / {etcd['peak_rss_mb']:.0f} | "
            f"{u['kube-scheduler']['cpu_s']:.0f} | {u['kwok']['cpu_s']:.0f} | {x['throttled_logs']} |")
    lines += ["", "Nodes Ready (seconds after creating them): "
              + ", ".join(f"{n} nodes {s:.0f}" for n, s in node_ready_s.items()), ""]
    for r in runs:
        status, operator = r.results.get("sweep_status"), r.results.get("usage", {}).get("operator")
        if status and operator:
            lines.append(f"- {r.nodes} nodes, {r.cells} cells, operator: the Sweep counted {status['counted']} "
                         f"cells done; a cell pod's success reached the Sweep's status after "
                         f"{fmt(status['lag_median_s'])} s (median), {fmt(status['lag_max_s'])} s (max); its final "
                         f"phase {fmt(status['final_phase_lag_s'])} s after the Workflow's; operator CPU "
                         f"{operator['cpu_s']:.0f} s (peak {operator['peak_cpu']:.2f} cores), RSS "
                         f"{operator['peak_rss_mb']:.0f} MB.")
    for r in runs:
        x = r.results
        if x and (x["bound"] < r.cells or x["watch_restarts"]):
            lines.append(f"- {r.nodes} nodes, {r.cells} cells, {r.mode}: the pod watch saw {x['pods_seen']} cell "
                         f"pods, {x['bound']} bound, and was started again {x['watch_restarts']} time(s) "
                         "(pods created and deleted while it restarted are not counted)")
    for r in runs:
        if r.results.get("stand_in_errors"):
            lines.append(f"- {r.nodes} nodes, {r.cells} cells, {r.mode}: the stand-in for argoexec failed: "
                         + "; ".join(r.results["stand_in_errors"]))
    for r in runs:
        if r.results.get("message") or r.results.get("too_large_logs"):
            lines.append(f"- {r.nodes} nodes, {r.cells} cells, {r.mode}: {r.results['message'][:160]} "
                         f"({r.results['too_large_logs']} 'maximum allowed size' lines in the controller's log)")
    return "\n".join(lines) + "\n"


def parse_run(text: str, args: argparse.Namespace) -> Run:
    """NODES:CELLS[:QPS:BURST][@MODE] -> a Run (parallelism: --parallelism, or the cell count)."""
    spec, _, mode = text.partition("@")
    parts = spec.split(":")
    if (len(parts) not in (2, 4) or not all(p.replace(".", "", 1).isdigit() for p in parts)
            or mode not in ("", "sweep", "operator", "items")):
        raise argparse.ArgumentTypeError(f"--run {text!r}: expected NODES:CELLS[:QPS:BURST][@sweep|@operator|@items]")
    nodes, cells = int(parts[0]), int(parts[1])
    qps, burst = (float(parts[2]), int(parts[3])) if len(parts) == 4 else (args.controller_qps, args.controller_burst)
    return Run(nodes, cells, args.parallelism or cells, qps, burst, mode or "sweep")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", action="append", metavar="NODES:CELLS[:QPS:BURST][@MODE]",
                   help="a fan-out to measure, in order (nodes only grow; a new qps/burst restarts the "
                        "controller). MODE: sweep (argo submit workflows/full-sweep.yaml, the default), "
                        "operator (a Sweep object, through the ccsweep operator), items (the cell step fed "
                        "from a parameter). Default: 50:390 50:3900 400:390 400:390@operator 400:3900")
    p.add_argument("--node-cores", type=int, default=16, help="cores of each fake node")
    p.add_argument("--cell-seconds", type=float, default=20, help="simulated time a cell pod runs")
    p.add_argument("--parallelism", type=int, default=0,
                   help="the Workflow's spec.parallelism (0: the run's cell count, so every cell may start)")
    p.add_argument("--controller-qps", type=float, default=20, help="workflow-controller --qps (Argo's default 20)")
    p.add_argument("--controller-burst", type=int, default=30, help="workflow-controller --burst (Argo's default 30)")
    p.add_argument("--timeout", type=float, default=900, help="seconds to wait for one workflow")
    p.add_argument("--out", type=Path, help="write the report (markdown) here as well")
    args = p.parse_args()
    try:
        default = ["50:390", "50:3900", "400:390", "400:390@operator", "400:3900"]
        runs = [parse_run(text, args) for text in (args.run or default)]
    except argparse.ArgumentTypeError as e:
        p.error(str(e))
    if any(r.nodes < q.nodes for q, r in zip(runs, runs[1:], strict=False)):
        p.error("--run: node counts must not shrink from one run to the next")
    if os.geteuid() != 0:
        p.error("must run as root (a network namespace of its own)")
    for tool in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "workflow-controller",
                 "argo", "kwok"):
        if not (BIN / tool).exists():
            p.error(f"{BIN / tool} missing: make tools && hack/tools/kwok.sh")

    kernel = label_value(platform.release())
    workdir = CACHE / "fanout"
    workdir.mkdir(parents=True, exist_ok=True)
    plan_dir = Path(tempfile.mkdtemp(prefix="plan-", dir=workdir.parent))
    node_ready: dict[int, float] = {}
    plane = ControlPlane(workdir, int(args.cell_seconds * 1000), runs[0].qps, runs[0].burst)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        items_all = plan_items(max(r.cells for r in runs), plan_dir)
        # Every algorithm the plan asks for (the algorithms experiment goes beyond BBR and CUBIC): a
        # cluster whose kernels offer them, as the node probe would label it.
        algorithms = sorted({key.removeprefix(CC_LABEL_PREFIX) for item in items_all for key in item["node_selector"]})
        plane.start()
        for run in runs:
            if (run.qps, run.burst) != (plane.controller_qps, plane.controller_burst):
                plane.stop_one("workflow-controller")
                plane.controller_qps, plane.controller_burst = run.qps, run.burst
                plane._start_argo()
            if run.mode == "operator":
                plane.start_operator()
            if run.nodes not in node_ready:
                node_ready[run.nodes] = plane.grow_nodes(run.nodes, args.node_cores, kernel, algorithms)
            print(f"[fanout] {run.nodes} nodes, {run.cells} cells ({run.mode}), parallelism {run.parallelism}, "
                  f"qps {run.qps:g}/{run.burst}", file=sys.stderr, flush=True)
            measure(plane, run, items_all[: run.cells], args.timeout)
            print(f"[fanout]   {json.dumps(run.results)}",   # kept even if a later run is interrupted
                  file=sys.stderr, flush=True)
    finally:
        plane.stop()
        shutil.rmtree(plan_dir, ignore_errors=True)
    text = report(runs, args, node_ready)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
