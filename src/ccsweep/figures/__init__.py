"""Figures, tables, the ReBBR CSV and the HTML report of a sweep, built from stored results only.

One module per figure kind (the `figure:` field of an experiment), registered in `registry`;
`build_sweep_outputs` is what `ccsweep figures` and `ccsweep run` call.
"""

from ccsweep.figures.build import build_sweep_outputs

__all__ = ["build_sweep_outputs"]
