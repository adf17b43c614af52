"""Registering ccsweep's BPF congestion controls with the kernel, with one owner on each machine.

Registration is kernel-wide: once `bpftool struct_ops register` has loaded an object, every socket
on the machine can pick its algorithm, until it is unregistered. So whoever registers one must
unregister it, and no one else may: the local executor registers what a sweep needs before its
first cell (`registered`) and unregisters exactly those at the end, also after Ctrl-C and SIGTERM.
A state file (STATE_ENV, else DEFAULT_STATE) records each registration with its owner's pid and
start time; a run killed outright leaves its entries behind with a dead owner, and the next start
(`recover`, also `ccsweep gc`) unregisters those. An algorithm of the same name that someone else
registered is never touched, and never used either: ccsweep cannot tell its code, so a record
could not say what ran. The cell runner reads the same file to check the registered object's
digest against the one its cell is pinned to (`registered_digests`).

On a Kubernetes node the chart's node setup registers the admin's list and holds it while its pod
runs (`holding`, `ccsweep bpf hold`), with a state file of its own. Cell pods see neither its pid
nor its /proc, so it also publishes what it registered in a held file (HELD_ENV, else
DEFAULT_HELD, mounted read-only into cell pods) on which it keeps an exclusive flock for as long
as it lives: a lock is shared by every mount of the file and ends with its process, so a pod
trusts the file only while the holder is alive, whatever PID namespace either runs in.

bpftool runs with argument lists and bounded timeouts; nothing from a spec reaches it but a name
from ccsweep.bpfcc.PROGRAMS.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, BinaryIO

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from ccsweep.bpfcc import PROGRAMS, BpfObjectMissing, object_digest

BTF_VMLINUX = Path("/sys/kernel/btf/vmlinux")
AVAILABLE_CC = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
STATE_ENV = "CCSWEEP_BPF_STATE"
#: Machine-wide, as registration is: every executor on this machine reads and writes the one file.
DEFAULT_STATE = Path("/run/ccsweep/bpf-registrations.json")
#: bpftool's slowest call here, dumping the kernel's BTF (some 12 MB of text), takes about 2 s.
BPFTOOL_TIMEOUT_S = 60.0
#: The longest wait for another process's turn at the state file: it holds it for a few bpftool calls.
LOCK_TIMEOUT_S = 4 * BPFTOOL_TIMEOUT_S
#: The type the kernel's BTF has when it can run a BPF struct_ops tcp_congestion_ops.
STRUCT_OPS_TYPE = "bpf_struct_ops_tcp_congestion_ops"
HELD_ENV = "CCSWEEP_BPF_HELD"
#: Where a holder publishes what it registered: the folder the chart mounts into cell pods, read-only.
DEFAULT_HELD = Path("/run/ccsweep/node/bpf-held.json")
#: A held file is a few names and digests; anything larger is not one.
HELD_MAX_BYTES = 64 * 1024


class BpfUnavailable(RuntimeError):
    """This machine cannot register a BPF congestion control; str() is one line saying what is missing."""


class Registration(BaseModel):
    """One algorithm registered by a ccsweep process: which object, and who must unregister it."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9_]{1,15}$")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    pid: int = Field(ge=1)
    #: The owner's start time (clock ticks after boot, /proc/PID/stat): a reused pid is not the owner.
    pid_start: int = Field(ge=0)


class RegistrationState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    registrations: list[Registration] = Field(default_factory=list, max_length=1000)


class HeldPrograms(BaseModel):
    """What a live holder registered on this machine: name -> its object's SHA-256."""

    model_config = ConfigDict(extra="forbid")

    programs: dict[Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]{1,15}$")],
                   Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]] = Field(max_length=100)


def state_path() -> Path:
    env = os.environ.get(STATE_ENV)
    return Path(env) if env else DEFAULT_STATE


def held_path() -> Path:
    env = os.environ.get(HELD_ENV)
    return Path(env) if env else DEFAULT_HELD


def kernel_registered() -> set[str]:
    """The algorithms the kernel lists now (registered BPF ones among them)."""
    try:
        return set(AVAILABLE_CC.read_text().split())
    except OSError:
        return set()


def registered_digests(path: Path | None = None, held: Path | None = None) -> dict[str, str]:
    """Name -> object digest of each algorithm a live ccsweep process registered and the kernel still
    lists: those of this machine's state file, and those a live holder published (a node setup,
    seen from a cell pod)."""
    listed = kernel_registered()
    own = {r.name: r.sha256 for r in _read(path or state_path()).registrations if _alive(r)}
    return {name: digest for name, digest in (held_digests(held) | own).items() if name in listed}


def held_digests(path: Path | None = None) -> dict[str, str]:
    """What a live holder published in the held file (name -> digest); {} when there is none, or
    when the one who wrote it is gone (its flock went with it)."""
    held_file = path or held_path()
    try:
        handle = open(held_file, "rb")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise BpfUnavailable(f"{held_file}: cannot be read ({exc.strerror})") from None
    with handle:
        if not _held(handle):
            return {}
        try:
            return HeldPrograms.model_validate_json(handle.read(HELD_MAX_BYTES + 1)).programs
        except ValidationError as exc:
            raise BpfUnavailable(f"{held_file}: not a ccsweep held-programs file "
                                 f"({str(exc).splitlines()[0]})") from None


