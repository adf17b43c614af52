"""Sweep specs: experiments as data, validated by one pydantic model.

A spec file (YAML) names a sweep and lists experiments; each experiment gives axes (lists of
values) whose cartesian product is its cells.  The same model validates YAML files, the Sweep
custom resource (its openAPIV3Schema is generated from `SweepSpec`) and the Argo parameters, so
there is one definition of what a valid sweep is.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ccsweep.cell import BufferParams, LossPosition, QueueKind, RateStep

SLUG = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"

#: Where an experiment's loss axis applies: the data direction, the ACK direction, or both.
LossDirection = Literal["uplink", "downlink", "both"]

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


class SpecError(ValueError):
    """A spec that does not validate; str() is one line naming the field and the allowed values."""


class SpecModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


#: The arguments only one queue kind takes (mm-link's CoDel and PIE parameters).
KIND_ONLY_FIELDS: dict[str, tuple[str, ...]] = {
    "codel": ("target_ms", "interval_ms"),
    "pie": ("qdelay_ref_ms", "max_burst_ms"),
}


class QueueSetting(SpecModel):
    """A queue as written in a spec: limits in packets/bytes or as a multiple of the path's BDP."""

    kind: QueueKind = "infinite"
    packets: int | None = Field(default=None, ge=1, le=10_000_000)
    bytes: int | None = Field(default=None, ge=1, le=10_000_000_000)
    bdp: float | None = Field(default=None, gt=0, le=1000, description="limit as a multiple of the bandwidth-delay product")
    min_bytes: int = Field(default=0, ge=0, description="floor for a BDP-derived byte limit (ReBBR: 30000)")
    target_ms: float | None = Field(default=None, gt=0, le=10_000)
    interval_ms: float | None = Field(default=None, gt=0, le=10_000)
    qdelay_ref_ms: float | None = Field(default=None, gt=0, le=10_000)
    max_burst_ms: float | None = Field(default=None, gt=0, le=10_000)

    @model_validator(mode="after")
    def _fields_fit_kind(self) -> "QueueSetting":
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
        return self


class FlowGroup(SpecModel):
    """`count` flows of one algorithm, starting at `start_s` and then every `stagger_s`."""

    cc: str = Field(pattern=r"^[a-z0-9_]+$")
    count: int = Field(default=1, ge=1, le=64)
    start_s: float = Field(default=0, ge=0)
    stagger_s: float = Field(default=0, ge=0)


class TraceSetting(SpecModel):
    """A pair of Mahimahi trace files (looked up on the trace path), data and ACK direction."""

    name: str = Field(pattern=SLUG)
    uplink: str
    downlink: str


class ReversePath(SpecModel):
    """The ACK direction's own delay and loss, for asymmetric paths."""

    label: str = Field(pattern=SLUG)
    delay_ms: float | None = Field(default=None, ge=0, le=10_000, description="one-way; default: half the RTT")
    loss_percent: float | None = Field(default=None, ge=0, le=100, description="default: per loss_direction")


