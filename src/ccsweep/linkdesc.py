"""One descriptor per link backend, in one registry: every layer asks it about a cell's link.

A link is more than the runner's module that drives it: a cell's parameters default its offloads
by it, expansion refuses what it cannot express, admission and a cell pod's requests price it,
the Argo fan-out sends its cells to a pod template with its privileges, its records note its
version, and the figures and comparisons set its cells beside the other links'. Each of those
read a hard-coded pair of names before; now each reads `LINKS`, so a new link is one descriptor
here and one runner module implementing `Link` (ccsweep.runner.links names it).

Data only, on the ground floor beside cell.py (tests/unit/test_layering.py): what a descriptor
says is turned into refusals (linkrules), costs (admission) and pod steps (support/link_steps.py)
by the layer that uses it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

#: How the link hands packets to the hosts. `tso`: ccsweep-link reads whole TCP segments and writes
#: the packets of one segment that leave together as one frame, which the receiving host takes
#: whole, as it takes what a NIC's GRO merged. `none`: one packet per read and write, as Mahimahi
#: moves them; a receiver without GRO.
LinkOffload = Literal["tso", "none"]
#: What a link's name and its pod template's name may be.
NAME = r"[a-z][a-z0-9]*(-[a-z0-9]+)*"


@dataclass(frozen=True)
class Inexpressible:
    """What a link's tools cannot do, each as the reason a refusal gives ("mm-link takes whole
    numbers"); None: the link can. linkrules.cannot_express turns them into one-line refusals."""

    asymmetric_delay: str | None = None
    fractional_delay_ms: str | None = None
    gilbert_elliott: str | None = None
    policer: str | None = None
    jitter: str | None = None
    delay_schedule: str | None = None
    slot: str | None = None
    ecn_marking: str | None = None
    rate_schedule: str | None = None
    fractional_queue_args: str | None = None
    #: Whether it runs a constant rate as a trace, which must then repeat within
    #: linkrules.MAX_PERIOD_MS (whole opportunities per whole ms).
    constant_rate_as_trace: bool = False


@dataclass(frozen=True)
class TimedReleaseCost:
    """A link that releases each packet at its due time from timed wake-ups, at most one per
    release window, and does per-packet work that follows the rate and its offloads (ccsweep-link)."""

    wakeup_cpu_s: float
    packet_cores_per_100mbit: Mapping[LinkOffload, float]


@dataclass(frozen=True)
class FixedTickCost:
    """A link that wakes on a fixed tick of its own and whose whole cost follows the rate
    (Mahimahi's shells)."""

    tick_us: float
    cores_per_100mbit: float


#: What admission (and so a cell pod's requests) prices a link's cells by.
LinkCost = TimedReleaseCost | FixedTickCost


@dataclass(frozen=True)
class PodPrivileges:
    """The main container's privileges in the link's cell pod template (ccsweep-cell.yaml); a test
    holds the template to them, and docs/security.md says why each is needed."""

    capabilities: tuple[str, ...]
    allow_privilege_escalation: bool


@dataclass(frozen=True)
class VersionProbe:
    """Where a run reads the link's version that its record notes (LinkSummary.version):
    `summary-field`, a field of the link's own summary line; `install-folder`, the name of the
    folder its tools are installed in, when it starts with `key` (else the link's name)."""

    kind: Literal["summary-field", "install-folder"]
    key: str


@dataclass(frozen=True)
class LinkDescriptor:
    """Everything the layers above the runner know of one link backend."""

    name: str
    #: How it is named in prose: titles, legends, notes.
    title: str
    #: The offloads it can run, its default (for a cell that names none) first.
    offloads: tuple[LinkOffload, ...]
    #: Why it cannot run the other offloads, after its name ("moves one packet at a time").
    offload_limit: str | None
    cannot: Inexpressible
    cost: LinkCost
    #: Its template in workflows/templates/ccsweep-cell.yaml, and that template's privileges.
    pod_template: str
    privileges: PodPrivileges
    version: VersionProbe

    def __post_init__(self) -> None:
        """The name and the template become YAML and Argo expressions (support/link_steps.py), a
        step's name and a cell pod's template: plain lowercase words joined by '-', nothing else."""
        for value in (self.name, self.pod_template):
            if not re.fullmatch(NAME, value):
                raise ValueError(f"link descriptor: {value!r} is not a plain name ({NAME})")
        if not self.offloads:
            raise ValueError(f"link {self.name}: it runs no offload")

    @property
    def default_offload(self) -> LinkOffload:
        return self.offloads[0]


