"""The `link` fixture: a real ccsweep-link between two namespaces (see emulator_harness)."""

from emulator_harness import link  # noqa: F401  (registers the fixture)
