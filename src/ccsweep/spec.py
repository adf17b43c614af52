"""Sweep specs: experiments as data, validated by one pydantic model.

A spec file (YAML) names a sweep and lists experiments; each experiment gives axes (lists of
values) whose cartesian product is its cells.  The same model validates YAML files, the Sweep
custom resource (its openAPIV3Schema is generated from `SweepSpec`) and the Argo parameters, so
there is one definition of what a valid sweep is.

This module is that definition and nothing else: the models, their bounds and rules, and how a
spec that breaks them is said in one line (`SpecError`, `one_line`). It reads no file and no
environment; turning YAML text, spec files, presets and `include` into a `SweepSpec` safely is
`ccsweep.specload`'s job, a floor above.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, field_validator, model_validator
from pydantic.functional_validators import AfterValidator, BeforeValidator
from pydantic.json_schema import WithJsonSchema

from ccsweep.bpfcc import BpfCongestionControl
from ccsweep.cell import (
    KERNEL_RELEASE,
    MAX_JITTER_MS,
    MAX_POLICER_BURST_BYTES,
    MAX_SLOT_MS,
    MAX_TRACE_DELAY_MS,
    MIN_EFFECT_MS,
    MIN_POLICER_BURST_BYTES,
    BernoulliLoss,
    GilbertElliottLoss,
    Jitter,
    JitterDistribution,
    JitterOrder,
    LinkBackend,
    LinkOffload,
    LossModel,
    LossPosition,
    Policer,
    QueueKind,
    Slot,
)

SLUG = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"

#: A file name with no folder part and no leading dot: it can only name a file inside the folders
#: searched for it (traces, included specs), never /etc/passwd or ../../x.
PLAIN_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"

#: Characters no text field takes besides C0 controls: C1 controls, the bidirectional overrides,
#: embeddings and isolates (they reorder what a reader sees: a title could show another sweep's
#: name), the marks that steer them, and Unicode's line and paragraph separators (a second line
#: inside "one line"). Written as \x{...}, which pydantic's (Rust) regex and the API server's Go
#: regexp (the CRD's patterns) both read, and which keeps the CRD's YAML plain ASCII.
_UNSEEN = r"\x{7f}-\x{9f}\x{61c}\x{200e}\x{200f}\x{2028}-\x{202e}\x{2066}-\x{2069}"
#: One line of text (titles, labels); TEXT also allows newlines and tabs (descriptions).
TEXT_LINE = rf"^[^\x00-\x1f{_UNSEEN}]*$"
TEXT = rf"^[^\x00-\x08\x0b-\x1f{_UNSEEN}]*$"

#: What each pattern means, for error messages people can act on.
PATTERN_WORDS = {
    SLUG: "a name (lowercase letters, digits and '-', at most 63, no '-' at either end)",
    PLAIN_NAME: "a plain file name (letters, digits, '.', '_' and '-'; no folder, no leading '.')",
    TEXT_LINE: "one line of text (no control characters, bidirectional overrides or line separators)",
    TEXT: "text (no control characters but newline and tab, no bidirectional overrides or line separators)",
}

#: Most values on one axis (loss rates, RTTs, ...); the cell cap (ccsweep.specload) bounds their product.
MAX_AXIS = 1000
MAX_FLOWS = 64

#: Where an experiment's loss axis applies: the data direction, the ACK direction, or both.
LossDirection = Literal["uplink", "downlink", "both"]

#: The congestion controls a Linux kernel can offer (in-tree modules, plus the out-of-tree BBRv2,
#: BBRv3 and Prague), and the BPF ones ccsweep ships (ccsweep.bpfcc). A name outside this list is a
#: typo: refused when the spec is read instead of planning cells that no node will ever run.
KernelCongestionControl = Literal[
    "bbr", "bbr2", "bbr3", "bic", "cdg", "cubic", "dctcp", "highspeed", "htcp", "hybla", "illinois", "lp", "nv",
    "prague", "reno", "scalable", "vegas", "veno", "westwood", "yeah",
]
CongestionControl = Literal[KernelCongestionControl, BpfCongestionControl]
KNOWN_CONGESTION_CONTROLS: tuple[str, ...] = get_args(CongestionControl)

#: Figure builders a spec can ask for (see ccsweep.figures).
FigureKind = Literal[
    "goodput-vs-loss",
    "capacity-share-vs-loss",
    "cellular",
    "step-response",
    "bufferbloat",
    "shallow-buffers",
    "loss-table",
]

#: Published numbers a figure can draw beside the measured ones (ccsweep.results.published_sets): ReBBR's
#: CSVs of its official figures, one name per ReBBR experiment.
PublishedName = Literal["rebbr-figure8", "rebbr-bandwidth", "rebbr-algorithms", "rebbr-rtt", "rebbr-cellular"]
#: The figure kinds that draw published numbers: those with loss on the x axis, as ReBBR's.
PUBLISHED_FIGURES: tuple[str, ...] = ("goodput-vs-loss", "capacity-share-vs-loss", "cellular")


class SpecError(ValueError):
    """A spec that does not validate; str() is one line naming the field and the allowed values.

    Control characters are escaped and the length capped, so whatever a hostile spec puts into a
    name or a key cannot break the line (or the Event the operator posts with it).
    """

    def __init__(self, message: str) -> None:
        line = re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\x{ord(m.group()):02x}", message)
        super().__init__(line if len(line) <= 500 else line[:497] + "...")


class SpecModel(BaseModel):
    """The fields of a spec, typed as the Sweep CRD types them.

    Strict: a number is a number and text is text, so `"10"` where a number belongs is refused as
    the CRD refuses it, not converted (an integer still stands for a float, as in JSON). inf and
    nan are refused everywhere: JSON cannot carry them, so a stored cell would not load. -0.0 is
    stored as 0.0, so the same physical cell never gets two ids.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)

    @field_validator("*", mode="after")
    @classmethod
    def _no_negative_zero(cls, value: Any) -> Any:
        return _without_negative_zero(value)


