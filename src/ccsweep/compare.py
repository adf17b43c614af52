"""Two sets of results for the same cells, compared as distributions: n, medians, difference, verdict.

A side is a sweep in a store (optionally one experiment of it, optionally only cells with a given
link or kernel), ReBBR's published CSV of a figure, or any CSV in ReBBR's columns.  Cells of the
two sides are matched on their parameters with the repetition and seed left out (runs of one cell
are its distribution) and with the parameters named in `ignore` left out too (link, link_offload,
kernel: what the comparison is about; leaving out the link leaves out its offloads, which follow
it: a Mahimahi cell has none).  A side that is a CSV has only algorithm, loss, RTT and bottleneck rate,
so matching with one is on those four.

Per matched cell: n on each side, the medians, median(A) - median(B) with its percentile-bootstrap
interval, the two-sided Mann-Whitney p-value and the k-sample Anderson-Darling p-value (scipy.stats),
and a verdict:
- agree: both sides have two runs or more and the whole interval of the difference lies within the
  tolerance (a fraction of the larger median): whatever the true difference, it is too small to matter;
- differ: the interval excludes 0 and the rank test rejects equal distributions at `alpha`;
- not settled: neither; more runs would decide it.  One run on a side says nothing of that side's
  spread (a bimodal cell's single run can land in either mode), so it settles a verdict only
  when the other side's runs are enough for the rank test alone (at alpha 0.05, 40 runs).

Sweeps of one run per cell (ReBBR's design) are not settled cell by cell; across all matched
cells, the Wilcoxon signed-rank test of the per-cell differences still says whether one side is
systematically above the other (`pooled`).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
from rich.table import Table
from scipy import stats

from ccsweep.cell import CellParams
from ccsweep.result import CellResult
from ccsweep.results.data import load_sweep
from ccsweep.results.points import cc_name, cell_summary
from ccsweep.results.published_sets import SETS, load
from ccsweep.results.rebbr_csv import RebbrRow, read_csv
from ccsweep.spec import SLUG, SpecError
from ccsweep.specload import read_regular_file
from ccsweep.stats import Interval, median_difference_ci, rank_test_p
from ccsweep.store import ResultStore

Verdict = Literal["agree", "differ", "not settled"]
#: Parameters a comparison may leave out of the match, and how a side may be filtered by them.
IGNORABLE = ("link", "link_offload", "kernel", "cc")
DEFAULT_TOLERANCE = 0.10
DEFAULT_ALPHA = 0.05
MAX_CSV_BYTES = 16 << 20


@dataclass(frozen=True)
class QuantityDef:
    """A number per run: how a stored result gives it, and how a ReBBR-format row does (None: it has none)."""

    name: str
    label: str
    measured: Callable[[CellResult], float | None]
    published: Callable[[RebbrRow], float] | None


QUANTITIES: dict[str, QuantityDef] = {q.name: q for q in (
    QuantityDef("goodput", "goodput (Mbit/s), application bytes over the whole flow",
                lambda r: r.goodput_mbps, None),
    QuantityDef("goodput-steady", "goodput after the warm-up (Mbit/s)", lambda r: r.goodput_steady_mbps, None),
    QuantityDef("bottleneck-throughput", "throughput out of the bottleneck (Mbit/s), ReBBR's \"goodput\"",
                lambda r: r.bottleneck_throughput_mbps, lambda row: row.goodput_Mbps),
)}


class CompareError(ValueError):
    """A side or option that cannot be compared; str() is one line naming it."""


@dataclass
class SidePoint:
    """One cell of a side: the parameters that stand for it (None for a CSV row) and its runs' values."""

    summary: str
    params: CellParams | None
    values: list[float] = field(default_factory=list)


@dataclass
class Side:
    label: str
    points: dict[str, SidePoint]
    #: Whether the side knows only algorithm, loss, RTT and rate (a CSV): matching is then on those.
    coarse: bool = False


@dataclass
class Row:
    """One matched cell's comparison."""

    summary: str
    params: CellParams | None
    a: list[float]
    b: list[float]
    difference: Interval
    p_rank: float | None
    p_anderson: float | None
    verdict: Verdict
    reason: str

    @property
    def median_a(self) -> float:
        return float(np.median(self.a))

    @property
    def median_b(self) -> float:
        return float(np.median(self.b))


