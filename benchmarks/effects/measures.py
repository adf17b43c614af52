"""What one run of the theory bench measured about a link effect, beside what theory expects.

Each function takes the probes the receiver recorded (benchmarks/effects/traffic.py: [sequence,
sent_ns, received_ns, tos] in arrival order), the number sent, and the effect's parameters, and
returns rows of `Stat`: the statistic, the measured value, the analytic expectation and, where the
statistic is random, its standard error over this run's draws (so |measured - expected| / sigma is
a z-score). A bound that holds exactly (the policer's) or an expectation with no draws behind it
(nothing reordered) has no sigma.

The expectations, per effect (docs/emulator.md states each model):
- Gilbert-Elliott: loss share (R (1-K) + P (1-H)) / (P + R), with the variance of a share of
  correlated losses; in the simple model (1-H = 1, 1-K = 0) a burst of consecutive losses is
  geometric with mean 1 / R; Bernoulli's bursts are geometric with mean 1 / (1 - p).
- Jitter: the added delay is one offset (uniform on [-J, J); normal with standard deviation J,
  iproute2's table being the standard normal's quantiles to 3/4096) plus what the path adds
  without jitter (the floor, measured in the same repetition), so the expected quantiles are those
  of an offset plus a draw from the floor; in reorder mode packet i+1 overtakes packet i, sent a
  gap g before it, when X_(i+1) - X_i < -g: probability (2J - g)^2 / (8 J^2) for uniform offsets
  and Phi(-g / (sqrt 2 J)) for normal ones; in keep mode never. Kept order's added delays are
  those of the recursion due_i = max(sent_i + D + X_i, due_(i-1)) for the run's own send times,
  drawn KEEP_DRAWS times.
- Slots: openings MIN + U (MAX - MIN) apart, so the gaps' quantiles are MIN + q (MAX - MIN); with no
  limit a slot releases what fell due since the slot before, rate x E[gap] on average; with a
  packet limit under a backlog, exactly the limit.
- Policer: between the first and the last packet it passed, at most BURST + RATE x T / 8 bytes;
  the share that a token bucket run again on the probes' send times drops; and no delay beyond
  the floor.
- Step marker: an ECT(1) probe is marked exactly when it waited at least the step, which the
  probe's own one-way delay tells (less the path's delay and its own service time); ECT(0) never.
- Delay trace (a step up of S and back down after T): a probe's delay is the trace's at the moment
  it reaches the delay line, so a stretch's delay is the step's own, and nothing is reordered. When
  the delay falls, the probes sent in the S that follow leave behind the last slow one (order is
  kept), so the first probe less than S/2 above the floor is sent S/2 after the fall: T + S/2
  after the first probe more than S/2 above it. The emulator's clock starts before the first probe,
  so the rise, read from the probes, places the trace on their clock.
"""

from __future__ import annotations

import bisect
import math
import random
import statistics
from collections import Counter
from dataclasses import dataclass

#: The Monte Carlo draws of kept order's recursion per run.
KEEP_DRAWS = 20
#: The added-delay quantiles reported for jitter.
QUANTILES = (0.1, 0.5, 0.9)
#: The burst lengths whose shares are compared one by one (the rest together).
BURST_LENGTHS = (1, 2, 3)
ECN_MASK, ECT1, CE = 0x03, 0x01, 0x03


@dataclass(frozen=True)
class Stat:
    """One statistic of one run: measured, expected, and the expectation's standard error (None
    for an exact bound or a count that theory puts at zero)."""

    statistic: str
    unit: str
    measured: float
    expected: float
    sigma: float | None


def loss_share_sigma(p: float, r: float, one_minus_h: float, one_minus_k: float, packets: int) -> float:
    """The standard error of the loss share of `packets` packets through a Gilbert-Elliott chain:
    the binomial variance plus the state's correlation, 2 (h_bad - h_good)^2 pi_bad pi_good
    lambda / (1 - lambda), lambda = 1 - P - R (Bernoulli: 1-H = 1-K, no correlation)."""
    pi_bad = p / (p + r)
    mean = pi_bad * one_minus_h + (1 - pi_bad) * one_minus_k
    lam = 1 - p - r
    correlated = 2 * (one_minus_h - one_minus_k) ** 2 * pi_bad * (1 - pi_bad) * lam / (1 - lam)
    return math.sqrt((mean * (1 - mean) + correlated) / packets)


