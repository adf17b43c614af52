"""The source documents' own claims, checked: ReBBR, ThousandEyes, the shallow-buffer study, the Mininet tutorial.

`checks.claims` holds the machinery and the BBR paper's claims; these, built from its public names
alone, are the claims the four other sources print, each with its scope, the bound it is read as,
and what the source measured.  A claim worded loosely in its source ("about", "slightly",
"little") is read with a stated margin (a factor of two, or the tolerance named in its constant),
so a cell near the bound is not called either way by noise; the verdict prints the numbers and the
bound.  Each claim's scope is data (`claims.Where`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

import numpy as np

from ccsweep.cell import CellParams
from ccsweep.checks.claims import (
    CLAIMS,
    STEADY,
    Claim,
    Scoped,
    Verdict,
    Where,
    baseline_pairs,
    one_flow,
    per_point,
    several_bbr_in_a_shallow_buffer,
    stated,
    steady_goodput,
    weighed,
)
from ccsweep.result import CellResult
from ccsweep.results.data import ExperimentData
from ccsweep.results.loss import steady_loss_percent
from ccsweep.results.points import Point, bdp_bytes, buffer_bdp, cell_summary, group_points, group_series
from ccsweep.results.quantities import payload_ideal_mbps
from ccsweep.stats import Interval

#: ReBBR's Figure 8 path.
REBBR_RATE_MBPS = 100.0
REBBR_RTT_MS = 100.0
#: "Slightly above": CUBIC at least BBR's and at most this much more.
SLIGHTLY = 1.10
#: BBR "holds up to about 45 %": at every loss of ReBBR's grid below 45 %, at least half the payload ideal.
REBBR_HOLDS_TO = 0.45
HOLDS_SHARE = 0.5
#: BBR "beats" another algorithm: read as at least this many times its goodput.  Two flows that both fill
#: the link (no loss, a deep buffer) tie to within noise, and a tie is not a win.
BEATS = 1.1
#: "No difference" between queues (and "about equal" elsewhere) read as within this fraction.
NO_DIFFERENCE = 0.25
#: ReBBR's CUBIC at 100 ms and 1 % loss: "about 1 Mbit/s", read as within a factor of 2.
REBBR_CUBIC_MBPS = 1.0
#: ReBBR: Linux's default buffers gave BBR "about 80 %" of the link at 100 ms, read as 70-90 % of the
#: same cell with ReBBR's 6.25 MB buffers.
DEFAULT_BUFFER_SHARE = (0.7, 0.9)
REBBR_RMEM_MAX = 6553600
LINUX_RMEM_MAX = 6291456
#: ThousandEyes: BBR 13.43 % below its symmetric baseline at 10 % loss; read as within a factor of 2.
TE_BBR_10PCT_DROP = 13.43
TE_DROP = (TE_BBR_10PCT_DROP / 2, TE_BBR_10PCT_DROP * 2)
#: ThousandEyes' baselines: BBR and CUBIC 7.9 % (symmetric) and 4.4 % (asymmetric) apart; read as
#: within 10 % of each other.
TE_BASELINE_GAP = 10.0
#: The shallow-buffer study: 4 BBR flows keep about 1 BDP queued ("1.12 BDP") where the buffer
#: allows it (1.5 BDP or more); read as 0.5-1.5 BDP.
STANDING_BDP = (0.5, 1.5)
#: "Loss up to 12 %" below 1.5 BDP, read as a worst loss within a factor of 2 (6-24 %).
SHALLOW_PEAK_PERCENT = 12.0
SHALLOW_EDGE_BDP = 1.5
#: "Little loss" for CUBIC alone, read as under 1 % after start-up.
CUBIC_LITTLE_PERCENT = 1.0
#: BBR "dominates" below 1.5 BDP, CUBIC "dominates" at about 5 BDP (read as 4 BDP or more): over half.
CUBIC_DEEP_BDP = 4.0
#: The Mininet tutorial: CUBIC ~150 ms mean and 400 ms worst against BBR's ~50 and 50; read as CUBIC's
#: mean at least half the printed ratio (3 -> 1.5) and its worst at least half (8 -> 4).
MININET_MEAN_RATIO = 1.5
MININET_WORST_RATIO = 4.0


def _pairs(data: ExperimentData, applies: Callable[[CellParams], bool], **blank: object) -> list[list[Point]]:
    """Points in scope grouped by every axis but `blank` (e.g. flows=None: one path, several algorithms)."""
    return group_series([pt for pt in group_points(data.results) if applies(pt.params)], **blank)


def _by_cc(group: Sequence[Point]) -> dict[str, Point]:
    return {pt.params.flows[0].cc: pt for pt in group}


def _bbr_and_cubic(data: ExperimentData, applies: Callable[[CellParams], bool]
                   ) -> Iterator[tuple[dict[str, Point], Interval, Interval]]:
    """Per path in scope with one BBR and one CUBIC point: the points and their medians' intervals."""
    for group in _pairs(data, lambda p: one_flow(p, "bbr", "cubic") and applies(p), flows=None):
        by_cc = _by_cc(group)
        if set(by_cc) != {"bbr", "cubic"}:
            continue
        bbr, cubic = by_cc["bbr"].median_ci(steady_goodput), by_cc["cubic"].median_ci(steady_goodput)
        if bbr is not None and cubic is not None:
            yield by_cc, bbr, cubic


