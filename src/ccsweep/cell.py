"""One experiment cell: fully resolved parameters and a content-addressed id.

A cell is what one runner executes: every value needed to reproduce it is here, already
resolved (percentages turned into fractions, BDP multiples into bytes, trace names pinned by
content hash).  The id is a hash of these parameters alone, so the same cell gets the same id on
any machine and in any sweep: a stored result is found again whichever sweep asks for it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema, model_validator

from ccsweep.linkdesc import DEFAULT_LINK, LINKS, LinkOffload, descriptor

CELL_SCHEMA_VERSION: Final = 1

QueueKind = Literal["infinite", "droptail", "drophead", "codel", "pie"]
#: A cell's endpoints' ECN, where it is not the kernel's default (net.ipv4.tcp_ecn 2, accept when asked).
TcpEcn = Literal["on", "off"]
#: net.ipv4.tcp_ecn's value for each.
TCP_ECN_SYSCTL: Mapping[TcpEcn, int] = {"on": 1, "off": 0}
LossPosition = Literal["after", "before"]


def _registered(name: str) -> str:
    """`name` when it is a registered link: read at each validation, so a link registered later counts."""
    if name not in LINKS:
        raise ValueError(f"link {name!r}: one of {', '.join(LINKS)}")
    return name


#: What emulates the path: a link registered in linkdesc.LINKS (ccsweep's own emulator, upstream
#: Mahimahi's nested shells). Checked against the registry as it is when a cell is read, so a link
#: added there is one every model takes; schemas (the CRD's) list the links registered at import.
LinkBackend = Annotated[str, AfterValidator(_registered),
                        WithJsonSchema({"enum": list(LINKS), "type": "string"})]

#: A kernel release as `uname -r` prints it, in the characters a Kubernetes label value allows.
KERNEL_RELEASE = r"^[0-9][0-9A-Za-z._-]{0,61}[0-9A-Za-z]$"

#: Mahimahi's TUN framing: a 1500-byte IP packet uses one 1504-byte delivery opportunity.
MAHIMAHI_OPPORTUNITY_BYTES = 1504


class Frozen(BaseModel):
    """Base for resolved parameters: immutable and strict, so a hash stays a hash."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Fields added after schema 1, with the default that means what the model did before each
    #: existed: canonical_json hashes such a field only when it differs from that default, at any
    #: depth, so adding one never moves a stored cell's id.
    added_after_schema_1: ClassVar[Mapping[str, object]] = {}


class QueueParams(Frozen):
    """A bottleneck queue with mm-link's names and arguments (limits already in bytes/packets)."""

    kind: QueueKind = "infinite"
    packets: int | None = Field(default=None, ge=1)
    bytes: int | None = Field(default=None, ge=1)
    target_ms: float | None = Field(default=None, gt=0)
    interval_ms: float | None = Field(default=None, gt=0)
    qdelay_ref_ms: float | None = Field(default=None, gt=0)
    max_burst_ms: float | None = Field(default=None, gt=0)
    ecn: bool = Field(default=False, description="CoDel or PIE marks ECN-capable packets CE instead of dropping them")
    l4s_step_us: int | None = Field(default=None, ge=1, description="ECT(1) packets that waited this long or more "
                                                                    "are marked CE as they leave (an L4S step)")

    added_after_schema_1: ClassVar[Mapping[str, object]] = {"ecn": False, "l4s_step_us": None}

    @model_validator(mode="after")
    def _arguments_fit_kind(self) -> QueueParams:
        limited = self.packets is not None or self.bytes is not None
        if self.kind == "infinite" and limited:
            raise ValueError("queue.kind infinite takes no packets/bytes limit")
        if self.kind != "infinite" and not limited:
            raise ValueError(f"queue.kind {self.kind} needs packets or bytes (or bdp)")
        if self.kind != "codel" and (self.target_ms or self.interval_ms):
            raise ValueError("queue.target_ms/interval_ms apply to codel only")
        if self.kind != "pie" and (self.qdelay_ref_ms or self.max_burst_ms):
            raise ValueError("queue.qdelay_ref_ms/max_burst_ms apply to pie only")
        if self.ecn and self.kind not in ("codel", "pie"):
            raise ValueError("queue.ecn applies to codel and pie only")
        return self

    def emulator_spec(self) -> str:
        """The queue in ccsweep-link's (and mm-link's) argument syntax."""
        args = {
            "packets": self.packets,
            "bytes": self.bytes,
            "target": self.target_ms if self.kind == "codel" else None,
            "interval": self.interval_ms if self.kind == "codel" else None,
            "qdelay_ref": self.qdelay_ref_ms if self.kind == "pie" else None,
            "max_burst": self.max_burst_ms if self.kind == "pie" else None,
        }
        if self.kind == "codel":
            args["target"] = self.target_ms or 5
            args["interval"] = self.interval_ms or 100
        if self.kind == "pie":
            args["qdelay_ref"] = self.qdelay_ref_ms or 15
            args["max_burst"] = self.max_burst_ms or 150
        args["ecn"] = 1 if self.ecn else None
        args["l4s_step_us"] = self.l4s_step_us
        parts = [f"{k}={_num(v)}" for k, v in args.items() if v is not None]
        return " ".join([self.kind, ",".join(parts)]) if parts else self.kind

    def label(self) -> str:
        """Short human label for tables and figure legends."""
        marking = (" ECN" if self.ecn else "") + (f" step {self.l4s_step_us} us" if self.l4s_step_us else "")
        if self.kind == "infinite":
            return "infinite" + marking
        limits = []
        if self.bytes is not None:
            limits.append(f"{self.bytes / 1000:g} kB")
        if self.packets is not None:
            limits.append(f"{self.packets} pkts")
        return f"{self.kind} {' / '.join(limits)}{marking}"


