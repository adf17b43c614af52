"""The cell's two network namespaces: created with unique names, always deleted.

Names are `ccs-<cell id, 8 hex>-<runner pid>-s|r`, so cells (even repetitions of one cell) run
side by side on a node and a leftover namespace says which process leaked it.  Socket-buffer
sysctls `net.ipv4.tcp_rmem`/`tcp_wmem`, and `net.ipv4.tcp_ecn` where the cell sets it, are per
namespace and set here; `net.core.rmem_max`/`wmem_max` are host-wide (writing them inside a
namespace fails), so they are only read back.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from ccsweep.cell import TCP_ECN_SYSCTL, CellParams
from ccsweep.runner.procs import ChildTimeout

#: Sysctls read back from the receiver namespace into each result (what the sockets really got).
RECORDED_SYSCTLS = ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.core.rmem_max", "net.core.wmem_max",
                    "net.ipv4.tcp_ecn")


class NamespaceError(RuntimeError):
    """An `ip` command failed; the message is the command's own one-line complaint."""


@dataclass(frozen=True)
class CellNamespaces:
    sender: str
    receiver: str

    @staticmethod
    def exec_prefix(name: str) -> list[str]:
        """Run a command inside a namespace (`ip netns exec` execs it: the PID stays the command's)."""
        return ["ip", "netns", "exec", name]


def namespace_names(cell_id: str, pid: int | None = None) -> CellNamespaces:
    stem = f"ccs-{cell_id[:8]}-{pid if pid is not None else os.getpid()}"
    return CellNamespaces(sender=f"{stem}-s", receiver=f"{stem}-r")


#: How long one `ip` command setting up a cell's namespaces may take; past it the machine is
#: taken to have starved the cell (ChildTimeout), and the runner is never held without end.
IP_TIMEOUT_S = 30.0