class Experiment(SpecModel):
    """One experiment: its axes, what stays fixed, and the figure that shows it."""

    name: str = Field(pattern=SLUG)
    title: str = ""
    figure: FigureKind = "goodput-vs-loss"
    cc: list[str] | None = Field(default=None, min_length=1, description="one algorithm per cell, for every flow")
    mixes: list[list[FlowGroup]] | None = Field(default=None, min_length=1, description="instead of cc: flow mixes")
    flows: int = Field(default=1, ge=1, le=64, description="flows per cell with `cc`")
    flow_stagger_s: float = Field(default=0, ge=0)
    loss_percent: list[float] | None = Field(default=None, min_length=1)
    loss: list[float] | None = Field(default=None, min_length=1, description="fractions; give this or loss_percent")
    loss_direction: LossDirection = "uplink"
    loss_position: LossPosition = "after"
    rtt_ms: list[float] = Field(min_length=1)
    bandwidth_mbps: list[float] | None = Field(default=None, min_length=1)
    trace: list[TraceSetting] | None = Field(default=None, min_length=1)
    rate_schedule: list[RateStep] = Field(default_factory=list)
    queue: list[QueueSetting] = Field(default_factory=lambda: [QueueSetting()], min_length=1)
    reverse: list[ReversePath] | None = Field(default=None, min_length=1)
    duration_s: float = Field(gt=0, le=3600)
    warmup_s: float | None = Field(default=None, ge=0)
    repetitions: int = Field(default=1, ge=1, le=100)
    seed: int = Field(default=1, ge=0, le=2**31)
    buffers: BufferParams = BufferParams()
    message_bytes: int = Field(default=1024, ge=1, le=1 << 20)

    @field_validator("cc")
    @classmethod
    def _cc_names(cls, value: list[str] | None) -> list[str] | None:
        for name in value or []:
            if not name.isidentifier() or not name.islower():
                raise ValueError(f"congestion control {name!r} is not a kernel algorithm name (e.g. bbr, cubic)")
        return value

    @field_validator("loss_percent")
    @classmethod
    def _percent_range(cls, value: list[float] | None) -> list[float] | None:
        for p in value or []:
            if not 0 <= p <= 100:
                raise ValueError(f"{p} is outside [0, 100] (percent)")
        return value

    @field_validator("loss")
    @classmethod
    def _fraction_range(cls, value: list[float] | None) -> list[float] | None:
        for p in value or []:
            if not 0 <= p <= 1:
                raise ValueError(f"{p} is outside [0, 1] (a fraction; use loss_percent for percent)")
        return value

    @field_validator("rtt_ms")
    @classmethod
    def _rtt_range(cls, value: list[float]) -> list[float]:
        for rtt in value:
            if not 0 <= rtt <= 20_000:
                raise ValueError(f"{rtt} is outside [0, 20000] ms")
        return value

    @field_validator("bandwidth_mbps")
    @classmethod
    def _bandwidth_range(cls, value: list[float] | None) -> list[float] | None:
        for bw in value or []:
            if not 0 < bw <= 100_000:
                raise ValueError(f"{bw} is outside (0, 100000] Mbit/s")
        return value

    @model_validator(mode="after")
    def _exactly_one_of_each(self) -> "Experiment":
        if (self.cc is None) == (self.mixes is None):
            raise ValueError("give exactly one of cc and mixes")
        if (self.loss is None) == (self.loss_percent is None):
            raise ValueError("give exactly one of loss (fraction) and loss_percent")
        if (self.bandwidth_mbps is None) == (self.trace is None):
            raise ValueError("give exactly one of bandwidth_mbps and trace")
        if self.rate_schedule and self.trace is not None:
            raise ValueError("rate_schedule needs bandwidth_mbps, not a trace")
        if self.warmup_s is not None and self.warmup_s >= self.duration_s:
            raise ValueError(f"warmup_s {self.warmup_s} must be below duration_s {self.duration_s}")
        return self

    @property
    def loss_fractions(self) -> list[float]:
        # Rounded so loss_percent 0.1 and loss 0.001 give the same cell id (0.1 / 100 is not exactly 0.001).
        return self.loss if self.loss is not None else [round(p / 100, 12) for p in self.loss_percent or []]

    @property
    def effective_warmup_s(self) -> float:
        """Default warm-up: 5 s, or a quarter of a short flow."""
        return self.warmup_s if self.warmup_s is not None else min(5.0, self.duration_s / 4)

    def flow_mixes(self) -> list[list[FlowGroup]]:
        """The flow axis in one shape: `cc` becomes single-group mixes."""
        if self.mixes is not None:
            return self.mixes
        return [[FlowGroup(cc=cc, count=self.flows, stagger_s=self.flow_stagger_s)] for cc in self.cc or []]


class SweepSpec(SpecModel):
    """A named sweep: experiments, optionally pulled in from other spec files."""

    name: str = Field(pattern=SLUG)
    description: str = ""
    include: list[str] = Field(default_factory=list, description="other sweep files or preset names whose experiments join this one")
    defaults: dict[str, Any] = Field(default_factory=dict, description="fields merged into every experiment of this file")
    experiments: list[Experiment] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_names(self) -> "SweepSpec":
        names = [e.name for e in self.experiments]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"experiment names must be unique; repeated: {', '.join(dupes)}")
        if not self.experiments and not self.include:
            raise ValueError("a sweep needs experiments or include")
        return self


