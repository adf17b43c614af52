"""A cell with upstream Mahimahi as its link: the same namespaces, endpoints, record and clean-up.

What differs from ccsweep-link, and why:
- Mahimahi's shells are setuid root and refuse to run as root: they run as nobody (65534) through
  `setpriv`, inside the cell's sender namespace, with net.ipv4.ip_forward=1 there. Each shell
  makes its namespace inside the previous one; the kernel gives a new namespace the host's
  ip_forward (or its creator's, with net.core.devconf_inherit_init_net=3), so the nesting needs
  one of those on the host: checked first, never changed here.
- The sender runs innermost, unprivileged: it may only pick an algorithm the host lists in
  net.ipv4.tcp_allowed_congestion_control (checked first), and it needs an interpreter and a
  ccsweep that nobody can read (the runner's own may sit in root's home). The receiver listens
  in the sender namespace, the outer side, where $MAHIMAHI_BASE points.
- The innermost namespace starts with the host's socket-buffer sysctls, not the cell's: the
  sender waits (`--wait-setup`) while the runner names that namespace (`ip netns attach`) and
  sets the cell's buffers there, before any socket exists.
- Mahimahi opens trace and log files after dropping privileges, so nobody must reach them, and
  the runner must too without CAP_DAC_OVERRIDE or CAP_CHOWN, which a cell pod does not hold: the
  traces are world-readable files in the runner's own folder (mode 711), the logs are written in a
  folder nobody makes itself, readable by all and writable only by nobody. Copies of the logs
  join the workdir under the names ccsweep-link uses; nobody removes its folder after the cell.
- The runner names the sender's namespace with nobody's file-system identity: /proc shows a
  process's namespace to another user only with CAP_SYS_PTRACE, which a cell pod does not hold
  either (docs/security.md lists what a `link: mahimahi` pod holds, and why).
- Mahimahi measures no lateness of its own: the runner measures its shells' run-queue delay per
  wake-up from /proc (runner.runqueue) and flags the cell late against the same threshold as
  ccsweep-link's. Its CPU share is the shells' CPU time sampled from /proc over the cell's wall time.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ccsweep
from ccsweep.cell import Cell
from ccsweep.linkrules import DIRECTIONS, LinkError, mahimahi_cannot
from ccsweep.runner import run as base
from ccsweep.runner.api import CellObserver
from ccsweep.runner.link import realtime_priority, resolve_trace
from ccsweep.runner.live import LiveFeed
from ccsweep.runner.mahimahi import (
    constant_rate_trace,
    find_mahimahi,
    log_init_ms,
    mahimahi_command,
    mahimahi_summary,
    mahimahi_version,
)
from ccsweep.runner.measure import read_link_log
from ccsweep.runner.netns import CellNamespaces, cell_namespaces, read_sysctls, set_sysctls, sysctl_settings
from ccsweep.runner.periodic import PeriodicSampler
from ccsweep.runner.procs import Child, ChildTimeout
from ccsweep.runner.runqueue import RunQueueDelay, proc_stats, tasks_of, tree_of

#: The unprivileged user and group Mahimahi runs as.
NOBODY = 65534
ALLOWED_CC_PATH = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
#: Where `ip netns add` keeps the named namespaces (the cell's own two are there already).
NETNS_RUN_DIR = Path("/run/netns")
#: Where to look for an interpreter nobody may run when the runner's own is out of its reach.
FALLBACK_PYTHON = Path("/usr/bin/python3")
#: The shells end with their command; this long past the flows' end they are stopped instead.
SHELLS_EXIT_S = 10.0
#: Mahimahi's processes, by name: each shell and the ferries it forks (not the sender inside).
SHELL_NAMES = ("mm-",)


def run_mahimahi_cell(run: base.CellRun, observer: CellObserver | None, threshold_us: float) -> None:
    """run_cell's path for `link: mahimahi` (see the module docstring); fills in `run` as it goes.

    The result is `late` when the shells' p99 run-queue delay per wake-up over the flow time
    exceeds `threshold_us` (runner.runqueue says why that stands for Mahimahi's lateness).
    """
    cell, workdir, p = run.cell, run.workdir, run.cell.params
    reason = mahimahi_cannot(p)
    if reason:
        raise LinkError(f"link: mahimahi cannot {reason}")
    folder = find_mahimahi()
    python = _unprivileged_python()
    _check_allowed(sorted({f.cc for f in p.flows}))
    live = LiveFeed(cell, observer)
    run_queue: RunQueueDelay | None = None
    scratch = Path(tempfile.mkdtemp(prefix=f"ccsweep-mm-{cell.id[:8]}-"))
    log_folder = scratch.with_name(f"{scratch.name}-logs")
    try:
        scratch.chmod(0o711)
        traces = {name: _readable_copy(_trace_text(cell, name, workdir), scratch / f"{name}.trace")
                  for name in DIRECTIONS}
        _as_nobody("make the log folder", "mkdir", "-m", "755", "--", str(log_folder))
        logs = {name: log_folder / f"{name}.log" for name in DIRECTIONS}
        with cell_namespaces(cell.id, p.buffers) as ns:
            inner = ns.sender.removesuffix("-s") + "-m"
            attached = False
            try:
                set_sysctls(ns.sender, {"net.ipv4.ip_forward": "1"})
                _check_forwarding(ns.sender)
                receiver = run.receiver = run.start(Child("receiver", _receiver_argv(cell, ns),
                                                          workdir / "receiver.stderr", on_event=live.on_receiver))
                command = mahimahi_command(p, folder, traces, logs, _sender(cell, python))
                # The shells print the sender's lines: they are the sender and the link to the runner.
                shells = run.sender = run.link = run.start(Child("mahimahi", _shells_argv(ns, command),
                                                                 workdir / "mahimahi.stderr", on_event=live.on_sender))
                cpu = ShellsCpu(shells.process.pid, SHELL_NAMES)
                run_queue = RunQueueDelay(shells.process.pid, SHELL_NAMES)
                receiver.wait_event("ready", base.READY_TIMEOUT_S)
                pid = int(shells.wait_event("setup", base.READY_TIMEOUT_S)["pid"])
                sched = realtime_shells(shells.process.pid)  # every ferry is forked by now
                _attach_netns(inner, pid)
                attached = True
                set_sysctls(inner, sysctl_settings(p.buffers))
                sysctls = read_sysctls(inner)
                shells.send("setup-done\n")
                base._wait_sender_ready(shells, run.environment.available_cc)
                t0_ns = time.monotonic_ns() + round(base.GO_MARGIN_S * 1e9)
                run.go(t0_ns, receiver, shells)
                t0_wall_ms = (time.time_ns() + t0_ns - time.monotonic_ns()) / 1e6
                base._wait_flows(run, receiver, shells, shells, live)
                cpu_share = cpu.stop()
                try:
                    shells.process.wait(SHELLS_EXIT_S)
                except subprocess.TimeoutExpired:
                    raise ChildTimeout(f"Mahimahi's shells did not end within {SHELLS_EXIT_S:g} s "
                                       "of their sender") from None
            finally:
                if run_queue is not None:
                    run_queue.stop()
                # Read before the shells are stopped: once the top one is reaped, what it forked is init's.
                # (returncode, not poll(): polling would reap it.)
                running = run.link is not None and run.link.process.returncode is None
                shells_tree = _tree(run.link.process.pid) if run.link is not None and running else {}
                try:
                    run.stop_all()
                finally:
                    if run.link is not None and running:  # shells that ended by themselves ended their own
                        end_leftovers(shells_tree, group=run.link.process.pid)
                if attached:
                    with contextlib.suppress(subprocess.TimeoutExpired):   # clean-up: never costs the result
                        subprocess.run(["ip", "netns", "delete", inner], capture_output=True,
                                       timeout=SETUP_COMMAND_TIMEOUT_S)
    finally:
        for name in DIRECTIONS:  # a failed attempt's logs too, for its record
            if logs[name].exists():
                shutil.copyfile(logs[name], workdir / f"{name}.log")
        shutil.rmtree(scratch, ignore_errors=True)
        if log_folder.exists():
            _as_nobody("remove the log folder", "rm", "-rf", "--", str(log_folder), check=False)

    run.offset_s = (t0_wall_ms - log_init_ms(workdir / "uplink.log")) / 1000
    totals = {name: read_link_log(workdir / f"{name}.log", 0, 2**62) for name in DIRECTIONS}
    timing = base.flow_run_queue(run, run_queue)
    run.summary = mahimahi_summary(p, mahimahi_version(folder), totals["uplink"], totals["downlink"], cpu_share,
                                   timing, threshold_us, sched)
    # Read in the sender's namespace: the one whose buffers this backend had to set itself.
    host_max = {f"{kind}_max": (sysctls.get(f"net.core.{kind}_max") or [0])[0] or None for kind in ("rmem", "wmem")}
    run.environment = run.environment.model_copy(update={
        "tcp_rmem": sysctls.get("net.ipv4.tcp_rmem"), "tcp_wmem": sysctls.get("net.ipv4.tcp_wmem"), **host_max})


def realtime_shells(root_pid: int) -> str:
    """Run Mahimahi's shells at the real-time priority ccsweep-link's emulator loop asks for.

    Both links then meet a busy machine alike: without it, a Mahimahi ferry waits behind every
    other runnable task for its 1 ms tick (run-queue delays of 5-60 ms at a load of 30 on a 2-core
    machine), and its cell is late on every attempt where ccsweep-link's, at SCHED_FIFO, keeps
    time. Only the shells (mm-*) are raised, never the sender inside them. Where the kernel refuses
    (a container without a real-time budget), they stay as they are and the record says why, in
    the same words as the emulator's `sched`.
    """
    priority = realtime_priority()
    if priority == 0:
        return "normal"
    raised = 0
    for pid in tree_of(root_pid, proc_stats(), SHELL_NAMES):
        for task in tasks_of(pid):
            try:
                os.sched_setscheduler(int(task.name), os.SCHED_FIFO, os.sched_param(priority))
            except ProcessLookupError:
                continue
            except PermissionError:
                return "normal (fifo: EPERM)"
            raised += 1
    return f"fifo:{priority}" if raised else "normal (no mm-* shell found)"


def _trace_text(cell: Cell, name: str, workdir: Path) -> bytes:
    """A direction's trace: the pinned file, or a constant rate written out as one period of a trace."""
    direction = getattr(cell.params, name)
    if direction.trace is not None:
        return resolve_trace(direction, workdir).read_bytes()
    return constant_rate_trace(direction.rate_mbps).encode()


def _readable_copy(data: bytes, path: Path) -> Path:
    """A file nobody can read: Mahimahi opens traces after dropping privileges (a trace is no secret)."""
    path.write_bytes(data)
    path.chmod(0o644)
    return path


#: Seconds a set-up command (mkdir, rm, a bind mount, a forwarding probe) may take: each is
#: instant, so a hang means a broken node, and the cell fails with one line instead of waiting.
SETUP_COMMAND_TIMEOUT_S = 30.0


class SetupTimeout(LinkError, ChildTimeout):
    """A set-up command ran out of SETUP_COMMAND_TIMEOUT_S: on a loaded machine that is the machine's
    fault (an instant command kept off the CPU), so the attempt is `starved` and runs again, as when
    a child's bounded wait runs out; a broken node fails every attempt and the cell still ends."""


def _setup_run(argv: list[str], what: str) -> subprocess.CompletedProcess[str]:
    """One set-up command, bounded by SETUP_COMMAND_TIMEOUT_S (SetupTimeout past it)."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=SETUP_COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise SetupTimeout(f"mahimahi: {what} took more than {SETUP_COMMAND_TIMEOUT_S:g} s") from None


def _nobody(*argv: str) -> list[str]:
    """argv run as nobody: user, group and no supplementary groups (CAP_SETUID, CAP_SETGID)."""
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv]


def _as_nobody(what: str, *argv: str, check: bool = True) -> None:
    done = _setup_run(_nobody(*argv), what)
    if check and done.returncode != 0:
        raise LinkError(f"mahimahi: nobody (uid {NOBODY}) could not {what}: "
                        f"{(done.stderr.strip().splitlines() or ['failed'])[-1]}")


def _shells_argv(ns: CellNamespaces, command: list[str]) -> list[str]:
    return [*ns.exec_prefix(ns.sender), *_nobody(*command)]


#: `ip netns attach NAME PID` with nobody's file-system identity (argv: uid, /proc/PID/ns/net, the
#: mount point). /proc hands a process's namespace to the same user, or to a holder of
#: CAP_SYS_PTRACE; the sender runs as nobody, so with nobody's fsuid and fsgid (CAP_SETUID,
#: CAP_SETGID) the bind mount needs only CAP_SYS_ADMIN. A process of its own: the runner's
#: identity never changes.
_ATTACH_AS = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
uid, source, target = int(sys.argv[1]), sys.argv[2], sys.argv[3]
libc.setfsgid(uid)
libc.setfsuid(uid)
if (libc.setfsgid(-1), libc.setfsuid(-1)) != (uid, uid):
    sys.exit(f"setfsuid/setfsgid {uid}: not permitted")
if libc.mount(source.encode(), target.encode(), None, 4096, None) != 0:  # MS_BIND
    sys.exit(f"mount --bind {source} {target}: {os.strerror(ctypes.get_errno())}")
"""


def _attach_netns(name: str, pid: int) -> None:
    """Name the network namespace of process `pid` (nobody's) `name`, as `ip netns attach` does."""
    target = NETNS_RUN_DIR / name
    try:
        os.close(os.open(target, os.O_RDONLY | os.O_CREAT | os.O_EXCL, 0))
    except OSError as exc:
        raise LinkError(f"naming the sender's namespace {name}: {target}: {exc.strerror}") from None
    try:
        done = _setup_run([sys.executable, "-c", _ATTACH_AS, str(NOBODY), f"/proc/{pid}/ns/net", str(target)],
                          f"naming the sender's namespace {name}")
    except LinkError:
        _unname(target)
        raise
    if done.returncode != 0:
        _unname(target)
        raise LinkError(f"naming the sender's namespace {name}: "
                        f"{(done.stderr.strip().splitlines() or ['failed'])[-1]}")


def _unname(target: Path) -> None:
    """Undo a failed _attach_netns, as `ip netns delete` does: detach the mount, then remove the file.

    The helper can fail after its mount took: killed at the timeout while mount() ran (a kill
    waits for the system call to end, and under load a bind mount under the shared /run/netns,
    which propagates to every `ip netns exec` process's mount namespace, can outlast it), or dying
    before it exits. Unlinking a mount point fails with EBUSY, which then hid the real error
    (seen as `[Errno 16] Device or resource busy: '/run/netns/...-m'`) and left the name behind.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.umount2(str(target).encode(), 2) != 0:  # MNT_DETACH
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOENT):  # EINVAL: nothing mounted there
            raise LinkError(f"{target}: umount: {os.strerror(code)}")
    target.unlink(missing_ok=True)


def _receiver_argv(cell: Cell, ns: CellNamespaces) -> list[str]:
    """The receiver in the sender namespace (Mahimahi's outside), on every address: $MAHIMAHI_BASE is one."""
    return [*ns.exec_prefix(ns.sender), sys.executable, "-m", "ccsweep.runner.flow", "receiver", "--addr", "0.0.0.0",
            "--label", ns.sender, "--port", str(base.RECEIVER_PORT), "--flows", str(len(cell.params.flows)),
            "--duration", f"{cell.params.duration_s:g}"]


def _sender(cell: Cell, python: list[str]) -> list[str]:
    flows = [f"--flow={i}:{f.cc}:{f.start_s:g}" for i, f in enumerate(cell.params.flows)]
    return [*python, "-m", "ccsweep.runner.flow", "sender", "--wait-setup", "--src", "0.0.0.0",
            "--dst-env", "MAHIMAHI_BASE", "--port", str(base.RECEIVER_PORT), "--duration",
            f"{cell.params.duration_s:g}", "--message-bytes", str(cell.params.message_bytes), *flows]


def _unprivileged_python() -> list[str]:
    """argv prefix running ccsweep's flow endpoints as nobody: an interpreter and a package it can read."""
    package = Path(ccsweep.__file__).resolve().parent
    if not _world_readable(package / "runner" / "flow.py"):
        raise LinkError(f"mahimahi: {package} is out of reach of the unprivileged sender (uid {NOBODY}); "
                        "install ccsweep where every user can read it")
    for python in (Path(sys.executable), FALLBACK_PYTHON):
        if python.exists() and _world_readable(python, execute=True):
            return ["env", f"PYTHONPATH={package.parent}", str(python)]
    raise LinkError(f"mahimahi: no Python interpreter the unprivileged sender (uid {NOBODY}) can run "
                    f"({sys.executable} and {FALLBACK_PYTHON} tried)")


def _world_readable(path: Path, *, execute: bool = False) -> bool:
    """Whether any user can reach and read (and run) `path`: mode bits along its resolved path."""
    target = path.resolve()
    wanted = 0o005 if execute else 0o004
    try:
        return (target.stat().st_mode & wanted == wanted
                and all(parent.stat().st_mode & 0o001 for parent in target.parents))
    except OSError:
        return False


def _check_allowed(algorithms: list[str]) -> None:
    allowed = ALLOWED_CC_PATH.read_text().split()
    missing = [cc for cc in algorithms if cc not in allowed]
    if missing:
        raise LinkError(f"mahimahi: the sender runs unprivileged and may only pick algorithms in "
                        f"net.ipv4.tcp_allowed_congestion_control ({' '.join(allowed)}), not {' '.join(missing)}; "
                        f"add them on the host: sysctl -w net.ipv4.tcp_allowed_congestion_control="
                        f"'{' '.join(allowed + missing)}'")


def _check_forwarding(namespace: str) -> None:
    """Whether a namespace made inside `namespace` forwards, as each nested Mahimahi shell requires."""
    probe = ["unshare", "--net", "cat", "/proc/sys/net/ipv4/ip_forward"]
    done = _setup_run(["ip", "netns", "exec", namespace, *probe], "the forwarding probe")
    if done.stdout.strip() != "1":
        raise LinkError("mahimahi: new network namespaces get net.ipv4.ip_forward=0 from the host, and Mahimahi's "
                        "nested shells need 1: on the host, sysctl -w net.ipv4.ip_forward=1 (Kubernetes nodes have "
                        "it) or net.core.devconf_inherit_init_net=3")


def _tree(root_pid: int) -> dict[int, str]:
    """Every process under `root_pid` (itself included), by PID, with its name."""
    stats = proc_stats()
    return {pid: stats[pid].comm for pid in tree_of(root_pid, stats, ("",))}


def end_leftovers(tree: dict[int, str], group: int) -> list[int]:
    """SIGKILL whatever of the shells still runs after Child.stop, and anything it forked.

    Mahimahi's outer mm-delay forks a copy of itself that makes the next namespace and runs the
    inner shell: stopping the top PID alone (Child.stop: SIGTERM, SIGKILL past 5 s) orphans that
    copy whenever the top does not pass the signal on (killed past its 5 s on a starved machine,
    or stopped mid-set-up). Such orphans (`mm-delay 50 ... mm-loss ...`, nobody's, parent PID 1)
    were seen running on for an hour, still in the process group of the shells' Child.
    Found are: the processes of `tree` (read before the top was stopped) that still run, Mahimahi's
    processes (mm-*) left in the Child's process group `group` (its session: the Child runs in one
    of its own), and everything under either. They are frozen (SIGSTOP) until nothing new appears,
    so none forks between being read and killed, then killed. A PID of `tree` counts only while it
    has the name it had there, so a PID reused meanwhile is left alone. Returns the PIDs killed.
    """
    frozen: dict[int, str] = {}
    while True:
        stats = proc_stats()
        roots = [pid for pid, comm in tree.items() if pid in stats and stats[pid].comm == comm]
        roots += [pid for pid in _group_members(group) if pid in stats and stats[pid].comm.startswith(SHELL_NAMES)]
        fresh = {pid: stats[pid].comm for root in roots for pid in tree_of(root, stats, ("",))
                 if pid not in frozen and not _is_zombie(pid)}
        if not fresh:
            break
        for pid in fresh:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        frozen |= fresh
        tree = {**tree, **fresh}
    for pid in frozen:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return sorted(frozen)


def _stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat after the name (state, ppid, pgrp, ...); empty once the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    except OSError:
        return []


def _is_zombie(pid: int) -> bool:
    fields = _stat_fields(pid)
    return not fields or fields[0] in ("Z", "X")


def _group_members(group: int) -> list[int]:
    """The live processes of process group `group`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if len(fields) > 2 and int(fields[2]) == group:
                found.append(int(entry.name))
    return found


class ShellsCpu(PeriodicSampler):
    """CPU time of the Mahimahi processes under one PID, sampled from /proc until stop().

    Sampled rather than read at exit: the shells' rusage at exit would include the sender's.
    `names` are the process names (prefixes) counted; `make bench-emulator` counts ccsweep-link's
    too, to measure both links the same way.
    """

    INTERVAL_S = 0.5

    def __init__(self, root_pid: int, names: tuple[str, ...] = ("mm-",)) -> None:
        self._root = root_pid
        self._names = names
        self._ticks: dict[int, int] = {}
        self._start = time.monotonic()
        super().__init__(self.INTERVAL_S, "mahimahi-cpu")

    def _sample(self) -> float:
        """Sample now; the counted processes' CPU seconds so far (an ended one keeps its last reading)."""
        stats = proc_stats()
        for pid in tree_of(self._root, stats, self._names):
            self._ticks[pid] = max(self._ticks.get(pid, 0), stats[pid].cpu_ticks)
        return sum(self._ticks.values()) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> float:
        """The shells' CPU seconds per wall second since the sampler started (with them), up to now."""
        seconds = self._sample()
        self._halt()
        wall = time.monotonic() - self._start
        return round(seconds / wall, 4) if wall > 0 else 0.0
