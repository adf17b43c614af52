"""run_cell: one cell from namespaces to result record.

Order of work, and why:
1. the algorithms are checked first, so a kernel without one fails fast with nothing to undo;
2. namespaces, then ccsweep-link (which creates the TUN devices and addresses), then the
   receiver and the sender together (their interpreters start in parallel: a cell pod's CPU limit
   makes each start-up cost a good part of a second); the sender checks again that its sockets
   accept each algorithm and connects only after `go`, which waits for the receiver to listen
   (ReBBR's clients could hang when they connected first);
3. all endpoints get one t0 on CLOCK_MONOTONIC, the flows run, the endpoints exit on their own;
4. the emulator is stopped with SIGTERM and prints its summary; children are stopped by PID and
   the namespaces deleted on every path, Ctrl-C included;
5. measurements are computed from what was recorded and the link logs are compressed.

Any failure but an unavailable algorithm or an interrupt becomes a "failed" record with a one-line
error, which the store keeps for diagnosis without marking the cell done; one whose bounded wait on
a child ran out (a ready or end wait, the output's end) is "starved" instead, and is run again.
The record keeps what was measured up to then (the flows' samples, the emulator's statistics and
logs), and its error names the child, its exit status and last lines, and how long each wait on
the children took.

A child is finished when it exited 0 having written its end event (`done` for the endpoints,
`summary` for the emulator), read after the end of its output however late (Child.has_ended):
a loaded machine delays the runner's readers, never the verdict.
"""

from __future__ import annotations

import gzip
import os
import platform
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ccsweep import __version__
from ccsweep.buildinfo import source_commit
from ccsweep.cell import Cell
from ccsweep.linkrules import lateness_threshold_us as lateness_threshold_for
from ccsweep.linkrules import release_window_for
from ccsweep.result import CellResult, CellStatus, Environment, LinkSummary, TimeSeries
from ccsweep.runner.api import (
    CellObserver,
    CellOutput,
    CellUnavailable,
    CongestionControlUnavailable,
    KernelUnavailable,
)
from ccsweep.runner.collect import cell_goodput, flow_result, flow_series, link_series, receiver_curves, samples_of
from ccsweep.runner.link import (
    find_link_binary,
    injected_lateness,
    link_command,
    link_files,
    link_summary,
    prepare_traces,
    realtime_priority,
)
from ccsweep.runner.live import LiveFeed
from ccsweep.runner.measure import read_link_log
from ccsweep.runner.netns import CellNamespaces, cell_namespaces, deferred_interrupts, read_sysctls
from ccsweep.runner.procs import Child, ChildError, ChildTimeout, Wait
from ccsweep.runner.runqueue import RunQueueDelay, RunQueueSummary
from ccsweep.runner.tcpinfo import available_congestion_controls, unavailable_congestion_controls

#: A generated rate schedule starts this long after the emulator, so the flows can start on it.
SCHEDULE_LEAD_S = 2.0
#: Time the emulator, receiver and sender may take to come up.
READY_TIMEOUT_S = 20.0
#: Time past the flows' end allowed for the endpoints' last words before the cell fails.
END_GRACE_S = 15.0
#: t0 this far after everyone is ready: the `go` line must reach both endpoints first, even on a
#: busy machine (a late endpoint would start its flow late and lose goodput it never had a chance at).
#: One CFS period (100 ms): a pod that spent its CPU quota on start-up waits at most that long.
GO_MARGIN_S = 0.1
RECEIVER_PORT = 5201
#: The emulator's process, whose run-queue delay the runner samples as it does Mahimahi's shells'.
LINK_NAMES = ("ccsweep-link",)


def check_kernel(cell: Cell, running: str) -> None:
    """Raise KernelUnavailable when the cell is pinned to a kernel release other than `running`."""
    if cell.params.kernel is not None and cell.params.kernel != running:
        raise KernelUnavailable(cell.params.kernel, running)


def check_congestion_controls(cell: Cell, available: list[str]) -> None:
    """Raise CongestionControlUnavailable for the first algorithm this kernel cannot give a socket."""
    refused = unavailable_congestion_controls(f.cc for f in cell.params.flows)
    if refused:
        raise CongestionControlUnavailable(refused[0], available)