def _without_negative_zero(value: Any) -> Any:
    """`value` with every -0.0 in it (lists and tuples too) written as 0.0; ids hash the sign."""
    if isinstance(value, float):
        return value + 0.0  # -0.0 + 0.0 is 0.0; every other float is unchanged
    if isinstance(value, list):
        return [_without_negative_zero(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_without_negative_zero(v) for v in value)
    return value


def _within(low: float, high: float, unit: str, *, open_low: bool = False) -> AfterValidator:
    """A check that a float lies in [low, high] (or (low, high]), whose error names the whole range."""
    def check(value: float) -> float:
        if not (low < value <= high if open_low else low <= value <= high):
            raise ValueError(f"{value} is outside {'(' if open_low else '['}{low:g}, {high:g}] {unit}".rstrip())
        return value

    return AfterValidator(check)


def _bounds(low: float, high: float, *, open_low: bool = False) -> WithJsonSchema:
    """The same range in the JSON Schema, so the Sweep CRD enforces it on each item of an axis."""
    lower = {"exclusiveMinimum": low} if open_low else {"minimum": low}
    return WithJsonSchema({"type": "number", **lower, "maximum": high})


LossPercent = Annotated[float, _within(0, 100, "(percent)"), _bounds(0, 100)]
LossFraction = Annotated[float, _within(0, 1, "(a fraction; use loss_percent for percent)"), _bounds(0, 1)]
RttMs = Annotated[float, _within(0, 20_000, "ms"), _bounds(0, 20_000)]
JitterMs = Annotated[float, _within(MIN_EFFECT_MS, MAX_JITTER_MS, "ms"), _bounds(MIN_EFFECT_MS, MAX_JITTER_MS)]
SlotMs = Annotated[float, _within(MIN_EFFECT_MS, MAX_SLOT_MS, "ms"), _bounds(MIN_EFFECT_MS, MAX_SLOT_MS)]
Probability = Annotated[float, _within(0, 1, "(a fraction)"), _bounds(0, 1)]
MeanLossPercent = Annotated[float, _within(0, 100, "(percent)", open_low=True), _bounds(0, 100, open_low=True)]
#: A mean burst of more than 100,000 packets (over a second at 1 Gbit/s) is an outage, not loss.
MAX_MEAN_BURST_PACKETS = 100_000
MeanBurstPackets = Annotated[float, _within(1, MAX_MEAN_BURST_PACKETS, "packets"), _bounds(1, MAX_MEAN_BURST_PACKETS)]
#: 0.01 Mbit/s is ReBBR's lowest rate (the bandwidth preset): a full-size packet then takes 1.2 s on
#: the wire. Below it a cell measures the link's start-up, not congestion control (at 1e-9 Mbit/s
#: one packet would take 380 years). docs/spec.md, "Bounds".
MIN_RATE_MBPS = 0.01
RateMbps = Annotated[float, _within(MIN_RATE_MBPS, 100_000, "Mbit/s"), _bounds(MIN_RATE_MBPS, 100_000)]
#: A socket-buffer size in bytes as the kernel's tcp_rmem/tcp_wmem sysctls take it (an int).
SocketBytes = Annotated[int, Field(ge=1, le=2**31 - 1, strict=True)]


#: A queue shorter than one full-size packet drops every data packet: the flow never starts.
MIN_QUEUE_BYTES = 1500
#: A rate schedule becomes a trace of one line per 1500-byte delivery opportunity, written by the
#: runner for the link's whole life (the flows plus SCHEDULE_LINK_OVERHEAD_S: lead, two ready
#: timeouts, end grace; ccsweep.runner.link_run and runner.attempt). 10^7 lines are about 90 MB
#: on disk and seconds to write; 1 Gbit/s for a 60 s flow is 9.8 x 10^6 (docs/spec.md, "Bounds").
MAX_SCHEDULE_OPPORTUNITIES = 10_000_000
SCHEDULE_LINK_OVERHEAD_S = 57.0
TRACE_OPPORTUNITY_BITS = 12_000

#: The arguments only one queue kind takes (mm-link's CoDel and PIE parameters).
KIND_ONLY_FIELDS: dict[str, tuple[str, ...]] = {
    "codel": ("target_ms", "interval_ms"),
    "pie": ("qdelay_ref_ms", "max_burst_ms"),
}


class QueueSetting(SpecModel):
    """A queue as written in a spec: limits in packets/bytes or as a multiple of the path's BDP."""

    kind: QueueKind = "infinite"
    packets: int | None = Field(default=None, ge=1, le=10_000_000)
    bytes: int | None = Field(default=None, ge=MIN_QUEUE_BYTES, le=10_000_000_000,
                              description="at least one full-size packet (1500 bytes)")
    bdp: float | None = Field(default=None, gt=0, le=1000,
                              description="limit as a multiple of the bandwidth-delay product")
    min_bytes: int = Field(default=0, ge=0, le=10_000_000_000,
                           description="floor for a BDP-derived byte limit (ReBBR: 30000)")
    target_ms: float | None = Field(default=None, gt=0, le=10_000)
    interval_ms: float | None = Field(default=None, gt=0, le=10_000)
    qdelay_ref_ms: float | None = Field(default=None, gt=0, le=10_000)
    max_burst_ms: float | None = Field(default=None, gt=0, le=10_000)
    ecn: bool = Field(default=False, strict=True,
                      description="codel or pie: mark ECN-capable packets CE instead of dropping them")
    l4s_step_us: int | None = Field(default=None, ge=1, le=10_000_000, strict=True,
                                    description="mark ECT(1) packets CE that waited this long or more (an L4S "
                                                "step marker, on any queue)")

    @model_validator(mode="after")
    def _fields_fitkind_in_words(self) -> QueueSetting:
        # Checked when the spec is read, so a mistake is one line naming the field (the resolved
        # QueueParams repeats the kind rules for cells that arrive as JSON without a spec).  Only a
        # BDP multiple's byte count is left to expansion, which knows the path's rate and RTT.
        limits = [name for name in ("packets", "bytes", "bdp") if getattr(self, name) is not None]
        if self.kind == "infinite" and limits:
            raise ValueError(f"kind infinite takes no limit ({', '.join(limits)} given); a limited queue is "
                             "droptail, drophead, codel or pie")
        if self.kind != "infinite" and not limits:
            raise ValueError(f"kind {self.kind} needs a limit: packets, bytes or bdp (at least one)")
        if self.bdp is not None and self.bytes is not None:
            raise ValueError("give bdp or bytes, not both")
        if self.min_bytes and self.bdp is None:
            raise ValueError("min_bytes is the floor of a bdp limit: give bdp with it")
        for kind, names in KIND_ONLY_FIELDS.items():
            given = [name for name in names if getattr(self, name) is not None]
            if given and self.kind != kind:
                raise ValueError(f"{', '.join(given)}: only for kind {kind}, not {self.kind}")
        if self.ecn and self.kind not in ("codel", "pie"):
            raise ValueError(f"ecn: only for kind codel or pie (the AQMs that mark), not {self.kind}")
        return self


class FlowGroup(SpecModel):
    """`count` flows of one algorithm, starting at `start_s` and then every `stagger_s`."""

    cc: CongestionControl
    count: int = Field(default=1, ge=1, le=MAX_FLOWS)
    start_s: float = Field(default=0, ge=0, le=3600)
    stagger_s: float = Field(default=0, ge=0, le=3600)

    @property
    def last_start_s(self) -> float:
        return self.start_s + (self.count - 1) * self.stagger_s


class TraceSetting(SpecModel):
    """A pair of Mahimahi trace files (plain names looked up on the trace path), data and ACK direction."""

    name: str = Field(pattern=SLUG)
    uplink: str = Field(pattern=PLAIN_NAME, description="trace file name (no folder), e.g. Verizon-LTE-short.up")
    downlink: str = Field(pattern=PLAIN_NAME, description="trace file name (no folder), e.g. Verizon-LTE-short.down")


class ReversePath(SpecModel):
    """The ACK direction's own delay and loss, for asymmetric paths."""

    label: str = Field(pattern=SLUG)
    delay_ms: float | None = Field(default=None, ge=0, le=10_000, description="one-way; default: half the RTT")
    loss_percent: float | None = Field(default=None, ge=0, le=100, description="default: per loss_direction")


class PolicerSetting(SpecModel):
    """A policer on the directions `direction` names: a token bucket of `burst_bytes`, filling at
    `rate_mbps`, just before the queue, that drops the packets it has no tokens for."""

    rate_mbps: RateMbps = Field(description="the bucket's fill rate, Mbit/s of IP packets")
    burst_bytes: int = Field(ge=MIN_POLICER_BURST_BYTES, le=MAX_POLICER_BURST_BYTES, strict=True,
                             description="the bucket's size in bytes, at least one full-sized packet")
    direction: LossDirection = Field(default="uplink", description="uplink (the data), downlink (the ACKs) or both")

    def resolved(self) -> Policer:
        return Policer(rate_mbps=self.rate_mbps, burst_bytes=self.burst_bytes)


class JitterSetting(SpecModel):
    """A jitter on the directions `direction` names: each packet's one-way delay varies by
    `jitter_ms`, drawn from `distribution` as netem draws it, never below zero, with packets kept in
    order or allowed to overtake (`order`)."""

    jitter_ms: JitterMs = Field(description="the spread in ms: uniform's half-width, normal's standard deviation")
    distribution: JitterDistribution = Field(default="uniform", description="uniform, normal, pareto or paretonormal")
    order: JitterOrder = Field(default="keep", description="keep (no packet overtakes) or reorder")
    direction: LossDirection = Field(default="uplink", description="uplink (the data), downlink (the ACKs) or both")

    def resolved(self) -> Jitter:
        return Jitter(jitter_ms=self.jitter_ms, distribution=self.distribution, order=self.order)


class SlotSetting(SpecModel):
    """Slots on the directions `direction` names (by default the ACKs'): packets leave only when a
    slot opens, `min_ms` to `max_ms` apart, each slot taking at most `packets` packets and packets
    while fewer than `bytes` bytes have left (0: no limit), as netem's `slot` does."""

    min_ms: SlotMs = Field(description="the shortest gap between two slots, ms")
    max_ms: SlotMs = Field(description="the longest gap between two slots, ms (at least min_ms)")
    packets: int = Field(default=0, ge=0, le=1_000_000, strict=True, description="packets a slot takes (0: any)")
    bytes: int = Field(default=0, ge=0, le=1 << 30, strict=True, description="bytes a slot takes (0: any)")
    direction: LossDirection = Field(default="downlink", description="downlink (the ACKs), uplink (the data) or both")

    @model_validator(mode="after")
    def _ordered(self) -> SlotSetting:
        if self.max_ms < self.min_ms:
            raise ValueError(f"max_ms {self.max_ms:g} is under min_ms {self.min_ms:g}")
        return self

    def resolved(self) -> Slot:
        return Slot(min_ms=self.min_ms, max_ms=self.max_ms, packets=self.packets, bytes=self.bytes)


class GilbertElliottSetting(SpecModel):
    """Gilbert-Elliott loss in one of two forms: netem's `gemodel` parameters as fractions (`p`,
    `r`, `one_minus_h`, `one_minus_k`), or the simple Gilbert model by what it does
    (`mean_loss_percent`, `mean_burst_packets`)."""

    p: Probability | None = Field(default=None, description="probability of moving from Good to Bad, per packet")
    r: Probability | None = Field(default=None, description="probability of moving from Bad to Good, per packet")
    one_minus_h: Probability | None = Field(default=None,
                                            description="loss probability in Bad (netem's 1-h); default 1")
    one_minus_k: Probability | None = Field(default=None,
                                            description="loss probability in Good (netem's 1-k); default 0")
    mean_loss_percent: MeanLossPercent | None = Field(
        default=None, description="instead of p and r: the long-run loss rate, in percent")
    mean_burst_packets: MeanBurstPackets | None = Field(
        default=None, description="with mean_loss_percent: the mean length of a burst of losses, in packets")

    @model_validator(mode="after")
    def _one_form(self) -> GilbertElliottSetting:
        netem = [name for name in ("p", "r", "one_minus_h", "one_minus_k") if getattr(self, name) is not None]
        friendly = [name for name in ("mean_loss_percent", "mean_burst_packets") if getattr(self, name) is not None]
        if netem and friendly:
            raise ValueError(f"give netem's parameters or mean_loss_percent and mean_burst_packets, not both "
                             f"({', '.join(netem + friendly)} given)")
        if friendly:
            if len(friendly) == 1:
                raise ValueError("mean_loss_percent and mean_burst_packets go together: give both")
            burst = self.mean_burst_packets or 1.0
            most = 100 * burst / (burst + 1)
            if (self.mean_loss_percent or 0) > most:
                raise ValueError(f"mean_loss_percent: {self.mean_loss_percent:g} is outside (0, {most:.6g}], the "
                                 f"most bursts of mean {burst:g} packets can lose (100 B / (B + 1) %)")
            return self
        if self.p is None or self.r is None:
            raise ValueError("give p and r (and optionally one_minus_h, one_minus_k), or mean_loss_percent and "
                             "mean_burst_packets")
        if self.p + self.r <= 0:
            raise ValueError("p and r are both 0: the chain never moves (p + r must be above 0)")
        return self

    def resolved(self) -> GilbertElliottLoss:
        """The four parameters a cell holds. The friendly form is the simple Gilbert model (loss
        only in Bad, all of it): a burst lasts a geometric number of packets of mean 1/r, and the
        loss rate p / (p + r)."""
        if self.mean_loss_percent is not None and self.mean_burst_packets is not None:
            loss = self.mean_loss_percent / 100
            r = 1 / self.mean_burst_packets
            return GilbertElliottLoss(p=loss * r / (1 - loss), r=r, one_minus_h=1.0, one_minus_k=0.0)
        return GilbertElliottLoss(p=self.p, r=self.r,
                                  one_minus_h=1.0 if self.one_minus_h is None else self.one_minus_h,
                                  one_minus_k=0.0 if self.one_minus_k is None else self.one_minus_k)


class RateStepSetting(SpecModel):
    """From `at_s` seconds into the flow on, the bottleneck runs at `factor` x its base rate."""

    at_s: float = Field(ge=0, le=3600)
    factor: float = Field(gt=0, le=1000)


#: The latest a step may start: an experiment's longest duration_s.
MAX_STEP_AT_S = 3600
StepAtS = Annotated[float, _within(0, MAX_STEP_AT_S, "s"), _bounds(0, MAX_STEP_AT_S)]
TraceDelayMs = Annotated[float, _within(0, MAX_TRACE_DELAY_MS, "ms"), _bounds(0, MAX_TRACE_DELAY_MS)]


class DelayStepSetting(SpecModel):
    """From `at_s` seconds into the flow on, the one-way delay is `delay_ms`."""

    at_s: StepAtS = Field(description="seconds into the flow (before duration_s)")
    delay_ms: TraceDelayMs = Field(description="the one-way delay from then on, ms")


class DelayScheduleSetting(SpecModel):
    """A delay that steps over time on the directions `direction` names: before the first step each
    keeps its delay (half of rtt_ms, or reverse.delay_ms), from each step's `at_s` on its `delay_ms`,
    after the last the last; packets keep their order when it falls (docs/emulator.md, "Delay
    trace")."""

    steps: list[DelayStepSetting] = Field(min_length=1, max_length=MAX_AXIS,
                                          description="the steps, at_s increasing from step to step")
    direction: LossDirection = Field(default="uplink", description="uplink (the data), downlink (the ACKs) or both")

    @model_validator(mode="after")
    def _in_time_order(self) -> DelayScheduleSetting:
        for i, (earlier, later) in enumerate(zip(self.steps, self.steps[1:], strict=False), 1):
            if later.at_s <= earlier.at_s:
                raise ValueError(f"steps[{i}].at_s {later.at_s:g} is not after steps[{i - 1}].at_s {earlier.at_s:g} "
                                 "(steps in time order, each at its own time)")
        return self


class BufferSetting(SpecModel):
    """Socket-buffer sysctls of the cell's namespaces: (min, default, max) bytes, in that order."""

    # A YAML or JSON list of three: strict on the numbers, not on the list being a tuple.
    tcp_rmem: tuple[SocketBytes, SocketBytes, SocketBytes] = Field(default=(4096, 87380, 6553600), strict=False)
    tcp_wmem: tuple[SocketBytes, SocketBytes, SocketBytes] = Field(default=(4096, 65536, 6553600), strict=False)

    @model_validator(mode="after")
    def _ordered(self) -> BufferSetting:
        for name in ("tcp_rmem", "tcp_wmem"):
            low, default, high = getattr(self, name)
            if not low <= default <= high:
                raise ValueError(f"{name}: {low} {default} {high} must be min <= default <= max")
        return self


def _drawable(title: str) -> str:
    """A title matplotlib can draw: between two `$`, mathtext that parses (else every figure of the
    sweep would fail when drawn, long after the spec was accepted)."""
    if title.replace("\\$", "").count("$") < 2:
        return title
    from matplotlib.mathtext import MathTextParser

    try:
        MathTextParser("path").parse(title)
    except ValueError as exc:
        raise ValueError(f"matplotlib cannot draw it: {' '.join(str(exc).split())[:200]} "
                         "(write \\$ for a dollar sign)") from None
    return title


def _repeated(values: list[Any]) -> Any:
    """The first value that occurs twice in `values`, or None."""
    seen: list[Any] = []
    for value in values:
        if value in seen:
            return value
        seen.append(value)
    return None


def _axis(description: str | None = None) -> Any:
    """An optional axis: a non-empty list of at most MAX_AXIS values."""
    return Field(default=None, min_length=1, max_length=MAX_AXIS, description=description)


#: Runs a cell may have at most, counted or adaptive.
MAX_REPETITIONS = 100


class PrecisionTarget(SpecModel):
    """When a cell has had runs enough: its goodput's interval is narrow enough."""

    ci_relative: float = Field(
        gt=0, le=1, description="settled when the 95 % bootstrap CI of the median goodput has a half-width at most "
                                "this fraction of the median")
    ci_absolute_mbps: float | None = Field(
        default=None, gt=0, le=100_000,
        description="also settled when the half-width is at most this many Mbit/s (cells that deliver almost "
                    "nothing, whose relative width means little)")


class AdaptiveRepetitions(SpecModel):
    """Runs until each cell is settled: `min` runs, then more after each round where the target is not met."""

    min: int = Field(ge=2, le=MAX_REPETITIONS, description="runs every cell gets (2 or more: one run has no interval)")
    max: int = Field(ge=2, le=MAX_REPETITIONS, description="runs a cell gets at most")
    target: PrecisionTarget

    @model_validator(mode="after")
    def _min_below_max(self) -> AdaptiveRepetitions:
        if self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}")
        return self


