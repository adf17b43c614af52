"""What each container of a sweep's cell pods used of the CPU, from the kubelet's own accounting.

A cell pod's request is the sum of its containers' requests, and Argo's wait container is one of
them: what it asks for is held from every cell for the pod's whole life. Whether it needs what it
asks is a measurement: the kubelet's summary API (`/api/v1/nodes/NODE/proxy/stats/summary`, the
same numbers `kubectl top` reads) gives each container's cumulative CPU time. This polls it for
every node while a sweep runs, writing one row per container and poll (appended after each poll,
so an interrupted run keeps what it read):

    python -m benchmarks.cluster.container_cpu sample --namespace ccsweep-bench --out samples.csv
    python -m benchmarks.cluster.container_cpu summary samples.csv

`sample` runs until interrupted (SIGINT or SIGTERM), with the kubeconfig in KUBECONFIG, where the
API server can be reached (the local cluster's namespace). `summary` prints, per container name,
the CPU time each pod's container had used when last seen and its mean rate over the pod's life
up to then (from the pod's start), as median, p90 and maximum over pods.
"""

from __future__ import annotations

import argparse
import csv
import json
import signal
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from pathlib import Path

import kubernetes

#: Seconds between polls: the kubelet's stats are refreshed about every 10-15 s anyway.
DEFAULT_INTERVAL_S = 15.0
#: Seconds one summary request may take.
REQUEST_TIMEOUT_S = 20


@dataclass(frozen=True)
class Sample:
    """One container's cumulative CPU time at one poll."""

    polled_at: str
    node: str
    pod: str
    pod_started_at: str
    container: str
    cpu_s: float


def poll(api: kubernetes.client.CoreV1Api, namespace: str) -> Iterator[Sample]:
    """Every container of `namespace`'s pods on every node, as the kubelets account them now."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    for node in api.list_node(_request_timeout=REQUEST_TIMEOUT_S).items:
        summary = api.connect_get_node_proxy_with_path(node.metadata.name, "stats/summary",
                                                       _request_timeout=REQUEST_TIMEOUT_S, _preload_content=False)
        for pod in json.loads(summary.data).get("pods", []):
            ref = pod.get("podRef", {})
            if ref.get("namespace") != namespace:
                continue
            for container in pod.get("containers", []):
                used_ns = container.get("cpu", {}).get("usageCoreNanoSeconds")
                if used_ns is not None:
                    yield Sample(now, node.metadata.name, ref.get("name", ""), pod.get("startTime", ""),
                                 container.get("name", ""), used_ns / 1e9)


def sample(namespace: str, out: Path, interval_s: float) -> int:
    """Polls until SIGINT or SIGTERM, appending each poll's rows to `out`; returns the rows written."""
    kubernetes.config.load_kube_config()
    api = kubernetes.client.CoreV1Api()
    stop = {"now": False}
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.update(now=True))
    names = [f.name for f in fields(Sample)]
    written = 0
    new = not out.exists()
    with out.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=names)
        if new:
            writer.writeheader()
        while not stop["now"]:
            try:
                rows = list(poll(api, namespace))
            except Exception as exc:  # noqa: BLE001 - a poll the API refused or timed out: try the next
                print(f"poll failed: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)
                rows = []
            writer.writerows(asdict(row) for row in rows)
            handle.flush()
            written += len(rows)
            deadline = time.monotonic() + interval_s
            while not stop["now"] and time.monotonic() < deadline:
                time.sleep(0.5)
    return written


def summary(samples: Path) -> list[str]:
    """Per container name: each pod's CPU time when last seen and its mean rate over the pod's
    life to then, as median, p90 and maximum over pods (a markdown table)."""
    last: dict[tuple[str, str], dict[str, str]] = {}
    with samples.open(newline="") as handle:
        for row in csv.DictReader(handle):
            last[(row["pod"], row["container"])] = row  # rows come in poll order: the last one stays
    by_container: dict[str, list[tuple[float, float]]] = {}
    for row in last.values():
        polled, started = datetime.fromisoformat(row["polled_at"]), datetime.fromisoformat(row["pod_started_at"])
        life_s = (polled - started).total_seconds()
        if life_s > 0:
            by_container.setdefault(row["container"], []).append((float(row["cpu_s"]), float(row["cpu_s"]) / life_s))
    lines = ["| container | pods | CPU time, median / p90 / max (s) "
             "| mean rate over the pod's life, median / p90 / max (millicores) |",
             "|---|---|---|---|"]
    for name, rows in sorted(by_container.items()):
        cpu = sorted(c for c, _ in rows)
        rate = sorted(r * 1000 for _, r in rows)
        lines.append(f"| {name} | {len(rows)} | {_three(cpu, '.2f')} | {_three(rate, '.1f')} |")
    return lines


def _three(values: list[float], form: str) -> str:
    p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
    return f"{statistics.median(values):{form}} / {p90:{form}} / {values[-1]:{form}}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("sample", help="poll the kubelets until interrupted")
    run.add_argument("--namespace", required=True, help="the sweep's namespace")
    run.add_argument("--out", type=Path, required=True, help="CSV to append the samples to")
    run.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_S, help="seconds between polls (1-600)")
    show = commands.add_parser("summary", help="each container's use, over pods")
    show.add_argument("samples", type=Path, help="a CSV that `sample` wrote")
    args = parser.parse_args(argv)
    if args.command == "sample":
        if not 1 <= args.interval <= 600:
            parser.exit(2, f"--interval {args.interval:g}: must be 1 to 600 seconds\n")
        print(f"{sample(args.namespace, args.out, args.interval)} rows", file=sys.stderr)
    else:
        print("\n".join(summary(args.samples)))


if __name__ == "__main__":
    main()
