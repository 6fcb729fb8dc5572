"""Writing a checkpoint: a fold's table streamed to ``record.jsonl.fold``, column by column.

``write`` takes the table's turns as columns (``session.columns.Turns.frozen``: a table
restored from a checkpoint or folded structurally already keeps them so) and streams each column
to a temporary file, digesting it by blocks as the bytes go by, then the derived columns (each
turn's byte span, the runs of turns by source, the big blocks of resident turns, the printed
index), then the header; the file is renamed over the old checkpoint. Nothing is held twice and
a table restored from a checkpoint copies what did not change from it (decision 0219).

A directory that cannot be written is no error: the checkpoint is an optimisation. ``save`` is
what its two writers call: an agent at a clean stop (``AgentLog.checkpoint``) and the door from
outside after it had to fold (``session.checkpoint.reopening.open_table``).
"""

from __future__ import annotations

import bisect
import itertools
import operator
import os
import struct
from array import array
from pathlib import Path
from typing import TYPE_CHECKING, Any

import blake3
import msgspec

from ..blocks import turn_blocks
from ..columns import Turns
from ..constants import BLOCK_LISTED_BYTES
from ..errors import SessionError
from ..log import digest
from ..records import DECODE_ERRORS, decode, encode
from . import layout
from .layout import MAGIC, VERSION, Header, Key, path_for
from .printed import printed_rows

if TYPE_CHECKING:
    from ..context import Context
    from ..turn import Turn
    from .table import Table


def save(ctx: "Context", log: Path, key: Key, sources=None) -> Path | None:
    """Write the checkpoint of ``ctx`` (the fold of ``log`` up to ``key``) with its big blocks
    (``big_blocks``: resident turns' records read through ``sources`` when the table keeps loci
    only); None when it could not be written."""
    return write(ctx, log, key, big_blocks(ctx, sources))


def _table_of(ctx: "Context"):
    """The context's turns as columns (``session.columns.Turns``): the table itself when it
    keeps them so, else columns over its list of turns."""
    turns = ctx.turns
    return turns if isinstance(turns, Turns) else Turns.of(turns, ctx.residues)


class _Joined:
    """Two arrays read as one (a column and its tail), for the few passes made over them."""

    def __init__(self, pair):
        self.a, self.b = pair
        self.n = len(self.a)

    def __len__(self) -> int:
        return self.n + len(self.b)

    def __getitem__(self, i: int):
        return self.a[i] if i < self.n else self.b[i - self.n]

    def __iter__(self):
        yield from self.a
        yield from self.b


def _spans(lstart, loff, llen, base: "Table | None" = None) -> tuple[array, array]:
    """Each turn's byte span in its file: the first locus's offset, the last one's end. Rows
    whose loci the restored-from checkpoint ``base`` already held take its spans."""
    starts, ends = array("q"), array("q")
    m = 0
    if base is not None:  # rows before its turn in hand: their loci are the checkpoint's
        m = base.n if base.in_hand is None else bisect.bisect_left(base.ids_, base.in_hand)
        m = max(0, min(m, len(lstart) - 1))
        starts.frombytes(base._raw["starts"][:8 * m])
        ends.frombytes(base._raw["ends"][:8 * m])
    ls = [lstart[x] for x in range(m, len(lstart))]
    starts.extend([loff[x] if y > x else 0 for x, y in zip(ls, ls[1:])])
    ends.extend([loff[y - 1] + llen[y - 1] if y > x else 0 for x, y in zip(ls, ls[1:])])
    return starts, ends



def _seg(col, a: int, b: int):
    """``col[a:b]`` without a copy: a memoryview of an array, or of a column and its tail."""
    if isinstance(col, _Joined):
        n = col.n
        if b <= n:
            return memoryview(col.a)[a:b]
        if a >= n:
            return memoryview(col.b)[a - n:b - n]
        return itertools.chain(memoryview(col.a)[a:], memoryview(col.b)[:b - n])
    return memoryview(col)[a:b]