#: `repetitions`: a count, or a mapping for the adaptive rule. Told apart by the input's shape, so an
#: error names the form that was meant (`repetitions.adaptive: min 5 is above max 4`).
Repetitions = Annotated[
    Annotated[Annotated[int, Field(ge=1, le=MAX_REPETITIONS)], Tag("count")]
    | Annotated[AdaptiveRepetitions, Tag("adaptive")],
    Discriminator(lambda value: "adaptive" if isinstance(value, dict | AdaptiveRepetitions) else "count"),
]


#: The tags of tagged unions, which pydantic puts into an error's location, by the fields they tag.
UNION_TAGS: dict[str, tuple[str, ...]] = {"count": ("repetitions",), "adaptive": ("repetitions",)}


def _yaml_switch(value: object) -> object:
    """YAML 1.1 reads an unquoted on/off as true/false: take those as the words they were."""
    return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value


class Experiment(SpecModel):
    """One experiment: its axes, what stays fixed, and the figure that shows it."""

    name: str = Field(pattern=SLUG)
    title: Annotated[str, AfterValidator(_drawable)] = Field(default="", max_length=200, pattern=TEXT_LINE)
    figure: FigureKind = "goodput-vs-loss"
    cc: list[CongestionControl] | None = Field(default=None, min_length=1, max_length=len(KNOWN_CONGESTION_CONTROLS),
                                               description="one algorithm per cell, for every flow")
    mixes: list[Annotated[list[FlowGroup], Field(min_length=1, max_length=16)]] | None = Field(
        default=None, min_length=1, max_length=64, description="instead of cc: flow mixes")
    flows: int = Field(default=1, ge=1, le=MAX_FLOWS, description="flows per cell with `cc`")
    flow_stagger_s: float = Field(default=0, ge=0, le=3600)
    loss_percent: list[LossPercent] | None = _axis()
    loss: list[LossFraction] | None = _axis("fractions; give this or loss_percent")
    gilbert_elliott: list[GilbertElliottSetting] | None = Field(
        default=None, min_length=1, max_length=64,
        description="instead of loss or loss_percent: Gilbert-Elliott loss, netem's four parameters or a mean loss "
                    "rate and burst length, on the directions loss_direction names")
    loss_direction: LossDirection = "uplink"
    loss_position: LossPosition = "after"
    policer: list[PolicerSetting] | None = Field(
        default=None, min_length=1, max_length=64,
        description="an axis of policers: token buckets before the queue that drop what exceeds them")
    jitter: list[JitterSetting] | None = Field(
        default=None, min_length=1, max_length=64,
        description="an axis of jitters: per-packet variation of the one-way delay, in order or reordering")
    slot: list[SlotSetting] | None = Field(
        default=None, min_length=1, max_length=64,
        description="an axis of slots: releases gathered into bursts (ACK aggregation), as netem's slot")
    rtt_ms: list[RttMs] = Field(min_length=1, max_length=MAX_AXIS)
    bandwidth_mbps: list[RateMbps] | None = _axis()
    trace: list[TraceSetting] | None = Field(default=None, min_length=1, max_length=64)
    rate_schedule: list[RateStepSetting] = Field(default_factory=list, max_length=MAX_AXIS)
    delay_schedule: DelayScheduleSetting | None = Field(
        default=None, description="a one-way delay that steps over time on the directions it names, from the "
                                  "flows' start (a delay trace); each cell gets the same schedule")
    queue: list[QueueSetting] = Field(default_factory=lambda: [QueueSetting()], min_length=1, max_length=64)
    reverse: list[ReversePath] | None = Field(default=None, min_length=1, max_length=64)
    duration_s: float = Field(gt=0, le=3600)
    warmup_s: float | None = Field(default=None, ge=0, le=3600)
    repetitions: Repetitions = Field(
        default=1, description="runs of every cell (seeds seed, seed + 1, ...), or {min, max, target}: runs "
                               "until each cell's interval meets the target")
    seed: int = Field(default=1, ge=0, le=2**31)
    buffers: BufferSetting = BufferSetting()
    message_bytes: int = Field(default=1024, ge=1, le=1 << 20)
    tcp_ecn: Annotated[Literal["on", "off", "accept"], BeforeValidator(_yaml_switch)] = Field(
        default="accept", description="the endpoints' ECN: on asks for it and accepts it, off neither, accept (the "
                                      "kernel's default) only when the peer asks")
    kernels: list[Annotated[str, Field(pattern=KERNEL_RELEASE)]] | None = Field(
        default=None, min_length=1, max_length=16,
        description="kernel releases (`uname -r`) to run every cell on, one cell each: results from different "
                    "kernels are different results; without it a cell runs on any kernel")
    link: LinkBackend = Field(default="ccsweep-link",
                              description="the link emulator: ccsweep-link, or upstream Mahimahi's nested shells")
    link_offload: LinkOffload | None = Field(
        default=None, description="how ccsweep-link hands packets to the receiver: tso, whole segments in and the "
                                  "packets that leave together as one frame (a receiver with GRO), or none, one "
                                  "packet at a time as Mahimahi does; unset: tso on ccsweep-link, none on mahimahi")
    published: list[PublishedName] = Field(
        default_factory=list, max_length=len(get_args(PublishedName)),
        description="published numbers drawn beside the measured ones, in a figure of their own (e.g. "
                    "rebbr-figure8); [] draws none")

    @model_validator(mode="after")
    def _exactly_one_of_each(self) -> Experiment:
        for names in EXACTLY_ONE_OF:
            if sum(getattr(self, name) is not None for name in names) != 1:
                raise ValueError(f"give exactly one of {_listed([FIELD_WORDS.get(n, n) for n in names])}")
        if self.rate_schedule and self.trace is not None:
            raise ValueError("rate_schedule needs bandwidth_mbps, not a trace")
        if self.warmup_s is not None and self.warmup_s >= self.duration_s:
            raise ValueError(f"warmup_s {self.warmup_s} must be below duration_s {self.duration_s}")
        if self.published and self.figure not in PUBLISHED_FIGURES:
            raise ValueError(f"published: figure {self.figure} draws no published numbers "
                             f"(only {', '.join(PUBLISHED_FIGURES)} do)")
        return self

    @model_validator(mode="after")
    def _everything_within_the_cell(self) -> Experiment:
        for i, mix in enumerate(self.flow_mixes()):
            if sum(group.count for group in mix) > MAX_FLOWS:
                raise ValueError(f"mixes[{i}]: {sum(g.count for g in mix)} flows; a cell has at most {MAX_FLOWS}")
            late = max(group.last_start_s for group in mix)
            if late >= self.duration_s:
                where = f"mixes[{i}]" if self.mixes is not None else "flow_stagger_s"
                raise ValueError(f"{where}: a flow starts at {late:g} s, not before the end of the cell "
                                 f"(duration_s {self.duration_s:g})")
        for i, step in enumerate(self.rate_schedule):
            if step.at_s >= self.duration_s:
                raise ValueError(f"rate_schedule[{i}].at_s {step.at_s:g} is not before duration_s {self.duration_s:g}")
        for i, delay_step in enumerate(self.delay_schedule.steps if self.delay_schedule else []):
            if delay_step.at_s >= self.duration_s:
                raise ValueError(f"delay_schedule.steps[{i}].at_s {delay_step.at_s:g} is not before duration_s "
                                 f"{self.duration_s:g}")
        return self

    @model_validator(mode="after")
    def _no_value_twice(self) -> Experiment:
        """Each value of an axis once: a repeat is the same cell twice, or two cells under one label."""
        axes: list[tuple[str, list[Any]]] = [
            ("cc", self.cc or []), ("mixes", [[g.model_dump() for g in m] for m in self.mixes or []]),
            ("loss" if self.loss is not None else "loss_percent", self.loss_fractions),
            ("gilbert_elliott", [g.resolved() for g in self.gilbert_elliott or []]), ("rtt_ms", self.rtt_ms),
            ("bandwidth_mbps", self.bandwidth_mbps or []), ("trace", [t.name for t in self.trace or []]),
            ("trace", [(t.uplink, t.downlink) for t in self.trace or []]),
            ("queue", [q.model_dump() for q in self.queue]), ("reverse", [r.label for r in self.reverse or []]),
            ("reverse", [(r.delay_ms, r.loss_percent) for r in self.reverse or []]),
            ("rate_schedule", [step.at_s for step in self.rate_schedule]), ("kernels", self.kernels or []),
            ("policer", [p.model_dump() for p in self.policer or []]),
            ("jitter", [j.model_dump() for j in self.jitter or []]),
            ("slot", [j.model_dump() for j in self.slot or []]),
            ("published", self.published)]
        for field, values in axes:
            twice = _repeated(values)
            if twice is not None:
                shown = (f"{twice * 100:g}" if field == "loss_percent" else
                         f"{twice:g}" if isinstance(twice, float) else short_repr(twice))
                raise ValueError(f"{field}: {shown} is given twice; each value of an axis makes cells of its own")
        return self

    @model_validator(mode="after")
    def _schedule_trace_fits(self) -> Experiment:
        if not self.rate_schedule or not self.bandwidth_mbps:
            return self
        factor = max([1.0, *(step.factor for step in self.rate_schedule)])
        lines = (max(self.bandwidth_mbps) * 1e6 * factor * (self.duration_s + SCHEDULE_LINK_OVERHEAD_S)
                 / TRACE_OPPORTUNITY_BITS)
        if lines > MAX_SCHEDULE_OPPORTUNITIES:
            raise ValueError(f"rate_schedule: at {max(self.bandwidth_mbps):g} Mbit/s x {factor:g} for "
                             f"{self.duration_s:g} s the schedule's trace has {lines:.3g} lines, more than "
                             f"{MAX_SCHEDULE_OPPORTUNITIES:.0e} (a lower rate, factor or duration_s)")
        return self

    def _fraction(self, value: float) -> float:
        return value if self.loss is not None else round(value / 100, 12)

    @property
    def loss_fractions(self) -> list[float]:
        # Rounded so loss_percent 0.1 and loss 0.001 give the same cell id (0.1 / 100 is not exactly 0.001).
        return [self._fraction(value) for value in (self.loss if self.loss is not None else self.loss_percent or [])]

    def loss_models(self) -> list[LossModel]:
        """The loss axis, one model per value: Bernoulli from loss or loss_percent, or Gilbert-Elliott."""
        if self.gilbert_elliott is not None:
            return [setting.resolved() for setting in self.gilbert_elliott]
        return [BernoulliLoss(p=fraction) for fraction in self.loss_fractions]

    @property
    def effective_warmup_s(self) -> float:
        """Default warm-up: 5 s, or a quarter of a short flow."""
        return self.warmup_s if self.warmup_s is not None else min(5.0, self.duration_s / 4)

    def flow_mixes(self) -> list[list[FlowGroup]]:
        """The flow axis in one shape: `cc` becomes single-group mixes."""
        if self.mixes is not None:
            return self.mixes
        return [[FlowGroup(cc=cc, count=self.flows, stagger_s=self.flow_stagger_s)] for cc in self.cc or []]

    @property
    def max_runs(self) -> int:
        """Runs a cell can get: the count, or an adaptive rule's max (the cells planned for each setting)."""
        return self.repetitions if isinstance(self.repetitions, int) else self.repetitions.max

    @property
    def adaptive(self) -> AdaptiveRepetitions | None:
        return None if isinstance(self.repetitions, int) else self.repetitions

    def cell_count(self) -> int:
        """How many cells the experiment expands to, from the axes' lengths alone (an adaptive rule's max)."""
        bottlenecks = len(self.bandwidth_mbps if self.bandwidth_mbps is not None else self.trace or [])
        reverses = len(self.reverse) if self.reverse else 1
        kernels = len(self.kernels) if self.kernels else 1
        losses = len(self.gilbert_elliott if self.gilbert_elliott is not None else self.loss_fractions)
        return (len(self.flow_mixes()) * losses * len(self.rtt_ms) * bottlenecks * len(self.queue)
                * reverses * kernels * self.max_runs)


