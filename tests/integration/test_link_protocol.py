"""A third link needs one new module and no edit to the lifecycle: a plain veth pair, in tests only.

VethLink is written against the Link protocol alone (runner/attempt.py), as a netem or hardware
link would be: it joins the cell's namespaces with a veth pair, addressed as ccsweep-link's TUN
devices are, and adds no emulation, so the cell is kernel TCP over a virtual wire. run_cell takes
it as it is and runs a real flow through it: the same namespaces, endpoints, go, collection and
clean-up as the two real links. It measures nothing of its own, so its record has no link summary.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ccsweep.cell import Cell
from ccsweep.expand import expand
from ccsweep.result import LinkSummary
from ccsweep.runner.attempt import CellRun, Link, LinkClock
from ccsweep.runner.endpoints import receiver_args, sender_args
from ccsweep.runner.live import LiveFeed
from ccsweep.runner.netns import CellNamespaces, namespace_names, read_sysctls
from ccsweep.runner.procs import Child
from ccsweep.runner.run import run_cell
from ccsweep.runner.runqueue import RunQueueSummary
from ccsweep.specload import parse_spec


class VethLink:
    """A veth pair between the namespaces, 10.0.0.1 on the sender's side and 10.0.0.2 on the receiver's."""

    process_names: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.calls: list[str] = []
        self._ns: CellNamespaces | None = None

    def prepare(self, run: CellRun) -> None:
        self.calls.append("prepare")

    def start(self, run: CellRun, ns: CellNamespaces, live: LiveFeed) -> None:
        self.calls.append("start")
        self._ns = ns
        for argv in (["-n", ns.sender, "link", "add", "veth-s", "type", "veth", "peer", "name", "veth-r",
                      "netns", ns.receiver],
                     ["-n", ns.sender, "addr", "add", "10.0.0.1/24", "dev", "veth-s"],
                     ["-n", ns.receiver, "addr", "add", "10.0.0.2/24", "dev", "veth-r"],
                     ["-n", ns.sender, "link", "set", "veth-s", "up"],
                     ["-n", ns.receiver, "link", "set", "veth-r", "up"]):
            subprocess.run(["ip", *argv], check=True, capture_output=True, timeout=30)

    def receiver_argv(self, run: CellRun, ns: CellNamespaces) -> list[str]:
        return [*ns.exec_prefix(ns.receiver), sys.executable, *receiver_args(run.cell, "--label", ns.receiver)]

    def start_sender(self, run: CellRun, ns: CellNamespaces, live: LiveFeed) -> Child:
        self.calls.append("start_sender")
        argv = [*ns.exec_prefix(ns.sender), sys.executable, *sender_args(run.cell, "--label", ns.sender)]
        return run.start(Child, "sender", argv, run.workdir / "sender.stderr", on_event=live.on_sender)

    def ready(self, run: CellRun) -> LinkClock | None:
        self.calls.append("ready")
        return None

    def end(self, run: CellRun) -> dict[str, list[int]]:
        self.calls.append("end")
        assert self._ns is not None
        return read_sysctls(self._ns.receiver)

    def stop(self, run: CellRun, run_queue: RunQueueSummary | None) -> LinkSummary | None:
        self.calls.append("stop")
        return None


def veth_cell() -> Cell:
    (cell,) = expand(parse_spec({"name": "veth", "experiments": [{
        "name": "veth", "cc": ["cubic"], "loss_percent": [0], "rtt_ms": [20], "bandwidth_mbps": [10],
        "duration_s": 3, "warmup_s": 1, "seed": 1}]}, origin="test"))
    return cell


def test_the_lifecycle_runs_a_real_flow_over_a_link_it_was_never_told_of(tmp_path: Path):
    link = VethLink()
    checked: Link = link  # the protocol is all the lifecycle knows of it
    cell = veth_cell()
    output = run_cell(cell, tmp_path / "work", link=checked)
    result = output.result
    assert result.status == "ok", result.error
    assert link.calls == ["prepare", "start", "start_sender", "ready", "end", "stop"]
    # No emulation: neither the cell's 10 Mbit/s nor its 20 ms is applied, so the kernel's flow
    # runs far above the rate, on a virtual wire's round trip.
    assert result.goodput_mbps is not None and result.goodput_mbps > 50, result.goodput_mbps
    (flow,) = result.flows
    assert flow.bytes_received > 0 and flow.min_rtt_ms is not None and flow.min_rtt_ms < 5, flow
    assert output.timeseries is not None and len(output.timeseries.flows) == 1
    assert result.link is None and result.bottleneck_throughput_mbps is None and output.files == {}
    assert result.environment.tcp_rmem == list(cell.params.buffers.tcp_rmem)
    names = namespace_names(cell.id)
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert names.sender not in listed and names.receiver not in listed


def test_a_link_that_fails_to_come_up_fails_the_cell_and_is_still_stopped(tmp_path: Path):
    class Broken(VethLink):
        def start(self, run: CellRun, ns: CellNamespaces, live: LiveFeed) -> None:
            self.calls.append("start")
            raise RuntimeError("no such device: veth-s")

    link = Broken()
    output = run_cell(veth_cell(), tmp_path / "work", link=link)
    assert output.result.status == "failed"
    assert output.result.error == "no such device: veth-s"
    assert link.calls == ["prepare", "start", "stop"]