@dataclass
class Comparison:
    a: Side
    b: Side
    quantity: QuantityDef
    ignore: tuple[str, ...]
    tolerance: float
    alpha: float
    rows: list[Row]
    only_a: list[str]
    only_b: list[str]

    def counts(self) -> dict[str, int]:
        return {v: sum(r.verdict == v for r in self.rows) for v in ("agree", "differ", "not settled")}


# Sides.
@dataclass(frozen=True)
class SideRef:
    """A side as the command line names it: `SWEEP[/EXPERIMENT][@PARAM=VALUE]`, `published:NAME` or `csv:PATH`."""

    kind: Literal["sweep", "published", "csv"]
    name: str
    experiment: str | None = None
    where: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        if self.kind != "sweep":
            return f"{self.kind}:{self.name}" + "".join(f"@{k}={v}" for k, v in self.where)
        text = self.name + (f"/{self.experiment}" if self.experiment else "")
        return text + "".join(f"@{k}={v}" for k, v in self.where)


def parse_side(text: str, field_name: str) -> SideRef:
    """A side from its command-line text; CompareError naming `field_name` when it is not one."""
    if text.startswith(("published:", "csv:")):
        # A CSV knows its rows' algorithm and nothing else a filter names: `@cc=` only, last.
        head, sep, cc = text.rpartition("@cc=")
        kept: tuple[tuple[str, str], ...] = ()
        if sep and re.fullmatch(r"[0-9A-Za-z._-]{1,63}", cc):
            text, kept = head, (("cc", cc),)
        kind, _, name = text.partition(":")
        if kind == "published" and name not in SETS:
            raise CompareError(f"{field_name}: {name[:64]!r} is not a published set (one of {', '.join(SETS)})")
        return SideRef("published" if kind == "published" else "csv", name, where=kept)
    head, *filters = text.split("@")
    sweep, _, experiment = head.partition("/")
    for part, what in ((sweep, "sweep"), *(((experiment, "experiment"),) if experiment else ())):
        if not re.fullmatch(SLUG, part):
            raise CompareError(f"{field_name}: {part[:64]!r} is not a {what} name (lowercase letters, digits and "
                               "'-'); a side is SWEEP[/EXPERIMENT][@link=...|@kernel=...], published:NAME or csv:PATH")
    where = []
    for item in filters:
        key, sep, value = item.partition("=")
        if not sep or key not in IGNORABLE or not re.fullmatch(r"[0-9A-Za-z._-]{1,63}", value):
            raise CompareError(f"{field_name}: @{item[:64]!r}: a filter is @link=VALUE, @link_offload=VALUE, "
                               "@kernel=VALUE or @cc=VALUE")
        where.append((key, value))
    return SideRef("sweep", sweep, experiment or None, tuple(where))


def _param(params: CellParams, result: CellResult | None, name: str) -> str:
    """The value of a match parameter: a cell that names no kernel ran on the kernel its result records;
    its algorithms are its flows' ('bbr', 'bbr+cubic' for a mix)."""
    if name == "kernel":
        return params.kernel or (result.environment.kernel if result else "")
    if name == "cc":
        return params.cc_label
    return str(getattr(params, name))


def match_key(params: CellParams, ignore: Iterable[str]) -> str:
    """Equal for runs of one cell, and for cells that differ only in the `ignore`d parameters."""
    data = params.model_dump(mode="json")
    data["seed"] = data["repetition"] = 0
    for name in ignore:
        data[name] = None
        if name == "link":
            data["link_offload"] = None
        if name == "cc":  # the flows' algorithms, and the BPF objects that follow them
            data["flows"] = [{**flow, "cc": None} for flow in data["flows"]]
            data["bpf_programs"] = None
    return json.dumps(data, sort_keys=True)


def coarse_key(cc: str, loss: float, rtt_ms: float, rate_mbps: float | None) -> str:
    """Algorithm, loss, RTT and rate: all a ReBBR-format CSV row says of its cell (rounded to meet)."""
    rate = None if rate_mbps is None else round(rate_mbps, 6)
    return json.dumps([cc, round(loss, 9), round(rtt_ms, 6), rate])


def _coarse_of(params: CellParams) -> str | None:
    if len(params.flows) != 1 or params.delay_scheduled:  # a ReBBR row's RTT is fixed
        return None
    return coarse_key(params.flows[0].cc, params.loss, params.rtt_ms, params.uplink.rate_mbps)