class BernoulliLoss(Frozen):
    """Each packet lost with probability `p`, independently of every other: ccsweep-link's
    `--*-loss`, mm-loss's model. Held in a direction as its `loss` (a bare fraction, as every
    cell since schema 1 has it)."""

    p: float = Field(ge=0, le=1)

    @property
    def mean_loss_rate(self) -> float:
        return self.p

    @property
    def loss_event_rate(self) -> float:
        """The share of packets that start a run of losses (lost, the one before delivered): what a
        loss-based sender's window answers to, one cut per run (carried.py)."""
        return self.p * (1 - self.p)

    def emulator_spec(self) -> tuple[str, ...]:
        """ccsweep-link's option for it (after `--uplink-` or `--downlink-`), then one argv
        element per value: `loss 0.01`."""
        return ("loss", f"{self.p:g}")


class GilbertElliottLoss(Frozen):
    """Gilbert-Elliott loss with netem's `gemodel` parameters, as fractions: a Good and a Bad
    state; a packet is lost with the probability of the state it finds, then the state moves
    (docs/emulator.md, "Gilbert-Elliott loss"). Resolved: all four given, the spec's defaults and
    its friendlier form (mean loss rate, mean burst length) already applied."""

    p: float = Field(ge=0, le=1, description="probability of moving from Good to Bad, per packet")
    r: float = Field(ge=0, le=1, description="probability of moving from Bad to Good, per packet")
    one_minus_h: float = Field(ge=0, le=1, description="loss probability in the Bad state (netem's 1-h)")
    one_minus_k: float = Field(ge=0, le=1, description="loss probability in the Good state (netem's 1-k)")

    @model_validator(mode="after")
    def _chain_moves(self) -> GilbertElliottLoss:
        if self.p + self.r <= 0:
            raise ValueError("gilbert_elliott: p and r are both 0; p + r must be above 0")
        return self

    @property
    def mean_loss_rate(self) -> float:
        """The long-run share of packets lost, rounded to 12 significant digits (so the form given
        as 1 % reads 0.01, as a figure's loss axis and a table show it)."""
        rate = (self.r * self.one_minus_k + self.p * self.one_minus_h) / (self.p + self.r)
        return float(f"{rate:.12g}")

    @property
    def loss_event_rate(self) -> float:
        """The share of packets that start a run of losses (lost, the one before delivered): what a
        loss-based sender's window answers to, one cut per run (carried.py). A burst of 4 at a mean
        of 1 % is about 0.25 % of events, where independent loss at 1 % is 0.99 %."""
        good, bad = self.r / (self.p + self.r), self.p / (self.p + self.r)
        lost_after_good = (1 - self.p) * self.one_minus_k + self.p * self.one_minus_h
        lost_after_bad = self.r * self.one_minus_k + (1 - self.r) * self.one_minus_h
        twice = good * self.one_minus_k * lost_after_good + bad * self.one_minus_h * lost_after_bad
        return max(0.0, good * self.one_minus_k + bad * self.one_minus_h - twice)

    def emulator_spec(self) -> tuple[str, ...]:
        """ccsweep-link's option for it, then its four values, one argv element each and exact
        (repr: the emulator draws with the probabilities the cell id hashed)."""
        return ("gilbert-elliott", *(repr(v) for v in (self.p, self.r, self.one_minus_h, self.one_minus_k)))