def run_cell(cell: Cell, workdir: Path, *, observer: CellObserver | None = None,
             lateness_threshold_us: float | None = None, link_binary: str | os.PathLike[str] | None = None,
             executor: str = "local", attempt: int = 1) -> CellOutput:
    """Run `cell` with scratch files in `workdir`; see the module docstring for what happens.

    A measured result has status `late`, not `ok`, when the emulator's p99 lateness exceeds
    `lateness_threshold_us` (default: the cell's own, from its RTT: see lateness_threshold_us):
    its numbers are kept as an attempt, and the executor runs the cell again.
    """
    started_at = _now()
    if lateness_threshold_us is None:
        lateness_threshold_us = lateness_threshold_for(cell)
    available = available_congestion_controls()
    check_kernel(cell, platform.release())
    check_congestion_controls(cell, available)
    environment = Environment(hostname=platform.node(), kernel=platform.release(), available_cc=available,
                              ccsweep_version=__version__, ccsweep_commit=source_commit(),
                              python=platform.python_version(), executor=executor)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    run = CellRun(cell, workdir, environment, started_at, attempt)
    try:
        with _sigterm_as_interrupt():
            if cell.params.link == "mahimahi":
                from ccsweep.runner.mahimahi_run import run_mahimahi_cell  # it reuses this module's steps

                run_mahimahi_cell(run, observer, lateness_threshold_us)
            else:
                _run(run, observer, lateness_threshold_us, link_binary)
            return _collect(run)
    except (CellUnavailable, KeyboardInterrupt):
        raise
    except Exception as exc:  # noqa: BLE001 - every other failure is recorded, not raised
        return _failed(run, exc)


@dataclass
class CellRun:
    """One attempt at a cell as far as it got: its processes, the flows' start and the waits on them.

    Both links fill it in as they go; the result is collected from it, a failed attempt's as
    well as a finished one's, so a failure keeps what was measured before it.
    """

    cell: Cell
    workdir: Path
    environment: Environment
    started_at: str
    attempt: int
    #: Processes in start order; stop_all stops them in reverse (senders first, emulator last).
    started: list[Child] = field(default_factory=list)
    receiver: Child | None = None
    sender: Child | None = None
    #: The child whose statistics (`stats` events) describe the link, if it prints them.
    link: Child | None = None
    #: The flows' common start on CLOCK_MONOTONIC, once `go` was sent.
    t0_ns: int | None = None
    flows_started_at: str | None = None
    #: The flows' t0 on the clock of the link's logs (seconds), once known.
    offset_s: float | None = None
    summary: LinkSummary | None = None
    #: Waits not on one child (the flows), beside the children's own.
    waits: list[Wait] = field(default_factory=list)

    def start(self, child: Child) -> Child:
        self.started.append(child)
        return child

    def stop_all(self) -> None:
        with deferred_interrupts():
            for child in reversed(self.started):
                child.stop()

    def go(self, t0_ns: int, *children: Child) -> None:
        """Send every endpoint the flows' start (t0 on CLOCK_MONOTONIC)."""
        for child in children:
            child.send(f"go {t0_ns}\n")
        self.t0_ns = t0_ns
        self.flows_started_at = _wall_time_of(t0_ns)

    def waits_text(self) -> str:
        """Every wait so far in the order they ended, e.g. `ccsweep-link ready 0.41 s, ...`."""
        waits = sorted([*self.waits, *(w for child in self.started for w in child.waits)], key=lambda w: w.ended_ns)
        return ", ".join(map(str, waits))


def _run(run: CellRun, observer: CellObserver | None, threshold_us: float,
         link_binary: str | os.PathLike[str] | None) -> None:
    cell, workdir, p = run.cell, run.workdir, run.cell.params
    binary = find_link_binary(link_binary)
    scheduled = bool(p.uplink.rate_schedule or p.downlink.rate_schedule)
    lead_s = SCHEDULE_LEAD_S if scheduled else 0.0
    link_limit_s = lead_s + READY_TIMEOUT_S * 2 + p.duration_s + END_GRACE_S
    traces = prepare_traces(cell, workdir, lead_s, link_limit_s)
    priority, inject = realtime_priority(), injected_lateness(run.attempt)
    window = release_window_for(cell, threshold_us)
    live = LiveFeed(cell, observer)
    run_queue: RunQueueDelay | None = None

    with cell_namespaces(cell.id, p.buffers) as ns:
        try:
            argv = link_command(cell, binary, ns.sender, ns.receiver, workdir, traces, link_limit_s,
                                priority=priority, inject_lateness=inject, release_window=window)
            link = run.link = run.start(Child("ccsweep-link", argv, workdir / "link.stderr", on_event=live.on_link))
            run_queue = RunQueueDelay(link.process.pid, LINK_NAMES)
            origin_ns = link.wait_event("ready", READY_TIMEOUT_S)["_mono_ns"]
            receiver = run.receiver = run.start(Child("receiver", _receiver_argv(cell, ns),
                                                      workdir / "receiver.stderr", on_event=live.on_receiver))
            sender = run.sender = run.start(Child("sender", _sender_argv(cell, ns), workdir / "sender.stderr",
                                                  on_event=live.on_sender))
            receiver.wait_event("ready", READY_TIMEOUT_S)
            _wait_sender_ready(sender, run.environment.available_cc)
            now_ns = time.monotonic_ns()
            t0_ns = max(now_ns + round(GO_MARGIN_S * 1e9), origin_ns + round(lead_s * 1e9))
            if scheduled and now_ns > origin_ns + lead_s * 1e9:
                raise ChildTimeout(f"setup took {(now_ns - origin_ns) / 1e9:.1f} s, longer than the rate "
                                   f"schedule's lead of {lead_s:g} s (machine overloaded?)")
            run.go(t0_ns, receiver, sender)
            run.offset_s = (t0_ns - origin_ns) / 1e9
            _wait_flows(run, receiver, sender, link, live)
            link.stop(signal.SIGTERM, timeout=10)
            _wait_ended(link, "summary")
            sysctls = read_sysctls(ns.receiver)
        finally:
            run.stop_all()
            if run_queue is not None:
                run_queue.stop()
            summaries = run.link.of_kind("summary") if run.link else []
            if summaries:  # a failed attempt's too: the emulator writes it when stopped
                run.summary = link_summary(summaries[0], threshold_us, flow_run_queue(run, run_queue))

    run.environment = run.environment.model_copy(update={
        "tcp_rmem": sysctls.get("net.ipv4.tcp_rmem"), "tcp_wmem": sysctls.get("net.ipv4.tcp_wmem"),
        "rmem_max": next(iter(sysctls.get("net.core.rmem_max") or []), None),
        "wmem_max": next(iter(sysctls.get("net.core.wmem_max") or []), None)})


