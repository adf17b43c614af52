"""The sweep's HTML report: one file with its figures embedded as SVG data URIs; it links the files beside it.

It holds what a reader needs to trust or doubt a figure: the reference checks, the runs each cell
took under adaptive repetitions and why it stopped, cells whose emulator ran late, missing and
failed cells, the environment the cells ran in, and per cell its parameters, measurements and
self-check.  Everything comes from the store.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from importlib.resources import files
from itertools import chain

import jinja2
import yaml

from ccsweep.adaptive import unwanted_ids
from ccsweep.buildinfo import build_identity, source_commit
from ccsweep.checks.claims import CheckRow
from ccsweep.checks.source_claims import ALL_CLAIMS
from ccsweep.figures.cell_series import image_name
from ccsweep.figures.links import links_heading, present_links
from ccsweep.figures.section import Section
from ccsweep.result import CellResult, SelfCheck
from ccsweep.results.cliff import experiment_cliffs
from ccsweep.results.data import ExperimentData, SweepData
from ccsweep.results.points import cell_summary
from ccsweep.results.quantities import QUANTITIES
from ccsweep.stats import COLLAPSE_FRACTION, collapsed_fraction, median_ci
from ccsweep.store.base import record_key
from ccsweep.version import __version__

#: Bytes of SVG per part of a figure's data URI.
DATA_URI_PART = 48 * 1024


@dataclass
class RenderedFigure:
    """A stored figure as the report embeds it. Its SVG is held compressed and embedded a part at
    a time: a figure that draws every run of a large sweep is megabytes of SVG (10 MiB at 40,000
    cells), a third more as a data URI, and the report embeds every figure."""

    name: str
    title: str
    caption: str
    svg_compressed: bytes
    png_path: str
    svg_path: str

    @classmethod
    def of(cls, name: str, title: str, caption: str, svg: bytes, png_path: str, svg_path: str) -> RenderedFigure:
        return cls(name, title, caption, zlib.compress(svg, 6), png_path, svg_path)

    def svg_data_uri_parts(self) -> Iterator[str]:
        """The SVG as a data URI, in parts of some 64 KiB that join to the whole: the report is
        written as rendered, so no part of it holds a whole figure."""
        yield "data:image/svg+xml;base64,"
        svg = zlib.decompressobj()
        pending, rest = self.svg_compressed, b""
        while pending:
            rest += svg.decompress(pending, DATA_URI_PART)
            pending = svg.unconsumed_tail
            whole = len(rest) - len(rest) % 3  # base64 of whole 3-byte groups joins without padding
            yield base64.b64encode(rest[:whole]).decode()
            rest = rest[whole:]
        yield base64.b64encode(rest + svg.flush()).decode()


ENVIRONMENT_FIELDS = ("hostname", "kernel", "ccsweep_version", "ccsweep_commit", "python", "executor", "available_cc",
                      "tcp_rmem", "tcp_wmem", "rmem_max", "wmem_max")


def _environment_summary(results: Iterable[CellResult]) -> list[tuple[str, str, int]]:
    """(field, value, cells) for each value seen: usually one value per field. One pass: each
    record is parsed as it is reached (results.held)."""
    counts: dict[str, Counter[str]] = {field: Counter() for field in ENVIRONMENT_FIELDS}
    scales: Counter[float] = Counter()
    for result in results:
        for field, values in counts.items():
            values[_text(getattr(result.environment, field))] += 1
        scales[result.cell.params.time_scale] += 1
    rows = [(field, value, n) for field, values in counts.items() for value, n in sorted(values.items())]
    rows += [("flow time scale", f"×{scale:g} (shortened: not comparable with full-length runs)" if scale != 1
              else "×1 (full length)", n) for scale, n in sorted(scales.items())]
    return rows


@dataclass
class _TimingRow:
    """One release window and threshold's running totals: a sweep's self-checks are counted, not held."""

    cells: int = 0
    late: int = 0
    unmeasured: int = 0
    p99_low: float | None = None
    p99_high: float | None = None
    cpu_sum: float = 0.0
    cpu_count: int = 0

    def add(self, check: SelfCheck | None) -> None:
        self.cells += 1
        if check is None:
            return
        self.late += check.late is True
        self.unmeasured += check.late is None
        if check.lateness_p99_us is not None:
            p99 = check.lateness_p99_us
            self.p99_low = p99 if self.p99_low is None else min(self.p99_low, p99)
            self.p99_high = p99 if self.p99_high is None else max(self.p99_high, p99)
        if check.cpu_share is not None:
            self.cpu_sum += check.cpu_share
            self.cpu_count += 1


def _selfcheck_summary(results: Iterable[CellResult]) -> list[dict[str, object]]:
    """One row per release window and lateness threshold the stored cells ran with: how many
    cells, how many late and how many unmeasured, the range of their p99 lateness and their
    links' mean CPU share."""
    groups: dict[tuple[str, str], _TimingRow] = {}
    for result in results:
        check = result.link.selfcheck if result.link else None
        if check is None or check.lateness_p99_us is None:
            window, threshold = "lateness not measured", "–"
        elif check.lateness_from == "run-queue":
            window, threshold = "Mahimahi: run-queue delay of its shells", f"{check.threshold_us:,.0f}"
        else:
            window = (f"{check.release_window_us:,.0f}" if check.release_window_us is not None
                      else "100 (emulator default; not recorded by this version)")
            threshold = "–" if check.threshold_us is None else f"{check.threshold_us:,.0f}"
        groups.setdefault((window, threshold), _TimingRow()).add(check)
    return [{"window": window, "threshold": threshold, "cells": row.cells, "late": row.late,
             "unmeasured": row.unmeasured,
             "p99": f"{row.p99_low:,.0f}–{row.p99_high:,.0f}" if row.p99_low is not None else "–",
             "cpu_share": row.cpu_sum / row.cpu_count if row.cpu_count else None}
            for (window, threshold), row in sorted(groups.items())]