#: The loss model of one direction.
LossModel = BernoulliLoss | GilbertElliottLoss

#: A policer's bucket: at least one full-sized packet (else nothing passes), at most 1 GiB.
MIN_POLICER_BURST_BYTES = 1500
MAX_POLICER_BURST_BYTES = 1 << 30


class Policer(Frozen):
    """A token bucket just before the queue that drops what exceeds it instead of queueing it, as
    an ISP's policer does: `burst_bytes` of tokens, filling at `rate_mbps`, starting full
    (docs/emulator.md, "Policer")."""

    rate_mbps: float = Field(gt=0, le=100_000, description="the bucket's fill rate, Mbit/s of IP packets")
    burst_bytes: int = Field(ge=MIN_POLICER_BURST_BYTES, le=MAX_POLICER_BURST_BYTES,
                             description="the bucket's size: the most bytes that pass at once")

    def emulator_spec(self) -> tuple[str, ...]:
        """ccsweep-link's option for it, then its two values: `policer 10.0mbit 30000` (repr: the
        rate the cell id hashed)."""
        return ("policer", f"{self.rate_mbps!r}mbit", str(self.burst_bytes))

    def label(self) -> str:
        return f"policer {self.rate_mbps:g} Mbit/s, {self.burst_bytes / 1000:g} kB"


#: The distributions a jitter draws from, as netem names them (docs/emulator.md, "Jitter").
JitterDistribution = Literal["uniform", "normal", "pareto", "paretonormal"]
#: Whether a jittered packet may overtake the ones ahead of it.
JitterOrder = Literal["keep", "reorder"]
#: ccsweep-link's largest jitter: 10 s. The smallest a cell takes is 1 us: ccsweep-link counts
#: nanoseconds, so anything under one would reach it as 0 and be refused there, cell by cell.
MAX_JITTER_MS = 10_000
MIN_EFFECT_MS = 0.001


class Jitter(Frozen):
    """Variation of a direction's one-way delay, drawn per packet as netem draws it: `uniform` over
    delay ± `jitter_ms`, or `jitter_ms` times a value of netem's `normal`, `pareto` or
    `paretonormal` table; never below zero, and with `order` keep never before the packet ahead
    (docs/emulator.md, "Jitter")."""

    jitter_ms: float = Field(ge=MIN_EFFECT_MS, le=MAX_JITTER_MS, description="uniform's half-width, normal's sd")
    distribution: JitterDistribution = "uniform"
    order: JitterOrder = Field(default="keep", description="keep: a packet never overtakes; reorder: it may")

    def emulator_spec(self) -> tuple[str, ...]:
        """ccsweep-link's option for it, then its three values: `jitter 5.0ms normal keep` (repr: the
        spread the cell id hashed)."""
        return ("jitter", f"{self.jitter_ms!r}ms", self.distribution, self.order)

    def label(self) -> str:
        reordered = ", reordered" if self.order == "reorder" else ""
        return f"jitter {self.jitter_ms:g} ms {self.distribution}{reordered}"


#: ccsweep-link's longest gap between two slots: 1 s.
MAX_SLOT_MS = 1_000


class Slot(Frozen):
    """Releases in slots, as netem's `slot`: slots open `min_ms` to `max_ms` apart (uniform), and a
    packet leaves at the first one at or after its due time that has room: at most `packets`
    packets, and packets while fewer than `bytes` bytes have left in it (0: no limit) (ACK
    aggregation; docs/emulator.md, "Slots")."""

    min_ms: float = Field(ge=MIN_EFFECT_MS, le=MAX_SLOT_MS, description="the shortest gap between two slots")
    max_ms: float = Field(ge=MIN_EFFECT_MS, le=MAX_SLOT_MS, description="the longest gap between two slots")
    packets: int = Field(default=0, ge=0, le=1_000_000, description="packets a slot takes at most (0: no limit)")
    bytes: int = Field(default=0, ge=0, le=1 << 30, description="bytes after which a slot takes no more (0: no limit)")

    @model_validator(mode="after")
    def _ordered(self) -> Slot:
        if self.max_ms < self.min_ms:
            raise ValueError(f"max_ms {self.max_ms:g} is under min_ms {self.min_ms:g}")
        return self

    def emulator_spec(self) -> tuple[str, ...]:
        """ccsweep-link's option for it, then its four values: `slot 1.0ms 4.0ms 16 0` (repr: the
        gaps the cell id hashed)."""
        return ("slot", f"{self.min_ms!r}ms", f"{self.max_ms!r}ms", str(self.packets), str(self.bytes))

    def label(self) -> str:
        room = [f"{self.packets} packets" if self.packets else "", f"{self.bytes / 1000:g} kB" if self.bytes else ""]
        limits = ", ".join(r for r in room if r)
        return f"slots {self.min_ms:g}-{self.max_ms:g} ms" + (f" of {limits}" if limits else "")


