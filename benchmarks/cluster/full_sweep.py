"""The whole full sweep through Argo on the local cluster, time-scaled, measured and checked.

Run as root (`make bench-full-sweep`). Brings up the local cluster as `make cluster-up` does (the
same scripts; a cluster already up there is used as it is and left running), submits
workflows/full-sweep.yaml with the real `argo` CLI and `-p time-scale=S -p sweep=full-sweep-xS` (S with '-' for '.', as
`ccsweep plan` names a scaled sweep),
and watches it to the end. Every flow is S times its real length (default 0.05: 1.5 to 7 s;
the shortest full-sweep flow, 30 s, reaches the 1 s floor at 0.034), so the 364 distinct cells of
the 390 fit a 2-core machine in well under an hour; scaled cells are other cells with their own
ids and are stamped as scaled in every figure and the report, so they never stand in for a
full-length run. `--time-scale 1` runs the study at full length (hours on one node);
`--store-prefix` then lets a later run resume it, and `--keep-workflows` keeps every pass's pod
attempts for the per-attempt table.

It prints, and writes to --out:
- wall time (submit -> workflow done) and cells per minute;
- the per-cell overhead distribution: pod created -> runner started -> first byte (the result's
  started_at and flows_started_at), and last byte (first byte + the cell's flow time) -> runner
  finished (finished_at) -> pod Succeeded -> pod gone (pod times from a watch of the API);
- peak CPU and memory of the Argo controller and the API server (/proc of their PIDs);
- the Workflow object's size (peak while running, and whether its nodes were compressed);
- the Pushgateway's group count and scrape size (peak and after the sweep), Prometheus' series;
- a projection of the unscaled sweep's wall time on N nodes of C cores, with its model stated.

A cell whose emulator ran late on all three attempts (on a loaded 2-core node some do) has no
result; the bench then does what a user would, the same submit again (--passes, default 2), and
prints every pass and the late attempts kept in the store.

Cells asking for an algorithm the node does not offer (this VM's kernel has reno, bbr and cubic;
the algorithms experiment also asks for bic, vegas and westwood) would stay Pending for ever
(docs/kubernetes.md): once nothing else runs for a minute, the bench stops the workflow and runs
the figures step's command itself, as the docs tell a user to, and reports those cells apart.

It checks, and exits 1 unless all hold: the workflow Succeeded, every planned cell has its result
in MinIO, every experiment has its figures (PNG and SVG) and the report is there.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import re
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.cluster.attempts import nodes_of
from benchmarks.cluster.bench import (
    EXECUTOR_CPU,
    NAMESPACE,
    bring_up,
    cpu_value,
    full_sweep_durations,
    makespan,
    parse_time,
)
from ccsweep.manifest import ManifestCell, ManifestChunk, SweepManifest
from ccsweep.plan import CC_LABEL_PREFIX, node_selector
from ccsweep.runner.wakelatency import MAX_BOUND_US, WakeRequest, idle_wake_bound
from ccsweep.store.base import plan_chunk_key
from ccsweep.storeurls import NAMESPACE_ENV, namespace_store
from support.clusterlib import CACHE, CELL_IMAGE, NODE_IP, Cluster, NodeServices, PodWatch
from support.procstat import ProcSampler, machine

REPO = Path(__file__).resolve().parents[2]

DEFAULT_SCALE = 0.05
CHECKED_DAEMONS = ("workflow-controller", "kube-apiserver", "etcd")


@dataclass
class Gauges:
    """Peaks of what grows with a sweep, polled every `interval` seconds while it runs."""

    workflow_bytes: int = 0
    compressed: bool = False
    push_groups: int = 0
    push_scrape_bytes: int = 0
    series: int = 0
    samples: list[tuple[float, int, int]] = field(default_factory=list)   # (t, groups, scrape bytes)


class GaugePoller(threading.Thread):
    def __init__(self, cluster: Cluster, workflow: str, interval: float = 15) -> None:
        super().__init__(daemon=True)
        self.cluster, self.workflow, self.interval = cluster, workflow, interval
        self.gauges = Gauges()
        self._stop_event = threading.Event()
        self._reported = 0.0

    def poll(self) -> None:
        g = self.gauges
        got = self.cluster.kubectl("get", "workflow", "-n", NAMESPACE, self.workflow, "-o", "json", check=False)
        if got.returncode == 0:
            workflow = json.loads(got.stdout)
            # Compact JSON, as the API server stores it and Argo sizes it against its 1 MiB limit
            # (kubectl's output is indented: about half as large again).
            g.workflow_bytes = max(g.workflow_bytes, len(json.dumps(workflow, separators=(",", ":")).encode()))
            status = workflow.get("status", {})
            g.compressed |= bool(status.get("compressedNodes"))
            self.report(status)
        groups, scrape = pushgateway_size(self.cluster)
        g.push_groups, g.push_scrape_bytes = max(g.push_groups, groups), max(g.push_scrape_bytes, scrape)
        g.series = max(g.series, prometheus_series(self.cluster))
        g.samples.append((time.time(), groups, scrape))

    def report(self, status: dict) -> None:
        """One progress line a minute on stderr: a pass of the full sweep runs for tens of minutes.
        Cell pods that failed are mostly late attempts (exit 75) that Argo runs again."""
        now = time.time()
        if now - self._reported < 60:
            return
        self._reported = now
        pods = [n for n in nodes_of({"status": status}).values() if n.get("type") == "Pod"]
        phases = {ph: sum(1 for n in pods if n.get("phase") == ph) for ph in ("Succeeded", "Failed", "Running")}
        print(f"[{time.strftime('%H:%M:%S')}] {self.workflow}: {status.get('phase', '?')}, progress "
              f"{status.get('progress', '?')}, pods succeeded {phases['Succeeded']}, failed or late "
              f"{phases['Failed']}, running {phases['Running']}", file=sys.stderr, flush=True)

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            self.poll()

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout=60)


def pushgateway_size(cluster: Cluster) -> tuple[int, int]:
    """(groups, bytes of one scrape of /metrics) of the node's Pushgateway."""
    groups = cluster.in_ns("curl", "-sf", "http://127.0.0.1:9091/api/v1/metrics")
    scrape = cluster.in_ns("curl", "-sf", "http://127.0.0.1:9091/metrics")
    count = len(json.loads(groups.stdout).get("data", [])) if groups.returncode == 0 else -1
    return count, len(scrape.stdout.encode()) if scrape.returncode == 0 else -1


