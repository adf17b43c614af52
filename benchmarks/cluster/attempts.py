"""Every cell pod attempt of kept Workflows as one CSV row, their outcomes summed, and a figure.

`benchmarks.cluster.full_sweep --keep-workflows DIR` keeps each pass's Workflow as it ended
(gzipped JSON): every pod attempt with its times, phase, exit code and the requests it asked for.
This reads them back:

    python -m benchmarks.cluster.attempts DIR/*.json.gz --csv attempts.csv --figure attempts.png

and prints, per Workflow, how many attempts succeeded, came back late (exit 75: the cell's
self-check kept the record under late/ and the template retried it with twice the requests),
failed otherwise, were stopped with their Workflow (`argo stop`) or never ended. An attempt's
times are its Argo pod node's: created (which includes any wait to be scheduled) and ended; the
figure counts attempts ended, by outcome, over the run.
"""

from __future__ import annotations

import argparse
import base64
import csv
import json
import re
import sys
from collections import Counter
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from pathlib import Path

from matplotlib.figure import Figure

from ccsweep.gunzip import gunzip
from ccsweep.linkdesc import LINKS

CELL_TEMPLATES = tuple(link.pod_template for link in LINKS.values())
#: `ccsweep cell`'s exit code for a measurement whose link ran late (ccsweep.exitcodes).
EXIT_LATE = "75"
#: How Argo's message for a node ends by `argo stop` begins.
SHUTDOWN = "workflow shutdown with strategy:"
#: Unpacked node status (or kept Workflow) of one Workflow, at most: etcd holds a Workflow of
#: 1.5 MiB, and node status compresses about tenfold.
MAX_NODES_BYTES = 64 << 20
#: The attempt number Argo appends to a retried node's name: "...(2)".
ATTEMPT = re.compile(r"\((\d+)\)$")


@dataclass(frozen=True)
class Attempt:
    """One cell pod attempt, as its Workflow recorded it."""

    workflow: str
    cell: str
    attempt: int
    phase: str
    exit_code: str
    cpu_request: str
    memory_request: str
    created_at: str
    finished_at: str
    seconds: float | None
    message: str
    #: The node the pod ran on (empty in tables written before the column was).
    node: str = ""

    @property
    def outcome(self) -> str:
        """succeeded, late (exit 75), stopped (the Workflow was stopped: the run's end, not the
        cell's), failed (any other end) or unfinished (pending or running)."""
        if self.phase == "Succeeded":
            return "succeeded"
        if self.phase in ("Pending", "Running"):
            return "unfinished"
        if self.exit_code == EXIT_LATE:
            return "late"
        return "stopped" if self.message.startswith(SHUTDOWN) else "failed"


def _parameter(node: dict, name: str) -> str:
    return next((p.get("value", "") for p in node.get("inputs", {}).get("parameters", []) if p["name"] == name), "")


def timestamp(text: str | None) -> datetime | None:
    """A Workflow's or a record's time (ISO 8601, 'Z' or an offset), None where empty."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def nodes_of(workflow: dict) -> dict[str, dict]:
    """The Workflow's nodes, unpacked where the controller compressed them (past 1 MiB it keeps them
    gzipped and base64'd in status.compressedNodes); the unpacking is bounded."""
    status = workflow.get("status", {})
    if "compressedNodes" in status:
        return json.loads(gunzip(base64.b64decode(status["compressedNodes"]), MAX_NODES_BYTES))
    return status.get("nodes", {})


def attempts_of(workflow: dict) -> list[Attempt]:
    """The cell pod attempts of one Workflow, in the order they were created."""
    rows = []
    for node in nodes_of(workflow).values():
        template = node.get("templateRef", {}).get("template") or node.get("templateName")
        if node.get("type") != "Pod" or template not in CELL_TEMPLATES:
            continue
        number = ATTEMPT.search(node.get("name", ""))
        attempt = int(number.group(1)) if number else 0
        created, finished = timestamp(node.get("startedAt")), timestamp(node.get("finishedAt"))
        rows.append(Attempt(
            workflow=workflow["metadata"]["name"], cell=_parameter(node, "id"), attempt=attempt,
            phase=node.get("phase", ""), exit_code=str(node.get("outputs", {}).get("exitCode", "")),
            cpu_request=_parameter(node, "cpu" if attempt == 0 else "retry-cpu"),
            memory_request=_parameter(node, "memory" if attempt == 0 else "retry-memory"),
            created_at=node.get("startedAt") or "", finished_at=node.get("finishedAt") or "",
            seconds=(finished - created).total_seconds() if created and finished else None,
            message=(node.get("message") or "")[:200], node=node.get("hostNodeName") or ""))
    return sorted(rows, key=lambda a: (a.created_at, a.cell, a.attempt))


