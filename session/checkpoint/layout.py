"""The checkpoint file's layout: where it lies, what it is keyed by, its header, its blocks.

``record.jsonl.fold`` beside a log (docs/format.md, "The fold checkpoint"; format 3, decision
0218): the line ``MAGIC``; the columns, each 8-byte aligned and digested by ``CHECK_BLOCK``
blocks; the ``Header`` (JSON) naming each column's place and digests, the ``Key`` and the fold's
scalars; the header's length (u64) and the first 8 bytes of its blake3. The file format is a
contract (existing checkpoints are read or rebuilt as they always were), so every name here is
fixed. ``Stale`` is how every reader says "this checkpoint does not describe the log".

Above only ``header`` (the file's frame, read without a decoder) in ``session.checkpoint``: it
imports nothing of the session, so the fold (``session.resume``, which keys what it folded by a
``Key``) can import it.

The block size and the size under which a log gets no checkpoint are read as
``layout.CHECK_BLOCK`` and ``layout.MIN_BYTES`` by every reader and writer, so that one setting
holds for all of them.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .header import MAGIC, SUFFIX, VERSION, Stale, path_for

CHECK_BLOCK = 1 << 20
"""Each column is digest-checked by blocks of this many bytes, each block when first used: a
``read`` of one turn checks a few blocks, not the table."""

MIN_BYTES = 1 << 20
"""Logs shorter than this get no checkpoint: their fold takes a few milliseconds, less than
writing and verifying one (and small fixtures stay as they are)."""


class Key(msgspec.Struct, array_like=True):
    """What a checkpoint covers: the log's first record, its last covered record, and the byte
    after it (the end of that record's line)."""

    first: tuple[int, int, str]
    last: tuple[int, int, str]
    end: int
    lines: int  # complete lines folded (line numbers of later refusals continue from here)


class Header(msgspec.Struct):
    version: int
    source: str
    key: Key
    arrays: dict[str, tuple[int, int, list[str]]]  # name -> (offset, bytes, blake3 per block)
    state: dict[str, Any]


__all__ = ["MAGIC", "SUFFIX", "VERSION", "CHECK_BLOCK", "MIN_BYTES", "path_for", "Key",
           "Header", "Stale"]
