"""Unpacking gzip that cannot be made to fill memory: a step at a time, never past a bound.

Whatever is read back from a store or an API object was written by someone who may not be
ccsweep (a store is shared, a Workflow's status is anyone's who may create Workflows), and a
megabyte of gzip unpacks to a gigabyte. Every gzip ccsweep reads goes through `gunzip`.
"""

from __future__ import annotations

import zlib

#: How much is unpacked at a time.
STEP_BYTES = 1 << 20


class TooLarge(ValueError):
    """The data unpacks to more than its bound."""


class NotGzip(ValueError):
    """The data is not one whole gzip stream."""


def gunzip(data: bytes, limit: int) -> bytes:
    """The one whole gzip stream `data` unpacked, at most `limit` bytes of it: TooLarge past that,
    NotGzip for anything but one complete stream (a cut or trailing one included)."""
    unpacker = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # gzip framing
    unpacked = bytearray()
    try:
        while data and not unpacker.eof:
            unpacked += unpacker.decompress(data, STEP_BYTES)
            if len(unpacked) > limit:
                raise TooLarge(f"unpacks to more than {limit:,} bytes")
            data = unpacker.unconsumed_tail
    except zlib.error as exc:
        raise NotGzip(f"not gzip: {exc}") from exc
    if not unpacker.eof or unpacker.unused_data:
        raise NotGzip("not one whole gzip stream")
    return bytes(unpacked)
