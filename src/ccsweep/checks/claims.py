"""Reference checks: published claims tested against the cells they apply to, pass or fail per claim.

Each claim names its source and its scope -- the cells where the claim's physics applies -- so a
failure means the platform (or the kernel) disagrees with the literature, not that a claim was
stretched to a path it was never made for.  Values are medians over repetitions of the
steady-state goodput (after the warm-up), because the claims describe steady state; every
verdict says so.

A verdict is judged on the whole 95 % bootstrap interval of each median, not on the median alone:
passed when the claim holds everywhere in it, failed when it holds nowhere, and not settled when
the interval straddles the bound (a cell with two modes) or there is no interval (one run).  More
runs settle it; with adaptive repetitions the detail says how many the cell had.

A claim's scope -- its algorithm, link, loss and buffer -- is data (`Where`) handed to its check
(`Scoped`), not written into the check's code: the same check then reads any cells a scope names,
and a test can move a claim onto recorded cells of a condition its source's statement does not
cover, where it must fail, with exactly the code that judges the claim's own cells.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ccsweep.cell import CellParams
from ccsweep.result import CellResult
from ccsweep.results.data import ExperimentData, SweepData
from ccsweep.results.loss import steady_loss_percent
from ccsweep.results.points import (
    MSS_BYTES,
    Point,
    bdp_bytes,
    buffer_bdp,
    cell_summary,
    drain_ms,
    group_points,
    group_series,
    loss_series,
)
from ccsweep.results.quantities import STEADY_GOODPUT, payload_ideal_mbps
from ccsweep.stats import Interval

#: The BBR paper's path: 100 Mbit/s x 100 ms = 1.25 MB in flight.
PAPER_BDP_BYTES = 100e6 / 8 * 0.1
MATHIS_C = 1.22
STEP_FOLLOW_S = 2.0
STEP_TOLERANCE = 0.25
#: ReBBR's shortest RTT and the loss at which its CUBIC fell far below BBR there; "far below" is
#: read as under half of BBR's goodput (Mathis alone would allow CUBIC 70 Mbit/s of 100 at 2 ms).
REBBR_RTT_MS = 2.0
REBBR_LOSS = 0.01
FAR_BELOW = 0.5
#: ThousandEyes at 1 % loss against its loss-free baseline: BBR lost under 10 %, CUBIC over 70 %.
THOUSANDEYES_LOSS = 0.01
THOUSANDEYES_BBR_MAX_DROP = 10.0
THOUSANDEYES_CUBIC_MIN_DROP = 70.0
#: The shallow-buffer study: below 1.5 BDP of buffer BBR's steady loss is high (up to 12 %), above it low.
SHALLOW_EDGE_BDP = 1.5
SHALLOW_HIGH_PERCENT = 1.0
SHALLOW_LOW_PERCENT = 0.5


@dataclass
class Verdict:
    subject: str
    #: True passed, False failed, None not settled (the interval straddles the bound, or one run).
    ok: bool | None
    detail: str
    #: Where not settled, how the medians alone read: True within the bound, False outside, None when
    #: settled.  One run per cell (ReBBR's study) settles nothing yet still reads one way, and a
    #: reader of a full-length run wants to know which, told apart from a settled verdict.
    leans: bool | None = None

    @property
    def word(self) -> str:
        return {True: "pass", False: "fail", None: "not settled"}[self.ok]

    @property
    def reading(self) -> str:
        """The verdict as the report prints it: 'not settled (the medians read fail)' where they lean."""
        if self.ok is not None or self.leans is None:
            return self.word
        return f"not settled (the medians read {'pass' if self.leans else 'fail'})"


@dataclass
class Claim:
    id: str
    statement: str
    source: str
    scope: str
    evaluate: Callable[[ExperimentData], list[Verdict]]
    #: What the source itself measured, and on which kernel: shown beside a failed check, so that a
    #: reader can tell a kernel that behaves otherwise from a claim the source's own numbers miss.
    measured: str = ""
    #: Compares cells that presets put in different experiments (rebbr-buffers' two buffer settings):
    #: judged once over all the sweep's stored cells.
    sweep_wide: bool = False


@dataclass(frozen=True)
class Where:
    """The cells a claim reads, as data: each field set narrows them, each left open does not.

    Loss ranges include both ends (to a relative 1e-6, so a grid's 0.001 % is 1e-5); buffer ranges,
    in BDPs of the cell's path, include the lowest and not the highest, as "below 1.5 BDP" and "4 BDP
    or more" are worded.  A check reads the fields its claim's scope names; the rest of the scope (one
    flow or several, which algorithms are compared) is what the claim is, and stays in its check.
    """

    #: The algorithm of a claim about one algorithm's flows (BBR holds, CUBIC's 1 Mbit/s ...).
    cc: str | None = None
    rate_mbps: float | None = None
    rtt_ms: float | None = None
    #: Random loss on the data direction, lowest and highest.
    loss: tuple[float, float] = (0.0, 1.0)
    #: The bottleneck's byte limit in BDPs, lowest and (not included) highest; None: any queue.
    buffer_bdp: tuple[float, float] | None = None

    def path(self, p: CellParams) -> bool:
        """Whether the cell's link rate, RTT and data-direction loss are the claim's."""
        low, high = self.loss
        return ((self.rate_mbps is None or math.isclose(p.bandwidth_mbps or 0, self.rate_mbps))
                and (self.rtt_ms is None or math.isclose(p.rtt_ms, self.rtt_ms))
                and low * (1 - 1e-6) <= p.loss <= high * (1 + 1e-6))

    def buffer(self, p: CellParams) -> bool:
        """Whether the cell's bottleneck buffer is the claim's size (any queue where the claim names none)."""
        if self.buffer_bdp is None:
            return True
        size = buffer_bdp(p)
        return size is not None and self.buffer_bdp[0] <= size < self.buffer_bdp[1]

    def buffers(self) -> str:
        """The buffer range in words: 'below 1.5', '4 or more', '0.5-2' (BDPs)."""
        low, high = self.buffer_bdp or (0.0, math.inf)
        return f"below {high:g}" if low == 0 else f"{low:g} or more" if high == math.inf else f"{low:g}-{high:g}"


@dataclass(frozen=True)
class Scoped:
    """A claim's check and the cells it reads: called on an experiment's data, as every claim's evaluate is."""

    check: Callable[[ExperimentData, Where], list[Verdict]]
    where: Where

    def __call__(self, data: ExperimentData) -> list[Verdict]:
        return self.check(data, self.where)