def _text(value: object) -> str:
    return " ".join(map(str, value)) if isinstance(value, list) else str(value)


def _cell_row(result: CellResult) -> dict[str, object]:
    check = result.link.selfcheck if result.link else None
    flows = result.flows
    return {
        "id": result.cell.id,
        "record": f"../../{record_key(result.cell.id)}",
        "summary": cell_summary(result.cell.params),
        "goodput": result.goodput_mbps,
        "quantities": [q.of(result) for q in QUANTITIES],
        "retransmits": sum(f.retransmits for f in flows),
        "rtt_mean": _mean([f.rtt_mean_ms for f in flows]),
        "rwnd_limited": _mean([f.rwnd_limited_fraction for f in flows]),
        "sndbuf_limited": _mean([f.sndbuf_limited_fraction for f in flows]),
        "late": result.late,
        "timing": result.timing,
        "attempt": result.attempt,
        "threshold": check.threshold_us if check else None,
        "window": check.release_window_us if check else None,
        "lateness_p99": check.lateness_p99_us if check else None,
        "cpu_share": check.cpu_share if check else None,
        "params": json.dumps(result.cell.params.model_dump(mode="json"), indent=1),
        "environment": json.dumps(result.environment.model_dump(mode="json"), indent=1),
        "started_at": result.started_at,
    }


class CellRows:
    """A section's per-cell rows, each made as the template reaches it: a sweep's rows (some 3 KiB a
    cell, with its parameters and environment as JSON) are never all held at once."""

    def __init__(self, results: Sequence[CellResult], row: Callable[[CellResult], dict[str, object]]):
        self._results = results
        self._row = row

    def __len__(self) -> int:
        return len(self._results)

    def __iter__(self) -> Iterator[dict[str, object]]:
        return map(self._row, self._results)


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def runs_rows(sweep: SweepData) -> list[dict[str, object]]:
    """Per setting of an adaptive experiment: its runs, interval, collapsed fraction, cell-seconds, why it stopped."""
    # Each stored run's wall time, not its record: the records are parsed as reached (results.held).
    stored = {r.cell.id: cell_seconds(r) for r in sweep.distinct_results()} if sweep.points else {}
    rows = []
    for point in sweep.points:
        interval = median_ci(point.values) if point.values else None
        params = point.params
        seconds = [stored[cell_id] for cell_id in point.ids if cell_id in stored]
        rows.append({
            "experiment": point.experiment,
            "summary": cell_summary(params, repetition=False),
            "runs": point.runs,
            "interval": interval.text() if interval else "–",
            "label": interval.label if interval else "no run stored",
            "relative": interval.relative_half_width * 100 if interval and interval.low is not None else None,
            "collapsed": collapsed_fraction(point.values, params.bandwidth_mbps),
            "cell_seconds": sum(s for s in seconds if s is not None) if seconds else None,
            "state": point.state,
            "reason": point.reason,
        })
    return rows