def missing_support(names: Iterable[str]) -> str | None:
    """What this machine lacks to register `names`, in one line; None when it has it all: the
    kernel's BTF, BPF struct_ops congestion control, every kfunc the programs call, and bpftool."""
    if not BTF_VMLINUX.is_file():
        return f"this kernel has no BTF ({BTF_VMLINUX}): it cannot load BPF congestion controls"
    if shutil.which("bpftool") is None:
        return "bpftool is not installed (Debian's bpftool package: make apt)"
    return missing_in_btf(_bpftool("btf", "dump", "file", str(BTF_VMLINUX)), names)


def missing_in_btf(dump: str, names: Iterable[str]) -> str | None:
    """What the kernel whose BTF `bpftool btf dump` printed as `dump` lacks to run `names`, in one
    line: BPF struct_ops for tcp_congestion_ops, or a kfunc a program calls; None when nothing."""
    funcs, kfunc_ids, structs = _btf_names(dump)
    if STRUCT_OPS_TYPE not in structs:
        return "this kernel has no BPF struct_ops for tcp_congestion_ops (CONFIG_BPF_JIT, CONFIG_BPF_SYSCALL)"
    for name in names:
        for kfunc in PROGRAMS[name].kfuncs:
            if kfunc not in funcs or (kfunc_ids and funcs[kfunc] not in kfunc_ids):
                return f"this kernel does not export {kfunc} as a kfunc, which {name} calls"
    return None


def recover(path: Path | None = None) -> list[str]:
    """Unregister what ccsweep processes that are gone left registered (killed outright); returns their names.
    Touches nothing where no ccsweep process ever registered one (no state file)."""
    state_file = path or state_path()
    if not state_file.exists():
        return []
    with _locked(state_file) as state:
        return _recover(state)


@contextmanager
def registered(names: Iterable[str], path: Path | None = None) -> Iterator[list[str]]:
    """Register the BPF congestion controls `names` for the time of the block, then unregister those
    this block registered; yields their names. One already registered by another live ccsweep process
    from the same object is used as it is, and left to its owner. Raises BpfUnavailable, having
    registered nothing, when one cannot be (kernel support, object, a foreign registration)."""
    wanted = list(dict.fromkeys(names))
    state_file = path or state_path()
    mine: list[str] = []
    try:
        if wanted:
            mine = _register(wanted, state_file)
        yield mine
    finally:
        if mine:
            with _locked(state_file) as state:
                for name in mine:
                    _unregister(name)
                state.registrations = [r for r in state.registrations if not (r.name in mine and r.pid == os.getpid())]


@contextmanager
def holding(names: Iterable[str], path: Path | None = None, held: Path | None = None) -> Iterator[dict[str, str]]:
    """Register `names` as `registered` does, and publish them with their digests in the held file
    for the time of the block (the chart's node setup); yields what it published. Raises
    BpfUnavailable, having registered nothing, when another holder on this machine is alive."""
    held_file = held or held_path()
    held_file.parent.mkdir(parents=True, exist_ok=True)
    if _locked_by_other(held_file):
        raise BpfUnavailable(f"{held_file}: another ccsweep process holds BPF congestion controls on this machine")
    with registered(names, path) as mine:
        programs = _digests(mine)
        scratch = held_file.with_name(held_file.name + ".tmp")
        scratch.write_text(HeldPrograms(programs=programs).model_dump_json())
        with open(scratch, "rb") as lock:
            # Locked before it takes the file's name, so a reader never sees it unlocked while we live.
            fcntl.flock(lock, fcntl.LOCK_EX)
            scratch.replace(held_file)
            try:
                yield programs
            finally:
                held_file.unlink(missing_ok=True)


def _locked_by_other(held_file: Path) -> bool:
    """Whether a live holder has the held file (one that published an empty list too)."""
    try:
        with open(held_file, "rb") as handle:
            return _held(handle)
    except FileNotFoundError:
        return False


def _held(handle: BinaryIO) -> bool:
    """Whether a live process holds the exclusive lock of `handle`'s file: then no shared one is had."""
    try:
        fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(handle, fcntl.LOCK_UN)
    return False