@dataclass
class CheckRow:
    claim: Claim
    experiment: str
    verdicts: list[Verdict]

    @property
    def passed(self) -> int:
        return sum(v.ok is True for v in self.verdicts)

    @property
    def status(self) -> str:
        """fail if any cell fails, not settled if any is not settled, else pass."""
        if any(v.ok is False for v in self.verdicts):
            return "fail"
        return "not settled" if any(v.ok is None for v in self.verdicts) else "pass"

    @property
    def missed(self) -> bool:
        """Whether a verdict failed or, not settled, has medians that read fail: the report then shows
        what the source itself measured beside it."""
        return any(v.ok is False or (v.ok is None and v.leans is False) for v in self.verdicts)

    @property
    def reading(self) -> str:
        """The status as the report prints it: a row not settled counts how its verdicts' medians read."""
        leaning = [v.leans for v in self.verdicts if v.ok is None and v.leans is not None]
        if self.status != "not settled" or not leaning:
            return self.status
        return f"not settled (by their medians: {sum(leaning)} pass, {len(leaning) - sum(leaning)} fail)"


def settle(outcomes: Sequence[bool]) -> bool | None:
    """True if the claim held at every value tried across the intervals, False if at none, else None."""
    return True if all(outcomes) else False if not any(outcomes) else None


def across(interval: Interval) -> list[float]:
    """Values spanning an interval (its ends and points between, for a bound that is a band); the
    center alone without an interval, which then settles nothing (see `judged`)."""
    if interval.low is None or interval.high is None:
        return [interval.center]
    return [float(v) for v in np.linspace(interval.low, interval.high, 9)]


