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
whose work the workflow depends on (standin.py):
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

One module per part: kwok.py (fake nodes, pod stages), controlplane.py (the daemons), workload.py
(what is submitted, the plan's items), submit.py (a run started as its mode says), standin.py
(argoexec's part), watch.py (pod events, the Sweep's status), measure.py (one run, its results)
and report.py; this one reads the arguments and runs them in turn.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from benchmarks.fanout.controlplane import BIN, ControlPlane
from benchmarks.fanout.measure import Run, measure
from benchmarks.fanout.report import report
from benchmarks.fanout.workload import plan_items
from ccsweep.plan import CC_LABEL_PREFIX
from ccsweep_operator.nodeprobe import label_value

CACHE = Path(os.environ.get("CCSWEEP_CACHE", Path.home() / ".cache" / "ccsweep"))
DEFAULT_RUNS = ["50:390", "50:3900", "400:390", "400:390@operator", "400:3900"]
TOOLS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "workflow-controller", "argo",
         "kwok")


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


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", action="append", metavar="NODES:CELLS[:QPS:BURST][@MODE]",
                   help="a fan-out to measure, in order (nodes only grow; a new qps/burst restarts the "
                        "controller). MODE: sweep (argo submit workflows/full-sweep.yaml, the default), "
                        "operator (a Sweep object, through the ccsweep operator), items (the cell step fed "
                        "from a parameter). Default: " + " ".join(DEFAULT_RUNS))
    p.add_argument("--node-cores", type=int, default=16, help="cores of each fake node")
    p.add_argument("--cell-seconds", type=float, default=20, help="simulated time a cell pod runs")
    p.add_argument("--parallelism", type=int, default=0,
                   help="the Workflow's spec.parallelism (0: the run's cell count, so every cell may start)")
    p.add_argument("--controller-qps", type=float, default=20, help="workflow-controller --qps (Argo's default 20)")
    p.add_argument("--controller-burst", type=int, default=30, help="workflow-controller --burst (Argo's default 30)")
    p.add_argument("--timeout", type=float, default=900, help="seconds to wait for one workflow")
    p.add_argument("--out", type=Path, help="write the report (markdown) here as well")
    return p


def checked_runs(p: argparse.ArgumentParser, args: argparse.Namespace) -> list[Run]:
    """The runs asked for, once the arguments, root and the pinned tools are there (else exit 2)."""
    try:
        runs = [parse_run(text, args) for text in (args.run or DEFAULT_RUNS)]
    except argparse.ArgumentTypeError as e:
        p.error(str(e))
    if any(r.nodes < q.nodes for q, r in zip(runs, runs[1:], strict=False)):
        p.error("--run: node counts must not shrink from one run to the next")
    if os.geteuid() != 0:
        p.error("must run as root (a network namespace of its own)")
    for tool in TOOLS:
        if not (BIN / tool).exists():
            p.error(f"{BIN / tool} missing: make tools && hack/tools/kwok.sh")
    return runs


def run_all(plane: ControlPlane, runs: list[Run], items_all: list[dict], args: argparse.Namespace) -> dict[int, float]:
    """Every run in turn on one control plane, nodes grown and the controller restarted as they ask;
    the seconds each node count took to be Ready."""
    kernel = label_value(platform.release())
    # Every algorithm the plan asks for (the algorithms experiment goes beyond BBR and CUBIC): a
    # cluster whose kernels offer them, as the node probe would label it.
    algorithms = sorted({key.removeprefix(CC_LABEL_PREFIX) for item in items_all for key in item["node_selector"]})
    node_ready: dict[int, float] = {}
    for run in runs:
        if (run.qps, run.burst) != (plane.controller_qps, plane.controller_burst):
            plane.restart_controller(run.qps, run.burst)
        if run.mode == "operator":
            plane.start_operator()
        if run.nodes not in node_ready:
            node_ready[run.nodes] = plane.grow_nodes(run.nodes, args.node_cores, kernel, algorithms)
        print(f"[fanout] {run.nodes} nodes, {run.cells} cells ({run.mode}), parallelism {run.parallelism}, "
              f"qps {run.qps:g}/{run.burst}", file=sys.stderr, flush=True)
        measure(plane, run, items_all[: run.cells], args.timeout)
        print(f"[fanout]   {json.dumps(run.results)}",   # kept even if a later run is interrupted
              file=sys.stderr, flush=True)
    return node_ready


def main() -> int:
    p = parser()
    args = p.parse_args()
    runs = checked_runs(p, args)
    workdir = CACHE / "fanout"
    workdir.mkdir(parents=True, exist_ok=True)
    plan_dir = Path(tempfile.mkdtemp(prefix="plan-", dir=workdir.parent))
    node_ready: dict[int, float] = {}
    plane = ControlPlane(workdir, int(args.cell_seconds * 1000), runs[0].qps, runs[0].burst)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        items_all = plan_items(max(r.cells for r in runs), plan_dir)
        plane.start()
        node_ready = run_all(plane, runs, items_all, args)
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
