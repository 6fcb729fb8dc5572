"""The checkpoint file's frame, read without a decoder: its place beside the log, the magic
line, the header (JSON, digest-checked) and the key's check against the log, and ``Stale``.

Below ``layout`` (which gives the header and key their typed shapes): what only needs to know
whether a checkpoint describes its log — ``table.load`` and the quick answers from outside (``lineage.nohit``,
``session.door.quick``) — reads it here, and the latter load no msgspec. The digests come from
the native batch hasher when it is built (``session._b3many``: the same BLAKE3, without
importing the ``blake3`` package, ~5 ms of a process that answers in 30), else from ``blake3``.
The names are fixed by the file format (docs/format.md, "The fold checkpoint").
"""

from __future__ import annotations

import json
import os
import struct
TYPE_CHECKING = False  # as typing's, without importing typing

from .. import native

if TYPE_CHECKING:
    from pathlib import Path

MAGIC = b"mnemon fold checkpoint 3\n"
SUFFIX = ".fold"
VERSION = 3


class Stale(Exception):
    """The checkpoint does not describe this log (or is damaged): refold."""


def b3_8(raw) -> bytes:
    """The first 8 bytes of BLAKE3 of ``raw`` (any bytes-like object)."""
    if native.AVAILABLE:
        return bytes.fromhex(native.digest_many(raw, (0,), (len(raw),))[0])
    import blake3

    return blake3.blake3(raw).digest(length=8)


def path_for(log: Path) -> Path:
    """``agents/<id>/record.jsonl`` → ``agents/<id>/record.jsonl.fold``."""
    return log.with_name(log.name + SUFFIX)


def _where(size: int, magic: bytes, tail: bytes) -> tuple[int, int]:
    """``(where the header starts, its length)`` from the file's size, its first bytes and its
    last 16 (``Stale`` when they are not a checkpoint's)."""
    if magic != MAGIC or size < len(MAGIC) + 16:
        raise Stale("not a checkpoint")
    (hlen,) = struct.unpack_from("<Q", tail, 0)
    h0 = size - 16 - hlen
    if h0 < len(MAGIC):
        raise Stale("a damaged header")
    return h0, hlen


def _checked(raw: bytes, tail: bytes) -> bytes:
    if b3_8(raw) != tail[8:]:
        raise Stale("a damaged header")  # each column has its own digest, checked on use
    return raw


def header_bytes(mm) -> tuple[int, bytes]:
    """``(where the header starts, its bytes)`` of a checkpoint's mapped bytes ``mm``, the
    magic line and the header's own digest checked (``Stale`` otherwise)."""
    size = len(mm)
    tail = mm[size - 16:] if size >= 16 else b""
    h0, hlen = _where(size, mm[:len(MAGIC)], tail)
    return h0, _checked(mm[h0:h0 + hlen], tail)


def read_header(path: Path | str) -> dict:
    """The header of the checkpoint at ``path`` as plain JSON values, read without mapping or
    reading the columns (``Stale`` when there is none, or it is damaged, or of another
    version)."""
    return read_frame(path)[0]


def read_frame(path: Path | str) -> tuple[dict, int]:
    """``(header, where it starts)`` of the checkpoint at ``path``, as ``read_header`` reads it:
    a column lies before the header's first byte."""
    try:
        with open(path, "rb", buffering=0) as f:
            size = os.fstat(f.fileno()).st_size
            magic = f.read(len(MAGIC))
            if size >= 16:
                f.seek(size - 16)
            tail = f.read(16)
            h0, hlen = _where(size, magic, tail)
            f.seek(h0)
            raw = _checked(f.read(hlen), tail)
    except OSError:
        raise Stale("no checkpoint") from None
    except struct.error:
        raise Stale("a damaged header") from None
    try:
        head = json.loads(raw)
    except ValueError:
        raise Stale("a damaged header") from None
    if not isinstance(head, dict) or head.get("version") != VERSION:
        raise Stale("another version")
    return head, h0


def check_key(log: Path | str, first, last, end: int) -> None:
    """The first and the last covered records read back from the log and digest-checked
    (``first``/``last``: ``(offset, length, digest)``; ``end``: the byte after the last)."""
    try:
        with open(log, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < end:
                raise Stale("the log is shorter than the checkpoint")
            for off, length, dig in (first, last):
                f.seek(off)
                raw = f.read(length + 1)
                if len(raw) != length + 1 or raw[-1:] != b"\n" or \
                        b3_8(memoryview(raw)[:-1]).hex() != dig:
                    raise Stale("the log does not hold the records the checkpoint covers")
            if last[0] + last[1] + 1 != end:
                raise Stale("a damaged key")
    except OSError:
        raise Stale("the log is unreadable") from None
    except (TypeError, ValueError):
        raise Stale("a damaged key") from None


__all__ = ["MAGIC", "SUFFIX", "VERSION", "Stale", "b3_8", "path_for", "header_bytes",
           "read_header", "read_frame", "check_key"]
