"""What the tests and the benchmarks share: bringing up the local cluster and rendering the chart,
the host settings Mahimahi needs, the ccsweep-link/Mahimahi cross-check, a real starvation, the
density bench's cell, /proc readers, stored raw runs, a planned and stored cell and the pinned
versions.

A package at the repository root, not part of ccsweep: the wheel packages src/ and operator/ only.
pytest puts the root on sys.path (pyproject's `pythonpath`), and benches run from there as modules
(`python -m benchmarks.<name>.<module>`, what each `make bench-*` target does), so both import
`support.<module>` and neither reaches into the other's folders.
"""
