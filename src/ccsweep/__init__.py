"""ccsweep: TCP congestion-control experiments over an emulated link, as batch sweeps.

`ccsweep.load(store, sweep)` returns a sweep's results as a pandas DataFrame (one row per stored
cell), `ccsweep.load_timeseries(...)` their 100 ms series and `ccsweep.read_csv(path)` a table
`ccsweep export` wrote; they need the `data` extra and are imported on first use only.
"""

from typing import Any

from ccsweep.version import __version__ as __version__

_DATAFRAME_API = ("load", "load_timeseries", "read_csv")


def __getattr__(name: str) -> Any:
    """ccsweep.load and its siblings, imported when first asked for: pandas is an extra."""
    if name in _DATAFRAME_API:
        from ccsweep import analysis

        return getattr(analysis, name)
    raise AttributeError(f"module 'ccsweep' has no attribute {name!r}")