def prometheus_series(cluster: Cluster) -> int:
    got = cluster.in_ns("curl", "-sf", "http://127.0.0.1:9090/api/v1/status/tsdb")
    return json.loads(got.stdout)["data"]["headStats"]["numSeries"] if got.returncode == 0 else -1


def daemon_pids(cluster: Cluster) -> dict[str, int]:
    return {d: int((cluster.base / "pids" / f"{d}.pid").read_text()) for d in CHECKED_DAEMONS
            if (cluster.base / "pids" / f"{d}.pid").exists()}


# -- the checks: everything the sweep promises is in the store ------------------------------------
def late_attempts(cell_keys: list[str], prefix: str) -> dict[str, int]:
    """Attempts kept under cells/<id>/late/ (their emulator ran late; the cell was measured again), by
    cell, from the keys listed under PREFIX/cells/."""
    late: dict[str, int] = {}
    for key in cell_keys:
        parts = key[len(prefix) + 1:].split("/")   # cells, <id>, late, <utc>.json
        if len(parts) == 4 and parts[2] == "late" and parts[3].endswith(".json"):
            late[parts[1]] = late.get(parts[1], 0) + 1
    return late


def lacking(selector: dict[str, str], node_labels: dict[str, str]) -> list[str]:
    """The algorithms of a cell's node selector this node's labels do not offer ([]: it can run)."""
    return [k.removeprefix(CC_LABEL_PREFIX) for k, v in selector.items() if node_labels.get(k) != v]


def workflow_phase(cluster: Cluster, name: str) -> str:
    return cluster.kubectl("get", "workflow", "-n", NAMESPACE, name, "-o", "jsonpath={.status.phase}",
                           check=False).stdout.strip()