def sweep_side(store: ResultStore, ref: SideRef, quantity: QuantityDef, ignore: Iterable[str]) -> Side:
    """The stored runs of a sweep (or one of its experiments), filtered by `ref.where`, grouped into cells."""
    data = load_sweep(store, ref.name)
    experiments = data.experiments
    if ref.experiment is not None:
        experiments = [e for e in experiments if e.name == ref.experiment]
        if not experiments:
            names = ", ".join(e.name for e in data.experiments)
            raise CompareError(f"{ref.label}: sweep {ref.name} has no experiment {ref.experiment} (it has {names})")
    return results_side(ref.label, [r for e in experiments for r in e.results], quantity, ignore, ref.where)


def results_side(label: str, results: Iterable[CellResult], quantity: QuantityDef, ignore: Iterable[str],
                 where: tuple[tuple[str, str], ...] = ()) -> Side:
    """Results (each cell once) with the `where` parameters, grouped into cells matched ignoring `ignore`."""
    seen: set[str] = set()
    points: dict[str, SidePoint] = {}
    ignored = tuple(ignore)
    for result in results:
        params = result.cell.params
        if result.cell.id in seen or any(_param(params, result, k) != v for k, v in where):
            continue
        seen.add(result.cell.id)
        value = quantity.measured(result)
        if value is None or not math.isfinite(value):
            continue
        if params.kernel is None and "kernel" not in ignored:
            params = params.model_copy(update={"kernel": result.environment.kernel})
        key = match_key(params, ignored)
        points.setdefault(key, SidePoint(cell_summary(params, repetition=False), params)).values.append(value)
    return Side(label, points)


def csv_side(ref: SideRef, quantity: QuantityDef) -> Side:
    """A ReBBR-format CSV (published and pinned, or a file): one value per row, rows of one cell pooled."""
    if quantity.published is None:
        raise CompareError(f"{ref.label}: a CSV in ReBBR's columns has no {quantity.name}; compare "
                           "--quantity bottleneck-throughput (what ReBBR called goodput)")
    if ref.kind == "published":
        rows = load(SETS[ref.name])
    else:
        try:
            rows = read_csv(read_regular_file(Path(ref.name), MAX_CSV_BYTES, ref.label).decode())
        except SpecError as exc:
            raise CompareError(str(exc)) from None
        except (UnicodeDecodeError, ValueError) as exc:
            raise CompareError(f"{ref.label}: not a CSV in ReBBR's columns ({str(exc).splitlines()[0]})") from None
    points: dict[str, SidePoint] = {}
    wanted = dict(ref.where).get("cc")
    for row in rows:
        if wanted is not None and row.congestion_control != wanted:
            continue
        key = coarse_key(row.congestion_control, row.loss_rate, row.rtt_ms, row.specified_bw_Mbps)
        summary = (f"{cc_name(row.congestion_control)}, {row.loss_rate * 100:g} % loss, {row.rtt_ms:g} ms, "
                   f"{row.specified_bw_Mbps:g} Mbit/s")
        points.setdefault(key, SidePoint(summary, None)).values.append(quantity.published(row))
    return Side(ref.label, points, coarse=True)


def coarsened(side: Side) -> Side:
    """A sweep side keyed as a CSV is (algorithm, loss, RTT, rate), for matching against one.

    Two cells of the sweep with the same four (another queue, another duration) would pool their
    runs; they are kept apart and the ambiguity is refused instead, naming both.
    """
    points: dict[str, SidePoint] = {}
    for point in side.points.values():
        key = _coarse_of(point.params) if point.params is not None else None
        if key is None:
            continue
        if key in points:
            raise CompareError(f"{side.label}: two cells match one CSV row ({points[key].summary}; {point.summary}); "
                               "name one experiment (SWEEP/EXPERIMENT)")
        points[key] = point
    return Side(side.label, points, coarse=True)


def _without_cc(side: Side) -> Side:
    """A coarse side keyed without the algorithm (--ignore cc against a CSV): two algorithms on one
    side would then meet in one key, which is refused, naming them."""
    points: dict[str, SidePoint] = {}
    for key, point in side.points.items():
        blank = json.dumps([None, *json.loads(key)[1:]])
        if blank in points:
            raise CompareError(f"{side.label}: two algorithms match one cell ({points[blank].summary}; "
                               f"{point.summary}) with --ignore cc; keep one with @cc=NAME")
        points[blank] = point
    return Side(side.label, points, coarse=True)