def bursts(received: set[int], sent: int) -> list[int]:
    """The lengths of the runs of consecutive probes (by sequence number) that never arrived."""
    lengths, current = [], 0
    for seq in range(sent):
        if seq in received:
            if current:
                lengths.append(current)
            current = 0
        else:
            current += 1
    if current:
        lengths.append(current)
    return lengths


def loss_stats(probes: list[list[int]], sent: int, p: float, r: float, one_minus_h: float,
               one_minus_k: float, burst_end: float) -> list[Stat]:
    """Loss share, mean burst and the burst lengths' shares against the chain's; `burst_end` is the
    probability that a burst ends at each packet (R in the simple Gilbert model, 1 - p Bernoulli)."""
    received = {probe[0] for probe in probes}
    lost = sent - len(received)
    mean = (r * one_minus_k + p * one_minus_h) / (p + r)
    rows = [Stat("loss share", "%", 100 * lost / sent, 100 * mean,
                 100 * loss_share_sigma(p, r, one_minus_h, one_minus_k, sent))]
    lengths = bursts(received, sent)
    count = len(lengths)
    if not count:
        return rows
    rows.append(Stat("mean burst", "packets", statistics.fmean(lengths), 1 / burst_end,
                     math.sqrt(1 - burst_end) / burst_end / math.sqrt(count)))
    seen = Counter(lengths)
    for length in BURST_LENGTHS:
        share = burst_end * (1 - burst_end) ** (length - 1)
        rows.append(Stat(f"bursts of {length}", "%", 100 * seen[length] / count, 100 * share,
                         100 * math.sqrt(share * (1 - share) / count)))
    tail = (1 - burst_end) ** BURST_LENGTHS[-1]
    longer = sum(n for length, n in seen.items() if length > BURST_LENGTHS[-1])
    rows.append(Stat(f"bursts over {BURST_LENGTHS[-1]}", "%", 100 * longer / count, 100 * tail,
                     100 * math.sqrt(tail * (1 - tail) / count)))
    return rows


def added_delays_ns(probes: list[list[int]], delay_ns: int, service_ns: int) -> list[int]:
    """Each probe's one-way delay less the path's delay and its own time on the bottleneck."""
    return [received - sent - delay_ns - service_ns for _, sent, received, _ in probes]


def quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=1000, method="inclusive")[round(q * 1000) - 1]


def offset_quantile(distribution: str, q: float) -> float:
    """The q-quantile of one offset in units of J."""
    return 2 * q - 1 if distribution == "uniform" else statistics.NormalDist().inv_cdf(q)


def offset_density(distribution: str, q: float) -> float:
    """The offset's density at its q-quantile, per unit of J."""
    if distribution == "uniform":
        return 0.5
    return statistics.NormalDist().pdf(statistics.NormalDist().inv_cdf(q))


def overtaking_probability(distribution: str, gap_ns: float, jitter_ns: float) -> float:
    """P(a packet overtakes the one sent gap_ns before it): P(X2 - X1 < -gap) for two offsets."""
    if distribution == "uniform":
        return max(0.0, 2 * jitter_ns - gap_ns) ** 2 / (8 * jitter_ns**2)
    return statistics.NormalDist().cdf(-gap_ns / (math.sqrt(2) * jitter_ns))


def overtaken_pairs(probes: list[list[int]]) -> tuple[int, list[int]]:
    """How many neighbours (i, i+1), both arrived, arrived in the wrong order; and each pair's send gap."""
    position = {probe[0]: index for index, probe in enumerate(probes)}
    sent = {probe[0]: probe[1] for probe in probes}
    pairs = [seq for seq in position if seq + 1 in position]
    inverted = sum(1 for seq in pairs if position[seq + 1] < position[seq])
    return inverted, [sent[seq + 1] - sent[seq] for seq in pairs]


def offset_draw(rng: random.Random, distribution: str) -> float:
    """One offset in units of J (normal: the standard normal iproute2's table samples)."""
    return rng.uniform(-1, 1) if distribution == "uniform" else rng.gauss()


def with_floor_quantiles(offsets_ns: list[float], floor_ns: list[int], rng: random.Random) -> list[float]:
    """QUANTILES of offsets each plus a delay drawn from the path's own floor (ns)."""
    return [quantile([o + rng.choice(floor_ns) for o in offsets_ns], q) for q in QUANTILES]


