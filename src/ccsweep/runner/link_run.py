"""ccsweep-link as a cell's Link: the emulator between the two namespaces, endpoints on either side.

The emulator creates the TUN devices and addresses (10.0.0.1 in the sender namespace, 10.0.0.2
in the receiver's) and prints `ready`, so it starts before the endpoints, which bind those
addresses. Its `ready` is the zero of its logs' clock; a rate schedule's trace, and a delay
schedule's steps, start SCHEDULE_LEAD_S later (runner/link.py), so t0 is placed exactly there and
the schedule's clock is the flows'. It measures itself: stopped with SIGTERM, it flushes its logs and prints its summary
(counters and per-packet lateness), a failed attempt's too.
"""

from __future__ import annotations

import os
import signal
import sys
from functools import partial

from ccsweep.linkrules import release_window_for
from ccsweep.result import LinkSummary
from ccsweep.runner.attempt import END_GRACE_S, READY_TIMEOUT_S, CellRun, LinkClock
from ccsweep.runner.endpoints import receiver_args, sender_args
from ccsweep.runner.link import (
    deadline_runtime_us,
    find_link_binary,
    injected_lateness,
    link_command,
    link_summary,
    prepare_delay_traces,
    prepare_traces,
    realtime_priority,
)
from ccsweep.runner.live import LiveFeed
from ccsweep.runner.netns import CellNamespaces, read_sysctls
from ccsweep.runner.procs import Child, ChildError
from ccsweep.runner.runqueue import RunQueueSummary

#: A generated rate or delay schedule starts this long after the emulator, so the flows can start on it.
SCHEDULE_LEAD_S = 2.0


class EmulatorLink:
    """ccsweep-link for one attempt (see the module docstring)."""

    process_names: tuple[str, ...] = ("ccsweep-link",)

    def __init__(self, binary: str | os.PathLike[str] | None = None) -> None:
        self._binary = binary
        self._lead_s = 0.0
        self._command: partial[list[str]] | None = None
        self._ns: CellNamespaces | None = None
        self._clock: LinkClock | None = None

    def prepare(self, run: CellRun) -> None:
        p = run.cell.params
        binary = find_link_binary(self._binary)
        scheduled = any(d.rate_schedule or d.delay_schedule for d in (p.uplink, p.downlink))
        self._lead_s = SCHEDULE_LEAD_S if scheduled else 0.0
        # The emulator's own time limit is a safety net only: the runner stops it with SIGTERM.
        limit_s = self._lead_s + READY_TIMEOUT_S * 2 + p.duration_s + END_GRACE_S
        traces = prepare_traces(run.cell, run.workdir, self._lead_s, limit_s)
        self._command = partial(link_command, run.cell, binary, workdir=run.workdir, traces=traces, duration_s=limit_s,
                                priority=realtime_priority(), inject_lateness=injected_lateness(run.attempt),
                                release_window=release_window_for(run.cell, run.threshold_us),
                                delay_traces=prepare_delay_traces(run.cell, run.workdir, self._lead_s),
                                deadline_runtime=deadline_runtime_us(run.cpu_milli))

    def start(self, run: CellRun, ns: CellNamespaces, live: LiveFeed) -> None:
        assert self._command is not None, "prepared first"
        argv = self._command(sender_netns=ns.sender, receiver_netns=ns.receiver)
        link = run.link = run.start(Child, "ccsweep-link", argv, run.workdir / "link.stderr", on_event=live.on_link,
                                    end_event="summary")
        self._ns = ns
        self._clock = LinkClock(link.wait_event("ready", READY_TIMEOUT_S)["_mono_ns"], self._lead_s)

    def receiver_argv(self, run: CellRun, ns: CellNamespaces) -> list[str]:
        return [*ns.exec_prefix(ns.receiver), sys.executable, *receiver_args(run.cell, "--label", ns.receiver)]

    def start_sender(self, run: CellRun, ns: CellNamespaces, live: LiveFeed) -> Child:
        argv = [*ns.exec_prefix(ns.sender), sys.executable, *sender_args(run.cell, "--label", ns.sender)]
        return run.start(Child, "sender", argv, run.workdir / "sender.stderr", on_event=live.on_sender)

    def ready(self, run: CellRun) -> LinkClock | None:
        return self._clock

    def end(self, run: CellRun) -> dict[str, list[int]]:
        assert run.link is not None and self._ns is not None
        run.link.stop(signal.SIGTERM, timeout=10)
        if not run.link.has_ended():
            raise ChildError(f"{run.link.name} still runs after it was stopped")
        return read_sysctls(self._ns.receiver)

    def stop(self, run: CellRun, run_queue: RunQueueSummary | None) -> LinkSummary | None:
        summaries = run.link.of_kind("summary") if run.link else []
        # A failed attempt's too: the emulator writes it whenever it is stopped.
        return link_summary(summaries[0], run.threshold_us, run_queue) if summaries else None