def judged(intervals: Sequence[Interval], holds: Callable[..., bool]) -> bool | None:
    """`holds(*values)` over every combination of values across the intervals, settled; None if an
    interval is missing (one run settles nothing)."""
    if any(i.low is None for i in intervals):
        return None
    grids = [across(i) for i in intervals]
    return settle([holds(*combo) for combo in itertools.product(*grids)])


def weighed(subject: str, intervals: Sequence[Interval], holds: Callable[..., bool], detail: str) -> Verdict:
    """The verdict `judged` gives; where that settles nothing, how the medians alone read, as its lean."""
    ok = judged(intervals, holds)
    return Verdict(subject, ok, detail, holds(*(i.center for i in intervals)) if ok is None else None)


def stated(interval: Interval, unit: str = "Mbit/s") -> str:
    """'median 41.2 [38.0, 43.1] Mbit/s (95 % bootstrap CI of the median, n = 12)'."""
    return f"median {interval.text()} {unit} ({interval.label})".replace("  ", " ")


steady_goodput = STEADY_GOODPUT.of
#: How a verdict names the value it weighs.
STEADY = STEADY_GOODPUT.name


def one_flow(params: CellParams, *ccs: str) -> bool:
    """One flow of one of `ccs` over a constant-rate link without rate steps, on a fixed path: a
    delay schedule moves the RTT the claims weigh against (rtt_ms, BDPs)."""
    return (len(params.flows) == 1 and params.flows[0].cc in ccs and params.bandwidth_mbps is not None
            and not params.uplink.rate_schedule and not params.delay_scheduled)


def per_point(data: ExperimentData, applies: Callable[[CellParams], bool],
               metric: Callable[[CellResult], float | None],
               judge: Callable[[Point, float], tuple[bool, str]]) -> list[Verdict]:
    """One verdict per point of the claim's scope: `judge` weighs `metric` across the interval of its median.

    The shape most claims share (a bound per parameter point); the claims that compare two points
    (a loss against its baseline, one algorithm against another) walk their series themselves.
    """
    verdicts = []
    for point in group_points(data.results):
        if not applies(point.params):
            continue
        stat = point.median_ci(metric)
        if stat is None:
            continue
        _, detail = judge(point, stat.center)
        verdicts.append(weighed(cell_summary(point.params, repetition=False), [stat],
                                lambda value, point=point: judge(point, value)[0],
                                f"{detail}; {stat.label}" + (f", interval [{stat.low:.3g}, {stat.high:.3g}]"
                                                             if stat.low is not None and stat.high is not None
                                                             else "")))
    return verdicts


def _bbr_ideal(data: ExperimentData) -> list[Verdict]:
    def judge(point: Point, goodput: float) -> tuple[bool, str]:
        bound = 0.9 * payload_ideal_mbps(point.params.bandwidth_mbps or 0, point.params.loss)
        return goodput >= bound, f"{STEADY} {goodput:.3g} Mbit/s vs bound {bound:.3g} (0.9 × the payload-rate ideal)"
    return per_point(data, lambda p: one_flow(p, "bbr") and p.loss <= 0.05, steady_goodput, judge)


def _cubic_tenfold(data: ExperimentData) -> list[Verdict]:
    points = [pt for pt in group_points(data.results) if one_flow(pt.params, "cubic")
              and (bdp_bytes(pt.params) or 0) >= PAPER_BDP_BYTES]
    verdicts = []
    for series in loss_series(points, data.experiment.loss_direction):
        lossy = _at_loss(series, 0.001)
        reference = min(series, key=lambda pt: pt.params.loss)
        if lossy is None or reference.params.loss > 1e-5:
            continue
        at, base = lossy.median_ci(steady_goodput), reference.median_ci(steady_goodput)
        if at is None or base is None:
            continue
        verdicts.append(weighed(cell_summary(lossy.params, repetition=False),
                                [at, base], lambda a, b: a <= b / 10,
                                f"{STEADY} {stated(at)} at 0.1 % vs {stated(base)} at "
                                f"{reference.params.loss * 100:g} % (ratio {base.center / max(at.center, 1e-9):.3g})"))
    return verdicts