def _cubic_above_at_lowest(data: ExperimentData, where: Where) -> list[Verdict]:
    verdicts = []
    for by_cc, bbr, cubic in _bbr_and_cubic(data, where.path):
        verdicts.append(weighed(cell_summary(by_cc["cubic"].params, repetition=False),
                                [cubic, bbr], lambda c, b: b <= c <= SLIGHTLY * b,
                                f"{STEADY}: CUBIC {stated(cubic)} vs BBR {stated(bbr)} "
                                f"(bound: BBR ≤ CUBIC ≤ {SLIGHTLY:g} × BBR)"))
    return verdicts


def _bbr_holds(data: ExperimentData, where: Where) -> list[Verdict]:
    def judge(point: Point, goodput: float) -> tuple[bool, str]:
        bound = HOLDS_SHARE * payload_ideal_mbps(point.params.bandwidth_mbps or 0, point.params.loss)
        kernels = ", ".join(sorted({r.environment.kernel for r in point.results}))
        return goodput >= bound, (f"{STEADY} {goodput:.3g} Mbit/s vs bound {bound:.3g} ({HOLDS_SHARE:g} × the "
                                  f"payload-rate ideal); kernel {kernels}")
    return per_point(data, lambda p: one_flow(p, where.cc or "") and where.path(p) and 0 < p.loss < REBBR_HOLDS_TO,
                      steady_goodput, judge)


def _bbr_beats_the_others(data: ExperimentData, where: Where) -> list[Verdict]:
    verdicts = []
    for group in _pairs(data, lambda p: len(p.flows) == 1 and p.bandwidth_mbps is not None and where.path(p),
                        flows=None):
        by_cc = _by_cc(group)
        bbr = by_cc.pop("bbr", None)
        bbr_goodput = bbr.median_ci(steady_goodput) if bbr else None
        if bbr is None or bbr_goodput is None:
            continue
        for cc, other in sorted(by_cc.items()):
            theirs = other.median_ci(steady_goodput)
            if theirs is None:
                continue
            verdicts.append(weighed(cell_summary(other.params, repetition=False),
                                    [bbr_goodput, theirs], lambda b, o: b >= BEATS * o,
                                    f"{STEADY}: BBR {stated(bbr_goodput)} vs {cc} {stated(theirs)} (bound: BBR ≥ "
                                    f"{BEATS:g} × {cc})"))
        verdicts += _unmeasured_rivals(data, bbr, sorted(set(data.experiment.cc or []) - set(by_cc) - {"bbr"}))
    return verdicts


def _unmeasured_rivals(data: ExperimentData, bbr: Point, rivals: list[str]) -> list[Verdict]:
    """A not-settled verdict per algorithm the experiment planned beside BBR but stored no result of
    (a kernel without BIC, Vegas or Westwood): the claim names them, so their absence is shown, never a pass."""
    verdicts = []
    for cc in rivals:
        params = bbr.params.model_copy(update={"flows": [bbr.params.flows[0].model_copy(update={"cc": cc})]})
        subject = cell_summary(params, repetition=False)
        why = next((m.reason for m in data.missing if m.summary.startswith(subject + ",")), "no result stored")
        verdicts.append(Verdict(subject, None, f"BBR against {cc} not measured: {why}"))
    return verdicts


