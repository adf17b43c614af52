"""Figure kinds (the `figure:` field of an experiment) and the module that builds each."""

from __future__ import annotations

from collections.abc import Callable

from ccsweep.figures import (
    bufferbloat,
    capacity_share,
    cellular,
    goodput_vs_loss,
    loss_table,
    shallow_buffers,
    step_response,
)
from ccsweep.figures.published import published_section
from ccsweep.figures.section import Section
from ccsweep.figures.style import context
from ccsweep.results.data import ExperimentData

Builder = Callable[[ExperimentData], Section]

BUILDERS: dict[str, Builder] = {
    "goodput-vs-loss": goodput_vs_loss.build,
    "capacity-share-vs-loss": capacity_share.build,
    "cellular": cellular.build,
    "step-response": step_response.build,
    "bufferbloat": bufferbloat.build,
    "shallow-buffers": shallow_buffers.build,
    "loss-table": loss_table.build,
}


def build_section(data: ExperimentData) -> Section:
    """The experiment's figures and tables, in the house style; an experiment without results gets a note.

    An experiment naming `published` sets gets their figure after its own (figures.published).
    """
    if not data.results:
        return Section(notes=["No stored results yet."])
    with context():
        section = BUILDERS[data.experiment.figure](data)
        if data.experiment.published:
            beside = published_section(data)
            section.figures += beside.figures
            section.notes += beside.notes
        return section