def read_side(ref: SideRef, store: ResultStore | None, quantity: QuantityDef, ignore: Iterable[str]) -> Side:
    if ref.kind == "sweep":
        if store is None:
            raise CompareError(f"{ref.label}: a sweep side needs --store")
        return sweep_side(store, ref, quantity, ignore)
    return csv_side(ref, quantity)


# The comparison.
def verdict(difference: Interval, p_rank: float | None, n_a: int, n_b: int, median_scale: float,
            tolerance: float, alpha: float) -> tuple[Verdict, str]:
    """agree, differ or not settled (see the module's docstring), with the reason in a few words."""
    if difference.low is None or difference.high is None:
        return "not settled", "one run on each side: no interval"
    margin = tolerance * median_scale
    if -margin <= difference.low and difference.high <= margin and min(n_a, n_b) >= 2:
        return "agree", f"interval within ±{margin:.3g}"
    excludes_zero = difference.low > 0 or difference.high < 0
    if excludes_zero and p_rank is not None and p_rank < alpha:
        return "differ", f"interval excludes 0, rank test p < {alpha:g}"
    if min(n_a, n_b) < 2:
        return "not settled", "one run on a side: its spread is unknown"
    if excludes_zero:
        return "not settled", f"interval excludes 0 but rank test p ≥ {alpha:g}"
    return "not settled", f"interval wider than ±{margin:.3g} and includes 0"


def anderson_p(a: list[float], b: list[float]) -> float | None:
    """The k-sample Anderson-Darling p-value (scipy caps it to [0.001, 0.25]); None below 2 runs a side
    or when every run is the same number (the test is then undefined)."""
    if min(len(a), len(b)) < 2 or len(set(a) | set(b)) < 2:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns when it caps the p-value; the cap is documented here
        return float(stats.anderson_ksamp([np.asarray(a), np.asarray(b)]).pvalue)


def compare(a: Side, b: Side, quantity: QuantityDef, ignore: tuple[str, ...] = (),
            tolerance: float = DEFAULT_TOLERANCE, alpha: float = DEFAULT_ALPHA) -> Comparison:
    """Every cell the two sides share, compared; the cells only one side has are listed by summary."""
    if not 0 < tolerance < 1:
        raise CompareError(f"--tolerance: {tolerance:g} is outside (0, 1) (a fraction of the larger median)")
    if not 0 < alpha < 1:
        raise CompareError(f"--alpha: {alpha:g} is outside (0, 1)")
    if a.coarse != b.coarse:
        a, b = (coarsened(a) if not a.coarse else a), (coarsened(b) if not b.coarse else b)
    if a.coarse and "cc" in ignore:
        a, b = _without_cc(a), _without_cc(b)
    rows = []
    for key, pa in a.points.items():
        pb = b.points.get(key)
        if pb is None or not pa.values or not pb.values:
            continue
        diff = median_difference_ci(pa.values, pb.values)
        p = rank_test_p(pa.values, pb.values)
        scale = max(abs(float(np.median(pa.values))), abs(float(np.median(pb.values))))
        rows.append(Row(pa.summary, pa.params or pb.params, pa.values, pb.values, diff, p,
                        anderson_p(pa.values, pb.values),
                        *verdict(diff, p, len(pa.values), len(pb.values), scale, tolerance, alpha)))
    only_a = [p.summary for k, p in a.points.items() if k not in b.points]
    only_b = [p.summary for k, p in b.points.items() if k not in a.points]
    return Comparison(a, b, quantity, ignore, tolerance, alpha, rows, only_a, only_b)


# Output.
CSV_COLUMNS = ["cell", "cc", "loss_percent", "rtt_ms", "bandwidth_mbps", "n_a", "n_b", "median_a", "median_b",
               "difference", "ci_low", "ci_high", "interval", "p_mannwhitney", "p_anderson_darling", "verdict",
               "reason"]


