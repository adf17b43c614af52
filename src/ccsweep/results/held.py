"""A sweep's stored records as the figures step holds them: compressed in a temporary file, parsed when read.

The figures, tables, checks and report read every stored record of a sweep, several times over.
A parsed record is some 20 KiB of Python objects (its flows with their per-second throughput, the
link's counters and self-check, its parameters): 30,000 of them held at once were 600 MiB, past a
figures pod's limit well inside the 100,000-cell cap. So each record is read from the store once,
written compressed to a local temporary file, and parsed again each time a pass reaches it; what
stays in memory per record is where it sits in that file (16 bytes). A pass over the records
holds one parsed record at a time, plus the few last read (`RecordFile.RECENT`), which the
figures read again right away (a point's first run, a row and then its details).

`Results` is a sequence of such records, as an experiment, a point or the sweep has them: it holds
row numbers, never records, so grouping a sweep's runs into points holds no record either.
"""

from __future__ import annotations

import os
import tempfile
import zlib
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol, overload

from ccsweep.result import CellResult


class RecordSource(Protocol):
    """Anything that gives a record by its row: a RecordFile, or a list of records held in memory."""

    def __getitem__(self, row: int, /) -> CellResult: ...


class RecordFile:
    """Records appended once and parsed on each read: zlib-compressed JSON in an unnamed temporary
    file (gone when the process ends, whatever way it ends), located by two arrays of offsets."""

    #: Parsed records kept for a read that follows at once: about 20 KiB each.
    RECENT = 64

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(prefix="ccsweep-records-")
        self._starts = array("q")
        self._sizes = array("l")
        self._end = 0
        self._recent: OrderedDict[int, CellResult] = OrderedDict()

    def add(self, result: CellResult) -> int:
        """Store one record; returns its row."""
        blob = zlib.compress(result.model_dump_json().encode(), 1)
        os.pwrite(self._file.fileno(), blob, self._end)
        self._starts.append(self._end)
        self._sizes.append(len(blob))
        self._end += len(blob)
        return len(self._starts) - 1

    def __len__(self) -> int:
        return len(self._starts)

    def __getitem__(self, row: int) -> CellResult:
        recent = self._recent.get(row)
        if recent is not None:
            self._recent.move_to_end(row)
            return recent
        blob = os.pread(self._file.fileno(), self._sizes[row], self._starts[row])
        result = CellResult.model_validate_json(zlib.decompress(blob))
        self._recent[row] = result
        if len(self._recent) > self.RECENT:
            self._recent.popitem(last=False)
        return result


class Results(Sequence[CellResult]):
    """Some records of a source in a given order, each parsed as it is reached; slices and subsets
    are Results of the same source, so they hold row numbers, not records."""

    def __init__(self, source: RecordSource, rows: Iterable[int]):
        self._source = source
        self._rows = array("l", rows)

    @classmethod
    def of(cls, results: Iterable[CellResult]) -> Results:
        """Records already in memory (tests, a sweep built by hand) as Results."""
        if isinstance(results, Results):
            return results
        held = list(results)
        return cls(held, range(len(held)))

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, index: int) -> CellResult: ...

    @overload
    def __getitem__(self, index: slice) -> Results: ...

    def __getitem__(self, index: int | slice) -> CellResult | Results:
        if isinstance(index, slice):
            return Results(self._source, self._rows[index])
        return self._source[self._rows[index]]

    def __iter__(self) -> Iterator[CellResult]:
        return map(self._source.__getitem__, self._rows)

    def subset(self, positions: Iterable[int]) -> Results:
        """The records at these positions of this sequence, in the order given."""
        return Results(self._source, (self._rows[p] for p in positions))

    def __repr__(self) -> str:
        return f"Results({len(self)} records)"