def _gap_shrinks(data: ExperimentData, where: Where) -> list[Verdict]:
    """Per loss ≥ 1 %: (BBR − CUBIC) / link rate at the lowest rate against the highest, weighed across
    the four medians' intervals like every comparison (one run a cell settles nothing)."""
    verdicts = []
    single = [pt for pt in group_points(data.results) if one_flow(pt.params, "bbr", "cubic") and where.path(pt.params)]
    for across_rates in group_series(single, uplink__rate_mbps=None, downlink__rate_mbps=None, flows=None):
        pairs: dict[float, dict[str, Interval]] = {}
        for pt in across_rates:
            if (stat := pt.median_ci(steady_goodput)) is not None:
                pairs.setdefault(pt.params.bandwidth_mbps or 0, {})[pt.params.flows[0].cc] = stat
        rates = sorted(rate for rate, pair in pairs.items() if rate > 0 and set(pair) == {"bbr", "cubic"})
        if len(rates) < 2:
            continue
        low, high = rates[0], rates[-1]

        def gaps_hold(bbr_low: float, cubic_low: float, bbr_high: float, cubic_high: float,
                      low: float = low, high: float = high) -> bool:
            return (bbr_low - cubic_low) / low < (bbr_high - cubic_high) / high

        gap_low, gap_high = ((pairs[r]["bbr"].center - pairs[r]["cubic"].center) / r for r in (low, high))
        some = across_rates[0].params
        verdicts.append(weighed(f"{some.loss * 100:g} % loss, {some.rtt_ms:g} ms, {low:g} vs {high:g} Mbit/s",
                                [pairs[low]["bbr"], pairs[low]["cubic"], pairs[high]["bbr"], pairs[high]["cubic"]],
                                gaps_hold, f"(BBR − CUBIC) / link rate of the medians: {gap_low:.3f} at {low:g} "
                                f"Mbit/s vs {gap_high:.3f} at {high:g} Mbit/s (bound: smaller at the lower rate); "
                                f"{pairs[low]['bbr'].label}"))
    return verdicts


def _cubic_about_1mbps(data: ExperimentData, where: Where) -> list[Verdict]:
    def judge(point: Point, goodput: float) -> tuple[bool, str]:
        low, high = REBBR_CUBIC_MBPS / 2, REBBR_CUBIC_MBPS * 2
        return low <= goodput <= high, f"{STEADY} {goodput:.3g} Mbit/s vs {low:g}-{high:g} (ReBBR: about 1)"
    return per_point(data, lambda p: one_flow(p, where.cc or "") and where.path(p), steady_goodput, judge)


def _verizon(data: ExperimentData, where: Where) -> list[Verdict]:
    verdicts = []
    for group in _pairs(data, lambda p: len(p.flows) == 1 and p.flows[0].cc in ("bbr", "cubic")
                        and p.uplink.trace is not None and where.path(p), flows=None):
        by_cc = _by_cc(group)
        bbr = by_cc["bbr"].median_ci(steady_goodput) if "bbr" in by_cc else None
        cubic = by_cc["cubic"].median_ci(steady_goodput) if "cubic" in by_cc else None
        if bbr is None or cubic is None:
            continue
        verdicts.append(weighed(cell_summary(by_cc["bbr"].params, repetition=False),
                                [bbr, cubic], lambda b, c: b >= BEATS * c,
                                f"{STEADY}: BBR {stated(bbr)} vs CUBIC {stated(cubic)} "
                                f"(bound: BBR ≥ {BEATS:g} × CUBIC)"))
    return verdicts


def _queue_no_difference(data: ExperimentData, where: Where) -> list[Verdict]:
    verdicts = []
    for group in _pairs(data, lambda p: one_flow(p, "bbr", "cubic") and where.path(p), uplink__queue=None):
        infinite = [pt for pt in group if pt.params.uplink.queue.kind == "infinite"]
        bdp = [pt for pt in group if pt.params.uplink.queue.kind == "droptail" and where.buffer(pt.params)]
        if not infinite or not bdp:
            continue
        a, b = infinite[0].median_ci(steady_goodput), bdp[0].median_ci(steady_goodput)
        if a is None or b is None or a.center <= 0:
            continue
        verdicts.append(weighed(cell_summary(bdp[0].params, repetition=False),
                                [a, b], lambda x, y: abs(y - x) <= NO_DIFFERENCE * max(x, y),
                                f"{STEADY}: infinite queue {stated(a)} vs {buffer_bdp(bdp[0].params):g} BDP "
                                f"{stated(b)} "
                                f"(bound: within {NO_DIFFERENCE:.0%} of the larger)"))
    return verdicts


def _share_within(part: float, whole: float, bounds: tuple[float, float]) -> bool:
    return bounds[0] * whole <= part <= bounds[1] * whole