def _at_loss(series: Sequence[Point], loss: float) -> Point | None:
    return next((pt for pt in series if math.isclose(pt.params.loss, loss, rel_tol=1e-6)), None)


def mathis_mbps(rtt_ms: float, loss: float, link_mbps: float) -> float:
    """Mathis et al.: MSS / RTT x C / sqrt(p), capped at what the link can carry as payload."""
    model = MSS_BYTES * 8 / (rtt_ms / 1000) * MATHIS_C / math.sqrt(loss) / 1e6
    return min(model, payload_ideal_mbps(link_mbps, loss))


def _mathis(data: ExperimentData) -> list[Verdict]:
    def judge(point: Point, goodput: float) -> tuple[bool, str]:
        p = point.params
        rtts = point.values(lambda r: r.flows[0].rtt_mean_ms if r.flows else None)
        rtt = float(np.mean(rtts)) if rtts else p.rtt_ms
        model = mathis_mbps(rtt, p.loss, p.bandwidth_mbps or 0)
        return model / 2 <= goodput <= model * 2, (f"{STEADY} {goodput:.3g} Mbit/s vs model {model:.3g} "
                                                   f"(RTT {rtt:.0f} ms)")
    return per_point(data, lambda p: one_flow(p, "cubic", "reno") and p.loss >= 0.01, steady_goodput, judge)


def _bbr_step(data: ExperimentData) -> list[Verdict]:
    verdicts = []
    for result in data.results:
        p = result.cell.params
        bbr = [i for i, f in enumerate(p.flows) if f.cc == "bbr"]
        if not p.uplink.rate_schedule or not bbr or p.uplink.rate_mbps is None:
            continue
        series = data.timeseries(result.cell.id)
        for index in bbr:
            flow = series.flows[index] if series and index < len(series.flows) else None
            if flow is None or not flow.bbr_bw_bps:
                continue
            t, bw = np.asarray(flow.t), np.asarray(flow.bbr_bw_bps) / 1e6
            for step in p.uplink.rate_schedule:
                if step.at_s + STEP_FOLLOW_S > p.duration_s:
                    continue
                rate = p.uplink.rate_mbps * step.factor
                window = (t >= step.at_s) & (t <= step.at_s + STEP_FOLLOW_S)
                near = window & (np.abs(bw - rate) <= STEP_TOLERANCE * rate)
                subject = f"{cell_summary(p)}: step to {rate:g} Mbit/s at {step.at_s:g} s"
                if near.any():
                    verdicts.append(Verdict(subject, True, f"followed after {t[near][0] - step.at_s:.1f} s"))
                else:
                    last = bw[window][-1] if window.any() else float("nan")
                    verdicts.append(Verdict(subject, False, f"estimate {last:.3g} Mbit/s {STEP_FOLLOW_S:g} s later"))
    return verdicts


def _deep_buffer(params: CellParams) -> bool:
    bdp = bdp_bytes(params)
    limit = params.uplink.queue.bytes
    return params.loss == 0 and bdp is not None and limit is not None and limit >= 4 * bdp


def half_buffer_rtt_ms(params: CellParams) -> float:
    """Propagation RTT plus half the time the bottleneck takes to drain its full buffer.

    The line between the two bufferbloat behaviours: a loss-based flow only backs off when the
    buffer overflows, so it spends most of its time above it; BBR caps what it has in flight at
    2 BDP, so it queues at most about 1 BDP, far below it in a buffer of 4 BDP or more.
    """
    return params.rtt_ms + 0.5 * (drain_ms(params) or 0.0)