def _ip(*args: str) -> str:
    """Run `ip`, in a session of its own: a signal to the cell's process group (a terminal's Ctrl-C,
    `kill -- -PGID`) reaches the runner, which ends what it started in order; it must not also kill
    an `ip netns add` or `delete` half-way, which leaves the namespace behind."""
    try:
        done = subprocess.run(["ip", *args], capture_output=True, text=True, start_new_session=True,
                              timeout=IP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ChildTimeout(f"ip {' '.join(args)}: not done within {IP_TIMEOUT_S:g} s (machine overloaded?)") from None
    if done.returncode != 0:
        message = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise NamespaceError(f"ip {' '.join(args)}: {message}")
    return done.stdout


def sysctl_settings(params: CellParams) -> dict[str, str]:
    """The per-namespace sysctls a cell sets, in `sysctl -w` syntax: its buffers, and its endpoints'
    ECN where it is not the kernel's default."""
    settings = {
        "net.ipv4.tcp_rmem": " ".join(map(str, params.buffers.tcp_rmem)),
        "net.ipv4.tcp_wmem": " ".join(map(str, params.buffers.tcp_wmem)),
    }
    if params.tcp_ecn is not None:
        settings["net.ipv4.tcp_ecn"] = str(TCP_ECN_SYSCTL[params.tcp_ecn])
    return settings


#: Writes sysctls inside `ip netns exec`. A cell pod is not privileged, so its runtime mounts
#: /proc/sys read-only; `ip netns exec` runs the command in a mount namespace of its own, where
#: SYS_ADMIN may remount /proc/sys writable without touching the pod's own view
#: (docs/kubernetes-privileges.md). Where /proc/sys is writable already (a host), nothing is remounted.
_SET_SYSCTLS = '[ -w /proc/sys/net/ipv4/tcp_rmem ] || mount -o remount,rw /proc/sys; exec sysctl -q -w "$@"'


def set_sysctls(namespace: str, settings: dict[str, str]) -> None:
    _ip("netns", "exec", namespace, "sh", "-c", _SET_SYSCTLS, "sysctl", *(f"{k}={v}" for k, v in settings.items()))


def read_sysctls(namespace: str, names: tuple[str, ...] = RECORDED_SYSCTLS) -> dict[str, list[int]]:
    """Effective values inside `namespace`, as lists of integers."""
    out = _ip("netns", "exec", namespace, "sysctl", "-n", *names)
    return {name: [int(v) for v in line.split()] for name, line in zip(names, out.splitlines(), strict=True)}


@contextmanager
def cell_namespaces(cell_id: str, settings: dict[str, str]) -> Iterator[CellNamespaces]:
    """Create both namespaces with `lo` up and the cell's sysctls (sysctl_settings); delete them on
    every exit path."""
    names = namespace_names(cell_id)
    created: list[str] = []
    try:
        for name in (names.sender, names.receiver):
            # Listed before `ip netns add` runs, which the interrupt waits for: an interrupt raised
            # inside the add (which subprocess.run answers by killing it) or between its end and
            # the listing left a namespace nothing would delete. (The name holds this runner's PID,
            # so whatever exists under it is this runner's or a dead runner's.)
            created.append(name)
            with deferred_interrupts():
                _ip("netns", "add", name)
            _ip("-n", name, "link", "set", "lo", "up")
            set_sysctls(name, settings)
        yield names
    finally:
        with deferred_interrupts():
            for name in reversed(created):
                delete_namespace(name)


def delete_namespace(name: str) -> None:
    """`ip netns delete NAME`, quietly (it may not exist), in a session of its own (see _ip); past
    IP_TIMEOUT_S it is given up: clean-up never holds a result back, and `ccsweep gc` removes what
    a cell leaves."""
    with suppress(subprocess.TimeoutExpired):
        subprocess.run(["ip", "netns", "delete", name], capture_output=True, start_new_session=True,
                       timeout=IP_TIMEOUT_S)


@contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Hold Ctrl-C/SIGTERM during cleanup and re-raise afterwards, so cleanup is never cut short.

    A Ctrl-C in a terminal reaches the cell twice (from the terminal and from the executor that
    forwards it); the second one must not interrupt the deletion of namespaces.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = {sig: signal.signal(sig, lambda s, _f: received.append(s)) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if received:
            raise KeyboardInterrupt


#: A cell's namespace: `ccs-<cell id, 8 hex>-<runner pid>-s|r` (see namespace_names), or `-m`: the
#: name runner.mahimahi_run gives the namespace Mahimahi made around the sender, to set its sysctls.
_CELL_NAMESPACE = re.compile(r"^ccs-[0-9a-f]{8}-(?P<pid>\d+)-[srm]$")


def _runner_alive(pid: int) -> bool:
    """Whether the runner `pid` may still be at work (a zombie is not).

    Any live process with that pid counts: a reused pid only delays the clean-up until it ends,
    whereas taking a live runner for dead would pull the namespaces from under its cell.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def leftover_namespaces() -> list[str]:
    """Cell namespaces whose runner is gone (killed with SIGKILL, or its machine's power cut)."""
    try:
        listing = _ip("netns", "list")
    except (NamespaceError, OSError):
        return []
    names = [line.split()[0] for line in listing.splitlines() if line.strip()]
    return [n for n in names if (m := _CELL_NAMESPACE.match(n)) and not _runner_alive(int(m["pid"]))]


def remove_leftovers() -> list[str]:
    """Delete the namespaces of dead cells, after stopping the cell processes still using them.

    Only processes a cell started are stopped: those inside a leftover namespace, and the
    emulator, which lives outside but names the namespace in its command line.
    """
    leftovers = leftover_namespaces()
    for name in leftovers:
        pids = {int(p) for p in _ip("netns", "pids", name).split()} if _exists(name) else set()
        pids |= {pid for pid in _pids_naming(name) if pid != os.getpid()}
        for pid in pids:
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        delete_namespace(name)
    return leftovers


def _exists(name: str) -> bool:
    return Path("/run/netns", name).exists()


def _pids_naming(name: str) -> set[int]:
    """Processes whose command line names `name` as an argument (an orphaned ccsweep-link)."""
    found = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = proc.joinpath("cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if name.encode() in argv and any(b"ccsweep" in a for a in argv[:1]):
            found.add(int(proc.name))
    return found