def _default_buffers(data: ExperimentData, where: Where) -> list[Verdict]:
    verdicts = []
    for group in _pairs(data, lambda p: one_flow(p, where.cc or "") and where.path(p), buffers=None):
        by_rmem = {pt.params.buffers.tcp_rmem[2]: pt for pt in group}
        if LINUX_RMEM_MAX not in by_rmem or REBBR_RMEM_MAX not in by_rmem:
            continue
        default, rebbr = by_rmem[LINUX_RMEM_MAX].median_ci(steady_goodput), by_rmem[REBBR_RMEM_MAX].median_ci(
            steady_goodput)
        if default is None or rebbr is None or rebbr.center <= 0:
            continue
        verdicts.append(weighed(cell_summary(by_rmem[LINUX_RMEM_MAX].params, repetition=False),
                                [default, rebbr], lambda d, r: _share_within(d, r, DEFAULT_BUFFER_SHARE),
                                f"{STEADY}: Linux's default buffers {stated(default)} vs ReBBR's {stated(rebbr)} "
                                f"(ratio {default.center / rebbr.center:.2f}, bound {DEFAULT_BUFFER_SHARE[0]:g}-"
                                f"{DEFAULT_BUFFER_SHARE[1]:g})"))
    return verdicts


def _te_bbr_10pct(data: ExperimentData, where: Where) -> list[Verdict]:
    verdicts = []
    for base, lossy in baseline_pairs(data, where, where.cc or ""):
        at, ref = lossy.median_ci(steady_goodput), base.median_ci(steady_goodput)
        if at is None or ref is None or ref.center <= 0:
            continue
        drop = 100 * (ref.center - at.center) / ref.center
        verdicts.append(weighed(cell_summary(lossy.params, repetition=False),
                                [at, ref], lambda a, r: TE_DROP[0] <= 100 * (r - a) / r <= TE_DROP[1],
                                f"{STEADY} {stated(at)} at {lossy.params.loss * 100:g} % vs baseline {stated(ref)}: "
                                f"{-drop:+.1f} % "
                                f"(bound: {TE_DROP[0]:.1f}-{TE_DROP[1]:.1f} % below)"))
    return verdicts


def _te_baseline_gap(data: ExperimentData, where: Where) -> list[Verdict]:
    verdicts = []
    for by_cc, bbr, cubic in _bbr_and_cubic(data, lambda p: where.path(p) and p.downlink.loss == 0):
        verdicts.append(weighed(cell_summary(by_cc["bbr"].params, repetition=False),
                                [bbr, cubic], lambda b, c: abs(b - c) <= TE_BASELINE_GAP / 100 * min(b, c),
                                f"{STEADY} at {by_cc['bbr'].params.loss * 100:g} % loss: BBR {stated(bbr)} vs CUBIC "
                                f"{stated(cubic)} "
                                f"(bound: within {TE_BASELINE_GAP:g} % of the lower)"))
    return verdicts


def _standing_queue_bdp(data: ExperimentData, result: CellResult) -> float | None:
    """Median bottleneck queue after the warm-up, in BDPs (None without a link series)."""
    series = data.timeseries(result.cell.id)
    bdp = bdp_bytes(result.cell.params)
    if series is None or series.link is None or not bdp:
        return None
    t, queue = np.asarray(series.link.t), np.asarray(series.link.uplink_queue_bytes, dtype=float)
    steady = queue[t >= result.cell.params.warmup_s]
    return float(np.median(steady)) / bdp if steady.size else None


def _standing_queue(data: ExperimentData, where: Where) -> list[Verdict]:
    low, high = STANDING_BDP

    def judge(point: Point, queue: float) -> tuple[bool, str]:
        bdp = bdp_bytes(point.params) or 0
        return low <= queue <= high, (f"median queue after start-up {queue:.2f} BDP ({queue * bdp:,.0f} B; bound "
                                      f"{low:g}-{high:g} BDP; the study's \"28,000 B\" would be {28000 / bdp:.3f} "
                                      "BDP here, its \"1.12 BDP\" "
                                      f"{'fits' if low <= queue <= high else 'does not fit'})")
    return per_point(data, lambda p: several_bbr_in_a_shallow_buffer(p) and where.buffer(p),
                      lambda r: _standing_queue_bdp(data, r), judge)