def wait_or_stop_stuck(cluster: Cluster, name: str, node_labels: dict[str, str], deadline: float) -> int:
    """Waits for the workflow to end; 0 when it did (or the deadline passed). When for a minute no
    cell pod has run and every Pending one asks for an algorithm this node lacks (they would wait
    for ever: docs/kubernetes.md), stops it with `argo stop` and returns how many were Pending."""
    stuck_since = None
    while time.time() < deadline:
        if workflow_phase(cluster, name) not in ("", "Pending", "Running"):
            return 0
        pods = json.loads(cluster.kubectl("get", "pods", "-n", NAMESPACE, "-o", "json", "-l",
                                          f"app.kubernetes.io/component=cell,workflows.argoproj.io/workflow={name}",
                                          check=False).stdout or '{"items": []}')["items"]
        pending = [p for p in pods if p["status"].get("phase") == "Pending"]
        unrunnable = [p for p in pending if lacking(p["spec"].get("nodeSelector") or {}, node_labels)]
        if pending and len(unrunnable) == len(pending) and not any(p["status"].get("phase") == "Running"
                                                                    for p in pods):
            stuck_since = stuck_since or time.time()
            if time.time() - stuck_since >= 60:
                cluster.argo("stop", "-n", NAMESPACE, name, check=False)
                while workflow_phase(cluster, name) == "Running" and time.time() < deadline:
                    time.sleep(5)
                return len(unrunnable)
        else:
            stuck_since = None
        time.sleep(15)
    return 0


def planned_entries(services: NodeServices, prefix: str, manifest: bytes) -> list[ManifestCell]:
    """The manifest's entries, from its chunks (schema 3) or inline (schema 2)."""
    header = SweepManifest.model_validate_json(manifest)
    if header.layout is None:
        return header.cells
    chunks = (services.s3_get(f"{prefix}/{plan_chunk_key(header.name, header.layout.folder, i)}")
              for i in range(header.layout.chunks))
    return [entry for data in chunks for entry in ManifestChunk.model_validate_json(data or b"{}").entries]


def unplaceable_cells(cells: list[dict], sweep: str, node_labels: dict[str, str]) -> dict[str, list[str]]:
    """Cells of the manifest the node cannot run (its labels lack one of their algorithms, as the
    cells' node selectors ask), by id: the algorithms missing. Their pods stay Pending until the
    bench stops the workflow (wait_or_stop_stuck); they are not the sweep's failures but the node's."""
    missing = {}
    for entry in cells:
        cell = ManifestCell.model_validate(entry).to_cell(sweep)
        if lacks := lacking(node_selector(cell), node_labels):
            missing[cell.id] = lacks
    return missing


def check_store(services: NodeServices, prefix: str, sweep: str, cell_keys: list[str],
                node_labels: dict[str, str]) -> tuple[list[str], dict, list[dict], dict[str, list[str]]]:
    """(problems, stored results by cell id, the manifest's distinct cells, the cells this node
    cannot run with what they lack)."""
    manifest = services.s3_get(f"{prefix}/sweeps/{sweep}/manifest.json")
    if manifest is None:
        return [f"no manifest at {prefix}/sweeps/{sweep}/manifest.json"], {}, [], {}
    planned = [entry.model_dump(mode="json") for entry in planned_entries(services, prefix, manifest)]
    cells = list({c["id"]: c for c in planned}.values())   # an experiment may repeat another's cell: it runs once
    unplaceable = unplaceable_cells(cells, sweep, node_labels)
    results = {}
    for key in cell_keys:
        if key.endswith("/result.json"):
            cell_id = key.split("/")[-2]
            results[cell_id] = key
    problems = [f"cell {c['id']} ({c['experiment']}): no result" for c in cells
                if c["id"] not in results and c["id"] not in unplaceable]
    problems += [f"cell {i}: stored, though this node lacks {', '.join(cc)}" for i, cc in unplaceable.items()
                 if i in results]
    outputs = set(services.s3_keys(f"{prefix}/sweeps/{sweep}/"))
    base = f"{prefix}/sweeps/{sweep}/"
    for experiment in sorted({c["experiment"] for c in planned}):
        for fmt in ("png", "svg"):
            if not any(k.startswith(f"{base}figures/{experiment}") and k.endswith(f".{fmt}") for k in outputs):
                problems.append(f"experiment {experiment}: no figures/{experiment}*.{fmt}")
    report = services.s3_get(f"{base}report.html")
    if not report:
        problems.append("no report.html")
    else:
        for name in sorted(set(re.findall(rb'figures/[A-Za-z0-9._-]+\.(?:png|svg)', report))):
            if f"{base}{name.decode()}" not in outputs:
                problems.append(f"report links {name.decode()}, which is not stored")
    loaded = {}
    for c in cells:
        if c["id"] in results and c["id"] not in loaded:
            loaded[c["id"]] = json.loads(services.s3_get(results[c["id"]]) or b"{}")
    return problems, loaded, cells, unplaceable