class TraceRef(Frozen):
    """A Mahimahi trace file, named for people and pinned by content for the cell id."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class BpfProgramRef(Frozen):
    """A BPF congestion control a cell's flows use, named as sockets pick it and pinned by its
    object's SHA-256: a changed program is another cell (ccsweep.bpfcc)."""

    name: str = Field(pattern=r"^[a-z0-9_]{1,15}$")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class RateStep(Frozen):
    """From `at_s` seconds into the flow on, the bottleneck runs at `factor` x its base rate."""

    at_s: float = Field(ge=0)
    factor: float = Field(gt=0)


#: ccsweep-link's longest delay in a delay trace: 10 s (docs/emulator.md, "Delay trace").
MAX_TRACE_DELAY_MS = 10_000


class DelayStep(Frozen):
    """From `at_s` seconds into the flow on, the one-way delay is `delay_ms`."""

    at_s: float = Field(ge=0)
    delay_ms: float = Field(ge=0, le=MAX_TRACE_DELAY_MS)

    def label(self) -> str:
        return f"{self.delay_ms:g} ms at {self.at_s:g} s"


#: The effects a direction may carry beside its loss, each a model with `emulator_spec()` and
#: `label()`: the fields of DirectionParams that the runner, the export and the figures walk alike.
DIRECTION_EFFECTS: Final = ("policer", "jitter", "slot")


class DirectionParams(Frozen):
    """One direction of the emulated path: bottleneck, queue, loss and one-way delay."""

    rate_mbps: float | None = Field(default=None, gt=0)
    trace: TraceRef | None = None
    rate_schedule: tuple[RateStep, ...] = ()
    delay_ms: float = Field(ge=0)
    loss: float = Field(ge=0, le=1, description="Bernoulli loss probability (a fraction)")
    queue: QueueParams = QueueParams()
    gilbert_elliott: GilbertElliottLoss | None = Field(
        default=None, description="Gilbert-Elliott loss instead of Bernoulli (`loss` is then 0)")
    policer: Policer | None = Field(default=None, description="a token bucket before the queue that drops")
    jitter: Jitter | None = Field(default=None, description="variation of the one-way delay, per packet")
    slot: Slot | None = Field(default=None, description="releases in slots (ACK aggregation)")
    delay_schedule: tuple[DelayStep, ...] = Field(
        default=(), description="the one-way delay from each step's time on (delay_ms before the first), in time order")

    # Hashed as JSON, where an empty tuple is [].
    added_after_schema_1: ClassVar[Mapping[str, object]] = {
        "gilbert_elliott": None, "policer": None, "jitter": None, "slot": None, "delay_schedule": []}

    @model_validator(mode="after")
    def _one_bottleneck(self) -> DirectionParams:
        if (self.rate_mbps is None) == (self.trace is None):
            raise ValueError("a direction needs exactly one of rate_mbps and trace")
        if self.rate_schedule and self.rate_mbps is None:
            raise ValueError("rate_schedule applies to a constant rate, not a trace")
        if self.gilbert_elliott is not None and self.loss:
            raise ValueError(f"a direction has one loss model: loss {self.loss:g} and gilbert_elliott both given")
        # Of two steps at one time (a spec's, scaled) the later counts, as in the emulator's trace.
        times = [step.at_s for step in self.delay_schedule]
        if any(later < earlier for earlier, later in zip(times, times[1:], strict=False)):
            raise ValueError(f"delay_schedule: at_s {times} must not decrease from step to step")
        return self

    def delay_at_ms(self, t_s: float) -> float:
        """The one-way delay `t_s` seconds into the flow: the last step started by then, else delay_ms."""
        started = [step.delay_ms for step in self.delay_schedule if step.at_s <= t_s]
        return started[-1] if started else self.delay_ms

    def delay_schedule_label(self) -> str:
        """'delay 80 ms at 10 s, 20 ms at 40 s'; '' without a schedule."""
        return "delay " + ", ".join(step.label() for step in self.delay_schedule) if self.delay_schedule else ""

    @property
    def loss_model(self) -> LossModel:
        """The direction's loss as its model: Gilbert-Elliott where given, else Bernoulli `loss`."""
        return self.gilbert_elliott if self.gilbert_elliott is not None else BernoulliLoss(p=self.loss)


