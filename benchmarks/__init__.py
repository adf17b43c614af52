"""The benchmarks, one folder each (benchmarks/README.md); run from the repository root as modules."""