# -- per-cell overheads from the pod watch and the stored records ---------------------------------
def cell_timings(watch: PodWatch, results: dict) -> list[dict]:
    rows = []
    for events in watch.pods().values():
        labels = events[0].pod["metadata"].get("labels", {})
        if labels.get("app.kubernetes.io/component") != "cell":
            continue
        record = results.get(labels.get("ccsweep.io/cell", ""))
        succeeded = PodWatch.first(events, lambda p: p.get("status", {}).get("phase") == "Succeeded")
        if not record or not record.get("flows_started_at") or succeeded is None:
            continue
        first_byte = parse_time(record["flows_started_at"])
        last_byte = first_byte + record["cell"]["params"]["duration_s"]
        gone = next((e.at for e in events if e.kind == "DELETED"), None)
        bound = PodWatch.first(events, lambda p: bool(p.get("spec", {}).get("nodeName"))) or events[0].at
        rows.append({"created": events[0].at, "runner": parse_time(record["started_at"]) - events[0].at,
                     "first_byte": first_byte - events[0].at, "bound_first_byte": first_byte - bound,
                     "flow": last_byte - first_byte,
                     "finished": parse_time(record["finished_at"]) - last_byte,
                     "succeeded": succeeded - last_byte, "gone": (gone - last_byte) if gone else None,
                     "slot": succeeded - bound})   # a terminal pod no longer holds its node's CPU
    return rows


def quantiles(values: list[float]) -> str:
    values = sorted(v for v in values if v is not None)
    if not values:
        return "n/a | n/a | n/a | n/a"
    q = statistics.quantiles(values, n=10, method="inclusive") if len(values) > 1 else [values[0]] * 9
    return f"{min(values):.2f} | {statistics.median(values):.2f} | {q[8]:.2f} | {max(values):.2f}"


# -- the projection -------------------------------------------------------------------------------
def projection(overhead_s: float, fixed_s: float, node_cores: int, cell_cpu: str,
               node_counts: list[int]) -> list[str]:
    """The full-sweep preset's unscaled flow times, each plus the measured per-cell overhead, placed
    longest first onto N x slots; plus the measured plan and figures steps."""
    durations, source = full_sweep_durations()
    slots_per_node = max(1, math.floor((node_cores - 0.5) / (cpu_value(cell_cpu) + EXECUTOR_CPU)))
    lines = [
        f"Model: each cell of {source} holds one slot for its unscaled flow time "
        f"(together {sum(durations) / 3600:.1f} h) plus the median per-cell overhead measured here "
        f"({overhead_s:.1f} s: pod bound -> Succeeded minus flow time), cells placed longest first onto "
        f"nodes x {slots_per_node} slots ({node_cores} cores, 0.5 kept for the node, {cell_cpu} CPU per cell "
        f"+ {EXECUTOR_CPU:g} for Argo's wait container); plus the plan and figures steps as measured "
        f"here ({fixed_s:.0f} s). It assumes the control plane keeps up (docs/scaling.md: it does at "
        "these sizes) and no cell is late or retried.",
        "",
        "| nodes | slots | projected wall time | efficiency |",
        "|---|---|---|---|",
    ]
    for nodes in node_counts:
        slots = nodes * slots_per_node
        wall = makespan([d + overhead_s for d in durations], slots) + fixed_s
        lines.append(f"| {nodes} | {slots} | {wall / 60:.0f} min | {sum(durations) / (wall * slots):.0%} |")
    return lines