def cell_seconds(result: CellResult) -> float | None:
    """Wall time of a cell's run, start to stored result (None where the record's times do not parse)."""
    try:
        return (datetime.fromisoformat(result.finished_at) - datetime.fromisoformat(result.started_at)).total_seconds()
    except ValueError:
        return None


def render_report(sweep: SweepData, sections: list[tuple[ExperimentData, Section, list[RenderedFigure]]],
                  checks: list[CheckRow], outputs: list[str], tables: dict[str, int] | None = None,
                  links: tuple[Section, list[RenderedFigure]] | None = None,
                  series_images: set[str] | None = None) -> str:
    """The report's HTML; `tables` are the tidy CSVs written beside it (file name -> rows), linked at the top;
    `links`, the section of a sweep run on two links or more, as ccsweep-link and Mahimahi (figures.links);
    `series_images`, the cells whose small multiples (figures.cell_series) were stored beside it."""
    return "".join(report_pieces(sweep, sections, checks, outputs, tables, links, series_images))


def report_pieces(sweep: SweepData, sections: list[tuple[ExperimentData, Section, list[RenderedFigure]]],
                  checks: list[CheckRow], outputs: list[str], tables: dict[str, int] | None = None,
                  links: tuple[Section, list[RenderedFigure]] | None = None,
                  series_images: set[str] | None = None) -> Iterator[str]:
    """render_report's HTML a piece at a time, as the template reaches it: the figures step writes
    them to a file, so a large sweep's report (about 2 KiB a cell) is never held whole in memory."""
    results = sweep.distinct_results()
    late = sweep.late
    unwanted = unwanted_ids(sweep.points)
    stored = {r.cell.id for r in results}
    experiments_of: dict[str, list[str]] = {}
    for cell_id, experiment in sweep.plan:
        if cell_id not in unwanted or cell_id in stored:  # runs an adaptive rule has not asked for are not cells
            experiments_of.setdefault(cell_id, []).append(experiment)
    env = jinja2.Environment(loader=jinja2.FunctionLoader(_template), autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = lambda v, digits=3: "–" if v is None else f"{v:.{digits}g}"
    env.filters["fixed"] = lambda v, digits=0: "–" if v is None else f"{v:,.{digits}f}"
    env.filters["percent"] = lambda v: "–" if v is None else f"{v * 100:.1f} %"
    return env.get_template("report.html.j2").generate(
        sweep=sweep,
        version=__version__,
        commit=source_commit(),
        build=build_identity(),
        counts={"entries": sum(map(len, experiments_of.values())), "distinct": len(experiments_of),
                "stored": len(results),
                "missing": len(experiments_of) - len(results) - len(sweep.unplaceable),
                "failed": len(sweep.failures), "late": len(late)},
        checks=checks,
        inapplicable=[c for c in ALL_CLAIMS if c.id not in {row.claim.id for row in checks}],
        late=[{**_cell_row(r), "experiments": ", ".join(experiments_of.get(r.cell.id, []))} for r in late],
        failures=sweep.failures,
        runs=runs_rows(sweep),
        cliffs=[c for data, _, _ in sections if data.experiment.figure == "goodput-vs-loss"
                for c in experiment_cliffs(data)],
        links={"section": links[0], "figures": links[1], "heading": links_heading(present_links(sweep))}
        if links else None,
        collapse_percent=COLLAPSE_FRACTION * 100,
        environment=_environment_summary(results),
        selfchecks=_selfcheck_summary(chain(results, late)),
        sections=[{
            "data": data,
            "spec": yaml.safe_dump(data.experiment.model_dump(mode="json", exclude_defaults=True), sort_keys=False),
            "section": section,
            "figures": figures,
            "cells": CellRows(data.results, lambda r: {
                **_cell_row(r), "series": image_name(r.cell.id) if r.cell.id in (series_images or ()) else None}),
        } for data, section, figures in sections],
        outputs=outputs,
        tables=tables or {},
        quantities=QUANTITIES,
    )


def _template(name: str) -> str:
    return (files("ccsweep") / "report" / name).read_text()
