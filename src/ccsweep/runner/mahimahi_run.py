"""Upstream Mahimahi as a cell's Link: the same lifecycle, endpoints, record and clean-up as ccsweep-link.

What differs from ccsweep-link, and why:
- Mahimahi's shells are setuid root and refuse to run as root: they run as nobody (65534) through
  `setpriv`, inside the cell's sender namespace, with net.ipv4.ip_forward=1 there. Each shell
  makes its namespace inside the previous one; the kernel gives a new namespace the host's
  ip_forward (or its creator's, with net.core.devconf_inherit_init_net=3), so the nesting needs
  one of those on the host: checked first, never changed here.
- The sender runs innermost, unprivileged: it may only pick an algorithm the host lists in
  net.ipv4.tcp_allowed_congestion_control (checked first), and it needs an interpreter and
  code that nobody can read. The runner's own ccsweep may sit in a private folder (a clone in
  root's 0700 home), so the sender's few modules (runner.endpoint_copy) are copied into the
  cell's scratch folder, readable by all, for every attempt; the interpreter is the runner's own
  where nobody can run it, else the system's. The receiver listens in the sender namespace, the
  outer side, where $MAHIMAHI_BASE points.
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

from ccsweep.cell import Cell
from ccsweep.linkrules import DIRECTIONS, LinkError, cannot_express
from ccsweep.result import LinkSummary
from ccsweep.runner.attempt import READY_TIMEOUT_S, CellRun, LinkClock
from ccsweep.runner.endpoint_copy import copy_sender_modules
from ccsweep.runner.endpoints import receiver_args, sender_args
from ccsweep.runner.link import realtime_priority, resolve_trace
from ccsweep.runner.live import LiveFeed
from ccsweep.runner.mahimahi import (
    BINARIES,
    constant_rate_trace,
    find_mahimahi,
    log_init_ms,
    mahimahi_command,
    mahimahi_summary,
    mahimahi_version,
)
from ccsweep.runner.measure import read_link_log
from ccsweep.runner.netns import (
    CellNamespaces,
    deferred_interrupts,
    delete_namespace,
    read_sysctls,
    set_sysctls,
    sysctl_settings,
)
from ccsweep.runner.periodic import PeriodicSampler
from ccsweep.runner.procs import Child, ChildTimeout
from ccsweep.runner.runqueue import RunQueueSummary, proc_stats, tasks_of, tree_of

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


class MahimahiLink:
    """Mahimahi's nested shells for one attempt (see the module docstring).

    The result is `late` when the shells' p99 run-queue delay per wake-up over the flow time
    exceeds the cell's threshold (runner.runqueue says why that stands for Mahimahi's lateness).
    Its summary needs the shells to have ended with their sender: a failed attempt has none,
    though its logs join the workdir for its record.
    """

    process_names: tuple[str, ...] = SHELL_NAMES

    def __init__(self) -> None:
        self._scratch: Path | None = None
        self._logs: dict[str, Path] = {}
        self._inner: str | None = None
        self._attached = False
        self._cpu: ShellsCpu | None = None
        self._sched = "normal"
        self._sysctls: dict[str, list[int]] = {}
        #: Set once the shells ended with their sender: the attempt then has a summary.
        self._cpu_share: float | None = None

    def prepare(self, run: CellRun) -> None:
        p = run.cell.params
        reason = cannot_express(p)
        if reason:
            raise LinkError(f"link: mahimahi cannot {reason}")
        self._folder, interpreter = host_tools(sorted({f.cc for f in p.flows}))
        scratch = self._scratch = Path(tempfile.mkdtemp(prefix=f"ccsweep-mm-{run.cell.id[:8]}-"))
        scratch.chmod(0o711)
        modules = copy_sender_modules(scratch / "endpoints")
        # In the scratch folder: the runner's own may be one nobody cannot enter (a private home).
        self._python = ["env", f"--chdir={scratch}", f"PYTHONPATH={modules}", str(interpreter)]
        self._traces = {name: _readable_copy(_trace_text(run.cell, name, run.workdir), scratch / f"{name}.trace")
                        for name in DIRECTIONS}
        log_folder = _log_folder(scratch)
        _as_nobody("make the log folder", "mkdir", "-m", "755", "--", str(log_folder))
        self._logs = {name: log_folder / f"{name}.log" for name in DIRECTIONS}

    def start(self, run: CellRun, ns: CellNamespaces, live: LiveFeed) -> None:
        set_sysctls(ns.sender, {"net.ipv4.ip_forward": "1"})
        _check_forwarding(ns.sender)
        self._inner = ns.sender.removesuffix("-s") + "-m"  # the name ready() gives the sender's namespace

    def receiver_argv(self, run: CellRun, ns: CellNamespaces) -> list[str]:
        """In the sender namespace (Mahimahi's outside), on every address: $MAHIMAHI_BASE is one."""
        return [*ns.exec_prefix(ns.sender), sys.executable,
                *receiver_args(run.cell, "--addr", "0.0.0.0", "--label", ns.sender)]

    def start_sender(self, run: CellRun, ns: CellNamespaces, live: LiveFeed) -> Child:
        sender = [*self._python, *sender_args(run.cell, "--wait-setup", "--src", "0.0.0.0",
                                              "--dst-env", "MAHIMAHI_BASE")]
        command = mahimahi_command(run.cell.params, self._folder, self._traces, self._logs, sender)
        # The shells print the sender's lines: they are the sender and the link to the runner.
        shells = run.link = run.start(Shells, "mahimahi", [*ns.exec_prefix(ns.sender), *_nobody(*command)],
                                      run.workdir / "mahimahi.stderr", on_event=live.on_sender)
        self._cpu = ShellsCpu(shells.process.pid, SHELL_NAMES)
        return shells

    def ready(self, run: CellRun) -> LinkClock | None:
        """The sender waits while its namespace is named and given the cell's socket buffers."""
        assert run.link is not None and self._inner is not None
        shells = run.link
        pid = int(shells.wait_event("setup", READY_TIMEOUT_S)["pid"])
        self._sched = realtime_shells(shells.process.pid)  # every ferry is forked by now
        self._attached = True  # before: an interrupt inside the attach must not leave the name unlisted
        _attach_netns(self._inner, pid)
        set_sysctls(self._inner, sysctl_settings(run.cell.params))
        # Read in the sender's namespace: the one whose buffers this link had to set itself.
        self._sysctls = read_sysctls(self._inner)
        shells.send("setup-done\n")
        return None  # t0 whenever the endpoints are ready; the logs' clock is read when they are done

    def end(self, run: CellRun) -> dict[str, list[int]]:
        """The shells end with their sender."""
        assert run.link is not None and self._cpu is not None
        cpu_share = self._cpu.stop()
        try:
            run.link.process.wait(SHELLS_EXIT_S)
        except subprocess.TimeoutExpired:
            raise ChildTimeout(f"Mahimahi's shells did not end within {SHELLS_EXIT_S:g} s of their sender") from None
        self._cpu_share = cpu_share
        return self._sysctls

    def stop(self, run: CellRun, run_queue: RunQueueSummary | None) -> LinkSummary | None:
        """Remove the sender's namespace name, the traces and the log folder, keeping copies of the logs."""
        if self._cpu is not None and self._cpu_share is None:
            self._cpu.stop()  # an attempt that failed: its sampler ends with it
        try:
            if self._attached and self._inner is not None:
                with deferred_interrupts():  # a signal now must not cut the deletion short
                    delete_namespace(self._inner)
        finally:
            self._remove_scratch(run.workdir)
        if self._cpu_share is None:
            return None
        assert run.t0_wall_ns is not None
        run.offset_s = (run.t0_wall_ns / 1e6 - log_init_ms(run.workdir / "uplink.log")) / 1000
        totals = {name: read_link_log(run.workdir / f"{name}.log", 0, 2**62) for name in DIRECTIONS}
        return mahimahi_summary(run.cell.params, mahimahi_version(self._folder), totals["uplink"], totals["downlink"],
                                self._cpu_share, run_queue, run.threshold_us, self._sched)

    def _remove_scratch(self, workdir: Path) -> None:
        """Copy the logs into the workdir under ccsweep-link's names, then remove the traces and log folder."""
        for name, log in self._logs.items():  # a failed attempt's logs too, for its record
            if log.exists():
                shutil.copyfile(log, workdir / f"{name}.log")
        if self._scratch is None:
            return
        shutil.rmtree(self._scratch, ignore_errors=True)
        log_folder = _log_folder(self._scratch)
        if log_folder.exists():
            _as_nobody("remove the log folder", "rm", "-rf", "--", str(log_folder), check=False)


def _log_folder(scratch: Path) -> Path:
    """Beside the scratch folder, made by nobody: Mahimahi writes its logs there after dropping privileges."""
    return scratch.with_name(f"{scratch.name}-logs")


class Shells(Child):
    """Mahimahi's shells as one child: stopping it stops whatever they forked too (end_leftovers)."""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 5.0) -> int:
        # Read before the top shell is stopped: once it is reaped, what it forked is init's.
        # (returncode, not poll(): polling would reap it.) Shells that ended by themselves ended their own.
        running = self.process.returncode is None
        tree = _tree(self.process.pid) if running else {}
        try:
            return super().stop(sig, timeout)
        finally:
            if running:
                end_leftovers(tree, group=self.process.pid)


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


