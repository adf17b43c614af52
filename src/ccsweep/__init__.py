"""ccsweep: TCP congestion-control experiments over an emulated link, as batch sweeps."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("ccsweep")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+source"
