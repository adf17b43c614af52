"""What a figure builder returns: figures, tables and notes for one experiment's report section."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

from matplotlib.figure import Figure


@dataclass
class FigureOut:
    """A figure and the file stem it is stored under (figures/<name>.png and .svg)."""

    name: str
    title: str
    figure: Figure
    caption: str = ""


@dataclass
class TableOut:
    """A table shown in the report and stored as tables/<name>.csv."""

    name: str
    title: str
    columns: list[str]
    rows: list[list[object]]

    def to_csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(self.columns)
        writer.writerows(self.rows)
        return out.getvalue()


@dataclass
class Section:
    figures: list[FigureOut] = field(default_factory=list)
    tables: list[TableOut] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