# -- the run ---------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> tuple[list[str], bool]:
    cluster = Cluster(args.base, args.netns)
    was_up = (args.base / "kubectl").exists() and cluster.kubectl("get", "--raw", "/readyz", check=False,
                                                                  timeout=20).stdout.strip() == "ok"
    try:
        # The local node is this host: a request held here is what the chart's nodeSetup.idleWakeUs
        # holds on every node (cell pods cannot open /dev/cpu_dma_latency themselves).
        with idle_wake_bound(WakeRequest(args.node_idle_wake_us, explicit=args.node_idle_wake_us is not None)):
            return measure(cluster, bring_up(cluster), args)
    finally:
        if was_up or args.keep:
            print(f"cluster left running: hack/cluster/down.sh {cluster.base} {cluster.ns}", file=sys.stderr)
        else:
            cluster.down()


@dataclass
class Target:
    """Where one measured sweep goes: its name, its store prefix, and the node it runs on."""

    sweep: str
    prefix: str
    node_cpu: float
    node_labels: dict[str, str]

    @property
    def stored(self) -> str:
        """The prefix the sweep's pods read and write: the bench namespace's folder of `prefix`."""
        return namespace_store(self.prefix, NAMESPACE)


@dataclass
class Passes:
    """The submits of one measured sweep: each pass's Workflow, phase and seconds; the last Workflow
    as read when it ended; what the bench did about a sweep stuck on cells no node here can run."""

    done: list[tuple[str, str, float]] = field(default_factory=list)   # (workflow, phase, seconds)
    name: str = ""
    phase: str = "?"
    workflow: dict = field(default_factory=dict)
    stuck_note: str = ""


@dataclass
class Stored:
    """The store after the sweep, checked: the problems found, the results by cell id, the planned
    cells, those this node cannot run with what they lack, and the late attempts by cell."""

    problems: list[str]
    results: dict
    cells: list[dict]
    unplaceable: dict[str, list[str]]
    late: dict[str, int]


def target_of(cluster: Cluster, args: argparse.Namespace) -> Target:
    # `ccsweep plan --time-scale` names a scaled sweep so (a sweep name has no dots).
    sweep = args.sweep or f"{args.spec}-x{args.time_scale:g}".replace(".", "-")[:63].rstrip("-")
    # A fresh store per run, unless --store-prefix names one to resume (content-addressed: a
    # resubmission runs only the cells it lacks).
    prefix = args.store_prefix or f"bench/{sweep}-{datetime.now(UTC):%Y%m%dT%H%M%S}"
    node = cluster.get_json("node", "ccsweep-node")
    return Target(sweep, prefix, cpu_value(node["status"]["allocatable"]["cpu"]), node["metadata"].get("labels", {}))


def submit_pass(cluster: Cluster, services: NodeServices, args: argparse.Namespace, target: Target) -> str:
    """`argo submit workflows/full-sweep.yaml` for the target; the Workflow's name."""
    submitted = cluster.argo(
        "submit", "-n", NAMESPACE, str(REPO / "workflows/full-sweep.yaml"), "-o", "name",
        "-p", f"spec={args.spec}", "-p", f"sweep={target.sweep}", "-p", f"time-scale={args.time_scale:g}",
        "-p", f"store=s3://{services.bucket}/{target.prefix}", "-p", f"pushgateway={NODE_IP}:9091",
        "-p", f"image={CELL_IMAGE}", "-p", "image-pull-policy=Never",
        "-p", f"cell-cpu={args.cell_cpu}", "-p", f"cell-memory={args.cell_memory}")
    return submitted.stdout.strip()


def keep_workflow(args: argparse.Namespace, workflow: dict) -> None:
    """With --keep-workflows, the Workflow as it ended (its nodes: every pod attempt's times,
    phase, exit code, node and resources) in DIR/NAME.json.gz, read when the pass ends: Argo's
    controller drops a Workflow's nodes it no longer needs, the store keeps only results."""
    if args.keep_workflows is not None:
        args.keep_workflows.mkdir(parents=True, exist_ok=True)
        target = args.keep_workflows / f"{workflow['metadata']['name']}.json.gz"
        target.write_bytes(gzip.compress(json.dumps(workflow).encode()))