#: Fields of which an experiment gives exactly one (the Sweep CRD states the same as CEL rules).
EXACTLY_ONE_OF: tuple[tuple[str, ...], ...] = (
    ("cc", "mixes"),
    ("loss", "loss_percent", "gilbert_elliott"),
    ("bandwidth_mbps", "trace"),
)
#: How the exactly-one errors name a field where its name alone misleads.
FIELD_WORDS = {"loss": "loss (fraction)"}


def _listed(words: list[str]) -> str:
    """`a and b`, `a, b and c`."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


class SweepSpec(SpecModel):
    """A named sweep: experiments, optionally pulled in from other spec files."""

    name: str = Field(pattern=SLUG)
    description: str = Field(default="", max_length=4000, pattern=TEXT)
    include: list[Annotated[str, Field(pattern=PLAIN_NAME)]] = Field(
        default_factory=list, max_length=32,
        description="presets (by name) or spec files beside this one (NAME.yaml) whose experiments join this one")
    defaults: dict[str, Any] = Field(default_factory=dict,
                                     description="fields merged into every experiment of this file")
    experiments: list[Experiment] = Field(default_factory=list, max_length=256)
    time_scale: float = Field(default=1.0, gt=0, le=1,
                              description="shorten every flow (duration, warm-up, starts, rate and delay steps) by "
                                          "this factor, "
                                          "for a quick pass over a big sweep; scaled cells are recorded as such and "
                                          "never stand in for full-length ones")

    def with_link(self, link: LinkBackend) -> SweepSpec:
        """This sweep with `link` as the backend of every experiment that does not set its own.

        An experiment sets its own link in its mapping or through its file's `defaults` (both
        merged before validation, so pydantic records `link` as given); an included file's
        experiments keep what they were given. The link stays in each cell's parameters, so a
        cell on another link is another cell, stored beside the first.
        """
        experiments = [exp if "link" in exp.model_fields_set else exp.model_copy(update={"link": link})
                       for exp in self.experiments]
        return self.model_copy(update={"experiments": experiments})

    @model_validator(mode="after")
    def _unique_names(self) -> SweepSpec:
        names = [e.name for e in self.experiments]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"experiment names must be unique; repeated: {', '.join(dupes)}")
        if not self.experiments and not self.include:
            raise ValueError("a sweep needs experiments or include")
        return self


def check_sweep_name(name: str, field: str = "--sweep") -> str:
    """A sweep name from outside a spec (a CLI option): a slug, so it can never leave the store's folder."""
    if not re.fullmatch(SLUG, name):
        raise SpecError(f"{field}: {name[:64]!r} is not a sweep name (lowercase letters, digits and '-', "
                        "at most 63, starting and ending with a letter or digit)")
    return name