def kept_order_offsets(sent_ns: list[int], delay_ns: int, jitter_ns: int, distribution: str,
                       rng: random.Random) -> list[float]:
    """Added delays under kept order for these send times: the recursion
    due_i = max(sent_i + D + X_i, due_(i-1)) drawn KEEP_DRAWS times (ns)."""
    added: list[float] = []
    for _ in range(KEEP_DRAWS):
        last = -math.inf
        for sent in sent_ns:
            last = max(sent + delay_ns + max(offset_draw(rng, distribution) * jitter_ns, -delay_ns), last)
            added.append(last - sent - delay_ns)
    return added


def jitter_stats(probes: list[list[int]], delay_ns: int, service_ns: int, jitter_ns: int,
                 distribution: str, order: str, seed: int, floor_ns: list[int]) -> list[Stat]:
    """The added delay's quantiles (ms) and the share of neighbours overtaken, against the model's.
    The expected quantiles are the model's offsets each plus a draw from `floor_ns`, the added
    delays of the same path without jitter in the same repetition: what the measurement adds
    (the host's stacks, the emulator's lateness) is there with jitter too."""
    added = [a / 1e6 for a in added_delays_ns(probes, delay_ns, service_ns)]
    n = len(added)
    rng = random.Random(seed)
    if order == "keep":
        offsets = kept_order_offsets([p[1] for p in sorted(probes)], delay_ns, jitter_ns, distribution, rng)
        sigmas: list[float | None] = [None] * len(QUANTILES)
    else:
        offsets = [offset_draw(rng, distribution) * jitter_ns for _ in range(KEEP_DRAWS * n)]
        sigmas = [math.sqrt(q * (1 - q) / n) / offset_density(distribution, q) * jitter_ns / 1e6 for q in QUANTILES]
    expected = [e / 1e6 for e in with_floor_quantiles(offsets, floor_ns, rng)]
    rows = [Stat(f"added delay p{round(q * 100)}", "ms", quantile(added, q), e, s)
            for q, e, s in zip(QUANTILES, expected, sigmas, strict=True)]
    inverted, gaps = overtaken_pairs(probes)
    if order == "keep":
        rows.append(Stat("neighbours overtaken", "%", 100 * inverted / len(gaps), 0.0, None))
    else:
        chances = [overtaking_probability(distribution, gap, jitter_ns) for gap in gaps]
        rows.append(Stat("neighbours overtaken", "%", 100 * inverted / len(gaps), 100 * statistics.fmean(chances),
                         100 * math.sqrt(sum(c * (1 - c) for c in chances)) / len(gaps)))
    return rows


def floor_stats(probes: list[list[int]], delay_ns: int, service_ns: int) -> list[Stat]:
    """The path without an effect: what the measurement itself adds to a one-way delay (ms)."""
    added = [a / 1e6 for a in added_delays_ns(probes, delay_ns, service_ns)]
    inverted, gaps = overtaken_pairs(probes)
    return [*(Stat(f"added delay p{round(q * 100)}", "ms", quantile(added, q), 0.0, None) for q in QUANTILES),
            Stat("neighbours overtaken", "%", 100 * inverted / len(gaps), 0.0, None)]


def releases(received_ns: list[int], split_ns: int) -> list[tuple[int, int]]:
    """(first arrival, packets) of each clump of arrivals: a clump ends where the next arrival comes
    more than split_ns after the one before."""
    stamps = sorted(received_ns)
    starts = [0, *(i for i in range(1, len(stamps)) if stamps[i] - stamps[i - 1] > split_ns), len(stamps)]
    return [(stamps[a], b - a) for a, b in zip(starts, starts[1:], strict=False)]