def figures_after_stuck(cluster: Cluster, services: NodeServices, target: Target, name: str, stuck: int) -> str:
    """What docs/kubernetes.md tells a user of a stuck sweep, after the bench stopped it: run the
    figures step's command for the report of what ran. Here from the host, in the cluster's
    namespace (the store's address exists only there): a harness path, named so in the note returned."""
    note = (f"{stuck} cell pods no node here can run stayed Pending; the bench stopped "
            f"{name} (`argo stop`) and ran `ccsweep figures` itself")
    # As the figures pod of the bench's namespace runs it: its folder of the store, its metric groups.
    figures = cluster.in_ns(str(REPO / ".venv/bin/ccsweep"), "figures",
                            f"--store=s3://{services.bucket}/{target.prefix}", f"--sweep={target.sweep}",
                            f"--pushgateway={NODE_IP}:9091", timeout=600,
                            env={**services.env, NAMESPACE_ENV: NAMESPACE})
    if figures.returncode != 0:
        note += f"; `ccsweep figures` exited {figures.returncode}: {figures.stderr.strip()[-300:]}"
    return note


def run_passes(cluster: Cluster, services: NodeServices, args: argparse.Namespace, target: Target,
               poller: GaugePoller, passes: Passes) -> None:
    """Up to --passes submits into `passes`. A pass that ends with cells late on every attempt is
    followed by the user's remedy: the same submit again. The plan is read from the store and lists
    only cells with no result."""
    for _ in range(args.passes):
        began = time.time()
        name = submit_pass(cluster, services, args, target)
        poller.workflow = name
        if not poller.is_alive():
            poller.start()
        stuck = wait_or_stop_stuck(cluster, name, target.node_labels, began + args.timeout)
        passes.name, passes.workflow = name, cluster.get_json("workflow", "-n", NAMESPACE, name)
        passes.phase = passes.workflow["status"].get("phase", "?")
        keep_workflow(args, passes.workflow)
        passes.done.append((name, passes.phase, time.time() - began))
        if stuck:
            passes.stuck_note = figures_after_stuck(cluster, services, target, name, stuck)
            break
        if passes.phase != "Failed":   # Succeeded, or the wait ended early (timeout, interrupted): no new pass
            break


def fixed_steps_s(workflow: dict) -> float:
    """Seconds the plan and figures steps took: the part of a sweep that does not grow with its cells."""
    steps = {n.get("templateName") or n.get("templateRef", {}).get("template"): n
             for n in nodes_of(workflow).values() if n["type"] == "Pod"}
    return sum(parse_time(n["finishedAt"]) - parse_time(n["startedAt"]) for t, n in steps.items()
               if t in ("plan", "figures") and n.get("finishedAt"))


def stored_after(services: NodeServices, target: Target, passes: Passes) -> Stored:
    """The store checked after the passes (check_store), with a Workflow that did not succeed as a
    problem unless the only reason is cells this node cannot run, which the bench stopped."""
    cell_keys = services.s3_keys(f"{target.stored}/cells/")   # listed once: results and late attempts
    problems, results, cells, unplaceable = check_store(services, target.stored, target.sweep, cell_keys,
                                                        target.node_labels)
    if passes.phase != "Succeeded" and not (passes.stuck_note and unplaceable and not problems):
        problems.insert(0, f"workflow {passes.name} {passes.phase} after {len(passes.done)} passes: "
                           f"{passes.workflow['status'].get('message', '')}")
    return Stored(problems, results, cells, unplaceable, late_attempts(cell_keys, target.stored))


def summary_lines(args: argparse.Namespace, services: NodeServices, target: Target, passes: Passes,
                  stored: Stored, wall: float, fixed: float) -> list[str]:
    """The title, the machine, the run and the table's rows up to the plan and figures steps."""
    results, cells, late = stored.results, stored.cells, stored.late
    return [
        f"# The {args.spec} preset through Argo on the local cluster, time-scaled x{args.time_scale:g}, "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "",
        f"**Machine.** {machine()}. One local node ({target.node_cpu:g} allocatable CPUs), "
        f"{args.cell_cpu or 'the cost model'} CPU per cell pod; idle CPUs of the node "
        + ("halt as its cpuidle driver chooses (no CPU-latency request held)." if args.node_idle_wake_us is None
           else f"held to wake within {args.node_idle_wake_us} us (/dev/cpu_dma_latency, for the whole run)."),
        "",
        f"**Run.** `argo submit workflows/full-sweep.yaml -p spec={args.spec} -p sweep={target.sweep} "
        f"-p time-scale={args.time_scale:g}` (store s3://{services.bucket}/{target.prefix}); workflow "
        f"{passes.name}: **{passes.phase}**.",
        "",
        "| measure | value |",
        "|---|---|",
        f"| wall time, submit -> done | {wall / 60:.1f} min |",
        f"| passes (the same submit again while cells lack a result) | "
        f"{'; '.join(f'{w}: {ph}, {sec / 60:.1f} min' for w, ph, sec in passes.done)} |",
        f"| cells planned (distinct) / this node can run / stored | {len(cells)} / "
        f"{len(cells) - len(stored.unplaceable)} / {len(results)} |",
        f"| cells per minute | {len(results) / (wall / 60):.1f} |",
        f"| attempts late (kept under late/, measured again) / cells with one | {sum(late.values())} / {len(late)} |",
        f"| cells late on every attempt (no result) | {len(set(late) - set(results))} |",
        f"| plan + figures steps | {fixed:.0f} s |",
    ]


