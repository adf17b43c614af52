"""The package's version, on its own so that any module can read it without importing `ccsweep`'s
`__init__`, which lends `ccsweep.load` from `analysis`, a module above most of those that need the version.
"""

# The one place the version is written (pyproject.toml reads it): a literal, because every cell
# process reads it and importlib.metadata costs 25 ms of start-up CPU each time.
__version__ = "0.1.0"