def unprivileged_interpreter() -> Path:
    """A Python interpreter nobody may run: the runner's own, or the system's (the sender needs only
    the standard library and the modules copied for it)."""
    for python in (Path(sys.executable), FALLBACK_PYTHON):
        if python.exists() and _world_readable(python, execute=True):
            return python
    raise LinkError(f"mahimahi: no Python interpreter the unprivileged sender (uid {NOBODY}) can run "
                    f"({sys.executable} and {FALLBACK_PYTHON} tried)")


def host_tools(algorithms: list[str]) -> tuple[Path, Path]:
    """Mahimahi's folder and an interpreter, both within nobody's reach, once the algorithms are
    known to be ones an unprivileged sender may pick; a LinkError says what is missing."""
    folder = find_mahimahi()
    for name in BINARIES:
        if not _world_readable(folder / name, execute=True):
            raise LinkError(f"mahimahi: {folder / name} is out of reach of the unprivileged user (uid {NOBODY}) "
                            "that runs it; install it where every user can reach it (`make mahimahi` installs "
                            "under /opt/ccsweep)")
    interpreter = unprivileged_interpreter()
    _check_allowed(algorithms)
    return folder, interpreter


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

    @property
    def pids(self) -> frozenset[int]:
        """Every process counted so far (a profile of the machine is narrowed to them)."""
        return frozenset(self._ticks)

    def stop(self) -> float:
        """The shells' CPU seconds per wall second since the sampler started (with them), up to now."""
        seconds = self._sample()
        self._halt()
        wall = time.monotonic() - self._start
        return round(seconds / wall, 4) if wall > 0 else 0.0