def daemon_lines(usage: dict) -> list[str]:
    lines = []
    for d in CHECKED_DAEMONS:
        if d in usage:
            u = usage[d]
            lines.append(f"| {d}: peak CPU, peak RSS, CPU total | {u.peak_cpu:.2f} cores, {u.peak_rss_mb:.0f} MB, "
                         f"{u.cpu_s:.0f} s |")
    return lines


def growth_and_overhead_lines(g: Gauges, after: tuple[int, int], rows: list[dict]) -> list[str]:
    """The rows of what grows with a sweep (peaks while it ran, the Pushgateway after it), then the
    per-cell overhead table."""
    groups_after, scrape_after = after
    return [
        f"| Workflow object, peak | {g.workflow_bytes / 1024:.0f} KiB"
        f"{' (nodes compressed)' if g.compressed else ''} |",
        f"| Pushgateway groups / scrape, peak while running | {g.push_groups} / {g.push_scrape_bytes / 1024:.0f} KiB |",
        f"| Pushgateway groups / scrape, after the sweep | {groups_after} / {scrape_after / 1024:.0f} KiB |",
        f"| Prometheus head series, peak | {g.series} |",
        "",
        f"Per-cell overhead, seconds, over {len(rows)} cells (min | median | p90 | max):",
        "",
        "| interval | min | median | p90 | max |",
        "|---|---|---|---|---|",
        f"| pod created -> runner started | {quantiles([r['runner'] for r in rows])} |",
        f"| pod created -> first byte (includes waiting for a free slot) | "
        f"{quantiles([r['first_byte'] for r in rows])} |",
        f"| pod bound to the node -> first byte | {quantiles([r['bound_first_byte'] for r in rows])} |",
        f"| last byte -> runner finished (result stored) | {quantiles([r['finished'] for r in rows])} |",
        f"| last byte -> pod Succeeded | {quantiles([r['succeeded'] for r in rows])} |",
        f"| last byte -> pod gone (pod GC waits 5 s) | {quantiles([r['gone'] for r in rows])} |",
        f"| bound -> Succeeded, minus flow time (a slot's overhead) | "
        f"{quantiles([r['slot'] - r['flow'] for r in rows])} |",
        "",
    ]


def unplaceable_lines(stored: Stored, node_labels: dict[str, str], stuck_note: str) -> list[str]:
    """What the report says of cells this node cannot run, when there are any."""
    if not stored.unplaceable:
        return []
    lacking = sorted({cc for ccs in stored.unplaceable.values() for cc in ccs})
    offered = sorted(k.removeprefix(CC_LABEL_PREFIX) for k, v in node_labels.items()
                     if k.startswith(CC_LABEL_PREFIX) and v == "true")
    return ["", f"**Cells this node cannot run: {len(stored.unplaceable)}**, asking for {', '.join(lacking)}; the "
            f"node offers {', '.join(offered)} (its kernel's tcp_available_congestion_control, as the node "
            f"probe labels it). {stuck_note or 'Their pods never ran'}; the report names them as missing. "
            "They are not counted as problems below (docs/kubernetes.md: Argo does not fail a Pending pod "
            "under a retry strategy)."]