def to_csv(result: Comparison) -> str:
    """One row per matched cell; the first lines (# ...) say what A and B are and the rule applied."""
    out = io.StringIO()
    out.write(f"# A: {result.a.label}; B: {result.b.label}; quantity: {result.quantity.label}; "
              f"matched ignoring: {', '.join(result.ignore) or 'nothing'}\n")
    out.write(f"# verdict: {rule_text(result)}\n")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    writer.writerows(csv_rows(result))
    return out.getvalue()


def rule_text(result: Comparison) -> str:
    return (f"agree when both sides have 2 runs or more and the interval of median(A) - median(B) lies within "
            f"±{result.tolerance:g} of the larger median; differ when it excludes 0 and Mann-Whitney p < "
            f"{result.alpha:g}; else not settled")


def csv_rows(result: Comparison) -> list[list[object]]:
    """The rows of CSV_COLUMNS, numbers as text with 6 significant digits."""
    rows: list[list[object]] = []
    for row in result.rows:
        p = row.params
        rows.append([row.summary, p.cc_label if p else "", _g(p.loss * 100 if p else None),
                     _g(p.rtt_ms if p else None), _g(p.bandwidth_mbps if p else None), len(row.a), len(row.b),
                     _g(row.median_a), _g(row.median_b), _g(row.difference.center), _g(row.difference.low),
                     _g(row.difference.high), row.difference.label, _g(row.p_rank), _g(row.p_anderson),
                     row.verdict, row.reason])
    return rows


def _g(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def table(result: Comparison) -> Table:
    """The comparison for a terminal: a row per matched cell, the interval's label in the title."""
    labels = {r.difference.label.split(",")[0] for r in result.rows if r.difference.low is not None}
    title = (f"A: {result.a.label}   B: {result.b.label}   {result.quantity.label}"
             + (f"\ndifference: median(A) - median(B), {labels.pop()} with n = n A + n B" if len(labels) == 1 else ""))
    out = Table(title=title, title_justify="left")
    for name in ("cell", "n A", "n B", "median A", "median B", "difference [95 % CI]", "p (MW)", "verdict"):
        out.add_column(name, justify="left" if name in ("cell", "verdict") else "right")
    colors = {"agree": "green", "differ": "red", "not settled": "yellow"}
    for row in result.rows:
        p = "" if row.p_rank is None else f"{row.p_rank:.3g}"
        out.add_row(row.summary, str(len(row.a)), str(len(row.b)), f"{row.median_a:.3g}", f"{row.median_b:.3g}",
                    row.difference.text(), p, f"[{colors[row.verdict]}]{row.verdict}[/]")
    return out


def pooled(result: Comparison) -> str | None:
    """Across the matched cells: the median of per-cell differences, how many lie above 0, and the
    Wilcoxon signed-rank p-value (whether A sits systematically above or below B); None below 6 cells."""
    diffs = np.array([r.median_a - r.median_b for r in result.rows])
    if diffs.size < 6:
        return None
    nonzero = diffs[diffs != 0]
    p = float(stats.wilcoxon(nonzero).pvalue) if nonzero.size >= 6 else 1.0
    return (f"across {diffs.size} cells: median of per-cell differences (A - B) {float(np.median(diffs)):+.3g}, "
            f"A above B in {int(np.sum(diffs > 0))}, below in {int(np.sum(diffs < 0))}; Wilcoxon signed-rank "
            f"p = {p:.3g}")


def summary_line(result: Comparison) -> str:
    counts = result.counts()
    parts = [f"{n} {v}" for v, n in counts.items()]
    extra = []
    if result.only_a:
        extra.append(f"{len(result.only_a)} only in A")
    if result.only_b:
        extra.append(f"{len(result.only_b)} only in B")
    return (f"{len(result.rows)} cells compared: {', '.join(parts)}" + (f" ({', '.join(extra)})" if extra else "")
            + f"; verdicts at tolerance ±{result.tolerance:g} of the larger median, alpha {result.alpha:g}")


def parse_ignore(values: Iterable[str]) -> tuple[str, ...]:
    ignore = tuple(dict.fromkeys(values))
    for name in ignore:
        if name not in IGNORABLE:
            raise CompareError(f"--ignore: {name[:64]!r} is not one of {', '.join(IGNORABLE)}")
    return ignore


def check_quantity(name: str) -> QuantityDef:
    if name not in QUANTITIES:
        raise CompareError(f"--quantity: {name[:64]!r} is not one of {', '.join(QUANTITIES)}")
    return QUANTITIES[name]

