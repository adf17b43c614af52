"""Stored results read back: a sweep's records per experiment, grouped into points, as tidy rows,
and the published numbers they are set beside.

Apart from `figures` because more than the figures read them: `ccsweep compare`, `ccsweep export`,
`ccsweep.analysis` and the claim checks each load results here and draw nothing, and none of them
should have to import the drawing (matplotlib, and the report's templates) to do it.
"""