class FlowParams(Frozen):
    """One TCP flow from the sender namespace to the receiver namespace."""

    cc: str = Field(pattern=r"^[a-z0-9_]+$")
    start_s: float = Field(default=0, ge=0)


class BufferParams(Frozen):
    """Socket-buffer sysctls set inside the cell's namespaces (min, default, max bytes)."""

    tcp_rmem: tuple[int, int, int] = (4096, 87380, 6553600)
    tcp_wmem: tuple[int, int, int] = (4096, 65536, 6553600)


class CellParams(Frozen):
    """Everything that determines a cell's outcome; hashed into the cell id."""

    flows: tuple[FlowParams, ...] = Field(min_length=1)
    uplink: DirectionParams
    downlink: DirectionParams
    duration_s: float = Field(gt=0)
    warmup_s: float = Field(ge=0)
    loss_position: LossPosition = "after"
    buffers: BufferParams = BufferParams()
    message_bytes: int = Field(default=1024, ge=1)
    seed: int = Field(ge=0)
    repetition: int = Field(default=0, ge=0)
    link: LinkBackend = DEFAULT_LINK
    kernel: str | None = Field(default=None, pattern=KERNEL_RELEASE,
                               description="the kernel release the cell must run on (a `kernels` axis); None: any")
    time_scale: float = Field(default=1.0, gt=0, le=1,
                              description="flow times were scaled by this: a shortened run, never a full-length one")
    link_offload: LinkOffload = Field(default="tso", description="how the link hands packets over (ccsweep-link's "
                                      "--offload); absent: the link's default (linkdesc)")
    bpf_programs: tuple[BpfProgramRef, ...] = Field(
        default=(), description="the BPF congestion controls the flows use, each once, with its object's digest")
    tcp_ecn: TcpEcn | None = Field(
        default=None, description="the endpoints' ECN (net.ipv4.tcp_ecn in their namespaces): on asks for it and "
                                  "accepts it (1), off neither (0); None: the kernel's default, accept when asked (2)")

    added_after_schema_1: ClassVar[Mapping[str, object]] = {"link": DEFAULT_LINK, "kernel": None, "time_scale": 1.0,
                                                            "bpf_programs": [], "tcp_ecn": None}

    @model_validator(mode="before")
    @classmethod
    def _offload_of_the_link(cls, data: object) -> object:
        """A cell that names no offloads gets its link's default, so a Mahimahi cell stored before
        the field existed reads `none` (packet by packet), which is what Mahimahi does. (A
        ccsweep-link cell's record made before 2026-11-26 reads `tso` but ran packet by packet:
        its `link.offload`, absent, says so.)"""
        if isinstance(data, dict) and data.get("link_offload") is None:
            link = data.get("link", DEFAULT_LINK)
            known = link if isinstance(link, str) and link in LINKS else DEFAULT_LINK
            return {**data, "link_offload": LINKS[known].default_offload}
        return data

    @model_validator(mode="after")
    def _warmup_fits(self) -> CellParams:
        if self.warmup_s >= self.duration_s:
            raise ValueError(f"warmup_s {self.warmup_s} must be below duration_s {self.duration_s}")
        return self

    @model_validator(mode="after")
    def _bpf_programs_are_the_flows(self) -> CellParams:
        named = [ref.name for ref in self.bpf_programs]
        if len(set(named)) != len(named) or not set(named) <= {f.cc for f in self.flows}:
            raise ValueError(f"bpf_programs {named}: each once, and only algorithms the flows use")
        return self

    @model_validator(mode="after")
    def _offloads_fit_the_link(self) -> CellParams:
        link = descriptor(self.link)
        if self.link_offload not in link.offloads:
            raise ValueError(f"link_offload {self.link_offload}: {link.title} {link.offload_limit}")
        return self

    # Summary values used by tables, figures and metric labels.
    @property
    def cc_label(self) -> str:
        """The algorithms of the cell: 'bbr', or 'bbr+cubic' for a mix (sorted, distinct)."""
        return "+".join(sorted({f.cc for f in self.flows}))

    @property
    def loss(self) -> float:
        """Loss rate on the data direction (a model's long-run rate), the x axis of the
        goodput-vs-loss figures."""
        return self.uplink.loss_model.mean_loss_rate

    @property
    def rtt_ms(self) -> float:
        """Base (propagation) round-trip time (before a delay schedule's first step, where one is given)."""
        return self.uplink.delay_ms + self.downlink.delay_ms

    @property
    def delay_scheduled(self) -> bool:
        """Whether a delay schedule moves the path's delay: rtt_ms then holds only before its first step."""
        return bool(self.uplink.delay_schedule or self.downlink.delay_schedule)

    @property
    def shortest_rtt_ms(self) -> float:
        """The shortest base round-trip time the path has at any time: rtt_ms, unless a delay
        schedule takes it lower (at one of its steps, or before them)."""
        times = {0.0, *(step.at_s for d in (self.uplink, self.downlink) for step in d.delay_schedule)}
        return min(self.uplink.delay_at_ms(t) + self.downlink.delay_at_ms(t) for t in times)

    @property
    def bandwidth_mbps(self) -> float | None:
        """The data direction's base rate; None for a trace-driven link."""
        return self.uplink.rate_mbps

    @property
    def traces(self) -> tuple[TraceRef, ...]:
        """The trace files the cell's link needs, each once."""
        return tuple(dict.fromkeys(d.trace for d in (self.uplink, self.downlink) if d.trace is not None))