def flow_run_queue(run: CellRun, run_queue: RunQueueDelay | None) -> RunQueueSummary | None:
    """The link's run-queue delay over the flow time, if the flows started and it was sampled."""
    if run_queue is None or run.t0_ns is None:
        return None
    return run_queue.summary(run.t0_ns, run.t0_ns + round(run.cell.params.duration_s * 1e9))


def _receiver_argv(cell: Cell, ns: CellNamespaces) -> list[str]:
    return [*ns.exec_prefix(ns.receiver), sys.executable, "-m", "ccsweep.runner.flow", "receiver",
            "--label", ns.receiver, "--port", str(RECEIVER_PORT), "--flows", str(len(cell.params.flows)),
            "--duration", f"{cell.params.duration_s:g}"]


def _sender_argv(cell: Cell, ns: CellNamespaces) -> list[str]:
    flows = [f"--flow={i}:{f.cc}:{f.start_s:g}" for i, f in enumerate(cell.params.flows)]
    return [*ns.exec_prefix(ns.sender), sys.executable, "-m", "ccsweep.runner.flow", "sender",
            "--label", ns.sender, "--port", str(RECEIVER_PORT), "--duration", f"{cell.params.duration_s:g}",
            "--message-bytes", str(cell.params.message_bytes), *flows]


def _wait_sender_ready(sender: Child, available: list[str]) -> None:
    try:
        sender.wait_event("ready", READY_TIMEOUT_S)
    except ChildError:
        refused = next((e for e in sender.of_kind("error") if e.get("kind") == "cc_unavailable"), None)
        if refused is not None:
            listed = list(refused.get("available") or available)
            raise CongestionControlUnavailable(str(refused["cc"]), listed) from None
        raise


def _wait_flows(run: CellRun, receiver: Child, sender: Child, link: Child, live: LiveFeed) -> None:
    """Until both endpoints are finished (Child.has_ended with `done`), at most END_GRACE_S past the flows' end.

    An error event, or an endpoint that ended without `done`, fails the cell at once; so does the
    link ending while the flows still need it. Running past the deadline is a ChildTimeout.
    """
    assert run.t0_ns is not None
    deadline_ns = run.t0_ns + round((run.cell.params.duration_s + END_GRACE_S) * 1e9)
    endpoints = [sender, receiver]
    try:
        while True:
            for child in dict.fromkeys([*endpoints, link]):
                error = child.error()
                if error is not None:
                    raise ChildError(f"{child.name}: {error}")
            finished = [child.has_ended("done") for child in endpoints]
            if all(finished):
                break
            if link not in endpoints and link.has_ended("summary"):
                raise ChildError(f"{link.name} ended before the flows did")
            if time.monotonic_ns() > deadline_ns:
                late = [child.name for child, done in zip(endpoints, finished, strict=True) if not done]
                raise ChildTimeout(f"the flows did not end within {END_GRACE_S:g} s of their end time "
                                   f"({' and '.join(late)} still running)")
            live.tick()
            time.sleep(0.1)
    finally:
        run.waits.append(Wait("flows", "end", (time.monotonic_ns() - run.t0_ns) / 1e9, time.monotonic_ns()))
    live.tick()


