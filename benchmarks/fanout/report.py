"""The fan-out's report, in Markdown, from the runs' results alone: the machine and the method, one
table row per run, then notes on what the table cannot say (the Sweep's status lag, a watch that
restarted, a stand-in that failed, the controller's complaints).
"""

from __future__ import annotations

import argparse
import subprocess
from datetime import UTC, datetime

from benchmarks.fanout.controlplane import NETNS, REPO
from benchmarks.fanout.measure import Run
from benchmarks.fanout.workload import PRESET
from ccsweep.plan import CHUNK_SIZE
from support.procstat import machine

COLUMNS = ("nodes", "cells", "mode", "parallelism", "controller qps/burst", "plan result", "chunk Workflows",
           "first cell pod", "fan-out", "all bound", "pods/s (avg, best 1 s)", "workflow done", "phase",
           "Workflow object", "largest chunk Workflow", "controller CPU s (peak cores) / RSS MB",
           "apiserver CPU s / RSS MB", "etcd CPU s / RSS MB", "scheduler CPU s", "KWOK CPU s", "throttled")


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def heading(args: argparse.Namespace) -> list[str]:
    """The title, the machine and how the runs were made."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                            text=True).stdout.strip()
    return [
        f"# Simulated fan-out with KWOK, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "",
        f"**Machine.** {machine()}. Real etcd (Debian), kube-apiserver, kube-controller-manager, "
        "kube-scheduler, Argo's workflow-controller and KWOK at the releases versions.env pins "
        f"(commit {commit}), all on this machine's cores, in network namespace {NETNS}.",
        "",
        f"**How.** `python -m benchmarks.fanout.bench` (`make bench-fanout`). Fake nodes of {args.node_cores} cores, "
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
    ]


def row(r: Run) -> str:
    """The run's line of the table (COLUMNS)."""
    x = r.results
    u = x["usage"]
    wc, api, etcd = u["workflow-controller"], u["kube-apiserver"], u["etcd"]
    size = f"{x['workflow_bytes'] / 1024:.0f} KiB" + (" (nodes compressed)" if x["compressed_nodes"] else "")
    plan = (f"{x['plan_result_bytes'] / 1024:.0f} KiB" if not x["chunks"] else "[] + chunks") + (
        " (cut)" if x["plan_result_cut"] else "")
    chunks = (f"{x['chunk_workflows']} of {x['chunks']} x {x['chunk_parallelism']} at once"
              f" ({', '.join(sorted(set(x['chunk_phases'])))})" if x["chunks"] else "-")
    largest = (f"{x['chunk_bytes_max'] / 1024:.0f} KiB" + (" (compressed)" if x["chunk_compressed"] else "")
               if x["chunk_workflows"] else "-")
    return (f"| {r.nodes} | {r.cells} | {r.mode} | {r.parallelism} | {r.qps:g}/{r.burst} | "
            f"{plan if r.mode != 'items' else '-'} | {chunks} | {fmt(x['first_pod_s'])} | {fmt(x['fan_out_s'])} | "
            f"{fmt(x['all_bound_s'])} | {fmt(x['pods_per_s'])}, {x['best_second']} | {fmt(x['done_s'])} | "
            f"{x['phase']} | {size} | {largest} | "
            f"{wc['cpu_s']:.0f} ({wc['peak_cpu']:.2f}) / {wc['peak_rss_mb']:.0f} | "
            f"{api['cpu_s']:.0f} / {api['peak_rss_mb']:.0f} | {etcd['cpu_s']:.0f} / {etcd['peak_rss_mb']:.0f} | "
            f"{u['kube-scheduler']['cpu_s']:.0f} | {u['kwok']['cpu_s']:.0f} | {x['throttled_logs']} |")


def operator_note(r: Run) -> str | None:
    """How the operator kept the Sweep's status, for a run through it."""
    status, operator = r.results.get("sweep_status"), r.results.get("usage", {}).get("operator")
    if not (status and operator):
        return None
    return (f"- {r.nodes} nodes, {r.cells} cells, operator: the Sweep counted {status['counted']} "
            f"cells done; a cell pod's success reached the Sweep's status after "
            f"{fmt(status['lag_median_s'])} s (median), {fmt(status['lag_max_s'])} s (max); its final "
            f"phase {fmt(status['final_phase_lag_s'])} s after the Workflow's; operator CPU "
            f"{operator['cpu_s']:.0f} s (peak {operator['peak_cpu']:.2f} cores), RSS "
            f"{operator['peak_rss_mb']:.0f} MB.")


def watch_note(r: Run) -> str | None:
    """Where the pod watch missed pods or had to start again: its counts are then lower bounds."""
    x = r.results
    if not (x and (x["bound"] < r.cells or x["watch_restarts"])):
        return None
    return (f"- {r.nodes} nodes, {r.cells} cells, {r.mode}: the pod watch saw {x['pods_seen']} cell "
            f"pods, {x['bound']} bound, and was started again {x['watch_restarts']} time(s) "
            "(pods created and deleted while it restarted are not counted)")


def stand_in_note(r: Run) -> str | None:
    if not r.results.get("stand_in_errors"):
        return None
    return (f"- {r.nodes} nodes, {r.cells} cells, {r.mode}: the stand-in for argoexec failed: "
            + "; ".join(r.results["stand_in_errors"]))


def controller_note(r: Run) -> str | None:
    """The Workflow's message and the controller's 'too large' complaints, when there are any."""
    if not (r.results.get("message") or r.results.get("too_large_logs")):
        return None
    return (f"- {r.nodes} nodes, {r.cells} cells, {r.mode}: {r.results['message'][:160]} "
            f"({r.results['too_large_logs']} 'maximum allowed size' lines in the controller's log)")


def report(runs: list[Run], args: argparse.Namespace, node_ready_s: dict[int, float]) -> str:
    lines = [*heading(args), "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += [row(r) for r in runs if r.results]
    lines += ["", "Nodes Ready (seconds after creating them): "
              + ", ".join(f"{n} nodes {s:.0f}" for n, s in node_ready_s.items()), ""]
    for note in (operator_note, watch_note, stand_in_note, controller_note):
        lines += [line for r in runs if (line := note(r)) is not None]
    return "\n".join(lines) + "\n"