CCSWEEP_LINK: Final = LinkDescriptor(
    name="ccsweep-link", title="ccsweep-link", offloads=("tso", "none"), offload_limit=None,
    cannot=Inexpressible(),
    # The CPU of one timed wake-up and its pass (15-30 us on a KVM guest, docs/emulator.md), and its
    # per-packet work (reading, cutting and writing, the writes running the receiving host's stack)
    # per 100 Mbit/s. Fitted with TUN offloads (`--offload tso`) to the emulator's share of two cells
    # (benchmarks/results/2026-11-26-offloads.md; admission.py gives the whole fit): wake-ups capped at
    # 4,000 a second at 100 Mbit/s and 250 us, 8,000 at 1 Gbit/s and 125 us: 0.098 = 4,000 w + p and
    # 0.31 = 8,000 w + 10 p give w = 21 us, p = 0.014 cores. Wake-ups alone cannot fit both (they would
    # need 24.5 us and 39 us each), hence the per-packet part. Windows of 100 us (paths up to 40 ms)
    # were not measured with offloads: there the model extrapolates. With `link_offload: none` (a read
    # and a write per packet) the same wake-ups: its emulator took 0.110 cores at 100 Mbit/s
    # (0.108-0.111, 5 runs) and 0.49 at 1 Gbit/s (0.48-0.52, 6 runs) in the same result file, so 0.026
    # and 0.032 per 100 Mbit/s; 0.03 gives 0.114 and 0.468.
    cost=TimedReleaseCost(wakeup_cpu_s=21e-6, packet_cores_per_100mbit={"tso": 0.014, "none": 0.03}),
    pod_template="cell",
    # NET_ADMIN for links, TUN devices and any congestion control, SYS_ADMIN for network namespaces,
    # SYS_NICE for the emulator's packet loop at real-time priority.
    privileges=PodPrivileges(capabilities=("NET_ADMIN", "SYS_ADMIN", "SYS_NICE"), allow_privilege_escalation=False),
    version=VersionProbe(kind="summary-field", key="version"),
)

MAHIMAHI: Final = LinkDescriptor(
    name="mahimahi", title="Mahimahi", offloads=("none",), offload_limit="moves one packet at a time",
    cannot=Inexpressible(
        asymmetric_delay="mm-delay delays both alike (drop reverse.delay_ms)",
        fractional_delay_ms="mm-delay takes whole milliseconds (give an even rtt_ms)",
        gilbert_elliott="mm-loss loses each packet independently",
        policer="mm-link has no token bucket",
        jitter="mm-delay holds every packet for one fixed delay",
        delay_schedule="mm-delay's one delay is fixed for its whole life",
        slot="mm-delay releases each packet when its delay ends",
        ecn_marking="mm-link's queues drop and mark nothing",
        rate_schedule="mm-link replays a trace from its own start, not from the flows' start",
        fractional_queue_args="mm-link takes whole numbers",
        constant_rate_as_trace=True),
    # Its shells wake on their own 1 ms timer. CPU of the three (mm-delay, mm-loss, mm-link) per
    # 100 Mbit/s, in place of ccsweep-link's wake-ups and packet work, measured on Mahimahi itself
    # (offloads do not apply to its TUN devices): 29.7% of a core at 93 Mbit/s of IP in the same run
    # that measured ccsweep-link's 22.2% (benchmarks/results/2026-11-23-emulator-vs-mahimahi.md);
    # 32.3% and 27.6% in the side-by-side runs of 2026-11-25-cheaper-cells.md and
    # 2026-11-26-offloads.md, 28.9% in 2026-11-26-link-cost-by-rate.md; 0.297 is the middle of the
    # first three, and the fourth agrees. Linear in the rate, it overstates faster cells (on the safe
    # side): the same bench's 400 Mbit/s cell took 16.9% per 100 Mbit/s of its throughput. The study's
    # Mahimahi cells run at 100 Mbit/s or less. A Mahimahi cell's prior at 100 Mbit/s is thus 0.367
    # cores; before this fit it was 0.447, because every cell then carried 0.1 cores per 100 Mbit/s of
    # "kernel TCP and writes", fitted to ccsweep-link cells whose receiver read every segment: the
    # writes are the link's own (in the shells' 0.297), and the endpoints now measure 0.02.
    cost=FixedTickCost(tick_us=1000.0, cores_per_100mbit=0.297),
    pod_template="cell-mahimahi",
    # As any cell, and the shells' namespaces, TUN devices, routes and NAT rules; SETUID, SETGID:
    # setpriv to nobody, and the shells' switch of real uid around iptables; NET_BIND_SERVICE: each
    # shell's dnsmasq binds port 53. The setuid shells need privilege escalation; no SYS_NICE.
    privileges=PodPrivileges(capabilities=("NET_ADMIN", "SYS_ADMIN", "SETUID", "SETGID", "NET_BIND_SERVICE"),
                             allow_privilege_escalation=True),
    version=VersionProbe(kind="install-folder", key="mahimahi-"),
)

#: Every link a cell can name, in the order figures and comparisons set them: the first is the
#: default (a cell or experiment that names none), the one every other is compared against, and
#: the one whose cell template takes a plan item that names no link (an older image's plan).
LINKS: dict[str, LinkDescriptor] = {d.name: d for d in (CCSWEEP_LINK, MAHIMAHI)}
DEFAULT_LINK: Final = CCSWEEP_LINK.name


def link_names() -> tuple[str, ...]:
    """The registered links' names, in registry order."""
    return tuple(LINKS)


def descriptor(name: str) -> LinkDescriptor:
    """The descriptor of link `name`; KeyError naming the known ones for a link not registered."""
    try:
        return LINKS[name]
    except KeyError:
        raise KeyError(f"link {name!r} is not one of {', '.join(LINKS)}") from None
