"""Batch BLAKE3 digests and line splitting for JSONL logs, native when built.

``session._b3many`` (``native/b3many.c``) hashes many short records per call across the SIMD
lanes, several times faster than one ``blake3`` call per line. It is optional: when it is not
built, or ``MNEMON_NO_NATIVE=1`` is set at import, the same functions run in pure Python with the
same results (the tests check both against each other and against ``blake3``).

A digest is the first 8 bytes of BLAKE3 as 16 lowercase hex digits, exactly
``blake3.blake3(record).digest(length=8).hex()``.
"""

from __future__ import annotations

import os
from array import array
from operator import index
TYPE_CHECKING = False  # as typing's, without importing typing
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["AVAILABLE", "digest_many", "verify_many", "split_lines", "framed", "fill", "count_literal", "find_all"]


def _ranges(buf, offsets, lengths) -> tuple[memoryview, list[int], list[int]]:
    """The byte view and the ranges, checked as the extension checks them (ValueError naming
    the record), so both paths refuse the same inputs."""
    mv = memoryview(buf).cast("B") if not isinstance(buf, (bytes, bytearray)) else memoryview(buf)
    offs, lens = [index(o) for o in offsets], [index(n) for n in lengths]
    if len(offs) != len(lens):
        raise ValueError(f"offsets has {len(offs)} items but lengths has {len(lens)}")
    size = len(mv)
    for i, (o, n) in enumerate(zip(offs, lens)):
        if n < 0:
            raise ValueError(f"record {i}: negative length {n}")
        if o < 0 or o > size or n > size - o:
            raise ValueError(f"record {i}: range [{o}, {o} + {n}) lies outside the buffer of "
                             f"{size} bytes")
    return mv, offs, lens


def py_digest_many(buf, offsets, lengths) -> list[str]:
    """Pure-Python digest_many: one blake3 call per record."""
    import blake3  # (here: with the extension built, a caller never loads the package)

    mv, offs, lens = _ranges(buf, offsets, lengths)
    b3 = blake3.blake3
    try:
        return [b3(mv[o:o + n]).digest(length=8).hex() for o, n in zip(offs, lens)]
    finally:
        mv.release()


def py_verify_many(buf, offsets, lengths, expected: Sequence[str]) -> int:
    """Pure-Python verify_many: index of the first record whose digest is not ``expected``."""
    mv, offs, lens = _ranges(buf, offsets, lengths)
    expected = list(expected)
    if len(expected) != len(offs):
        raise ValueError(f"expected has {len(expected)} items for {len(offs)} records")
    import blake3

    b3 = blake3.blake3
    try:
        for i, (o, n, want) in enumerate(zip(offs, lens, expected)):
            if b3(mv[o:o + n]).digest(length=8).hex() != want:
                return i
        return -1
    finally:
        mv.release()


def py_framed(buf, offsets, lengths) -> bool:
    """Pure-Python framed: every record is at least ``{}``, opens with ``{`` and closes with ``}``."""
    mv, offs, lens = _ranges(buf, offsets, lengths)
    try:
        return all(n >= 2 and mv[o] == 0x7B and mv[o + n - 1] == 0x7D for o, n in zip(offs, lens))
    finally:
        mv.release()


def py_fill(fd: int, dst, src, src_from: int, src_to: int, base: int
            ) -> tuple[int, int, list[tuple[int, int, str]], bool]:
    """Pure-Python fill: move the carry to the front of dst, read fd until dst is full or the
    file ends, and answer ``(filled, end, loci, framed)`` for the complete lines."""
    mv = memoryview(dst)
    try:
        carry = bytes(memoryview(src)[src_from:src_to]) if src is not None else b""
        if len(carry) > len(mv):
            raise ValueError(f"the carry [{src_from}, {src_to}) does not fit")
        mv[:len(carry)] = carry
        filled = len(carry)
        while filled < len(mv):
            got = os.readv(fd, [mv[filled:]])
            if got == 0:
                break
            filled += got
    finally:
        mv.release()
    offs, lens = py_split_lines(dst, 0, filled)
    digs = py_digest_many(dst, offs, lens)
    loci = [(base + o, n, d) for o, n, d in zip(offs, lens, digs)]
    end = offs[-1] + lens[-1] + 1 if offs else 0
    return filled, end, loci, bool(offs) and py_framed(dst, offs, lens)


def py_split_lines(buf, start: int = 0, end: int = -1) -> tuple[array, array]:
    """Pure-Python split_lines: complete lines in buf[start:end] (a torn tail is left out)."""
    data = buf if isinstance(buf, (bytes, bytearray)) else memoryview(buf).cast("B").tobytes()
    if end == -1:
        end = len(data)
    if not 0 <= start <= end <= len(data):
        raise ValueError(f"start={start}, end={end} do not lie within a buffer of {len(data)} "
                         "bytes")
    offs, lens = array("q"), array("q")
    p = start
    while (nl := data.find(b"\n", p, end)) >= 0:
        offs.append(p)
        lens.append(nl - p)
        p = nl + 1
    return offs, lens


_native = None
if os.environ.get("MNEMON_NO_NATIVE") != "1":
    try:
        from . import _b3many as _native
    except ImportError:  # not built (the extension is optional)
        _native = None

AVAILABLE: bool = _native is not None
"""True when the C extension is in use."""

if _native is not None:
    digest_many = _native.digest_many
    verify_many = _native.verify_many
    split_lines = _native.split_lines
    framed = _native.framed
    fill = _native.fill
else:
    digest_many = py_digest_many
    verify_many = py_verify_many
    split_lines = py_split_lines
    framed = py_framed
    fill = py_fill


# the grep scanners (``native/scan.c``): ``count_literal`` gives, per record, the lines of its
# searchable text that hold a literal, counted on the raw JSON, or -1 where the raw bytes may not
# map one-to-one onto the decoded text; ``find_all`` finds every start of a literal's forms in a
# window with the GIL released. No pure-Python twins: without them the door decodes every record
# or searches with ``bytes.find`` (the same answers).
count_literal = find_all = None
if os.environ.get("MNEMON_NO_NATIVE") != "1":
    try:
        from ._scan import count_literal, find_all
    except ImportError:  # not built (the extension is optional)
        count_literal = find_all = None