def _shallow_peak(data: ExperimentData, where: Where) -> list[Verdict]:
    verdicts = []
    shallow = [pt for pt in group_points(data.results) if several_bbr_in_a_shallow_buffer(pt.params)
               and where.buffer(pt.params)]
    low, high = SHALLOW_PEAK_PERCENT / 2, SHALLOW_PEAK_PERCENT * 2
    for series in group_series(shallow, uplink__queue=None):
        losses = [(stat, pt) for pt in series
                  if (stat := pt.median_ci(lambda r: steady_loss_percent(r, data.timeseries(r.cell.id)))) is not None]
        if not losses:
            continue
        worst, at = max(losses, key=lambda row: row[0].center)
        verdicts.append(weighed(cell_summary(at.params, repetition=False), [worst],
                                lambda w: low <= w <= high,
                                f"worst loss after start-up in buffers {where.buffers()} BDP: {stated(worst, '%')} at "
                                f"{buffer_bdp(at.params):g} BDP (bound {low:g}-{high:g} %; the study: up to 12 %)"))
    return verdicts


def _cubic_little_loss(data: ExperimentData, where: Where) -> list[Verdict]:
    def judge(point: Point, loss: float) -> tuple[bool, str]:
        return loss <= CUBIC_LITTLE_PERCENT, (f"loss after start-up {loss:.3g} % at {buffer_bdp(point.params):g} BDP "
                                              f"(bound ≤ {CUBIC_LITTLE_PERCENT:g} %)")
    return per_point(data, lambda p: len(p.flows) >= 2 and {f.cc for f in p.flows} == {where.cc} and where.path(p)
                      and p.uplink.queue.kind == "droptail" and buffer_bdp(p) is not None,
                      lambda r: steady_loss_percent(r, data.timeseries(r.cell.id)), judge)


def bbr_share(result: CellResult) -> float | None:
    """BBR flows' share of the cell's steady-state goodput."""
    total = sum(f.goodput_steady_mbps for f in result.flows)
    if not total:
        return None
    return sum(f.goodput_steady_mbps for f in result.flows if f.cc == "bbr") / total


def _mix_share(data: ExperimentData, where: Where) -> list[Verdict]:
    """BBR over half below SHALLOW_EDGE_BDP, CUBIC over half in the deep buffers `where` names."""
    def mixed(p: CellParams) -> bool:
        buffer = buffer_bdp(p)
        return ({f.cc for f in p.flows} == {"bbr", "cubic"} and where.path(p) and p.uplink.queue.kind == "droptail"
                and buffer is not None and (buffer < SHALLOW_EDGE_BDP or where.buffer(p)))

    def judge(point: Point, share: float) -> tuple[bool, str]:
        buffer = buffer_bdp(point.params) or 0
        shallow = buffer < SHALLOW_EDGE_BDP
        ok = share > 0.5 if shallow else share < 0.5
        return ok, (f"BBR's share of the {STEADY} {share:.0%} at {buffer:g} BDP (bound: "
                    f"{'BBR' if shallow else 'CUBIC'} over half)")
    return per_point(data, mixed, bbr_share, judge)


def _worst_rtt_ms(data: ExperimentData, result: CellResult) -> float | None:
    """The flow's largest smoothed RTT sample after the warm-up (its 95th percentile without a series)."""
    series = data.timeseries(result.cell.id)
    if series and series.flows and series.flows[0].rtt_us:
        t, rtt = np.asarray(series.flows[0].t), np.asarray(series.flows[0].rtt_us) / 1000
        steady = rtt[t >= result.cell.params.warmup_s]
        return float(steady.max()) if steady.size else None
    return result.flows[0].rtt_p95_ms if result.flows else None


