"""The BPF congestion controls ccsweep ships: their names, their objects and the objects' digests.

Each is a struct_ops `tcp_congestion_ops` built from bpf/cc/ (GPL-2.0) by `make bpf` into
bin/bpf/NAME.bpf.o. Once registered it is an algorithm like any other: a socket picks it by name.
A spec names it like the kernel's own; a cell that uses one is pinned to its object's SHA-256 (a
changed program is a new cell), as a cell is pinned to its trace files. Registering them is
`bpfregister`'s job; this module only says what they are, and touches nothing in the kernel.

Adding one's own: a source file in bpf/cc/, an entry in PROGRAMS and a name in
BpfCongestionControl (docs/runner.md, "BPF congestion controls").
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

#: The names a spec may give for ccsweep's BPF congestion controls (each a key of PROGRAMS).
BpfCongestionControl = Literal["aimd_bpf", "bbr_bpf", "bbr_unpaced"]

#: The kfuncs of the kernel's BBR (net/ipv4/tcp_bbr.c) that bbr_kfuncs.h calls.
BBR_KFUNCS = ("bbr_init", "bbr_main", "bbr_sndbuf_expand", "bbr_undo_cwnd", "bbr_cwnd_event", "bbr_ssthresh",
              "bbr_min_tso_segs", "bbr_set_state")

#: Where the objects are when $CCSWEEP_BPF_DIR does not say: where `make bpf` puts them in a clone.
OBJECTS_ENV = "CCSWEEP_BPF_DIR"


@dataclass(frozen=True)
class BpfProgram:
    """One shipped BPF congestion control."""

    #: The algorithm's name, as a socket picks it: the struct_ops map's `.name` (at most 15 characters).
    name: str
    #: The kernel functions it calls, each of which the kernel must export as a kfunc.
    kfuncs: tuple[str, ...]
    #: Whether it is the kernel's BBR: its record would carry BBR's estimates (TCP_CC_INFO), but
    #: the kernel refuses a BPF `get_info` ("attach to unsupported member get_info"), so it has none.
    bbr: bool
    summary: str

    def object_path(self) -> Path:
        return objects_dir() / f"{self.name}.bpf.o"


PROGRAMS: dict[str, BpfProgram] = {
    "bbr_unpaced": BpfProgram("bbr_unpaced", BBR_KFUNCS, bbr=True,
                              summary="the kernel's BBR through its kfuncs, TCP's internal pacing off"),
    "bbr_bpf": BpfProgram("bbr_bpf", BBR_KFUNCS, bbr=True,
                          summary="the kernel's BBR through its kfuncs, paced (the control for bbr_unpaced)"),
    "aimd_bpf": BpfProgram("aimd_bpf", (), bbr=False,
                           summary="a minimal AIMD, the example of a researcher's own (bpf/cc/aimd_bpf.bpf.c)"),
}


def not_measured(ccs: list[str]) -> list[str]:
    """What a record of flows using `ccs` cannot carry because of BPF: `bbr_info`, BBR's estimates,
    when one is BBR through BPF (the kernel refuses a struct_ops `get_info`)."""
    return ["bbr_info"] if any(cc in PROGRAMS and PROGRAMS[cc].bbr for cc in ccs) else []


class BpfObjectMissing(FileNotFoundError):
    """A BPF congestion control's object is not built; str() is one line saying how to build it."""


def objects_dir() -> Path:
    """$CCSWEEP_BPF_DIR, else <repo>/bin/bpf (where `make bpf` builds them)."""
    env = os.environ.get(OBJECTS_ENV)
    return Path(env) if env else Path(__file__).resolve().parents[2] / "bin" / "bpf"


def is_bpf(cc: str) -> bool:
    return cc in PROGRAMS


def object_digest(name: str) -> str:
    """The SHA-256 of `name`'s object as built now. Read again whenever the file changes (a rebuild
    during a long process gives the new digest), and hashed once per version otherwise."""
    path = PROGRAMS[name].object_path()
    try:
        stat = path.stat()
    except OSError:
        raise BpfObjectMissing(f"BPF congestion control {name}: its object {path} is not built; build it with "
                               f"`make bpf` (or name the folder holding it in {OBJECTS_ENV})") from None
    return _digest(path, stat.st_mtime_ns, stat.st_size)


_DIGESTS: dict[tuple[Path, int, int], str] = {}


def _digest(path: Path, mtime_ns: int, size: int) -> str:
    key = (path, mtime_ns, size)
    if key not in _DIGESTS:
        _DIGESTS[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return _DIGESTS[key]
