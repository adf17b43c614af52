"""run_cell: one cell from namespaces to result record, through one lifecycle whatever its link.

Order of work, and why (the Link protocol, runner/attempt.py, says what each link adds at each step):
1. the algorithms are checked first, so a kernel without one fails fast with nothing to undo;
   then the link prepares (its own checks, its trace files) before anything needs undoing;
2. namespaces, then the link (ccsweep-link creates the TUN devices and addresses), then the
   receiver and the sender together (their interpreters start in parallel: a cell pod's CPU limit
   makes each start-up cost a good part of a second), where the link places them; the run-queue
   delay of the link's processes is sampled from then on. Once the receiver listens the link
   finishes its set-up (Mahimahi names the sender's namespace and sets its buffers); the sender
   checks again that its sockets accept each algorithm and connects only after `go`, which waits
   for the receiver to listen (ReBBR's clients could hang when they connected first);
3. all endpoints get one t0 on CLOCK_MONOTONIC, never before the link's clock allows (a rate
   schedule's lead), the flows run, the endpoints exit on their own;
4. the link ends (ccsweep-link on SIGTERM, printing its summary; Mahimahi's shells with their
   sender); children are stopped by PID and the namespaces deleted on every path, Ctrl-C included,
   and the link then removes what it left and gives its summary and self-check;
5. measurements are computed from what was recorded and the link logs are compressed.

Any failure but an unavailable algorithm or an interrupt becomes a "failed" record with a one-line
error, which the store keeps for diagnosis without marking the cell done; one whose bounded wait on
a child ran out (a ready or end wait, the output's end) is "starved" instead, and is run again.
The record keeps what was measured up to then (the flows' samples, the link's statistics and
logs, its summary where it gives one), and its error names the child, its exit status and last
lines, and how long each wait on the children took.

A child is finished when it exited 0 having written its end event (`done` for the endpoints,
`summary` for the emulator), read after the end of its output however late (Child.has_ended):
a loaded machine delays the runner's readers, never the verdict.
"""

from __future__ import annotations

import gzip
import platform
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from ccsweep.bpfcc import not_measured
from ccsweep.buildinfo import source_commit
from ccsweep.cell import Cell
from ccsweep.linkrules import lateness_threshold_us as lateness_threshold_for
from ccsweep.result import CellResult, CellStatus, Environment, LatenessEvidence, LinkSummary, TimeSeries
from ccsweep.runner.api import CellObserver, CellOutput, CellUnavailable, CongestionControlUnavailable, check_runnable
from ccsweep.runner.attempt import END_GRACE_S, READY_TIMEOUT_S, CellRun, Link, LinkClock, link_files
from ccsweep.runner.collect import cell_goodput, flow_result, flow_series, link_series, receiver_curves, samples_of
from ccsweep.runner.hostcpu import HostCpu
from ccsweep.runner.links import link_for
from ccsweep.runner.live import LiveFeed
from ccsweep.runner.measure import read_link_log
from ccsweep.runner.netns import cell_namespaces, sysctl_settings
from ccsweep.runner.procs import Child, ChildError, ChildTimeout, Wait
from ccsweep.runner.runqueue import RunQueueDelay, RunQueueSummary
from ccsweep.runner.tcpinfo import available_congestion_controls
from ccsweep.runner.wakelatency import idle_wake_bound, requested_bound
from ccsweep.version import __version__

#: t0 this far after everyone is ready: the `go` line must reach both endpoints first, even on a
#: busy machine (a late endpoint would start its flow late and lose goodput it never had a chance at).
#: One CFS period (100 ms): a pod that spent its CPU quota on start-up waits at most that long.
GO_MARGIN_S = 0.1


def run_cell(cell: Cell, workdir: Path, *, observer: CellObserver | None = None,
             lateness_threshold_us: float | None = None, executor: str = "local", attempt: int = 1,
             link: Link | None = None, cpu_milli: int | None = None) -> CellOutput:
    """Run `cell` with scratch files in `workdir`; see the module docstring for what happens.

    A measured result has status `late`, not `ok`, when the link's p99 lateness exceeds
    `lateness_threshold_us` (default: the cell's own, from its RTT: see lateness_threshold_us):
    its numbers are kept as an attempt, and the executor runs the cell again. `link`: the link to
    run it on (default: the one the cell names, runner.links), a fresh one per attempt. `cpu_milli`:
    the CPU the cell was given (a cell pod's request), where something gave it a share.
    """
    started_at = _now()
    if lateness_threshold_us is None:
        lateness_threshold_us = lateness_threshold_for(cell)
    available = available_congestion_controls()
    check_runnable(cell, available)
    environment = Environment(hostname=platform.node(), kernel=platform.release(), available_cc=available,
                              ccsweep_version=__version__, ccsweep_commit=source_commit(),
                              python=platform.python_version(), executor=executor,
                              bpf_programs=list(cell.params.bpf_programs))  # as check_runnable found them registered
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    run = CellRun(cell, workdir, environment, started_at, attempt, lateness_threshold_us, cpu_milli)
    try:
        with _sigterm_as_interrupt(), idle_wake_bound(requested_bound()) as bound:
            run.idle_wake_us = bound
            _run(run, link or link_for(cell), LiveFeed(cell, observer))
            return _collect(run)
    except (CellUnavailable, KeyboardInterrupt):
        raise
    except Exception as exc:  # noqa: BLE001 - every other failure is recorded, not raised
        return _failed(run, exc)


