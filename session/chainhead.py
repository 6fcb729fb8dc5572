"""A log's chain head from its bytes alone: the one pass of BLAKE3 that checks a whole chain.

Why a module of its own: ``mnemon verify --head`` is a command people run on large logs to keep
each head elsewhere, and its answer is one pass of BLAKE3 over each file — tens of milliseconds
for 300 MB — while the full CLI's imports (argparse, msgspec, the record Structs) cost more than
that on a slow machine. This module needs only ``os``, ``re``, ``mmap`` and ``blake3``, so the
quick path (``orchestrator.cli.quick``) answers from it; ``session.chain`` builds its ``check``
on the same functions, so both read a chain the same way (docs/format.md, "The chain"; decision
0422). A broken chain is not this module's: ``examine`` says so and ``chain.walk`` names the line.
"""

from __future__ import annotations

import mmap
import os
import re

import blake3

VERSION = 1
SUFFIX = re.compile(rb',"c":\[([1-9][0-9]{0,15}),"([0-9a-f]{16})"\]\}\Z')
"""A chained line's end; matched against its last ``TAIL`` bytes only (bounded: a line may be
megabytes)."""
TAIL = 64
HEX_FROM_END = 19
"""``h``'s first digit is this many bytes before the end of its line (16 digits and ``"]}``),
the newline not counted."""
VERSIONED = re.compile(rb',"chain":([0-9]{1,6}),"c":\[1,"[0-9a-f]{16}"\]\}\Z')
BLOCK = 16 << 20
"""Bytes counted for newlines at a time (an unchained log's line count)."""


def line_suffix(fd: int, end: int, start: int) -> bytes:
    """The last ``TAIL`` bytes of the line ``[start, end)`` (no newline)."""
    k = max(start, end - TAIL)
    return os.pread(fd, end - k, k)


def first_line_end(fd: int, stop: int) -> int:
    """The offset of the first newline (the file holds one before ``stop``)."""
    pos = 0
    while pos < stop:
        data = os.pread(fd, min(1 << 16, stop - pos), pos)
        nl = data.find(b"\n")
        if nl >= 0:
            return pos + nl
        pos += len(data)
    return stop


def last_line_start(fd: int, end: int) -> int:
    """The offset where the line ending at ``end`` (its newline at ``end``) starts."""
    pos = end
    while pos > 0:
        k = max(0, pos - (1 << 16))
        data = os.pread(fd, pos - k, k)
        nl = data.rfind(b"\n")
        if nl >= 0:
            return k + nl + 1
        pos = k
    return 0


def complete(fd: int) -> int:
    """The bytes of the file's complete lines: up to and including its last newline (a torn
    tail, bytes after it, is not read, nor counted — as ``log.find_torn_tail`` finds it)."""
    size = os.fstat(fd).st_size
    return last_line_start(fd, size) if size else 0


def feed(fd: int, upto: int, marks: list[int], h, at: dict[int, str],
         count: bool = False) -> int:
    """Feed bytes ``[0, upto)`` to ``h`` — mapped, in as few calls as the marks allow, so that
    BLAKE3 uses all its SIMD lanes and threads — noting the digest at each mark (sorted);
    return the newlines seen when ``count`` (else 0)."""
    marks = [m for m in marks if m <= upto]
    if upto <= 0:
        for m in marks:
            at[m] = h.digest().hex()
        return 0
    lines = 0
    with mmap.mmap(fd, upto, prot=mmap.PROT_READ) as mm, memoryview(mm) as mv:
        pos = 0
        for stop in [*marks, upto]:
            while pos < stop:
                step = min(stop, pos + BLOCK) if count else stop
                h.update(mv[pos:step])
                if count:
                    lines += mm[pos:step].count(b"\n")
                pos = step
            if stop in marks:
                at[stop] = h.digest().hex()
    return lines


def parse(tail: bytes) -> tuple[int, str] | None:
    """``(n, h)`` of a chained line's key, from the line's last ``TAIL`` bytes."""
    m = SUFFIX.search(tail)
    return (int(m[1]), m[2].decode()) if m else None


def prefix(fd: int, mark: int) -> str:
    """BLAKE3 of the file's first ``mark`` bytes."""
    h = blake3.blake3(max_threads=blake3.blake3.AUTO)
    feed(fd, mark, [], h, {})
    return h.digest().hex()


def examine(fd: int, end: int, want: list[int], h) -> tuple[int | None, int, str,
                                                             dict[int, str]] | None:
    """``(version, lines, head, at)`` of the log's first ``end`` bytes (its complete lines),
    hashed into ``h``: ``version`` None for an unchained log, the chain's version otherwise;
    ``at`` BLAKE3 of the first B bytes for each mark B in ``want`` (sorted, each ≤ ``end``).

    A log of this chain version is checked whole in one pass: the last line's key covers
    every byte before it, so when it holds, so does every line's (``h`` then ends in the
    state after the last byte — the writer goes on from it). None when the chain is of this
    version and does not hold: it must be walked line by line (``chain.walk``). A log of
    another version, or with chain keys but no version, is hashed and counted, not checked."""
    at: dict[int, str] = {}
    nl1 = first_line_end(fd, end) if end else 0
    first = line_suffix(fd, nl1, 0) if end else b""
    m = VERSIONED.search(first)
    version = int(m[1]) if m is not None else None
    if version is None and end and (SUFFIX.search(first) or SUFFIX.search(
            line_suffix(fd, end - 1, last_line_start(fd, end - 1)))):
        version = VERSION  # chain keys, but the first line says no version: walked
    if version is None or version != VERSION:
        lines = feed(fd, end, want, h, at, count=True)
        head = h.digest().hex()
        at.update({x: head for x in want if x == end})
        return version, lines, head, at
    parsed = parse(line_suffix(fd, end - 1, last_line_start(fd, end - 1)))
    if parsed is None:
        return None
    n, hx = parsed
    hexpos = end - 1 - HEX_FROM_END
    feed(fd, hexpos, [x for x in want if x <= hexpos], h, at)
    # (the line count is not checked: the digest covers every number before it)
    if h.digest(length=8).hex() != hx:
        return None
    h.update(os.pread(fd, end - hexpos, hexpos))
    head = h.digest().hex()
    for x in want:  # a kept head is at a line's end: only ``end`` is left
        if x > hexpos:
            at[x] = head if x == end else prefix(fd, x)
    return VERSION, n, head, at


def run_head(heads) -> str:
    """One digest over a run: BLAKE3 over ``mnemon run heads 1\\n`` and one line
    ``<path> <bytes> <head>\\n`` per log (``(path, bytes, head)`` triples), sorted by path."""
    h = blake3.blake3(b"mnemon run heads 1\n")
    for path, size, head in sorted(heads):
        h.update(f"{path} {size} {head}\n".encode())
    return h.digest().hex()


__all__ = ["VERSION", "SUFFIX", "TAIL", "HEX_FROM_END", "VERSIONED", "examine",
           "complete", "feed", "parse", "prefix", "run_head"]
