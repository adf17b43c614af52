"""Cells as plot points: repetitions grouped, series found, and labels that say what differs.

A *point* is one setting of an experiment's axes: its repetitions differ only in seed and
repetition number.  A *series* is a run of points along one axis (loss, buffer size, ...), so its
key is the point key with that axis blanked out.  Labels name only the axes that actually vary
among the series drawn together, so a legend reads "BBR" for Figure 8 and "BBR (10 Mbit/s)" for
the bandwidth experiment.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from weakref import WeakKeyDictionary

from ccsweep.cell import DIRECTION_EFFECTS, CellParams, DirectionParams, PackedParams
from ccsweep.result import CellResult
from ccsweep.results.held import Results
from ccsweep.spec import LossDirection
from ccsweep.stats import Interval, median_ci

#: Payload of a 1500-byte packet with TCP timestamps (1500 - 20 IP - 20 TCP - 12 options).
MSS_BYTES = 1448
PACKET_BYTES = 1500

CC_NAMES = {"bbr": "BBR", "cubic": "CUBIC", "reno": "Reno", "bic": "BIC", "vegas": "Vegas", "westwood": "Westwood"}


class Point:
    """The repetitions of one setting (first repetition's parameters stand for all)."""

    def __init__(self, params: CellParams, results: Sequence[CellResult]):
        # The kernel apart: one a result recorded (group_points) is the host's, which a cell's own
        # field need not accept (a kernel named by a spec has a pattern to match).
        self._kernel = params.kernel
        self._params = PackedParams.of(params.model_copy(update={"kernel": None}))
        #: Parsed as each is reached when grouped from a `Results`: a point holds no record.
        self.results = results

    @property
    def params(self) -> CellParams:
        """Parsed again at each use, as the records are (cell.PackedParams): a sweep has a point per
        setting (2,000 in 40,000 cells of 20 runs)."""
        params = self._params.parsed()
        return params if self._kernel is None else params.model_copy(update={"kernel": self._kernel})

    def __repr__(self) -> str:
        return f"Point({len(self.results)} runs)"

    def values(self, value: Callable[[CellResult], float | None]) -> list[float]:
        return [v for v in (value(r) for r in self.results) if v is not None]

    def median_ci(self, value: Callable[[CellResult], float | None]) -> Interval | None:
        """Median over repetitions with its bootstrap interval; None when no repetition has a value."""
        values = self.values(value)
        return median_ci(values) if values else None


def _key(params: CellParams, **blank: object) -> str:
    data = params.model_dump(mode="json")
    data["seed"] = data["repetition"] = 0
    for path, value in blank.items():
        node = data
        *parents, leaf = path.split("__")
        for part in parents:
            node = node[part]
        node[leaf] = value
    return json.dumps(data, sort_keys=True)


def point_key(params: CellParams) -> str:
    """Equal for the repetitions of one setting, different otherwise."""
    return _key(params)


def group_points(results: Iterable[CellResult]) -> list[Point]:
    """Repetitions grouped into points, in first-seen order; results from different kernels never share one.

    A cell that names no kernel ran on whichever it got: its point takes the kernel of its
    results, so the same parameters measured on two kernels are two points (and two series).
    Points hold positions in `results`, not records. A sweep's records are parsed on each pass
    (results.held), and the figures and the checks group the same records again and again: the
    points of a `Results` are kept while it lives, and each call gets a list of its own.
    """
    held = Results.of(results)
    if held in _GROUPED:
        return list(_GROUPED[held])
    # By a digest of the key: a key is the setting's JSON (1 KiB), and a sweep has a point per setting.
    members: dict[bytes, tuple[Point, list[int]]] = {}
    for position, result in enumerate(held):
        params = result.cell.params
        if params.kernel is None:
            params = params.model_copy(update={"kernel": result.environment.kernel})
        key = hashlib.sha256(point_key(params).encode()).digest()
        if key not in members:
            members[key] = (Point(params, held), [])  # the point's own runs are known at the end
        members[key][1].append(position)
    for point, positions in members.values():
        point.results = held.subset(positions)
    points = _GROUPED[held] = [point for point, _ in members.values()]
    return list(points)


#: The points of each Results grouped, for as long as it lives.
_GROUPED: WeakKeyDictionary[Results, list[Point]] = WeakKeyDictionary()


def _grouped(points: Iterable[Point], key: Callable[[CellParams], str]) -> list[list[Point]]:
    series: dict[str, list[Point]] = {}
    for point in points:
        series.setdefault(key(point.params), []).append(point)
    return list(series.values())


def group_series(points: Iterable[Point], **blank: object) -> list[list[Point]]:
    """Points grouped into series along the blanked axes (e.g. uplink__loss=0), in first-seen order."""
    return _grouped(points, lambda params: _key(params, **blank))


def loss_series(points: Iterable[Point], loss_direction: LossDirection) -> list[list[Point]]:
    """Points grouped into series along an experiment's loss axis, in first-seen order.

    The axis always sets the data direction's loss.  With `loss_direction: both` it sets the ACK
    direction's too, unless a reverse path gives that its own loss: a cell whose ACK loss equals
    its data loss follows the axis (blanked to a marker no fixed loss can equal), any other keeps
    its fixed ACK loss, which then tells series apart.  A reverse path's fixed loss equal to a
    value on the axis cannot be told from following it: the cell's parameters are the same.
    """
    def key(params: CellParams) -> str:
        up, down = params.uplink, params.downlink
        follows = loss_direction == "both" and down.loss_model == up.loss_model
        blank: dict[str, object] = {"uplink__loss": 0.0, **({"downlink__loss": "axis"} if follows else {})}
        if up.gilbert_elliott is not None:
            # Along a Gilbert-Elliott axis p sets the loss rate; the bursts (r) and each state's
            # loss (1-h, 1-k) tell series apart, as the friendly form's burst length does.
            blank["uplink__gilbert_elliott__p"] = 0.0
            if follows:
                blank["downlink__gilbert_elliott__p"] = "axis"
        return _key(params, **blank)

    return _grouped(points, key)


# Human labels.
def cc_name(cc: str) -> str:
    return CC_NAMES.get(cc, cc.upper() if len(cc) <= 4 else cc.capitalize())


def flows_label(params: CellParams) -> str:
    """'BBR', '4 x BBR' or '2 x BBR + 2 x CUBIC'."""
    counts: dict[str, int] = {}
    for flow in params.flows:
        counts[flow.cc] = counts.get(flow.cc, 0) + 1
    if len(params.flows) == 1:
        return cc_name(params.flows[0].cc)
    return " + ".join(f"{n} × {cc_name(cc)}" for cc, n in counts.items())


def rate_label(mbps: float) -> str:
    return f"{mbps:g} Mbit/s"


def bottleneck_label(params: CellParams) -> str:
    up = params.uplink
    return rate_label(up.rate_mbps) if up.rate_mbps is not None else f"trace {up.trace.name if up.trace else '?'}"


def bdp_bytes(params: CellParams) -> float | None:
    """The path's bandwidth-delay product at the base rate; None for a trace link."""
    rate = params.uplink.rate_mbps
    return rate * 1e6 / 8 * params.rtt_ms / 1000 if rate is not None else None


def drain_ms(params: CellParams) -> float | None:
    """Time the bottleneck takes to send a full queue at its base rate; None without a rate or a byte limit."""
    rate, limit = params.uplink.rate_mbps, params.uplink.queue.bytes
    if rate is None or limit is None:
        return None
    return limit * 8 / (rate * 1e6) * 1000


def buffer_bdp(params: CellParams) -> float | None:
    """The bottleneck queue's byte limit as a multiple of the BDP (3 significant digits)."""
    bdp = bdp_bytes(params)
    limit = params.uplink.queue.bytes
    if bdp is None or not limit or not bdp:
        return None
    return float(f"{limit / bdp:.3g}")


def queue_label(params: CellParams) -> str:
    multiple = buffer_bdp(params)
    label = params.uplink.queue.label()
    return f"{label} ({multiple:g} BDP)" if multiple is not None else label


def loss_model_label(direction: DirectionParams) -> str:
    """'' for Bernoulli loss (what every figure assumed before other models), else the model:
    'bursts of 4 pkts' for the simple Gilbert model, or its four parameters."""
    model = direction.gilbert_elliott
    if model is None:
        return ""
    if model.one_minus_h == 1 and model.one_minus_k == 0:
        return f"bursts of {1 / model.r:.3g} pkts"
    return (f"Gilbert-Elliott p {model.p:.3g}, r {model.r:.3g}, 1-h {model.one_minus_h:.3g}, "
            f"1-k {model.one_minus_k:.3g}")


def _loss_label(direction: DirectionParams) -> str:
    """A direction's loss for people: '1 % loss', '2 % loss in bursts of 3 pkts'."""
    rate = f"{direction.loss_model.mean_loss_rate * 100:g} % loss"
    model = loss_model_label(direction)
    return f"{rate} in {model}" if model.startswith("bursts") else f"{rate} ({model})" if model else rate


def path_label(params: CellParams) -> str:
    """'symmetric', or the ACK direction's own delay and loss when they differ from the data direction's."""
    up, down = params.uplink, params.downlink
    lossless = down.gilbert_elliott is None and down.loss == 0.0
    if down.delay_ms == up.delay_ms and (lossless or down.loss_model == up.loss_model):
        return "symmetric"
    return f"reverse {down.delay_ms:g} ms, {_loss_label(down)}"


#: Each per-direction effect's facet name (cell.DIRECTION_EFFECTS).
EFFECT_FACETS = {"policer": "policer", "jitter": "jitter", "slot": "slots"}


def _per_direction(params: CellParams, label: Callable[[DirectionParams], str]) -> str:
    """Each direction's `label`, named ('uplink ...; downlink ...'), where it is not ''."""
    return "; ".join(f"{name} {text}" for name in ("uplink", "downlink") if (text := label(getattr(params, name))))


def effect_label(params: CellParams, field: str) -> str:
    """'uplink policer 10 Mbit/s, 30 kB' (or jitter, slots): both directions' where both have the
    effect `field`; '' for none."""
    return _per_direction(params, lambda d: effect.label() if (effect := getattr(d, field)) is not None else "")


def delay_schedule_label(params: CellParams) -> str:
    """'uplink delay 80 ms at 10 s, 20 ms at 40 s': each direction's delay schedule; '' for none."""
    return _per_direction(params, DirectionParams.delay_schedule_label)


def _effect_facet(field: str, facet: str) -> Callable[[CellParams], str]:
    """The facet label of one per-direction effect: its directions' labels, or 'no slots'."""
    return lambda params: effect_label(params, field) or f"no {facet}"


#: Axes that can tell series apart, with their labels; the flows come first.
FACETS: dict[str, Callable[[CellParams], str]] = {
    "flows": flows_label,
    "rtt": lambda p: f"{p.rtt_ms:g} ms",
    "bottleneck": bottleneck_label,
    "schedule": lambda p: "steps " + ", ".join(f"×{s.factor:g} at {s.at_s:g} s" for s in p.uplink.rate_schedule),
    "delay schedule": lambda p: delay_schedule_label(p) or "fixed delay",
    "queue": queue_label,
    "path": path_label,
    "loss": lambda p: f"{p.loss * 100:g} % loss",
    "loss model": lambda p: loss_model_label(p.uplink) or "independent loss",
    "kernel": lambda p: f"kernel {p.kernel}",
    **{EFFECT_FACETS[field]: _effect_facet(field, EFFECT_FACETS[field]) for field in DIRECTION_EFFECTS},
}


def varying_facets(params: Sequence[CellParams], skip: Iterable[str] = ()) -> list[str]:
    """Facets (other than `skip`) whose label differs among `params`."""
    skipped = set(skip)
    return [name for name, label in FACETS.items()
            if name not in skipped and len({label(p) for p in params}) > 1]


def series_label(params: CellParams, facets: Sequence[str]) -> str:
    """The flows, then the varying facets in brackets: 'BBR (10 Mbit/s, 100 ms)'."""
    extra = [FACETS[f](params) for f in facets if f != "flows"]
    head = flows_label(params)
    return f"{head} ({', '.join(extra)})" if extra else head


def cell_summary(params: CellParams, repetition: bool = True, loss: bool = True) -> str:
    """One line naming a cell (or, without the repetition, a point; without the loss, a series along
    the loss axis) for tables and check details."""
    parts = [flows_label(params), *([_loss_label(params.uplink)] if loss else []), f"{params.rtt_ms:g} ms",
             bottleneck_label(params), queue_label(params)]
    if path_label(params) != "symmetric":
        parts.append(path_label(params))
    if params.uplink.rate_schedule:
        parts.append(FACETS["schedule"](params))
    if delays := delay_schedule_label(params):
        parts.append(delays)
    parts += [label for field in DIRECTION_EFFECTS if (label := effect_label(params, field))]
    if repetition:
        parts.append(f"rep {params.repetition}")
    return ", ".join(parts)
