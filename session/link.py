"""A long ``Inherited`` line folded in pieces: its rows decoded a piece at a time, never whole.

A mnemon child's log opens with one ``Inherited`` record holding a row and a Pointer for every
turn of its parent's table: at 1 GB of lineage one line of 80 MB and 336 000 rows. Decoded
whole it is a Python object graph of several hundred megabytes (a ``Linked``, a ``Row``, a
``Pointer``, a list and a tuple per locus, strings, for every row), alive at once while the link
is installed — and the fold's read buffer doubles until the line fits in it. A structural fold
(the one that builds the door's checkpoint) needs none of that at once: its table is columns.

``fold_link`` reads such a line straight from the file in bounded pieces:

1. the line's end and its digest (one pass, ``PIECE`` bytes at a time);
2. the record without its rows — the line's tail from the last ``],"residues":[`` (the close
   of the rows), after ``{"t":"Inherited","turns":[`` — decoded by msgspec as an ``Inherited``
   whose ``turns`` must come out empty (a tail that names ``turns`` or ``t`` again is left to
   the ordinary path: of two equal keys the last counts);
3. the rows, about ``PIECE`` bytes of them at a time: each piece is cut after a ``}`` that
   precedes ``,{"row":`` and decoded by msgspec as a JSON array of ``Linked`` (the record's
   own Struct, with its own validation), then judged and installed by ``Context.step_link`` —
   the judgement and the install of ``Context.step``, row by row — and spilled to the table's
   columns.

No JSON is parsed here: ``{"row":`` cannot occur inside a JSON string (its quote would end the
string), so every cut lies between two members of some object or array, and a cut between
members of anything but the rows array leaves a piece that is not a JSON array — msgspec
refuses it. Pieces that each decode as an array, joined by the commas they were cut at, are the
rows array itself, so the rows are exactly those of decoding the line whole.

Only the layout mnemon writes takes this path (keys in field order, no whitespace: the line
opens with ``{"t":"Inherited","turns":[`` and its rows with ``{"row":``). Anything else — another
layout, a piece that does not decode, a row or residue the fold refuses — gives the line back
to the ordinary path (``None``): the table is reset and the caller decodes the line whole, so a
refusal names the same line with the same words as before, and a foreign file folds as it
always did.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterator

import blake3
import msgspec

from .records import Inherited, Linked, Locus, decode

if TYPE_CHECKING:
    from .context import Context

OPENING = b'{"t":"Inherited","turns":['
"""How mnemon writes an ``Inherited`` line (msgspec, keys in field order): the rows first."""
CUT = b'},{"row":'
"""Between two rows (a ``Linked`` encodes ``row`` first)."""
CLOSE = b'],"residues":['
"""After the rows: the residues follow them (``id_floor`` after those)."""

PIECE = 1 << 20
"""Bytes read at a time, and about the size of the rows decoded at a time (a row longer than
this is read whole): ~5 000 rows, a few megabytes of objects."""

_rows = msgspec.json.Decoder(list[Linked])


def fold_link(ctx: "Context", fd: int, at: int, stop: int | None = None) -> Locus | None:
    """Fold the ``Inherited`` line that starts at byte ``at`` of the log open as ``fd`` into
    ``ctx`` (folded from the log's start, nothing but forensic records folded before it), its
    rows a piece at a time (see the module). Returns the line's locus, or None when the line is
    left to the ordinary path — ``ctx`` is then as it was. ``stop``: where a torn tail begins
    (never read). The file position of ``fd`` is not used."""
    if ctx.started is None or ctx.protocol_seen or ctx.turns or ctx.residues:
        return None
    end = _line_end(fd, at, stop)
    if end is None:
        return None
    length, dig = end
    saved = (ctx.reach, ctx.id_floor, ctx.in_hand, ctx._hist, ctx.records_folded)
    try:
        tail = _tail(fd, at, length)
        if tail is None:
            return None
        close, rest = tail
        if b'"turns":' in rest or b'"t":' in rest:
            return None  # a key again after the rows (the last one counts): decoded whole
        head = decode(OPENING + rest)
        if type(head) is not Inherited or head.turns:
            return None
        ctx.step_link(head, _pieces(fd, at + len(OPENING), at + close))
    except Exception:  # left to the ordinary path, which refuses or folds it as always
        _reset(ctx, saved)
        return None
    return (at, length, dig)


def _reset(ctx: "Context", saved: tuple) -> None:
    """``ctx`` as before the link (an empty table: only forensic records were folded)."""
    ctx.residues.clear()
    columns = type(ctx.turns) is not list
    ctx.turns = []
    ctx._by_id = {}
    if columns:
        ctx.use_columns()
    ctx.reach, ctx.id_floor, ctx.in_hand, ctx._hist, ctx.records_folded = saved
    ctx.protocol_seen = False


def _line_end(fd: int, at: int, stop: int | None) -> tuple[int, str] | None:
    """The length of the line at ``at`` (without its newline) and its digest; None when it
    has no newline before the end of the file or ``stop``."""
    h = blake3.blake3()
    pos = at
    while True:
        want = PIECE if stop is None else min(PIECE, stop - pos)
        if want <= 0:
            return None
        data = os.pread(fd, want, pos)
        if not data:
            return None
        nl = data.find(b"\n")
        if nl >= 0:
            h.update(memoryview(data)[:nl])
            return pos + nl - at, h.digest(length=8).hex()
        h.update(data)
        pos += len(data)


def _tail(fd: int, at: int, length: int) -> tuple[int, bytes] | None:
    """Where the rows array closes (its ``]``, from the line's start) and the line from there
    on: the last ``CLOSE`` of the line (residue notes are strings, where it cannot occur)."""
    size = min(length, PIECE)
    while True:
        data = os.pread(fd, size, at + length - size)
        if len(data) != size:
            return None
        k = data.rfind(CLOSE)
        if k >= 0:
            close = length - size + k
            return (close, data[k:]) if close >= len(OPENING) else None
        if size == length:
            return None
        size = min(length, 4 * size)


def _pieces(fd: int, a: int, b: int) -> Iterator[list[Linked]]:
    """The rows in bytes ``[a, b)`` of the file (the inside of the rows array), decoded about
    ``PIECE`` bytes at a time; a piece that does not decode raises (``msgspec.DecodeError``)."""
    buf = bytearray()
    pos = a
    while pos < b:
        data = os.pread(fd, min(PIECE, b - pos), pos)
        if not data:
            raise EOFError("the log ended inside a link")
        seen = max(0, len(buf) - len(CUT) + 1)  # no cut before: the carry has none
        buf += data
        pos += len(data)
        if pos >= b:
            break
        k = buf.rfind(CUT, seen)
        if k < 0:
            continue  # a row longer than a piece: read on
        yield _rows.decode(b"[" + buf[:k + 1] + b"]")
        del buf[:k + 2]  # the carry opens with the next row's ``{"row":``
    if buf:
        yield _rows.decode(b"[" + buf + b"]")


__all__ = ["fold_link", "OPENING", "PIECE"]