def _bbr_low_delay(data: ExperimentData) -> list[Verdict]:
    # The bound is half the buffer's drain time, not BBR's theoretical cap of 2 x the propagation
    # RTT: Linux's BBR adds 3 send quanta to that cap, delayed ACKs inflate the sampled RTT and
    # start-up overshoots, so a real flow sits at its theoretical limit or just above it (about
    # 2.5 x in the 10 Mbit/s, 40 ms bufferbloat fixture).  The paper's claim is qualitative (BBR
    # stays near the propagation delay while CUBIC fills the buffer); with a buffer of at least
    # 4 BDP, half its drain time is at least 2 BDP of queue, twice what BBR's cap allows, so the
    # check separates the two behaviours with a margin and fails only if BBR fills the buffer.
    def judge(point: Point, rtt: float) -> tuple[bool, str]:
        bound = half_buffer_rtt_ms(point.params)
        return rtt <= bound, f"median RTT {rtt:.0f} ms vs bound {bound:.0f} (propagation {point.params.rtt_ms:g} ms)"
    return per_point(data, lambda p: one_flow(p, "bbr") and _deep_buffer(p),
                      lambda r: r.flows[0].rtt_p50_ms if r.flows else None, judge)


def _cubic_fills(data: ExperimentData) -> list[Verdict]:
    def judge(point: Point, rtt: float) -> tuple[bool, str]:
        bound = half_buffer_rtt_ms(point.params)
        return rtt >= bound, f"95th-percentile RTT {rtt:.0f} ms vs bound {bound:.0f}"
    return per_point(data, lambda p: one_flow(p, "cubic") and _deep_buffer(p),
                      lambda r: r.flows[0].rtt_p95_ms if r.flows else None, judge)


def _rebbr_short_rtt(data: ExperimentData, where: Where) -> list[Verdict]:
    points = [pt for pt in group_points(data.results) if one_flow(pt.params, "bbr", "cubic") and where.path(pt.params)]
    verdicts = []
    for pair in group_series(points, flows=None):  # the same path, one point per algorithm
        by_cc = {pt.params.flows[0].cc: pt for pt in pair}
        if set(by_cc) != {"bbr", "cubic"}:
            continue
        cubic, bbr = by_cc["cubic"].median_ci(steady_goodput), by_cc["bbr"].median_ci(steady_goodput)
        if cubic is None or bbr is None or bbr.center <= 0:
            continue
        ratio = cubic.center / bbr.center
        verdicts.append(weighed(cell_summary(by_cc["cubic"].params, repetition=False),
                                [cubic, bbr], lambda c, b: c <= FAR_BELOW * b,
                                f"{STEADY}: CUBIC {stated(cubic)} vs BBR {stated(bbr)} (ratio {ratio:.2f}, "
                                f"bound ≤ {FAR_BELOW:g})"))
    return verdicts


def baseline_pairs(data: ExperimentData, where: Where, *ccs: str) -> list[tuple[Point, Point]]:
    """(baseline at 0 %, a lossy cell in scope) per series of one flow of one of `ccs`."""
    points = [pt for pt in group_points(data.results) if one_flow(pt.params, *ccs)]
    pairs = []
    for series in loss_series(points, data.experiment.loss_direction):
        base = next((pt for pt in series if pt.params.loss == 0), None)
        if base is not None:
            pairs += [(base, lossy) for lossy in series if lossy.params.loss > 0 and where.path(lossy.params)]
    return pairs


def _thousandeyes(data: ExperimentData, where: Where) -> list[Verdict]:
    verdicts = []
    for baseline, lossy in baseline_pairs(data, where, "bbr", "cubic"):
        at, base = lossy.median_ci(steady_goodput), baseline.median_ci(steady_goodput)
        if at is None or base is None or base.center <= 0:
            continue
        drop = 100 * (base.center - at.center) / base.center
        bbr = lossy.params.flows[0].cc == "bbr"

        def holds(a: float, b: float, bbr: bool = bbr) -> bool:
            fall = 100 * (b - a) / b if b > 0 else 0.0
            return fall < THOUSANDEYES_BBR_MAX_DROP if bbr else fall > THOUSANDEYES_CUBIC_MIN_DROP

        bound = f"< {THOUSANDEYES_BBR_MAX_DROP:g} %" if bbr else f"> {THOUSANDEYES_CUBIC_MIN_DROP:g} %"
        verdicts.append(weighed(cell_summary(lossy.params, repetition=False), [at, base], holds,
                                f"{STEADY} {stated(at)} vs baseline {stated(base)}: {-drop:+.1f} % "
                                f"(fall bound {bound})"))
    return verdicts