def _runs(srcs, starts, ends, lstart, loff, llen) -> list[list[int]]:
    """``[source, first, stop, spans in order, records in order]`` for each run of turns from
    one source — what the grep would otherwise work out per call."""
    out: list[list[int]] = []
    n = len(srcs)
    i = 0
    lt, le, add = operator.lt, operator.le, operator.add
    while i < n:
        j = i + 1
        while j < n and srcs[j] == srcs[i]:
            j += 1
        spans_ok = all(map(lt, _seg(lstart, i, j), _seg(lstart, i + 1, j + 1))) and \
            all(map(lt, _seg(starts, i, j), _seg(ends, i, j))) and \
            all(map(lt, _seg(ends, i, j - 1), _seg(starts, i + 1, j)))
        a, b = lstart[i], lstart[j]
        flat_ok = all(map(le, map(add, _seg(loff, a, b - 1), _seg(llen, a, b - 1)),
                          _seg(loff, a + 1, b)))
        out.append([srcs[i], i, j, int(spans_ok), int(flat_ok)])
        i = j
    return out


def _state(ctx: "Context", cols) -> dict[str, Any]:
    res_ix = {id(r): i for i, r in enumerate(ctx.residues)}
    return {
        "sources": cols.sources,
        "residues": [[r.span[0], r.span[1], r.note, r.by, r.weight, r.withdrawn, list(r.labels),
                      res_ix[id(r.parent)] if r.parent is not None else -1, r._msg_len]
                     for r in ctx.residues],
        "swept": [[i, sorted(v.items())] for i, v in sorted(cols.swept.items()) if v],
        "marks": [[k[0], k[1], v] for k, v in ctx.marks.items()],
        "pending": list(ctx.pending.items()),
        "approvals": [[encode(a).decode("utf-8") for a in entry if a is not None]
                      for entry in ctx.approvals.values()],
        "reach": ctx.reach, "id_floor": ctx.id_floor, "in_hand": ctx.in_hand,
        "started": encode(ctx.started).decode("utf-8") if ctx.started is not None else None,
        "workspace": encode(ctx.workspace).decode("utf-8") if ctx.workspace is not None
        else None,
        "ended": ctx.ended, "protocol_seen": ctx.protocol_seen,
        "last_input_tokens": ctx.last_input_tokens,
        "history_at_response": ctx.history_at_response,
        "records_folded": ctx.records_folded, "hist": ctx._hist,
    }


def big_blocks(ctx: "Context", sources) -> dict[int, list]:
    """``{turn position: [[block address, bytes], …]}`` for the resident turns of at least
    BLOCK_LISTED_BYTES with a block that large — the index's optional ``blocks``. A table that
    keeps loci only reads those turns' records through ``sources`` (one open file per source,
    in turn order, each record digest-checked); a turn whose file cannot be read lists none."""
    out: dict[int, list] = {}
    files: dict[str, Any] = {}
    turns = ctx.turns
    where = turns.positions("resident") if hasattr(turns, "positions") else range(len(turns))
    try:
        for i in where:
            w = turns.weights[i] if hasattr(turns, "weights") and i not in turns.made else None
            if w is not None and w < BLOCK_LISTED_BYTES:
                continue  # too light to list a block: no Turn made for it
            t = turns[i]
            if t.state != "resident" or t.bytes < BLOCK_LISTED_BYTES:
                continue
            recs = t.records
            if recs is None:
                recs = _read_turn(t, files, sources)
                if recs is None:
                    continue
            got = [[b.address, n] for b in turn_blocks(t.id, recs)
                   if b.index not in t.swept and (n := b.length) >= BLOCK_LISTED_BYTES]
            if got:
                out[i] = got
    finally:
        for f in files.values():
            if f is not None:
                f.close()
    return out