@dataclass(frozen=True, slots=True)
class PackedParams:
    """A setting's parameters held as their JSON (some 0.7 KiB) and parsed at each use (some 10 µs),
    where a parsed CellParams is some 7 KiB: what a per-setting object keeps (an adaptive point,
    a plotted point), as a sweep has thousands of settings and status and the figures hold them all."""

    json: bytes

    @classmethod
    def of(cls, params: CellParams) -> PackedParams:
        return cls(params.model_dump_json().encode())

    def parsed(self) -> CellParams:
        return CellParams.model_validate_json(self.json)


class Cell(BaseModel):
    """A cell as it travels: id, where it belongs (sweep, experiment) and its parameters."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = CELL_SCHEMA_VERSION
    id: str
    sweep: str
    experiment: str
    params: CellParams

    @model_validator(mode="after")
    def _id_matches_params(self) -> Cell:
        expected = cell_id(self.params)
        if self.id != expected:
            raise ValueError(f"cell id {self.id} does not match its parameters (expected {expected})")
        return self

    @classmethod
    def build(cls, sweep: str, experiment: str, params: CellParams) -> Cell:
        return cls(id=cell_id(params), sweep=sweep, experiment=experiment, params=params)


def canonical_json(params: CellParams) -> str:
    """Sorted, compact JSON of the parameters: the exact bytes that are hashed.

    A field added after schema 1 (a model's `added_after_schema_1`, at any depth: a new field
    inside DirectionParams as much as one of CellParams) is hashed only when it differs from its
    default: a cell that does not use it is the same experiment as before the field existed, so it
    keeps its id, and the results already stored under that id stay found. A new field takes a
    default that means what cells did before it. The offloads' default depends on the cell's link
    (its descriptor's default_offload): a Mahimahi cell has no offloads, a ccsweep-link cell has its
    emulator's default ones.
    """
    data = _without_later_defaults(params, params.model_dump(mode="json"))
    if data.get("link_offload") == descriptor(params.link).default_offload:
        del data["link_offload"]
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def _without_later_defaults(model: Frozen, data: dict[str, Any]) -> dict[str, Any]:
    """`data`, the JSON dump of `model`, without the fields added after schema 1 that hold their
    default, in `model` and in every model nested in it (directly or in a tuple)."""
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, Frozen):
            _without_later_defaults(value, data[name])
        elif isinstance(value, tuple):
            for item, item_data in zip(value, data[name], strict=True):
                if isinstance(item, Frozen):
                    _without_later_defaults(item, item_data)
    for name, default in type(model).added_after_schema_1.items():
        if data.get(name) == default:
            del data[name]
    return data


def cell_id(params: CellParams) -> str:
    """Content address: the first 16 hex digits of SHA-256 over the canonical JSON."""
    return hashlib.sha256(canonical_json(params).encode()).hexdigest()[:16]


def _num(value: float | int) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
