"""build_sweep_outputs: a sweep's figures, tables, ReBBR CSVs, tidy CSVs and report, written back to its store.

Outputs go under sweeps/<sweep>/ through the store's put_sweep_file, so the same call works for a
local folder and for S3 (the Argo figures step).  They are derived data: rebuilt and replaced
whenever asked, from stored results only.
"""

from __future__ import annotations

import io
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TextIO

from ccsweep.checks.claims import run_checks
from ccsweep.checks.source_claims import ALL_CLAIMS
from ccsweep.figures.cell_series import cell_png, image_name
from ccsweep.figures.links import links_section
from ccsweep.figures.registry import build_section
from ccsweep.figures.report import RenderedFigure, report_pieces
from ccsweep.figures.section import Section
from ccsweep.figures.style import render
from ccsweep.result import CellResult
from ccsweep.results import rebbr_csv, tidy
from ccsweep.results.data import load_sweep
from ccsweep.store import REPORT_FILE, ResultStore

CELLS_CSV = "cells.csv"
FLOWS_CSV = "flows.csv"


def build_sweep_outputs(store: ResultStore, sweep: str) -> list[str]:
    """Build and store everything for `sweep`; return where each file was written (report last)."""
    data = load_sweep(store, sweep)
    written: dict[str, str] = {}

    def put(name: str, blob: bytes) -> None:
        written[name] = store.put_sweep_file(sweep, name, blob)

    @contextmanager
    def put_text(name: str) -> Iterator[TextIO]:
        """A text file written to a temporary file and sent from there as the block ends: a
        sweep's CSVs and report (some KiB a cell) are never held whole."""
        with tempfile.TemporaryFile() as handle:
            text = io.TextIOWrapper(handle, encoding="utf-8", newline="")
            yield text
            text.flush()
            handle.seek(0)
            written[name] = store.put_sweep_stream(sweep, name, handle)
            text.detach()  # the temporary file closes it

    def store_section(section: Section, results: Sequence[CellResult]) -> list[RenderedFigure]:
        """Render and store a section's figures (stamped with the kernels they were made on) and tables."""
        figures = []
        kernels = ", ".join(sorted({r.environment.kernel for r in results})) or "none (no results)"
        scaled = sorted({r.cell.params.time_scale for r in results if r.cell.params.time_scale != 1})
        stamp = f"kernel {kernels}" + (f"; flow times scaled ×{', '.join(f'{s:g}' for s in scaled)}" if scaled else "")
        for fig in section.figures:
            fig.figure.text(0.995, 0.005, stamp, ha="right", va="bottom", fontsize=6, color="0.45")
            images = render(fig.figure)
            for fmt, blob in images.items():
                put(f"figures/{fig.name}.{fmt}", blob)
            figures.append(RenderedFigure.of(fig.name, fig.title, fig.caption, images["svg"],
                                          f"figures/{fig.name}.png", f"figures/{fig.name}.svg"))
            del images, blob
            fig.figure.clear()  # its artists now, not when the cycle collector gets to the figure
        # Stored and embedded from `figures`: a section's drawn figures (every point of thousands of
        # settings) are not held through the rest of the sections, the CSVs, the checks and the report.
        section.figures.clear()
        for table in section.tables:
            put(f"tables/{table.name}.csv", table.to_csv().encode())
        return figures

    sections = []
    for exp in data.experiments:
        section = build_section(exp)
        sections.append((exp, section, store_section(section, exp.results)))
        if exp.results:
            with put_text(f"rebbr/{exp.name}.csv") as out:
                rebbr_csv.write_rows(out, rebbr_csv.each_row(exp.results))
    with put_text("rebbr.csv") as out:
        rebbr_csv.write_rows(out, rebbr_csv.each_row(data.distinct_results()))
    # Each cell's series as small multiples, linked from its row of the report.
    series_images: set[str] = set()
    for exp in data.experiments:  # through each experiment's cache: the figures read most series already
        for result in exp.results:
            if result.cell.id in series_images:
                continue
            series = exp.timeseries(result.cell.id)
            image = cell_png(result, series) if series is not None else None
            if image is not None:
                put(image_name(result.cell.id), image)
                series_images.add(result.cell.id)
    # The tidy tables `ccsweep export` writes, beside the report: record links relative to it.
    with put_text(FLOWS_CSV) as flows_text, put_text(CELLS_CSV) as cells_text:  # sent in reverse: cells first
        cells, flows = tidy.tables_csv(data, lambda key: f"../../{key}", tidy.CsvText(cells_text),
                                       tidy.CsvText(flows_text))
    both = links_section(data)
    links = (both, store_section(both, data.distinct_results())) if both else None
    tables = {CELLS_CSV: cells.rows, FLOWS_CSV: flows.rows}
    outputs = [*written, REPORT_FILE]
    with put_text(REPORT_FILE) as html:  # written as rendered
        html.writelines(report_pieces(data, sections, run_checks(data, ALL_CLAIMS), outputs=outputs, tables=tables,
                                      links=links, series_images=series_images))
    return list(written.values())