def _mininet(data: ExperimentData, where: Where) -> list[Verdict]:
    verdicts = []
    deep = [pt for pt in group_points(data.results) if one_flow(pt.params, "bbr", "cubic") and where.path(pt.params)
            and where.buffer(pt.params)]
    for group in group_series(deep, flows=None):
        by_cc = _by_cc(group)
        if set(by_cc) != {"bbr", "cubic"}:
            continue
        mean = [by_cc[cc].median_ci(lambda r: r.flows[0].rtt_mean_ms if r.flows else None) for cc in ("cubic", "bbr")]
        worst = [by_cc[cc].median_ci(lambda r: _worst_rtt_ms(data, r)) for cc in ("cubic", "bbr")]
        if None in mean or None in worst:
            continue
        (cubic_mean, bbr_mean), (cubic_worst, bbr_worst) = mean, worst
        assert cubic_mean and bbr_mean and cubic_worst and bbr_worst
        verdicts.append(weighed(cell_summary(by_cc["cubic"].params, repetition=False),
                                [cubic_mean, bbr_mean, cubic_worst, bbr_worst],
                                       lambda cm, bm, cw, bw: cm >= MININET_MEAN_RATIO * bm
                                       and cw >= MININET_WORST_RATIO * bw,
                                f"mean RTT: CUBIC {stated(cubic_mean, 'ms')} vs BBR {stated(bbr_mean, 'ms')}; worst: "
                                f"CUBIC {stated(cubic_worst, 'ms')} vs BBR {stated(bbr_worst, 'ms')} (bound: CUBIC's "
                                f"mean ≥ {MININET_MEAN_RATIO:g} × BBR's and worst ≥ {MININET_WORST_RATIO:g} ×)"))
    return verdicts


#: ReBBR's Figure 8 path; a claim about it narrows the loss.
REBBR_PATH = Where(rate_mbps=REBBR_RATE_MBPS, rtt_ms=REBBR_RTT_MS)
NO_LOSS = (0.0, 0.0)
#: A buffer of 1 BDP, to 2 % (a floor such as ReBBR's 15 KB makes it larger on a slow path).
ONE_BDP = (0.98, 1.021)

REBBR = "ReBBR (Hsiao and Muindi, CS244 2017)"
#: Why pacing decides where BBR's cliff sits, in one sentence a verdict carries.  With a random loss
#: p, BBR's delivery-rate samples read (1 - p) × what it sends; paced, it sends at most 1.25 × its
#: estimate in the probing phase, so the estimate shrinks once 1.25 (1 - p) < 1, at p = 20 %;
#: unpaced, only its cwnd of 2 × the estimated BDP bounds a round trip's sending: 2 (1 - p) < 1 at 50 %.
PACED_WHY = ("Paced, BBR sends at most 1.25 × its bandwidth estimate, which falls once 1.25 (1 − p) < 1, "
             "from 20 % loss.")
UNPACED_WHY = ("Unpaced (as on Linux before 4.13 without the fq qdisc, likely ReBBR's case), only its cwnd of "
               "2 × the estimated BDP bounds it, which falls once 2 (1 − p) < 1, from 50 % loss.")
#: ReBBR's "BBR holds" claim once per pacing mode: (claim id, algorithm, who, why).
BBR_PACING_MODES = (
    ("rebbr-bbr-holds", "bbr", "BBR (the kernel's, paced by TCP)", PACED_WHY),
    ("rebbr-bbr-holds-bpf-paced", "bbr_bpf", "BBR through BPF, paced (bbr_bpf, the control)", PACED_WHY),
    ("rebbr-bbr-holds-unpaced", "bbr_unpaced", "BBR through BPF, unpaced (bbr_unpaced)", UNPACED_WHY),
)
REBBR_MEASURED = "ReBBR measured on Linux 4.11.1 under Mahimahi, one run per cell, bottleneck throughput."
SHALLOW = "Shallow-buffer study (an untitled, unsigned write-up)"
SHALLOW_MEASURED = ("A testbed with one bottleneck router (no emulator, queue discipline or kernel named); "
                    "the numbers printed are the claims, the rest plots.")