def _wait_ended(child: Child, end_event: str) -> None:
    """After stopping `child`: its output read to the end, and it finished (Child.has_ended's rule)."""
    if not child.has_ended(end_event):
        raise ChildError(f"{child.name} still runs after it was stopped")


def _failed(run: CellRun, exc: Exception) -> CellOutput:
    """The record of an attempt that failed, with what it measured before it did and how long each wait took.

    A wait that ran out (ChildTimeout) makes it `starved`: the machine did not give the cell's
    processes the CPU to answer in time, so the cell runs again; anything else is `failed`.
    """
    status: CellStatus = "starved" if isinstance(exc, ChildTimeout) else "failed"
    error = _one_line(exc)
    waits = run.waits_text()
    if waits:
        error += f" (waits: {waits})"
    try:
        return _collect(run, status=status, error=error)
    except Exception as collect_exc:  # noqa: BLE001 - the error that ended the cell must be kept
        result = CellResult(cell=run.cell, status=status, error=f"{error}; its measurements could not be read: "
                            f"{_one_line(collect_exc)}", started_at=run.started_at, finished_at=_now(),
                            environment=run.environment, attempt=run.attempt)
        return CellOutput(result=result, timeseries=None)


def _collect(run: CellRun, status: CellStatus | None = None, error: str | None = None) -> CellOutput:
    """The record, time series and link logs of `run`: ok or late when it finished, else `status`.

    A failed attempt gets whatever exists: flows measured up to the failure (none before `go`),
    the link's statistics and logs, its summary if the emulator wrote one.
    """
    cell, p = run.cell, run.cell.params
    curves = receiver_curves(run.receiver.of_kind("rx") if run.receiver else [], len(p.flows))
    sender_events = run.sender.of_kind("sample") if run.sender else []
    samples = [samples_of(sender_events, i) for i in range(len(p.flows))]
    flows_ran = run.t0_ns is not None
    goodput, steady = cell_goodput(p, curves) if flows_ran else (None, None)
    logs = link_files(run.workdir)
    uplink_log = None
    if run.offset_s is not None and logs["uplink.log"].exists():
        start_ms = round(run.offset_s * 1000)
        uplink_log = read_link_log(logs["uplink.log"], start_ms, start_ms + round(p.duration_s * 1000))
    files = {f"{name}.gz": _gzip(path) for name, path in logs.items() if path.exists()}
    if status is None:
        assert run.summary is not None, "a finished run has its link's summary"
        status = "late" if run.summary.selfcheck.late else "ok"
    result = CellResult(
        cell=cell,
        status=status,
        error=error,
        attempt=run.attempt,
        started_at=run.started_at,
        finished_at=_now(),
        flows_started_at=run.flows_started_at,
        goodput_mbps=goodput,
        goodput_steady_mbps=steady,
        bottleneck_throughput_mbps=round(uplink_log.bottleneck_throughput_mbps, 4) if uplink_log else None,
        capacity_mbps=round(uplink_log.capacity_mbps, 4) if uplink_log and uplink_log.capacity_bytes else None,
        flows=[flow_result(i, p, samples[i], curves) for i in range(len(p.flows))] if flows_ran else [],
        link=run.summary,
        environment=run.environment,
    )
    stats = run.link.of_kind("stats") if run.link else []
    timeseries = TimeSeries(
        cell_id=cell.id,
        flows=[flow_series(samples[i], curves.t, curves.bytes[i]) for i in range(len(p.flows))],
        link=link_series(stats, run.offset_s) if run.offset_s is not None else None,
    ) if flows_ran else None
    return CellOutput(result=result, timeseries=timeseries, files=files)


def _gzip(path: Path) -> Path:
    """Compress a link log next to itself and drop the original (logs are ~20 MB a minute)."""
    target = path.with_name(path.name + ".gz")
    with open(path, "rb") as source, gzip.open(target, "wb", compresslevel=6) as sink:
        shutil.copyfileobj(source, sink, 1 << 20)
    path.unlink()
    return target


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (a pod being deleted, the executor stopping) cleans up like Ctrl-C does."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _wall_time_of(monotonic_ns: int) -> str:
    """The wall-clock time of a CLOCK_MONOTONIC instant (t0 is scheduled on the monotonic clock)."""
    wall_s = time.time() + (monotonic_ns - time.monotonic_ns()) / 1e9
    return datetime.fromtimestamp(wall_s, UTC).isoformat(timespec="milliseconds")


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if isinstance(exc, (ChildError, RuntimeError, OSError)) else f"{type(exc).__name__}: {text}"