def measure(cluster: Cluster, services: NodeServices, args: argparse.Namespace) -> tuple[list[str], bool]:
    """The sweep's passes with the pods watched and the daemons and gauges sampled; the report's
    lines, and whether every check held."""
    target = target_of(cluster, args)
    watch = PodWatch(cluster, NAMESPACE)
    sampler = ProcSampler(daemon_pids(cluster), interval=2)
    sampler.start()
    start = time.time()
    passes = Passes()
    poller = GaugePoller(cluster, "")
    try:
        run_passes(cluster, services, args, target, poller, passes)
    finally:
        end = time.time()
        poller.stop()
        if passes.done:
            poller.poll()
        sampler.stop()
        time.sleep(7)   # pod GC deletes succeeded pods 5 s after they finish
        watch.stop()
    fixed = fixed_steps_s(passes.workflow)
    stored = stored_after(services, target, passes)
    after = pushgateway_size(cluster)
    rows = cell_timings(watch, stored.results)
    lines = summary_lines(args, services, target, passes, stored, end - start, fixed)
    lines += daemon_lines(sampler.usage) + growth_and_overhead_lines(poller.gauges, after, rows)
    if rows and stored.cells:
        overhead = statistics.median(r["slot"] - r["flow"] for r in rows)
        lines += projection(overhead, fixed, args.node_cores, args.cell_cpu_full, args.nodes)
    lines += unplaceable_lines(stored, target.node_labels, passes.stuck_note)
    lines += ["", "**Checks** (every cell stored, every experiment's figures, the report): "
              + ("all hold." if not stored.problems else f"{len(stored.problems)} failed:")]
    lines += [f"- {p}" for p in stored.problems[:40]]
    return lines, not stored.problems


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--spec", default="full-sweep", help="preset to run (default full-sweep; quick for a check)")
    p.add_argument("--time-scale", type=float, default=DEFAULT_SCALE,
                   help=f"flow time factor (default {DEFAULT_SCALE:g}; 0.034 is the full sweep's floor)")
    p.add_argument("--sweep", help="sweep name (default SPEC-xSCALE, '.' as '-': quick-x0-1)")
    p.add_argument("--cell-cpu", default="", help="CPU request of every cell pod (default empty: each cell's "
                                                  "own from the cost model, ccsweep.podrequests)")
    p.add_argument("--cell-memory", default="", help="memory request and limit of every cell pod (default "
                                                     "empty: each cell's own)")
    p.add_argument("--store-prefix", help="the store's prefix in the node's bucket, bench/NAME (default: a fresh "
                                          "one per run; give one to resume a run, which then runs only what it lacks)")
    p.add_argument("--keep-workflows", type=Path, metavar="DIR",
                   help="write each pass's Workflow as it ended to DIR/NAME.json.gz (every pod attempt)")
    p.add_argument("--node-idle-wake-us", type=int, metavar="US",
                   help="hold the node's idle CPUs to wake within US microseconds for the whole run (0: they "
                        "poll), as the chart's nodeSetup.idleWakeUs does (default: no request)")
    p.add_argument("--passes", type=int, default=2, help="submits at most while cells lack a result (default 2)")
    p.add_argument("--node-cores", type=int, default=8, help="cores of each node in the projection")
    p.add_argument("--cell-cpu-full", default="1", help="CPU per cell in the projection")
    p.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 4, 8, 16, 50])
    p.add_argument("--timeout", type=float, default=3 * 3600, help="seconds to wait for the workflow")
    p.add_argument("--base", type=Path, default=CACHE / "cluster", help="cluster folder (make cluster-up's)")
    p.add_argument("--netns", default="ccsweep-k8s", help="cluster network namespace (make cluster-up's)")
    p.add_argument("--keep", action="store_true", help="leave a cluster this run started running")
    p.add_argument("--out", type=Path, help="also write the report (markdown) here")
    args = p.parse_args()
    if not 0.001 <= args.time_scale <= 1:
        p.error(f"--time-scale {args.time_scale:g}: must be between 0.001 and 1")
    if args.node_idle_wake_us is not None and not 0 <= args.node_idle_wake_us <= MAX_BOUND_US:
        p.error(f"--node-idle-wake-us {args.node_idle_wake_us}: must be from 0 to {MAX_BOUND_US}")
    lines, ok = run(args)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