def _read_turn(t: "Turn", files: dict, sources) -> list | None:
    f = files.get(t.source, False)
    if f is False:
        try:
            f = files[t.source] = sources(t.source) if sources is not None else None
        except (SessionError, OSError):
            f = files[t.source] = None
    if f is None:
        return None
    recs = []
    for off, length, dig in t.loci:
        f.seek(off)
        raw = f.read(length)
        if len(raw) != length or digest(raw) != dig:
            return None
        try:
            recs.append(decode(raw))
        except DECODE_ERRORS:
            return None
    return recs


class _Column:
    """Writes one column at the file's current position, digesting it by ``CHECK_BLOCK`` blocks
    as the bytes go by (the column is never held whole)."""

    def __init__(self, f, at: int):
        self.f, self.at, self.n = f, at, 0
        self.digs: list[str] = []
        self._h = blake3.blake3()
        self._filled = 0

    def write(self, data) -> None:
        mv = memoryview(data).cast("B")
        self.f.write(mv)
        self.n += len(mv)
        while len(mv):
            take = min(len(mv), layout.CHECK_BLOCK - self._filled)
            self._h.update(mv[:take])
            self._filled += take
            mv = mv[take:]
            if self._filled == layout.CHECK_BLOCK:
                self.digs.append(self._h.digest(length=8).hex())
                self._h = blake3.blake3()
                self._filled = 0

    def close(self) -> tuple[int, int, list[str]]:
        if self._filled or not self.digs:
            self.digs.append(self._h.digest(length=8).hex())
        return self.at, self.n, self.digs


def write(ctx: "Context", log: Path, key: Key, big: dict[int, list]) -> Path | None:
    """Save the checkpoint beside ``log`` (a temporary file renamed over the old one). A
    directory that cannot be written is no error: the checkpoint is an optimisation.

    The columns are streamed to the file one after another (the printed index row by row, in
    chunks), each digested as it goes; the header follows them, so nothing is held twice."""
    table = _table_of(ctx)
    cols = table.frozen()
    base = getattr(table, "base", None)  # the checkpoint it was restored from, if still whole
    lstart, loff, llen = _Joined(cols.lstart), _Joined(cols.loff), _Joined(cols.llen)
    starts, ends = _spans(lstart, loff, llen, base)
    spans = [list(r.outermost().span) for r in ctx.residues]

    def columns():
        yield "ids", (cols.ids,)
        yield "weights", (cols.weights,)
        yield "meta", (cols.meta,)
        yield "srcs", (cols.srcs,)
        yield "under", (cols.under,)
        yield "lstart", cols.lstart
        yield "starts", (starts,)
        yield "ends", (ends,)
        yield "loff", cols.loff
        yield "llen", cols.llen
        yield "ldig", cols.ldig
        yield "label_off", (cols.label_off,)
        yield "labels", (cols.labels,)
        yield "big", (msgspec.msgpack.encode({str(k): v for k, v in big.items()}),)
        yield "runs", (msgspec.msgpack.encode(
            _runs(cols.srcs, starts, ends, lstart, loff, llen)),)
        rows = printed_rows(cols, spans, big, base)
        offs = []
        yield "index", _until_array(rows, offs)
        yield "index_off", offs

    dest = path_for(log)
    tmp = dest.with_name(f"{dest.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(MAGIC)
            at = len(MAGIC)
            arrays: dict[str, tuple[int, int, list[str]]] = {}
            for name, chunks in columns():
                pad = -at % 8
                f.write(bytes(pad))
                col = _Column(f, at + pad)
                for chunk in chunks:
                    col.write(chunk)
                arrays[name] = col.close()
                at = col.at + col.n
            head = msgspec.json.encode(Header(VERSION, ctx.source, key, arrays,
                                              _state(ctx, cols)))
            f.write(head)
            f.write(struct.pack("<Q", len(head)) + blake3.blake3(head).digest(length=8))
        os.replace(tmp, dest)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass
        return None
    return dest


def _until_array(chunks, out: list):
    """Yield the byte chunks of a generator that ends with an array; put the array in ``out``."""
    for c in chunks:
        if isinstance(c, array):
            out.append(c)
            return
        yield c



__all__ = ["save", "write", "big_blocks"]