def read_attempts(path: Path) -> list[Attempt]:
    """Attempts back from a CSV this module wrote."""
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    names = [f.name for f in fields(Attempt)]
    return [Attempt(**{**{n: row.get(n, "") for n in names}, "attempt": int(row["attempt"]),
                       "seconds": float(row["seconds"]) if row["seconds"] else None}) for row in rows]


def load(path: Path) -> dict:
    """A kept Workflow (.json or .json.gz); the unpacking is bounded as the nodes' is."""
    raw = path.read_bytes()
    return json.loads(gunzip(raw, MAX_NODES_BYTES) if path.suffix == ".gz" else raw)


def summary_lines(attempts: list[Attempt]) -> list[str]:
    """A markdown table of outcomes per Workflow, then the cells that needed more than one attempt."""
    lines = ["| workflow | attempts | succeeded | late (exit 75) | failed otherwise | stopped with the Workflow "
             "| unfinished | cells stored |",
             "|---|---|---|---|---|---|---|---|"]
    for workflow in dict.fromkeys(a.workflow for a in attempts):
        mine = [a for a in attempts if a.workflow == workflow]
        counts = Counter(a.outcome for a in mine)
        stored = len({a.cell for a in mine if a.outcome == "succeeded"})
        lines.append(f"| {workflow} | {len(mine)} | {counts['succeeded']} ({counts['succeeded'] / len(mine):.0%}) | "
                     f"{counts['late']} | {counts['failed']} | {counts['stopped']} | {counts['unfinished']} | "
                     f"{stored} |")
    retried = Counter(a.cell for a in attempts if a.attempt > 0)
    lines += ["", f"Cells retried at least once: {len(retried)}; attempts past the first: {sum(retried.values())}."]
    return lines


def draw(attempts: list[Attempt], path: Path) -> None:
    """Attempts ended so far, by outcome, over each Workflow's run (one panel each): how fast cells
    were stored and how many attempts were spent on late or failed ones meanwhile."""
    workflows = list(dict.fromkeys(a.workflow for a in attempts if a.finished_at))
    if not workflows:
        return
    fig = Figure(figsize=(9, 2.8 * len(workflows)), layout="constrained")  # the Agg canvas, as ccsweep's figures
    for ax, workflow in zip(fig.subplots(len(workflows), 1, squeeze=False)[:, 0], workflows, strict=True):
        mine = [a for a in attempts if a.workflow == workflow]
        start = min(timestamp(a.created_at) for a in mine if a.created_at)
        ended = sorted((timestamp(a.finished_at), a.outcome) for a in mine if a.finished_at)
        for outcome, colour in (("succeeded", "tab:green"), ("late", "tab:orange"), ("failed", "tab:red")):
            minutes = [(at - start).total_seconds() / 60 for at, o in ended if o == outcome]
            ax.step([0, *minutes], range(len(minutes) + 1), where="post", color=colour,
                    label=f"{outcome} ({len(minutes)})")
        ax.set_title(workflow, fontsize=9)
        ax.set_xlabel("minutes since its first attempt was created")
        ax.set_ylabel("attempts ended")
        ax.legend(loc="upper left", fontsize=8)
    fig.savefig(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cluster.attempts", description=__doc__.split("\n\n")[0])
    parser.add_argument("workflows", type=Path, nargs="+", help="kept Workflows (.json or .json.gz)")
    parser.add_argument("--csv", type=Path, help="write one row per attempt here")
    parser.add_argument("--figure", type=Path, help="write the attempts-in-flight figure here (PNG or SVG)")
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.workflows if not p.is_file()]
    if missing:
        parser.error(f"workflows: no such file: {missing[0]}")
    attempts = [a for path in args.workflows for a in attempts_of(load(path))]
    if args.csv:
        with args.csv.open("w", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=[f.name for f in fields(Attempt)] + ["outcome"])
            writer.writeheader()
            writer.writerows({**asdict(a), "outcome": a.outcome} for a in attempts)
    if args.figure:
        draw(attempts, args.figure)
    print("\n".join(summary_lines(attempts)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
