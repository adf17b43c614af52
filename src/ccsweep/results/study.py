"""A whole study on its links beside its published numbers, and what its run cost: from records alone.

ccsweep's headline is that ReBBR's 390 cells, run one after another for 8.5 hours, become a short
run whose numbers agree with Mahimahi's.  Both halves are claims about stored records, so this
module reads nothing but records (results and late attempts) and ReBBR's shipped CSVs:

- `compare_links` sets each cell's number on ccsweep-link beside the same cell on Mahimahi (on each
  other link registered in linkdesc.LINKS; the cells differ only in `link`) and beside ReBBR's
  published number for that cell, per experiment, with the median and worst relative difference
  of each pair.  The quantity is ReBBR's own: the
  throughput out of the bottleneck (`bottleneck_throughput_mbps`), since that is what ReBBR
  published as "goodput"; receiver goodput would sit up to 1 / (1 - p) below it.
- `run_stats` gives a run's wall time, cells per minute, how many cells ran at once, the link's CPU
  per cell and the late attempts that were run again, from the records' own start and end times.

A relative difference is |a - b| / b against the second of the pair; cells where that reference
is below `FLOOR_MBPS` (CUBIC at 50 % loss moves kilobits) are compared in absolute terms only and
kept out of the relative summary, where a 0.01 against 0.02 Mbit/s would read as 100 %.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import combinations

from ccsweep.cell import CellParams
from ccsweep.linkdesc import DEFAULT_LINK, LINKS, link_names
from ccsweep.result import CellResult
from ccsweep.results.published_sets import SETS, load
from ccsweep.results.rebbr_csv import RebbrRow
from ccsweep.spec import Experiment

#: Below this reference (Mbit/s) a relative difference says nothing; the absolute one is shown.
FLOOR_MBPS = 1.0
#: The published numbers' column and side of a pair.
PUBLISHED = "rebbr"


def _same_cell(params: CellParams) -> str:
    """The cell apart from its link and the link's offloads: the key that pairs a ccsweep-link cell
    with its twin on another link."""
    update = {"link": DEFAULT_LINK, "link_offload": LINKS[DEFAULT_LINK].default_offload}
    return params.model_copy(update=update).model_dump_json()


PublishedKey = tuple[str, float, float, float | None]


def _published_key(cc: str, loss: float, rtt_ms: float, rate_mbps: float | None) -> PublishedKey:
    return cc, round(loss, 9), round(rtt_ms, 6), None if rate_mbps is None else round(rate_mbps, 6)


@dataclass(frozen=True)
class Row:
    """One cell of an experiment: its label and its number on each link and in ReBBR's CSV."""

    cc: str
    loss: float
    setting: str  # what else varies in the experiment: "100 ms", "10 Mbit/s", a trace
    values: dict[str, float | None]  # per link, bottleneck throughput (Mbit/s); None: not run or not stored
    published: float | None


@dataclass(frozen=True)
class Difference:
    """Median and worst relative difference of a pair over the cells both have above the floor."""

    pair: tuple[str, str]
    compared: int
    median: float | None
    worst: float | None
    worst_row: Row | None


@dataclass(frozen=True)
class ExperimentTable:
    experiment: str
    title: str
    published_set: str | None
    #: The links of its columns, the first sweep's first, in registry order.
    links: tuple[str, ...]
    rows: list[Row]
    differences: list[Difference]


def relative(a: float | None, b: float | None) -> float | None:
    """|a - b| / b, or None where either is missing or b is below the floor."""
    if a is None or b is None or b < FLOOR_MBPS:
        return None
    return abs(a - b) / b


def _setting(params: CellParams, experiment: Experiment) -> str:
    parts = []
    if len(experiment.rtt_ms) > 1:
        parts.append(f"{params.rtt_ms:g} ms")
    if experiment.bandwidth_mbps is not None and len(experiment.bandwidth_mbps) > 1:
        parts.append(f"{params.bandwidth_mbps:g} Mbit/s")
    if experiment.trace is not None:
        parts.append(" / ".join(t.name for t in params.traces) or "trace")
    return ", ".join(parts) or "-"


def _published_rows(experiment: Experiment) -> tuple[str | None, dict[PublishedKey, float]]:
    """ReBBR's numbers for the experiment's cells, keyed like `_published_key` (one run per point)."""
    for name in experiment.published:
        published = SETS[name]
        rows: list[RebbrRow] = load(published)
        trace = published.trace_uplink is not None
        return name, {_published_key(r.congestion_control, r.loss_rate, r.rtt_ms,
                                     None if trace else r.specified_bw_Mbps): r.goodput_Mbps for r in rows}
    return None, {}


def _difference(rows: Sequence[Row], a: str, b: str) -> Difference:
    def value(row: Row, side: str) -> float | None:
        return row.published if side == PUBLISHED else row.values.get(side)

    scored = [(d, row) for row in rows if (d := relative(value(row, a), value(row, b))) is not None]
    if not scored:
        return Difference((a, b), 0, None, None, None)
    worst, worst_row = max(scored, key=lambda pair: pair[0])
    return Difference((a, b), len(scored), statistics.median(d for d, _ in scored), worst, worst_row)