SOURCE_CLAIMS = [
    Claim("rebbr-cubic-above-lowest-loss", "At 0.001 % loss CUBIC's steady-state goodput is at or slightly above "
          f"BBR's (up to {SLIGHTLY:g} ×)", f"{REBBR}: CUBIC is slightly above BBR at the lowest loss rates",
          "one BBR and one CUBIC flow on ReBBR's path (100 Mbit/s, 100 ms), 0.001 % loss",
          Scoped(_cubic_above_at_lowest, replace(REBBR_PATH, loss=(1e-5, 1e-5))),
          "ReBBR's figure8.csv at 0.001 %: CUBIC 98.81 Mbit/s, BBR 95.36 (CUBIC 3.6 % above). " + REBBR_MEASURED),
    *(Claim(claim_id, f"{who}: steady-state goodput ≥ {HOLDS_SHARE:g} × the payload-rate ideal at every loss below "
            f"{REBBR_HOLDS_TO:.0%} (ReBBR's kernel: Linux 4.11.1; each verdict names the cell's). {why}",
            f"{REBBR}: BBR keeps its throughput up to about 45 % loss on Linux 4.11.1 (the paper's fell at 20 %)",
            f"one {cc} flow on ReBBR's path (100 Mbit/s, 100 ms), 0 < p < 45 %",
            Scoped(_bbr_holds, replace(REBBR_PATH, cc=cc)), REBBR_MEASURED)
      for claim_id, cc, who, why in BBR_PACING_MODES),
    Claim("rebbr-bbr-beats-others", "At 100 Mbit/s, 100 ms and 1 % loss BBR's steady-state goodput is at least "
          f"{BEATS:g} × each other algorithm's",
          f"{REBBR}, algorithms experiment: BBR beats BIC, CUBIC, Reno, Vegas and Westwood (BIC and Westwood second)",
          "one flow per algorithm on ReBBR's path, 1 % loss",
          Scoped(_bbr_beats_the_others, replace(REBBR_PATH, loss=(0.01, 0.01))), REBBR_MEASURED),
    Claim("rebbr-gap-shrinks", "The BBR − CUBIC gap in steady-state goodput, as a share of the link rate, is "
          "smaller at the lowest rate than at the highest", f"{REBBR}, bandwidth experiment: the gap narrows as "
          "bandwidth falls; at 10 kbit/s CUBIC and BBR are about equal", "one BBR and one CUBIC flow at two or more "
          "rates, same RTT and loss, loss ≥ 1 %", Scoped(_gap_shrinks, Where(loss=(0.01, 1.0))), REBBR_MEASURED),
    Claim("rebbr-cubic-1mbps", f"At 100 ms RTT and 1 % loss CUBIC's steady-state goodput is {REBBR_CUBIC_MBPS / 2:g}-"
          f"{REBBR_CUBIC_MBPS * 2:g} Mbit/s",
          f"{REBBR}, RTT experiment: CUBIC gets about 1 Mbit/s at 100 ms and 1 % loss",
          "one CUBIC flow on ReBBR's path (100 Mbit/s, 100 ms), 1 % loss",
          Scoped(_cubic_about_1mbps, replace(REBBR_PATH, cc="cubic", loss=(0.01, 0.01))), REBBR_MEASURED),
    Claim("rebbr-verizon",
          f"Over a cellular trace BBR's steady-state goodput is at least {BEATS:g} × CUBIC's at every loss ≥ 1 %",
          f"{REBBR}, cellular experiment: BBR beats CUBIC on the Verizon LTE trace at non-negligible loss",
          "one BBR and one CUBIC flow over the same trace link, loss ≥ 1 %", Scoped(_verizon, Where(loss=(0.01, 1.0))),
          "ReBBR's experiment4.csv (60 s flows; the cellular preset runs 140 s). " + REBBR_MEASURED),
    Claim("rebbr-queue-no-difference", f"A 1-BDP drop-tail queue gives the same steady-state goodput as an infinite "
          f"one (within {NO_DIFFERENCE:.0%})", f"{REBBR}: a BDP-sized queue (15 KB floor) made no difference against "
          "the infinite queue", "one BBR or CUBIC flow, the same path with an infinite and a 1-BDP drop-tail queue",
          Scoped(_queue_no_difference, Where(buffer_bdp=ONE_BDP)),
          "ReBBR reports no numbers for the 1-BDP runs, only that they matched."),
    Claim("rebbr-default-buffers", f"With Linux's default socket buffers BBR's steady-state goodput is "
          f"{DEFAULT_BUFFER_SHARE[0]:.0%}-{DEFAULT_BUFFER_SHARE[1]:.0%} of its goodput with ReBBR's 6.25 MB",
          f"{REBBR}: with Ubuntu's default buffers BBR reached only about 80 % of the link at 100 ms RTT "
          "(receive-window limited)", "one BBR flow on ReBBR's path, p ≤ 1 %, a cell with tcp_rmem max 6291456 and "
          "one with 6553600 (across the sweep's experiments)",
          Scoped(_default_buffers, replace(REBBR_PATH, cc="bbr", loss=(0.0, 0.01))),
          "A sentence of ReBBR's text on Linux 4.11.1; no figure or number.", sweep_wide=True),
    Claim("thousandeyes-bbr-10pct", f"At 10 % loss BBR's steady-state goodput is {TE_BBR_10PCT_DROP / 2:.1f}-"
          f"{TE_BBR_10PCT_DROP * 2:.1f} % below its loss-free baseline", "ThousandEyes, Path Quality Part 3 (Table 5): "
          "BBR 751.89 Mbit/s at 10 % against 868.50 without loss, 13.4 % down", "one BBR flow, a 0 % and a 10 % cell "
          "on the same path", Scoped(_te_bbr_10pct, Where(cc="bbr", loss=(0.1, 0.1))),
          "ThousandEyes, iperf3 over netem, near 1 Gbit/s (kernel not printed); asymmetric path: 9.1 % down."),
    Claim("thousandeyes-baseline-gap", f"Without loss BBR's and CUBIC's steady-state goodput are within "
          f"{TE_BASELINE_GAP:g} % of each other", "ThousandEyes, Path Quality Part 3: baselines BBR 868.50 vs CUBIC "
          "804.6 Mbit/s (symmetric, 7.9 % apart), 827.20 vs 864.1 (asymmetric, 4.4 %)", "one BBR and one CUBIC flow "
          "on the same path, no loss in either direction", Scoped(_te_baseline_gap, Where(loss=NO_LOSS)),
          "ThousandEyes; CUBIC's baselines come from its earlier Part 1."),
    Claim("shallow-standing-queue", f"Several BBR flows keep {STANDING_BDP[0]:g}-{STANDING_BDP[1]:g} BDP queued after "
          "start-up where the buffer allows it", f"{SHALLOW}: 4 BBR flows at 80 Mbit/s, 25 ms keep a standing queue of "
          "\"28,000 B or more\", \"1.12 BDP\" (the two readings disagree tenfold; the verdict says which fits)",
          f"2 or more BBR flows, no random loss, drop-tail buffer ≥ {SHALLOW_EDGE_BDP:g} BDP, link series stored",
          Scoped(_standing_queue, Where(buffer_bdp=(SHALLOW_EDGE_BDP, math.inf))), SHALLOW_MEASURED),
    Claim("shallow-peak-loss", f"Several BBR flows' worst loss after start-up in buffers below {SHALLOW_EDGE_BDP:g} "
          f"BDP is {SHALLOW_PEAK_PERCENT / 2:g}-{SHALLOW_PEAK_PERCENT * 2:g} %", f"{SHALLOW}: loss up to 12 % below "
          "1.5 BDP", "2 or more BBR flows, no random loss, drop-tail buffers below 1.5 BDP, per rate",
          Scoped(_shallow_peak, Where(buffer_bdp=(0.0, SHALLOW_EDGE_BDP))), SHALLOW_MEASURED),
    Claim("shallow-cubic-little-loss", f"Several CUBIC flows lose ≤ {CUBIC_LITTLE_PERCENT:g} % after start-up",
          f"{SHALLOW}: 4 CUBIC flows would see little loss in the same conditions (expected, not run there)",
          "2 or more CUBIC flows, no random loss, drop-tail buffer",
          Scoped(_cubic_little_loss, Where(cc="cubic", loss=NO_LOSS)),
          "The study left this run as a TODO: no number."),
    Claim("shallow-mix-share", f"BBR takes over half of a 2 BBR + 2 CUBIC mix below {SHALLOW_EDGE_BDP:g} BDP, CUBIC "
          f"over half at {CUBIC_DEEP_BDP:g} BDP and more", f"{SHALLOW}: below 1.5 BDP BBR dominates; at about 5 BDP "
          "CUBIC dominates", "mixed BBR and CUBIC flows, no random loss, drop-tail buffer below 1.5 or ≥ 4 BDP",
          Scoped(_mix_share, Where(loss=NO_LOSS, buffer_bdp=(CUBIC_DEEP_BDP, math.inf))), SHALLOW_MEASURED),
    Claim("mininet-latency", f"In a deep buffer CUBIC's mean RTT is ≥ {MININET_MEAN_RATIO:g} × BBR's and its worst "
          f"≥ {MININET_WORST_RATIO:g} × BBR's", "TCP BBR on Mininet (tutorial blog post): average latency ~150 ms "
          "with CUBIC vs ~50 with BBR, worst 400 vs 50", "one BBR and one CUBIC flow on the same path, no loss, "
          "drop-tail buffer ≥ 4 BDP (worst: the largest smoothed RTT after the warm-up)",
          Scoped(_mininet, Where(loss=NO_LOSS, buffer_bdp=(4.0, math.inf))),
          "The tutorial prints no link rate, delay, buffer or kernel (Linux 4.9 or later)."),
]

#: Every claim the report checks: the BBR paper's and Mathis (checks.CLAIMS), then the sources'.
ALL_CLAIMS = [*CLAIMS, *SOURCE_CLAIMS]