def sweep_search_path() -> list[Path]:
    """Where preset names are looked up: $CCSWEEP_SWEEPS (colon-separated), ./sweeps, the repo's sweeps/."""
    dirs = [Path(p) for p in os.environ.get("CCSWEEP_SWEEPS", "").split(":") if p]
    dirs += [Path.cwd() / "sweeps", Path(__file__).resolve().parents[2] / "sweeps", Path("/opt/ccsweep/sweeps")]
    return dirs


def find_spec_file(ref: str) -> Path:
    """A path to a spec file, or a preset name such as `figure8`."""
    path = Path(ref)
    if path.suffix in (".yaml", ".yml") or os.sep in ref:
        if not path.is_file():
            raise SpecError(f"{ref}: no such spec file")
        return path
    for directory in sweep_search_path():
        candidate = directory / f"{ref}.yaml"
        if candidate.is_file():
            return candidate
    raise SpecError(f"{ref}: not a spec file and not a preset (looked in {', '.join(map(str, sweep_search_path()))})")


def load_spec(ref: str) -> SweepSpec:
    """Load and validate a spec, resolving `include` and `defaults` into one flat experiment list."""
    return _load(find_spec_file(ref), seen=())


def parse_spec(data: dict[str, Any], origin: str = "spec", base_dir: Path | None = None) -> SweepSpec:
    """Validate an already-parsed spec (a YAML document or a Sweep resource's spec)."""
    return _resolve(data, origin, base_dir or Path.cwd(), seen=())


def _load(path: Path, seen: tuple[Path, ...]) -> SweepSpec:
    if path.resolve() in seen:
        raise SpecError(f"{path}: include cycle through {' -> '.join(map(str, seen))}")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: a spec is a mapping with name and experiments")
    return _resolve(data, str(path), path.parent, seen + (path.resolve(),))


def _resolve(data: dict[str, Any], origin: str, base_dir: Path, seen: tuple[Path, ...]) -> SweepSpec:
    defaults = data.get("defaults") or {}
    raw = dict(data)
    raw["experiments"] = [{**defaults, **e} if isinstance(e, dict) else e for e in data.get("experiments") or []]
    spec = _validate(raw, origin)
    included: list[Experiment] = []
    for ref in spec.include:
        candidate = base_dir / ref
        sub = _load(candidate if candidate.is_file() else find_spec_file(ref), seen)
        included.extend(sub.experiments)
    if not included:
        return spec
    return _validate({**spec.model_dump(exclude={"experiments", "include"}), "experiments": [
        e.model_dump() for e in [*included, *spec.experiments]]}, origin)


def _validate(raw: dict[str, Any], origin: str) -> SweepSpec:
    try:
        return SweepSpec.model_validate(raw)
    except ValidationError as exc:
        raise SpecError(f"{origin}: {one_line(exc, raw)}") from None


def one_line(exc: ValidationError, raw: dict[str, Any] | None = None) -> str:
    """The first validation error as `field.path: message` (experiments named, not numbered)."""
    err = exc.errors()[0]
    parts: list[str] = []
    node: Any = raw
    for key in err["loc"]:
        if isinstance(key, int) and isinstance(node, list) and parts and parts[-1] == "experiments":
            item = node[key] if key < len(node) else None
            name = item.get("name") if isinstance(item, dict) else None
            parts[-1] = f"experiments[{name or key}]"
        elif isinstance(key, int):
            parts[-1] = f"{parts[-1]}[{key}]" if parts else f"[{key}]"
        else:
            parts.append(str(key))
        node = node[key] if isinstance(node, (dict, list)) and _has(node, key) else None
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        message = "unknown field"
    elif err["type"] == "literal_error":
        message = f"{err.get('input')!r}: {message}"
    return f"{'.'.join(parts) or 'spec'}: {message}"


def _has(node: Any, key: Any) -> bool:
    if isinstance(node, dict):
        return key in node
    return isinstance(key, int) and 0 <= key < len(node)