def _register(wanted: list[str], state_file: Path) -> list[str]:
    with _locked(state_file) as state:
        _recover(state)
        digests = _digests(wanted)
        if (missing := missing_support(wanted)) is not None:
            raise BpfUnavailable(missing)
        listed = kernel_registered()
        owned = {r.name: r for r in state.registrations}
        for name in wanted:
            if name in listed and name not in owned and name in held_digests():
                raise BpfUnavailable(f"congestion control {name} is held on this machine by `ccsweep bpf hold` (the "
                                     f"chart's node setup), which alone unregisters it; its cells run in the "
                                     f"cluster's pods")
            if name in listed and name not in owned:
                raise BpfUnavailable(f"congestion control {name} is already registered on this machine, not by "
                                     f"ccsweep: its code is unknown; unregister it (bpftool struct_ops unregister "
                                     f"name {name}) to run cells that use it")
            if name in owned and owned[name].sha256 != digests[name]:
                raise BpfUnavailable(f"congestion control {name} is registered by ccsweep process {owned[name].pid} "
                                     f"from another object (sha256 {owned[name].sha256[:16]}, this one "
                                     f"{digests[name][:16]}); let that run end first")
        mine = []
        try:
            for name in wanted:
                if name in owned:
                    continue
                _bpftool("struct_ops", "register", str(PROGRAMS[name].object_path()))
                if name not in kernel_registered():
                    raise BpfUnavailable(f"bpftool registered no {name} from {PROGRAMS[name].object_path()}")
                mine.append(name)
                state.registrations.append(Registration(name=name, sha256=digests[name], pid=os.getpid(),
                                                        pid_start=_start_time(os.getpid()) or 0))
        except BaseException:
            for name in mine:
                _unregister(name)
            state.registrations = [r for r in state.registrations if r.name not in mine]
            raise
        return mine


def _digests(names: list[str]) -> dict[str, str]:
    try:
        return {name: object_digest(name) for name in names}
    except BpfObjectMissing as exc:
        raise BpfUnavailable(str(exc)) from None


def _recover(state: RegistrationState) -> list[str]:
    gone = [r for r in state.registrations if not _alive(r)]
    listed = kernel_registered()
    for registration in gone:
        if registration.name in listed:
            _unregister(registration.name)
    state.registrations = [r for r in state.registrations if r not in gone]
    return [r.name for r in gone]


def _unregister(name: str) -> None:
    """Unregister `name` if the kernel lists it. bpftool unregisters every struct_ops map of that name,
    and fails on those unregistered already that live on while a socket still uses them (a cell's
    last sockets in TIME_WAIT): what counts is that the kernel no longer offers the algorithm."""
    if name not in kernel_registered():
        return
    try:
        _bpftool("struct_ops", "unregister", "name", name)
    except BpfUnavailable:
        if name in kernel_registered():
            raise


def _bpftool(*args: str) -> str:
    """bpftool's stdout; BpfUnavailable with its last line of stderr when it fails or hangs."""
    try:
        done = subprocess.run(["bpftool", *args], capture_output=True, text=True, timeout=BPFTOOL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise BpfUnavailable(f"bpftool {args[0]} {args[1]} did not end within {BPFTOOL_TIMEOUT_S:g} s") from None
    except OSError as exc:
        raise BpfUnavailable(f"bpftool could not run: {exc}") from None
    if done.returncode != 0:
        last = next((line for line in reversed(done.stderr.splitlines()) if line.strip()), "no message")
        raise BpfUnavailable(f"bpftool {' '.join(args[:2])} failed ({done.returncode}): {last.strip()}")
    return done.stdout


_BTF_LINE = re.compile(r"^\[(\d+)\] (FUNC|STRUCT|DECL_TAG) '([^']*)'(?: type_id=(\d+))?")


def _btf_names(dump: str) -> tuple[dict[str, str], set[str], set[str]]:
    """From `bpftool btf dump`'s text: function name -> type id, the ids tagged bpf_kfunc (empty on a
    kernel whose BTF has no such tags), and the struct names."""
    funcs: dict[str, str] = {}
    kfunc_ids: set[str] = set()
    structs: set[str] = set()
    for line in dump.splitlines():
        if (match := _BTF_LINE.match(line)) is None:
            continue
        type_id, kind, name, target = match.groups()
        if kind == "FUNC":
            funcs[name] = type_id
        elif kind == "STRUCT":
            structs.add(name)
        elif name == "bpf_kfunc" and target is not None:
            kfunc_ids.add(target)
    return funcs, kfunc_ids, structs


@contextmanager
def _locked(path: Path) -> Iterator[RegistrationState]:
    """The state, read under an exclusive lock and written back (atomically) when the block ends."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise BpfUnavailable(f"{path}: another ccsweep process held its lock for {LOCK_TIMEOUT_S:g} s") \
                        from None
                time.sleep(0.1)
        state = _read(path)
        try:
            yield state
        finally:
            scratch = path.with_name(path.name + ".tmp")
            scratch.write_text(state.model_dump_json(indent=1))
            scratch.replace(path)


def _read(path: Path) -> RegistrationState:
    try:
        return RegistrationState.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        return RegistrationState()
    except (OSError, ValidationError) as exc:
        raise BpfUnavailable(f"{path}: not a ccsweep BPF registration state ({str(exc).splitlines()[0]}); "
                             "check what it names with bpftool struct_ops show, then remove it") from None


def _alive(registration: Registration) -> bool:
    return _start_time(registration.pid) == registration.pid_start


def _start_time(pid: int) -> int | None:
    """A process's start time in clock ticks after boot (field 22 of /proc/PID/stat); None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rpartition(")")[2].split()[19])