def compare_links(experiments: Iterable[tuple[Experiment, Sequence[CellResult]]],
                  others: Iterable[CellResult], links: Sequence[str] | None = None) -> list[ExperimentTable]:
    """Per experiment, each cell of the first sweep (ccsweep-link) beside its twin on each other of
    `links` among `others` (the same cells on Mahimahi) and ReBBR's published number; `links`, the
    table's columns, default to every registered link."""
    columns = tuple(links if links is not None else link_names())
    twins: dict[tuple[str, str], CellResult] = {}
    for result in others:
        twins.setdefault((result.cell.params.link, _same_cell(result.cell.params)), result)
    tables = []
    for experiment, results in experiments:
        set_name, published = _published_rows(experiment)
        rows = []
        for result in sorted(results, key=lambda r: (r.cell.params.cc_label, _setting(r.cell.params, experiment),
                                                     r.cell.params.loss)):
            params = result.cell.params
            key = _same_cell(params)
            rate = None if experiment.trace is not None else params.bandwidth_mbps
            values = {link: twin.bottleneck_throughput_mbps if (twin := twins.get((link, key))) is not None else None
                      for link in columns if link != params.link}
            rows.append(Row(
                cc=params.cc_label, loss=params.loss, setting=_setting(params, experiment),
                values={params.link: result.bottleneck_throughput_mbps, **values},
                published=published.get(_published_key(params.cc_label, params.loss, params.rtt_ms, rate))))
        tables.append(ExperimentTable(experiment.name, experiment.title or experiment.name, set_name, columns, rows,
                                      [_difference(rows, a, b) for a, b in combinations([*columns, PUBLISHED], 2)]))
    return tables


def _mbps(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f} %"


def table_markdown(table: ExperimentTable) -> str:
    """One experiment's comparison as a Markdown table, summary rows last."""
    others = table.links[1:]
    titles = [LINKS[link].title for link in table.links]
    lines = [f"### {table.title}", "",
             f"Throughput out of the bottleneck (Mbit/s), one run per cell; ReBBR: {table.published_set or 'none'}.",
             "", f"| algorithm | loss % | setting | {' | '.join(titles)} | ReBBR | "
             f"{' | '.join(f'link vs {title}' for title in titles[1:])} |",
             f"|---|---:|---|{'---:|' * (2 * len(titles))}"]
    for row in table.rows:
        values = [row.values.get(link) for link in table.links]
        against = [_percent(relative(values[0], row.values.get(other))) for other in others]
        lines.append(f"| {row.cc} | {row.loss * 100:g} | {row.setting} | {' | '.join(map(_mbps, values))} | "
                     f"{_mbps(row.published)} | {' | '.join(against)} |")
    for diff in table.differences:
        a, b = diff.pair
        where = (f" ({diff.worst_row.cc}, {diff.worst_row.loss * 100:g} %, {diff.worst_row.setting})"
                 if diff.worst_row else "")
        lines.append(f"| **{a} vs {b}** | | {diff.compared} cells | median {_percent(diff.median)} | "
                     f"worst {_percent(diff.worst)}{where} |{' |' * (2 * len(titles) - 2)}")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class RunStats:
    """What a run of stored cells took, from its records' own times."""

    cells: int
    #: Attempts that did not count, per kind (late, starved, failed): each was run again.
    attempts: dict[str, int]
    #: Time with at least one cell running: pauses between runs of a resumed study are not counted.
    wall_s: float
    cell_seconds: float
    max_at_once: int
    mean_at_once: float
    link_cpu_median: dict[str, float]  # per bottleneck rate label: the link's CPU share per cell

    @property
    def cells_per_minute(self) -> float:
        return self.cells / (self.wall_s / 60) if self.wall_s > 0 else 0.0


def _span(result: CellResult) -> tuple[datetime, datetime] | None:
    try:
        return datetime.fromisoformat(result.started_at), datetime.fromisoformat(result.finished_at)
    except ValueError:
        return None


@dataclass(frozen=True)
class Occupancy:
    """How a set of runs occupied the machine, from their start and end times alone."""

    #: Time with at least one run going: the gaps between runs (a resumed study's pauses) are not counted.
    busy_s: float
    #: The most runs going at one instant.
    peak: int
    #: The runs' own durations, summed: the time they would take one after another.
    run_s: float

    @property
    def mean_at_once(self) -> float:
        return self.run_s / self.busy_s if self.busy_s > 0 else 0.0


def at_once(spans: Sequence[tuple[datetime, datetime]]) -> list[tuple[datetime, int]]:
    """How many (start, end) spans are open after each start and end, in time order; a run that
    ends as another starts does not count as overlapping it."""
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda ev: (ev[0], ev[1]))
    level, out = 0, []
    for when, step in events:
        level += step
        out.append((when, level))
    return out


def occupancy(spans: Sequence[tuple[datetime, datetime]]) -> Occupancy:
    """Busy time and peak concurrency of (start, end) spans (`at_once`)."""
    before = peak = 0
    busy_since: datetime | None = None
    busy = 0.0
    for when, level in at_once(spans):
        if before == 0 and level == 1:
            busy_since = when
        peak = max(peak, level)
        if level == 0 and busy_since is not None:
            busy += (when - busy_since).total_seconds()
        before = level
    return Occupancy(busy, peak, sum((e - s).total_seconds() for s, e in spans))


def run_stats(results: Sequence[CellResult], attempts: Sequence[CellResult]) -> RunStats:
    """Busy wall time, and how many cells ran at once, over stored results and the attempts that
    did not count (every attempt occupied the machine, counted or not)."""
    spans = [s for s in map(_span, [*results, *attempts]) if s is not None]
    used = occupancy(spans)
    shares: dict[str, list[float]] = {}
    for result in results:
        if result.link is not None and result.link.selfcheck.cpu_share is not None:
            rate = result.cell.params.bandwidth_mbps
            label = f"{rate:g} Mbit/s" if rate is not None else "trace"
            shares.setdefault(label, []).append(result.link.selfcheck.cpu_share)
    kinds: dict[str, int] = {}
    for attempt in attempts:
        kinds[attempt.status] = kinds.get(attempt.status, 0) + 1
    return RunStats(len(results), kinds, used.busy_s, used.run_s, used.peak, used.mean_at_once,
                    {label: statistics.median(v) for label, v in sorted(shares.items())})