def short_repr(value: Any) -> str:
    """repr(value), cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def kind_in_words(value: Any) -> str:
    """What kind of value a parsed document holds, in a spec writer's words (a list, text, a number, ...)."""
    return {list: "a list", str: "text", int: "a number", float: "a number", bool: "true/false",
            type(None): "empty"}.get(type(value), type(value).__name__)


def one_line(exc: ValidationError, raw: Any = None) -> str:
    """The first validation error as `field.path: message` (experiments named, not numbered)."""
    err = exc.errors(include_url=False)[0]
    parts: list[str] = []
    node: Any = raw
    for key in err["loc"]:
        if key in UNION_TAGS and parts and parts[-1] in UNION_TAGS[key]:
            continue  # the form a union took (repetitions: count or adaptive) is no field of the input
        if isinstance(key, int):
            label: str | int = key
            if parts and parts[-1] == "experiments":
                item = node[key] if isinstance(node, list) and _has(node, key) else None
                name = item.get("name") if isinstance(item, dict) else None
                label = name if isinstance(name, str) and re.fullmatch(SLUG, name) else key
            if parts:
                parts[-1] = f"{parts[-1]}[{label}]"
            else:
                parts.append(f"[{label}]")
        else:
            parts.append(short_repr(key)[1:-1] if not re.fullmatch(r"[A-Za-z0-9_]{1,64}", str(key)) else str(key))
        node = _child(node, key)
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        message = "unknown field"
    elif err["type"] == "literal_error":
        message = f"{short_repr(err.get('input'))}: {message}"
    elif err["type"] in _TYPE_ERRORS:
        message = f"{short_repr(err.get('input'))} ({kind_in_words(err.get('input'))}): {_TYPE_ERRORS[err['type']]}"
    elif err["type"] == "string_pattern_mismatch" and err.get("ctx", {}).get("pattern") in PATTERN_WORDS:
        message = f"{short_repr(err.get('input'))} is not {PATTERN_WORDS[err['ctx']['pattern']]}"
    return f"{'.'.join(parts) or 'spec'}: {message}"


#: Type errors in the words of the CRD's types; quoted numbers are the usual cause.
_TYPE_ERRORS = {
    "float_type": "must be a number (unquoted)",
    "int_type": "must be a whole number (unquoted)",
    "bool_type": "must be true or false (unquoted)",
    "string_type": "must be text",
}


def _has(node: Any, key: Any) -> bool:
    if isinstance(node, dict):
        return key in node
    return isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node)


def _child(node: Any, key: Any) -> Any:
    """node[key] of the raw input, or None where the input does not have it."""
    return node[key] if _has(node, key) else None