def several_bbr_in_a_shallow_buffer(p: CellParams) -> bool:
    buffer = buffer_bdp(p)
    return (len(p.flows) >= 2 and {f.cc for f in p.flows} == {"bbr"} and p.loss == 0
            and p.uplink.queue.kind == "droptail" and buffer is not None
            and not math.isclose(buffer, SHALLOW_EDGE_BDP))


def _shallow_loss(data: ExperimentData) -> list[Verdict]:
    def judge(point: Point, loss: float) -> tuple[bool, str]:
        buffer = buffer_bdp(point.params) or 0.0
        shallow = buffer < SHALLOW_EDGE_BDP
        ok = loss >= SHALLOW_HIGH_PERCENT if shallow else loss <= SHALLOW_LOW_PERCENT
        bound = f"≥ {SHALLOW_HIGH_PERCENT:g} %" if shallow else f"≤ {SHALLOW_LOW_PERCENT:g} %"
        return ok, f"loss after start-up {loss:.3g} % at {buffer:g} BDP (bound {bound})"
    return per_point(data, several_bbr_in_a_shallow_buffer,
                      lambda r: steady_loss_percent(r, data.timeseries(r.cell.id)), judge)


CLAIMS = [
    Claim("bbr-ideal", "BBR's steady-state goodput ≥ 0.9 × the payload-rate ideal (1 − p) × link rate × 1448/1500 "
          "for loss p ≤ 5 %",
          "BBR paper (ACM Queue 2016, Figure 8): \"BBR meets this limit [(1 − p) × link rate] up to a 5 % loss\"; "
          "receiver goodput carries no headers, so its limit is the payload rate",
          "one BBR flow, constant-rate link", _bbr_ideal,
          "The paper shows a plot, no numbers, measured on Google's own kernel. ReBBR measured the same path on "
          "Linux 4.11.1 under Mahimahi (bottleneck throughput, 60 s): BBR 94.94 Mbit/s at 0.1 % loss, 85.37 at 1 %, "
          "84.1 at 2 %, 76.89 at 5 %, below this bound (86.0, 85.1, 82.5) from 1 % on."),
    Claim("cubic-tenfold", "CUBIC's steady-state goodput at 0.1 % loss ≤ a tenth of it without loss",
          "BBR paper: \"CUBIC's throughput decreases by 10 times at 0.1 % loss\"",
          "one CUBIC flow, BDP ≥ the paper's 1.25 MB (Mathis: below it the link, not loss, limits CUBIC); "
          "the lowest loss ≤ 0.001 % stands for no loss", _cubic_tenfold,
          "The paper shows a plot, measured on Google's own kernel. ReBBR on Linux 4.11.1 under Mahimahi: CUBIC "
          "98.81 Mbit/s at 0.001 % loss, 5.92 at 0.1 % (16.7 times less)."),
    Claim("mathis", "CUBIC's and Reno's steady-state goodput within a factor of 2 of MSS / RTT × 1.22 / √p for p ≥ 1 %",
          "Mathis et al., CCR 1997 (MSS 1448 B, measured mean RTT, capped at the link's payload rate)",
          "one CUBIC or Reno flow, constant-rate link", _mathis,
          "A model of Reno-style window halving, not a measurement on any kernel."),
    Claim("bbr-step", "BBR's bandwidth estimate follows a step of the bottleneck rate within 2 s (±25 %)",
          "BBR paper: BBR follows a 2× rise and fall of the bottleneck within about 2 s",
          "BBR flows in cells with a rate schedule, each repetition and step", _bbr_step,
          "The paper shows a plot of one flow on Google's own kernel; it prints no number but \"about 2 s\"."),
    Claim("bbr-low-delay", "BBR's median RTT ≤ propagation RTT + half the buffer's drain time (it does not fill "
          "a deep buffer)",
          "BBR paper (bufferbloat): BBR keeps RTT near the propagation delay; it caps inflight at 2 BDP, so about "
          "1 BDP queues at most",
          "one BBR flow, no loss, drop-tail buffer ≥ 4 BDP", _bbr_low_delay,
          "The paper shows a plot on Google's own kernel, no numbers."),
    Claim("cubic-fills-buffer", "CUBIC's 95th-percentile RTT ≥ propagation RTT + half the buffer's drain time",
          "BBR paper (bufferbloat): loss-based CUBIC fills deep buffers",
          "one CUBIC flow, no loss, drop-tail buffer ≥ 4 BDP", _cubic_fills,
          "The paper shows a plot on Google's own kernel, no numbers."),
    Claim("rebbr-short-rtt", "At 2 ms RTT and 1 % loss, CUBIC's steady-state goodput ≤ half of BBR's",
          "ReBBR (Muindi and Hsiao, CS244 2017), RTT experiment: at 2 ms RTT and 1 % loss CUBIC is far below BBR",
          "one CUBIC and one BBR flow on the same constant-rate path, 2 ms RTT, 1 % loss",
          Scoped(_rebbr_short_rtt, Where(rtt_ms=REBBR_RTT_MS, loss=(REBBR_LOSS, REBBR_LOSS))),
          "ReBBR on Linux 4.11.1 under Mahimahi (100 Mbit/s, 120 s, bottleneck throughput): CUBIC 25.22 Mbit/s, "
          "BBR 98.19 (ratio 0.26)."),
    Claim("thousandeyes-1pct", "At 1 % loss BBR's steady-state goodput falls < 10 % and CUBIC's > 70 % below its "
          "loss-free baseline",
          "ThousandEyes (BBR vs CUBIC tables, baseline 868 Mbit/s): at 1 % loss BBR lost under 10 %, CUBIC over 70 %",
          "one BBR or CUBIC flow, constant-rate link, a 0 % and a 1 % cell on the same path",
          Scoped(_thousandeyes, Where(loss=(THOUSANDEYES_LOSS, THOUSANDEYES_LOSS))),
          "ThousandEyes, iperf3 over netem on a symmetric path (the kernel is not printed): BBR 868.50 Mbit/s "
          "without loss, 794.06 at 1 % (-8.6 %); CUBIC 804.6 and 235.51 (-70.7 %)."),
    Claim("shallow-loss", "Several BBR flows: loss after start-up ≥ 1 % in buffers below 1.5 BDP, ≤ 0.5 % above",
          "Shallow-buffer study (an untitled, unsigned write-up): 4 BBR flows at 80 Mbit/s and 25 ms lose up to "
          "12 % after start-up whenever the buffer is below 1.5 BDP",
          "cells of 2 or more BBR flows, no random loss, drop-tail buffer other than 1.5 BDP, offered packets "
          "counted over time", _shallow_loss,
          "The write-up reports a testbed with one bottleneck router (no emulator, queue discipline or kernel named) "
          "and prints one number for this curve: loss up to 12 % below 1.5 BDP, the rest a plot."),
]


#: The experiment a sweep-wide claim's row names.
ALL_EXPERIMENTS = "all experiments"


def run_checks(sweep: SweepData, claims: Sequence[Claim] = CLAIMS) -> list[CheckRow]:
    """Every claim against every experiment it applies to (experiments with no applicable cell are skipped)."""
    rows = []
    whole = ExperimentData(experiment=sweep.experiments[0].experiment, results=sweep.distinct_results(),
                           load_series=sweep.experiments[0].load_series) if sweep.experiments else None
    for claim in claims:
        if claim.sweep_wide:
            verdicts = claim.evaluate(whole) if whole is not None else []
            if verdicts:
                rows.append(CheckRow(claim, ALL_EXPERIMENTS, verdicts))
            continue
        for exp in sweep.experiments:
            verdicts = claim.evaluate(exp)
            if verdicts:
                rows.append(CheckRow(claim, exp.name, verdicts))
    return rows
