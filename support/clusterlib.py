"""Driving the local test cluster from Python: bring-up, kubectl/argo, node services, pod watch.

Shared by the e2e fixtures (tests/e2e/) and the cluster benches (benchmarks/cluster/), so the
two bring the cluster up and read it the same way. Everything here goes through the scripts in
hack/ and the wrappers they write into BASE (kubectl, argo, ctr), which enter the cluster's
network namespace: the API server, MinIO and Prometheus only listen inside it.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ccsweep.buildinfo import build_identity
from ccsweep.runner.periodic import PeriodicSampler
from ccsweep_operator.nodeprobe import label_value
from support.chartlib import CHART, render
from support.versions import ARGO_WORKFLOWS_VERSION

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("CCSWEEP_CACHE", Path.home() / ".cache" / "ccsweep"))
#: What images/build.sh names the cell image it builds without --push: the build identity.
CELL_IMAGE = f"localhost/ccsweep/cell:{build_identity()}"
EXECUTOR_IMAGE = f"localhost/ccsweep/argoexec:{ARGO_WORKFLOWS_VERSION}"
NODE_IP = "10.200.0.1"  # hack/cluster/lib.sh


def workflow_identity(namespace: str) -> list[dict]:
    """The ServiceAccount workflow pods run as, its Role and its right to list nodes (the plan step's
    --check-nodes), as the chart renders them: one source."""
    rendered = render(values_files=[CHART / "ci/minimal-values.yaml"], namespace=namespace)
    return [d for d in rendered if d["kind"] in ("ServiceAccount", "Role", "RoleBinding", "ClusterRole",
                                                 "ClusterRoleBinding")]


def workflow_templates(namespace: str, bucket: str, lateness_threshold_us: str = "") -> list[dict]:
    """ccsweep's WorkflowTemplates as the chart renders them for CELL_IMAGE: the chart writes the
    image of the pods that hold the S3 keys and the cells' allowlist into them (docs/security.md),
    so the repository's files, which name the release image, are not applied as they are. The
    tests' stores (runs/NAME or bench/NAME in the node's bucket: `*` matches within one segment)
    and the node's Pushgateway are the ones the chart's lists allow, as an installation's values
    would list its own. `lateness_threshold_us` is workflows.latenessThresholdUs (empty: each cell's
    own; the e2e tests give the bookkeeping tests', support/bookkeeping.py)."""
    registry, _, rest = CELL_IMAGE.partition("/")
    repository, _, tag = rest.rpartition(":")
    rendered = render(values_files=[CHART / "ci/minimal-values.yaml"], namespace=namespace, set_values=[
        f"image.registry={registry}", f"image.repository={repository}", f"image.tag={tag}", "image.pullPolicy=Never",
        f"operator.allowedStores={{s3://{bucket}/runs/*,s3://{bucket}/bench/*}}",
        f"operator.allowedPushgateways={{{NODE_IP}:9091}}",
        f"workflows.latenessThresholdUs={lateness_threshold_us}"])
    return [d for d in rendered if d["kind"] == "WorkflowTemplate"]


def run_step(cmd: list[str], *, timeout: float, label: str,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run a setup step (`env` added to this process's environment); report its time on stderr;
    fail with the tail of its output."""
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
                          env={**os.environ, **env} if env else None)
    sys.stderr.write(f"\n[cluster] {label}: exit {proc.returncode} in {time.monotonic() - start:.0f}s\n")
    if proc.returncode != 0:
        raise RuntimeError(f"{label} failed (exit {proc.returncode}):\n{proc.stdout[-4000:]}")
    return proc


class RssSampler(PeriodicSampler):
    """Samples the summed RSS of the cluster's daemons, add-ons and shims every 2 s from its
    construction until stop(); keeps the peak."""

    def __init__(self, base: Path) -> None:
        self.base, self.peak_mb = base, 0
        super().__init__(2.0, "cluster-rss")

    def _pids(self) -> list[str]:
        """The daemons' and add-ons' recorded PIDs, the added nodes' (nodes/NAME/pids), and the
        shims of every node's containerd (their socket is under base)."""
        recorded = [*(self.base / "pids").glob("*.pid"), *(self.base / "nodes").glob("*/pids/*.pid")]
        pids = [p.read_text().strip() for p in recorded]
        base = str(self.base).encode()
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    cmdline = (d / "cmdline").read_bytes()
                except OSError:
                    continue
                if base in cmdline and b"containerd-shim" in cmdline:
                    pids.append(d.name)
        return pids

    def sample(self) -> int:
        """The summed RSS now, in MB (the peak is raised with it)."""
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

    def _sample(self) -> int:
        return self.sample()

    def stop(self) -> None:
        """Stop sampling; returns once the sampler's thread took its last sample."""
        self._halt()


@dataclass
class Cluster:
    """One local cluster (hack/cluster/up.sh BASE NS) and what runs beside it."""

    base: Path
    ns: str
    timings: dict[str, float] = field(default_factory=dict)
    _down: bool = False

    # -- lifecycle -------------------------------------------------------------------------
    def _timed(self, name: str, cmd: list[str], timeout: float, env: dict[str, str] | None = None) -> None:
        start = time.monotonic()
        run_step(cmd, timeout=timeout, label=name, env=env)
        self.timings[name] = time.monotonic() - start

    def build_tools(self, *tools: str) -> None:
        """hack/tools/<tool>.sh for each tool: a cache hit takes seconds, a cold build minutes."""
        for tool in tools:
            self._timed(f"tools/{tool}", [str(REPO / "hack/tools" / f"{tool}.sh")], 1800)

    def up(self) -> None:
        self._timed("up", [str(REPO / "hack/cluster/up.sh"), str(self.base), self.ns], 600)

    def start_argo(self, requeue_s: int | None = None) -> None:
        """hack/cluster/argo.sh; `requeue_s`: how often the controller looks at a running Workflow
        again unprompted (default upstream's 10 s, which a step's end often waits for)."""
        env = {"CCSWEEP_ARGO_REQUEUE_S": str(requeue_s)} if requeue_s is not None else None
        self._timed("argo", [str(REPO / "hack/cluster/argo.sh"), str(self.base), self.ns], 600, env)

    def start_services(self) -> NodeServices:
        self._timed("services", [str(REPO / "hack/cluster/services.sh"), str(self.base), self.ns], 300)
        return NodeServices.load(self)

    def node(self, action: str, name: str, *, cpu_milli: int | None = None) -> None:
        """hack/cluster/node.sh ACTION NAME: `add` a node beyond the first (and wait until it is
        Ready; `cpu_milli`: its allocatable CPU, default an equal share of the machine), `kill` it as
        a machine dies, or `remove` it and all it left on the host."""
        env = {"CCSWEEP_NODE_CPU_MILLI": str(cpu_milli)} if cpu_milli is not None else None
        script = str(REPO / "hack/cluster/node.sh")
        self._timed(f"node/{action}/{name}", [script, action, name, str(self.base), self.ns], 300, env)

    def import_image(self, name: str) -> None:
        """The image NAME built from its Dockerfile with buildah and imported into the node's containerd
        (hack/cluster/image.sh). A cold cell image build takes minutes; buildah's layer cache, seconds."""
        self._timed(f"image/{name}", [str(REPO / "hack/cluster/image.sh"), str(self.base), self.ns, name], 3600)

    def down(self) -> None:
        if self._down:
            return
        self._down = True
        if os.environ.get("CCSWEEP_E2E_KEEP") == "1":
            sys.stderr.write(f"\n[cluster] CCSWEEP_E2E_KEEP=1: cluster left running; stop it with "
                             f"hack/cluster/down.sh {self.base} {self.ns}\n")
            return
        start = time.monotonic()
        proc = subprocess.run([str(REPO / "hack/cluster/down.sh"), str(self.base), self.ns],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
        self.timings["down"] = time.monotonic() - start
        sys.stderr.write(f"\n[cluster] down.sh exit {proc.returncode} in {self.timings['down']:.0f}s\n"
                         f"{proc.stdout[-2000:]}")

    # -- commands inside the cluster's network namespace ---------------------------------
    def in_ns(self, *cmd: str, timeout: float = 60, input: str | None = None,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """cmd in the cluster's network namespace (its 10.200.0.x addresses exist only there);
        `env` is added to this process's environment."""
        return subprocess.run(["nsenter", f"--net=/run/netns/{self.ns}", *cmd], input=input,
                              capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **env} if env else None)

    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                timeout: float = 120) -> subprocess.CompletedProcess:
        proc = subprocess.run([str(self.base / "kubectl"), *args], input=input, capture_output=True, text=True,
                              timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc

    def argo(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        proc = subprocess.run([str(self.base / "argo"), *args], capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"argo {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc

    def get_json(self, *args: str) -> dict:
        return json.loads(self.kubectl("get", "-o", "json", *args).stdout)

    def apply(self, manifest: dict, namespace: str | None = None) -> None:
        self.kubectl("apply", *(["-n", namespace] if namespace else []), "-f", "-", input=json.dumps(manifest))

    def label_node_algorithms(self, node: str = "ccsweep-node", available: list[str] | None = None) -> list[str]:
        """What the chart's node probe does: label the node with each algorithm its kernel offers
        (`available`, default this kernel's list), and its kernel release."""
        if available is None:
            available = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
        self.kubectl("label", "node", node, "--overwrite", *[f"ccsweep.io/cc-{cc}=true" for cc in available],
                     f"ccsweep.io/kernel={label_value(platform.release())}")
        return available

    def prepare_sweep_namespace(self, namespace: str, services: NodeServices, lateness_threshold_us: str = "") -> None:
        """What a namespace needs to run sweeps: the pods' identity, the WorkflowTemplates (cells judged
        against `lateness_threshold_us`, empty: each cell's own), the S3 Secret."""
        self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        self.kubectl("wait", "-n", namespace, "--for=create", "serviceaccount/default", "--timeout=60s")
        for manifest in workflow_identity(namespace):
            self.apply(manifest, namespace=namespace)
        for template in workflow_templates(namespace, services.bucket, lateness_threshold_us):
            self.apply(template, namespace=namespace)
        self.apply(services.s3_secret(), namespace=namespace)
        self.label_node_algorithms()

    def submit_sweep(self, namespace: str, services: NodeServices, *, spec_yaml: str, sweep: str | None,
                     store_prefix: str, parallelism: int, cell_cpu: str = "500m", **parameters: str) -> str:
        """workflows/full-sweep.yaml with the spec inline, with the real argo CLI; the Workflow's name.

        `argo submit` has no parallelism flag: the Workflow's own spec.parallelism (which wins over
        the template's) goes into a copy of the file, as a user would edit theirs. `sweep` None: no
        `sweep` parameter, the plan names the sweep. `parameters`: more of the template's parameters
        (chunk_size for chunk-size).
        """
        workflow = yaml.safe_load((REPO / "workflows/full-sweep.yaml").read_text())
        workflow["spec"]["parallelism"] = parallelism
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="full-sweep-") as copy:
            copy.write(yaml.safe_dump(workflow))
            copy.flush()
            proc = self.argo(
                "submit", "-n", namespace, copy.name, "-o", "name",
                "-p", f"spec-yaml={spec_yaml}", *(("-p", f"sweep={sweep}") if sweep is not None else ()),
                "-p", f"store=s3://{services.bucket}/{store_prefix}", "-p", f"pushgateway={NODE_IP}:9091",
                "-p", f"image={CELL_IMAGE}", "-p", "image-pull-policy=Never",
                "-p", f"cell-cpu={cell_cpu}", "-p", "cell-memory=512Mi",
                *[arg for k, v in parameters.items() for arg in ("-p", f"{k.replace('_', '-')}={v}")])
        return proc.stdout.strip()


@dataclass
class NodeServices:
    """MinIO, Pushgateway and Prometheus on the node (hack/cluster/services.sh), read from inside NS."""

    cluster: Cluster
    env: dict[str, str]

    @classmethod
    def load(cls, cluster: Cluster) -> NodeServices:
        lines = (cluster.base / "services.env").read_text().splitlines()
        return cls(cluster, dict(line.split("=", 1) for line in lines if "=" in line))

    @property
    def bucket(self) -> str:
        return self.env["CCSWEEP_S3_BUCKET"]

    def s3_secret(self, name: str = "ccsweep-s3") -> dict:
        """The Secret the workflow templates read (keys accessKey, secretKey, endpoint)."""
        return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "type": "Opaque",
                "stringData": {"accessKey": self.env["CCSWEEP_S3_ACCESS_KEY"],
                               "secretKey": self.env["CCSWEEP_S3_SECRET_KEY"],
                               "endpoint": self.env["CCSWEEP_S3_ENDPOINT"]}}

    def _s3(self, path: str, *options: str) -> subprocess.CompletedProcess:
        # A signed request with curl's SigV4: checks the store independently of ccsweep's S3 code.
        # The keys reach curl as a config file on stdin (-K -), never on its command line.
        user = f'user = "{self.env["CCSWEEP_S3_ACCESS_KEY"]}:{self.env["CCSWEEP_S3_SECRET_KEY"]}"\n'
        return subprocess.run(["nsenter", f"--net=/run/netns/{self.cluster.ns}", "curl", "-K", "-", "-s", "-f",
                               "--aws-sigv4", "aws:amz:us-east-1:s3", *options,
                               f"http://127.0.0.1:9000/{self.bucket}{path}"], input=user.encode(),
                              capture_output=True, timeout=60)

    def s3_keys(self, prefix: str) -> list[str]:
        """Every key under prefix (ListObjectsV2, all pages of 1,000 keys).

        Pages after the first start after the last key seen (`start-after`) rather than at the
        continuation token: with the token the second page was refused (the full-sweep bench, 325
        cells; the token is base64, and its percent-encoded '+', '/' and '=' are what curl's SigV4
        and MinIO may canonicalize differently), whereas keys are plain characters."""
        keys: list[str] = []
        truncated = True
        while truncated:
            query = {"list-type": "2", "prefix": prefix, **({"start-after": keys[-1]} if keys else {})}
            proc = self._s3("?" + urllib.parse.urlencode(query))
            if proc.returncode != 0:
                raise AssertionError(f"listing s3://{self.bucket}/{prefix} failed: {proc.stderr!r}")
            truncated = False
            for element in ET.fromstring(proc.stdout).iter():
                tag = element.tag.rsplit("}", 1)[-1]
                if tag == "Key":
                    keys.append(element.text or "")
                elif tag == "IsTruncated":
                    truncated = element.text == "true"
        return keys

    def s3_get(self, key: str) -> bytes | None:
        proc = self._s3(f"/{key}")
        return proc.stdout if proc.returncode == 0 else None

    def s3_delete(self, key: str) -> bool:
        return self._s3(f"/{key}", "-X", "DELETE").returncode == 0

    def prometheus_query(self, query: str) -> list[dict]:
        proc = self.cluster.in_ns("curl", "-sf", "-G", "--data-urlencode", f"query={query}",
                                  "http://127.0.0.1:9090/api/v1/query")
        if proc.returncode != 0:
            raise AssertionError(f"Prometheus query {query!r} failed: {proc.stderr}")
        return json.loads(proc.stdout)["data"]["result"]


def template_of(node: dict) -> str | None:
    """The template a Workflow node ran: templateName, or templateRef.template for steps that
    reference a WorkflowTemplate (Argo leaves templateName empty for those)."""
    return node.get("templateName") or node.get("templateRef", {}).get("template")


@dataclass
class PodEvent:
    at: float          # time.time() when the watch delivered it (ms resolution, unlike the API's seconds)
    kind: str          # ADDED, MODIFIED, DELETED
    pod: dict


class PodWatch:
    """`kubectl get pods -w` in the background: every pod event of a namespace, time-stamped locally.

    The API's timestamps have one-second resolution; the watch sees each change within
    milliseconds, so per-pod overheads of a second or two can be measured.
    """

    def __init__(self, cluster: Cluster, namespace: str, selector: str = "") -> None:
        cmd = [str(cluster.base / "kubectl"), "get", "pods", "-n", namespace, "--watch", "--output-watch-events",
               "-o", "json"]
        if selector:
            cmd += ["-l", selector]
        self.events: list[PodEvent] = []
        self._proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        decoder, buffer = json.JSONDecoder(), ""
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            buffer += line
            try:
                event, end = decoder.raw_decode(buffer.lstrip())
            except json.JSONDecodeError:
                continue
            buffer = buffer.lstrip()[end:]
            self.events.append(PodEvent(time.time(), event.get("type", ""), event.get("object", {})))

    def stop(self) -> None:
        self._proc.terminate()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._thread.join(timeout=5)

    def pods(self) -> dict[str, list[PodEvent]]:
        """Events per pod name, in order."""
        out: dict[str, list[PodEvent]] = {}
        for e in self.events:
            out.setdefault(e.pod.get("metadata", {}).get("name", "?"), []).append(e)
        return out

    @staticmethod
    def first(events: list[PodEvent], predicate) -> float | None:
        return next((e.at for e in events if predicate(e.pod)), None)

    @staticmethod
    def container_in(pod: dict, name: str, states: tuple[str, ...], init: bool = False) -> bool:
        """Whether the pod's container `name` (an init container if `init`) is in one of `states`
        (`waiting`, `running`, `terminated`)."""
        key = "initContainerStatuses" if init else "containerStatuses"
        return any(status.get("name") == name and any(state in status.get("state", {}) for state in states)
                   for status in pod.get("status", {}).get(key, []))

    @staticmethod
    def main_started(pod: dict) -> bool:
        """The `main` container (Argo's name for the step's own container) is running or done."""
        return PodWatch.container_in(pod, "main", ("running", "terminated"))