def _run(run: CellRun, link: Link, live: LiveFeed) -> None:
    """The order of work of the module docstring, the same for every link; fills in `run` as it goes."""
    run_queue: RunQueueDelay | None = None
    host = HostCpu()
    try:
        link.prepare(run)
        with cell_namespaces(run.cell.id, sysctl_settings(run.cell.params)) as ns:
            try:
                link.start(run, ns, live)
                receiver = run.receiver = run.start(Child, "receiver", link.receiver_argv(run, ns),
                                                    run.workdir / "receiver.stderr", on_event=live.on_receiver)
                sender = run.sender = link.start_sender(run, ns, live)
                if run.link is not None and link.process_names:
                    run_queue = RunQueueDelay(run.link.process.pid, link.process_names)
                receiver.wait_event("ready", READY_TIMEOUT_S)
                clock = link.ready(run)
                _wait_sender_ready(sender, run.environment.available_cc)
                t0_ns = _t0(clock)
                run.go(t0_ns, receiver, sender)
                if clock is not None:
                    run.offset_s = (t0_ns - clock.origin_ns) / 1e9
                _wait_flows(run, live)
                sysctls = link.end(run)
            finally:
                run.stop_all()
                if run_queue is not None:
                    run_queue.stop()
    finally:
        host.stop()
        run.summary = with_evidence(link.stop(run, flow_run_queue(run, run_queue)), run, run_queue, host)
    run.environment = run.environment.model_copy(update={
        "tcp_rmem": sysctls.get("net.ipv4.tcp_rmem"), "tcp_wmem": sysctls.get("net.ipv4.tcp_wmem"),
        "rmem_max": next(iter(sysctls.get("net.core.rmem_max") or []), None),
        "wmem_max": next(iter(sysctls.get("net.core.wmem_max") or []), None),
        "tcp_ecn": next(iter(sysctls.get("net.ipv4.tcp_ecn") or []), None)})


def _t0(clock: LinkClock | None) -> int:
    """The flows' start: GO_MARGIN_S from now, and never before the link's clock allows.

    A link whose clock must meet the flows (a rate schedule's lead) and has already run past that
    point fails the attempt as starved: set-up took longer than the lead on an overloaded machine.
    """
    now_ns = time.monotonic_ns()
    t0_ns = now_ns + round(GO_MARGIN_S * 1e9)
    if clock is None:
        return t0_ns
    if clock.lead_s and now_ns > clock.origin_ns + clock.lead_s * 1e9:
        raise ChildTimeout(f"setup took {(now_ns - clock.origin_ns) / 1e9:.1f} s, longer than the rate "
                           f"schedule's lead of {clock.lead_s:g} s (machine overloaded?)")
    return max(t0_ns, clock.origin_ns + round(clock.lead_s * 1e9))


def flow_run_queue(run: CellRun, run_queue: RunQueueDelay | None) -> RunQueueSummary | None:
    """The link's run-queue delay over the flow time, if the flows started and it was sampled."""
    if run_queue is None or run.t0_ns is None:
        return None
    return run_queue.summary(run.t0_ns, run.t0_ns + round(run.cell.params.duration_s * 1e9))


def with_evidence(summary: LinkSummary | None, run: CellRun, run_queue: RunQueueDelay | None,
                  host: HostCpu) -> LinkSummary | None:
    """The link's summary with what was measured of the host and the link's processes over the flow
    time beside its own timing (result.LatenessEvidence), and the cause of its lateness if late."""
    if summary is None or run.t0_ns is None:
        return summary
    end_ns = run.t0_ns + round(run.cell.params.duration_s * 1e9)
    evidence = summary.selfcheck.evidence or LatenessEvidence()
    cpus = host.summary(run.t0_ns, end_ns)
    if cpus is not None:
        evidence = evidence.model_copy(update=asdict(cpus))
    evidence = evidence.model_copy(update={"idle_wake_bound_us": run.idle_wake_us})
    faults = run_queue.page_faults(run.t0_ns, end_ns) if run_queue is not None else None
    if faults is not None:
        evidence = evidence.model_copy(update={"minor_faults": faults.minor, "major_faults": faults.major})
    return summary.model_copy(update={"selfcheck": summary.selfcheck.with_evidence(evidence)})


def _wait_sender_ready(sender: Child, available: list[str]) -> None:
    try:
        sender.wait_event("ready", READY_TIMEOUT_S)
    except ChildError:
        refused = next((e for e in sender.of_kind("error") if e.get("kind") == "cc_unavailable"), None)
        if refused is not None:
            listed = list(refused.get("available") or available)
            raise CongestionControlUnavailable([str(refused["cc"])], listed) from None
        raise


def _wait_flows(run: CellRun, live: LiveFeed) -> None:
    """Until both endpoints are finished (Child.has_ended), at most END_GRACE_S past the flows' end.

    An error event, or an endpoint that ended without `done`, fails the cell at once; so does the
    link's own process ending while the flows still need it. Running past the deadline is a ChildTimeout.
    """
    assert run.t0_ns is not None and run.sender is not None and run.receiver is not None
    deadline_ns = run.t0_ns + round((run.cell.params.duration_s + END_GRACE_S) * 1e9)
    endpoints = [run.sender, run.receiver]
    link = run.link if run.link not in endpoints else None
    try:
        while True:
            for child in [*endpoints, *([link] if link else [])]:
                error = child.error()
                if error is not None:
                    raise ChildError(f"{child.name}: {error}")
            finished = [child.has_ended() for child in endpoints]
            if all(finished):
                break
            if link is not None and link.has_ended():
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
    if status is None:  # finished: late only where the link's self-check says so (a link may give none)
        status = "late" if run.summary is not None and run.summary.selfcheck.late else "ok"
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
        not_measured=not_measured([f.cc for f in p.flows]),
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


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if isinstance(exc, (ChildError, RuntimeError, OSError)) else f"{type(exc).__name__}: {text}"
