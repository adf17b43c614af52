"""ccsweep: TCP congestion-control experiments over an emulated link, as batch sweeps."""

# The one place the version is written (pyproject.toml reads it): a literal, because every cell
# process imports this package and importlib.metadata costs 25 ms of start-up CPU each time.
__version__ = "0.1.0"