def slot_stats(probes: list[list[int]], delay_ns: int, service_ns: int, min_ns: int, max_ns: int,
               packets: int) -> list[Stat]:
    """Slot spacing quantiles (ms) against U[MIN, MAX]; release sizes against the sending rate (no
    limit) or the limit (a backlog); and each release against what fell due since the one before.

    A slot with nothing due passes unseen, so a stall of the sender (no probe due for MIN or more)
    joins two gaps into one spacing and two slots' worth into one release. With no limit, spacings
    and sizes are therefore read over the slots the sender kept fed: no gap of MIN between due
    times (send time + delay + service) since the release before; the share left out is reported.
    With a limit, the backlog feeds every slot until it drains, after the sender has stopped."""
    clumps = releases([p[2] for p in probes], min_ns // 2)[1:-1]  # the first and last may be partial
    due = sorted(p[1] + delay_ns + service_ns for p in probes)
    fed, off = [], 0
    for before, (opening, size) in zip(clumps, clumps[1:], strict=False):
        since, until = bisect.bisect_right(due, before[0]), bisect.bisect_right(due, opening)
        # Each release holds the probes that fell due since the release before; its arrival stamp
        # and a probe's send stamp each miss the link's own clock by tens of microseconds, so a
        # probe due that close to an opening may count on either side of it.
        off += abs(size - (until - since)) > 1
        window = [before[0], *due[since:until], opening]
        if packets or max(b - a for a, b in zip(window, window[1:], strict=False)) < min_ns:
            fed.append(((opening - before[0]) / 1e6, size))
    spacing = [gap for gap, _ in fed]
    span = (max_ns - min_ns) / 1e6
    rows = [Stat(f"slot spacing p{round(q * 100)}", "ms", quantile(spacing, q), min_ns / 1e6 + q * span,
                 math.sqrt(q * (1 - q) / len(spacing)) * span) for q in QUANTILES]
    sizes = [size for _, size in fed]
    if packets:
        rows.append(Stat("mean release", "packets", statistics.fmean(sizes), float(packets), None))
        rows.append(Stat(f"releases of exactly {packets}", "%", 100 * sizes.count(packets) / len(sizes), 100.0, None))
        return rows
    sent = sorted(p[1] for p in probes)
    rate_per_ms = (len(sent) - 1) / ((sent[-1] - sent[0]) / 1e6)
    rows.append(Stat("mean release", "packets", statistics.fmean(sizes), rate_per_ms * (min_ns + max_ns) / 2e6,
                     rate_per_ms * span / math.sqrt(12) / math.sqrt(len(sizes))))
    rows.append(Stat("releases after a stall of the sender, left out", "%",
                     100 * (1 - len(fed) / (len(clumps) - 1)), 0.0, None))
    rows.append(Stat("releases off what fell due by over 1", "%", 100 * off / (len(clumps) - 1), 0.0, None))
    return rows


def send_times(probes: list[list[int]], sent: int) -> list[float]:
    """Every probe's send time (ns), those that never arrived interpolated by sequence number
    between the nearest that did (the sender stamps only what it sends)."""
    known = sorted((p[0], p[1]) for p in probes)
    seqs, stamps = [k[0] for k in known], [k[1] for k in known]
    times = []
    for seq in range(sent):
        at = bisect.bisect_left(seqs, seq)
        if at < len(seqs) and seqs[at] == seq:
            times.append(float(stamps[at]))
        elif at == 0 or at == len(seqs):
            times.append(float(stamps[min(at, len(seqs) - 1)]))
        else:
            share = (seq - seqs[at - 1]) / (seqs[at] - seqs[at - 1])
            times.append(stamps[at - 1] + share * (stamps[at] - stamps[at - 1]))
    return times


def token_bucket(times_ns: list[float], rate_bps: float, burst_bytes: int, ip_bytes: int) -> list[bool]:
    """Which packets a token bucket (full at the start) passes: the policer's definition, run again."""
    tokens, last, passed = float(burst_bytes), times_ns[0], []
    for at in times_ns:
        tokens = min(float(burst_bytes), tokens + rate_bps / 8 * (at - last) / 1e9)
        last = at
        passed.append(tokens >= ip_bytes)
        if passed[-1]:
            tokens -= ip_bytes
    return passed


def policer_stats(probes: list[list[int]], sent: int, rate_bps: float, burst_bytes: int, ip_bytes: int,
                  delay_ns: int, service_ns: int, floor_ns: list[int]) -> list[Stat]:
    """What passed against BURST + RATE x T / 8 over the passed packets' span, and the share dropped
    against a token bucket run again on the send times (which also counts what the sender's stalls
    cost: a bucket full for longer than BURST / RATE wastes what it would have filled; packet by
    packet the two need not agree, as at twice the rate each decision is on the edge of a packet's
    tokens); and the delay it added: the path's own floor (`floor_ns`), as a policer drops and
    never queues."""
    stamps = sorted(p[1] for p in probes)
    span_s = (stamps[-1] - stamps[0]) / 1e9
    passed = len(probes) * ip_bytes
    bound = burst_bytes + rate_bps * span_s / 8
    added = [a / 1e6 for a in added_delays_ns(probes, delay_ns, service_ns)]
    again = token_bucket(send_times(probes, sent), rate_bps, burst_bytes, ip_bytes)
    return [Stat("passed over its span", "Mbit/s", passed * 8 / span_s / 1e6, bound * 8 / span_s / 1e6, None),
            Stat("passed / bound", "%", 100 * passed / bound, 100.0, None),
            Stat("dropped", "%", 100 * (sent - len(probes)) / sent, 100 * (1 - sum(again) / sent), None),
            Stat("added delay p50", "ms", quantile(added, 0.5), quantile([f / 1e6 for f in floor_ns], 0.5), None)]


def step_stats(probes: list[list[int]], delay_ns: int, service_ns: int, step_ns: int, ect1_every: int) -> list[Stat]:
    """CE-marked shares of ECT(1) and ECT(0) probes against each probe's own wait, and the probes
    whose mark disagrees with its wait."""
    ect1 = [p for p in probes if p[0] % ect1_every == 0]
    ect0 = [p for p in probes if p[0] % ect1_every]
    waits = added_delays_ns(ect1, delay_ns, service_ns)
    marked = [(p[3] & ECN_MASK) == CE for p in ect1]
    predicted = [wait >= step_ns for wait in waits]
    disagreeing = [wait for m, w, wait in zip(marked, predicted, waits, strict=True) if m != w]
    return [Stat("ECT(1) marked", "%", 100 * statistics.fmean(marked), 100 * statistics.fmean(predicted), None),
            Stat("ECT(1) mark against its wait, disagreeing", "%", 100 * len(disagreeing) / len(ect1), 0.0, None),
            Stat("a disagreeing probe's wait from the step, largest", "ms",
                 max((abs(wait - step_ns) / 1e6 for wait in disagreeing), default=0.0), 0.0, None),
            Stat("ECT(0) marked", "%", 100 * statistics.fmean((p[3] & ECN_MASK) == CE for p in ect0), 0.0, None)]


def mathis_mbps(mss_bytes: int, rtt_s: float, loss_event_rate: float) -> float:
    """Mathis et al. (1997): MSS / RTT x sqrt(3/2) / sqrt(p), p the rate of loss events (a window's
    reduction) per packet. CUBIC's Reno-friendly region (RFC 9438: alpha = 3 (1 - beta) / (1 + beta),
    beta = 0.7) has the same constant, and at these windows that region is the one that sets it."""
    return mss_bytes * 8 / rtt_s * math.sqrt(1.5 / loss_event_rate) / 1e6


def delay_trace_stats(probes: list[list[int]], delay_ns: int, service_ns: int, step_ns: int, hold_ns: int,
                      floor_ns: list[int], edge_ns: int = 100_000_000) -> list[Stat]:
    """A delay trace that adds `step_ns` for `hold_ns` and falls back: each stretch's added delay
    (p50, ms, away from its edges by `edge_ns`) against the step and the floor, the time from the
    rise to the first probe back under half the step (ms), and the neighbours overtaken (%)."""
    by_send = sorted((sent, received - sent - delay_ns - service_ns) for _, sent, received, _ in probes)
    half = step_ns / 2
    rise = next(sent for sent, added in by_send if added > half)
    back = next(sent for sent, added in by_send if sent > rise + edge_ns and added < half)
    high = [added / 1e6 for sent, added in by_send if rise + edge_ns <= sent <= rise + hold_ns - edge_ns]
    low = [added / 1e6 for sent, added in by_send if sent >= rise + hold_ns + step_ns + edge_ns]
    floor_p50 = quantile([f / 1e6 for f in floor_ns], 0.5)
    inverted, gaps = overtaken_pairs(probes)
    return [Stat("the step's stretch: added delay p50", "ms", quantile(high, 0.5), step_ns / 1e6 + floor_p50, None),
            Stat("after the fall: added delay p50", "ms", quantile(low, 0.5), floor_p50, None),
            Stat("rise to the first probe back under half the step", "ms", (back - rise) / 1e6,
                 (hold_ns + half) / 1e6, None),
            Stat("neighbours overtaken", "%", 100 * inverted / len(gaps), 0.0, None)]
