"""The fold checkpoint: a structural fold of one log, saved beside it, derived data only.

``record.jsonl.fold`` (docs/format.md, "The fold checkpoint") holds what a lazy fold
(``Context(lazy=True)``: loci, not contents) of the log's first ``end`` bytes built, in columns:
per turn its id, weight, role/state/origin, source, residue, label and where its loci lie; per
record its locus; the residues, marks, pending calls and the fold's scalars; the big blocks of
resident turns (for the index's ``blocks``). It is never a source of truth:

* it is keyed by the log's first record and the last record it covers (offset, length, digest)
  and the byte where its coverage ends; on load both records are read back from the log and
  digest-checked, the body is checked against its own blake3 digest, and anything that does not
  match — another file, a rewritten or truncated log, a damaged checkpoint — is thrown away and
  the log refolded;
* a log appended behind its back is caught up by restoring the table and folding only the new
  lines through the same ``Context.step``; the save that follows copies what did not change
  (decision 0219);
* ``mnemon verify`` never reads it: it refolds every log.

The door opens a ``Table`` — the checkpoint mapped into memory, columns read in place — so an
outside ``read`` or ``index`` costs a map and a bisection, not a fold; memory stays flat in the
log's size (the pages touched, not the table). ``restore`` rebuilds a ``Context`` from it for a
fold that must go on (a tail appended, an agent reopened to append): its turns are columns
copied out of the map (``session.columns``, decision 0217). ``write`` streams the columns to the
file, the header last (format 3, decision 0218).
"""

from __future__ import annotations

import bisect
import mmap
import operator
import os
import struct
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import blake3
import msgspec

from typing import TYPE_CHECKING

from .constants import BLOCK_LISTED_BYTES
from .errors import SessionError
from .log import TornTail, digest, find_torn_tail
from .records import DECODE_ERRORS, decode, encode
from .turn import ORIGIN_OF, ORIGINS, ROLE_OF, ROLES, STATE_OF, STATES, loci_equal

if TYPE_CHECKING:  # the table module (and its import cost) is needed only to fold or restore
    from .context import Context, Turn

MAGIC = b"mnemon fold checkpoint 3\n"
SUFFIX = ".fold"
VERSION = 3

CHECK_BLOCK = 1 << 20
"""Each column is digest-checked by blocks of this many bytes, each block when first used: a
``read`` of one turn checks a few blocks, not the table."""

MIN_BYTES = 1 << 20
"""Logs shorter than this get no checkpoint: their fold takes a few milliseconds, less than
writing and verifying one (and small fixtures stay as they are)."""

def path_for(log: Path) -> Path:
    """``agents/<id>/record.jsonl`` → ``agents/<id>/record.jsonl.fold``."""
    return log.with_name(log.name + SUFFIX)


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


# --------------------------------------------------------------------------- writing


def _table_of(ctx: "Context"):
    """The context's turns as columns (``session.columns.Turns``): the table itself when it
    keeps them so, else columns over its list of turns."""
    from .columns import Turns

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


def _index_rows(cols, spans: list, big: dict[int, list], base: "Table | None" = None,
                chunk: int = 1 << 20):
    """The index rows as the CLI prints them (compact JSON, each followed by a comma) in
    chunks of about ``chunk`` bytes, then the array of the offset after each row — so an
    outside ``transcript index`` copies bytes instead of building 300 000 objects.

    A table restored from the checkpoint ``base`` copies the printed rows of the turns that did
    not change since (``_reusable``), rewriting in place the residue span of those whose
    outermost residue was swallowed by a newer one; only the other rows are encoded."""
    enc = msgspec.json.Encoder()
    ids, weights, meta, srcs, under, swept = cols.ids, cols.weights, cols.meta, cols.srcs, \
        cols.under, cols.swept
    sources, loff = cols.sources, cols.label_off
    blob = cols.labels
    text = blob.decode("utf-8", "surrogatepass")
    ascii_ = len(text) == len(blob)
    n = len(ids)
    plan = _reusable(cols, spans, big, base) if base is not None else None
    n0, dirty, old, old_off, reps = plan if plan is not None else (0, b"", b"", (), {})
    grow = {u: len(new) - len(was) for u, (was, new) in reps.items()}
    offs = array("q", [0])
    buf = bytearray()
    done = 0
    i = 0
    while i < n:
        if i < n0 and not dirty[i]:  # a run of unchanged rows: their printed bytes
            j = dirty.find(1, i, n0)
            j = n0 if j < 0 else j
            # at most about ``chunk`` bytes at a time (rows whole), never the run in one copy
            j = max(i + 1, min(j, bisect.bisect_right(old_off, old_off[i] + chunk, i, j + 1) - 1))
            seg = old[old_off[i]:old_off[j]]
            at = done + len(buf)
            if reps:
                seg = bytes(seg)
                for was, new in reps.values():
                    seg = seg.replace(was, new)
                for x in range(i, j):
                    at += old_off[x + 1] - old_off[x] + grow.get(under[x], 0)
                    offs.append(at)
            else:
                shift = at - old_off[i]
                offs.extend([old_off[x] + shift for x in range(i + 1, j + 1)])
            if buf:
                done += len(buf)
                yield bytes(buf)
                buf.clear()
            done += len(seg)
            yield seg
            if base is not None:  # written: its mapped pages may go (see ``_let_go``)
                base.let_go("index", old_off[i], old_off[j])
            i = j
            continue
        else:
            m = meta[i]
            st = STATE_OF[m]
            u = under[i]
            label = text[loff[i]:loff[i + 1]] if ascii_ else \
                blob[loff[i]:loff[i + 1]].decode("utf-8", "surrogatepass")
            row: dict[str, Any] = {
                "id": ids[i], "role": ROLE_OF[m], "label": label, "bytes": weights[i],
                "held": "swept" if st == "resident" and swept.get(i) else st,
                "residue": spans[u] if u >= 0 else None, "origin": ORIGIN_OF[m],
                "source": sources[srcs[i]]}
            if st == "resident" and i in big:
                row["blocks"] = [{"block": a, "bytes": b} for a, b in big[i]]
            enc.encode_into(row, buf, -1)
            buf += b","
            offs.append(done + len(buf))
            i += 1
        if len(buf) >= chunk:
            done += len(buf)
            yield bytes(buf)
            buf.clear()
    yield bytes(buf)
    yield offs


def _reusable(cols, spans: list, big: dict, base: "Table"):
    """What of ``base``'s printed index still holds: ``(n0, dirty, rows, offsets, reps)`` —
    rows ``[0, n0)`` came from it, ``dirty[i]`` marks one whose weight, state, residue, sweeps
    or listed blocks changed (or its turn in hand, which may have grown), ``reps`` the printed
    residue spans to rewrite (residue position → (old text, new text)). None when the printed
    index does not check out or the rows are not the checkpoint's."""
    try:
        old = base._col("index", "B")
        # checked block by block, each dropped once checked: read again run by run
        base._check_blocks("index", sorted(base._todo["index"]), drop=True)
        old_off = base._col("index_off", "q", True)
        base.need("ids", "weights", "meta", "under", "big")
    except (Stale, KeyError):
        return None
    n0 = min(base.n, len(cols.ids))
    if len(old_off) != base.n + 1 or \
            memoryview(cols.ids).cast("B")[:8 * n0] != base._raw["ids"][:8 * n0]:
        return None
    dirty = bytearray(n0)
    step = 512
    for name, size in (("weights", 8), ("meta", 1), ("under", 4)):
        new, was = memoryview(getattr(cols, name)).cast("B"), base._raw[name]
        for a in range(0, n0, step):
            b = min(n0, a + step)
            if new[a * size:b * size] != was[a * size:b * size]:
                for x in range(a, b):
                    if new[x * size:(x + 1) * size] != was[x * size:(x + 1) * size]:
                        dirty[x] = 1
    if base._big is None:
        base._big = {int(k): v for k, v in msgspec.msgpack.decode(base._big_raw).items()}
    for i in set(cols.swept) | set(base._swept):
        if i < n0 and cols.swept.get(i) != base._swept.get(i):
            dirty[i] = 1
    for i in set(big) | set(base._big):
        if i < n0 and big.get(i) != base._big.get(i):
            dirty[i] = 1
    if base.in_hand is not None and n0:
        dirty[n0 - 1] = 1
    reps = {}
    for u, was in enumerate(base._outer):
        if u < len(spans) and tuple(spans[u]) != tuple(was):
            reps[u] = (b'"residue":[%d,%d]' % tuple(was), b'"residue":[%d,%d]' % tuple(spans[u]))
    return n0, dirty, old, old_off, reps


def _seg(col, a: int, b: int):
    """``col[a:b]`` without a copy: a memoryview of an array, or of a column and its tail."""
    if isinstance(col, _Joined):
        n = col.n
        if b <= n:
            return memoryview(col.a)[a:b]
        if a >= n:
            return memoryview(col.b)[a - n:b - n]
        import itertools

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
        "reach": ctx.reach, "id_floor": ctx.id_floor, "in_hand": ctx.in_hand,
        "started": encode(ctx.started).decode("utf-8") if ctx.started is not None else None,
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
    from .blocks import turn_blocks

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


def _read_turn(t: Turn, files: dict, sources) -> list | None:
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
    """Writes one column at the file's current position, digesting it by CHECK_BLOCK blocks
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
            take = min(len(mv), CHECK_BLOCK - self._filled)
            self._h.update(mv[:take])
            self._filled += take
            mv = mv[take:]
            if self._filled == CHECK_BLOCK:
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
        rows = _index_rows(cols, spans, big, base)
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


# --------------------------------------------------------------------------- loading


class Stale(Exception):
    """The checkpoint does not describe this log (or is damaged): refold."""


class _Digests:
    """The per-record digests as 16-hex strings, made on demand from the raw 8 bytes."""

    def __init__(self, raw: memoryview):
        self.raw = raw

    def __len__(self) -> int:
        return len(self.raw) // 8

    def __getitem__(self, i):
        raw = self.raw
        if isinstance(i, slice):
            a, b, _ = i.indices(len(self))
            return [raw[8 * x:8 * x + 8].hex() for x in range(a, b)]
        return raw[8 * i:8 * i + 8].hex()


class Loci(tuple):
    """One turn's loci, ``(offset, length, digest)`` each, read from the columns in place.

    Made as ``Loci((table, first, stop))`` — a tuple underneath, so that answering for a table of
    300 000 turns builds them in C — but it reads as the sequence of the turn's loci."""

    __slots__ = ()

    @property
    def t(self) -> "Table":
        return tuple.__getitem__(self, 0)

    @property
    def a(self) -> int:
        return tuple.__getitem__(self, 1)

    @property
    def b(self) -> int:
        return tuple.__getitem__(self, 2)

    def __len__(self) -> int:
        return self.b - self.a

    def _checked(self) -> "Table":
        t = self.t
        if t._todo["loff"] or t._todo["llen"] or t._todo["ldig"]:
            t.need_records(self.a, self.b)
        return t

    def __bool__(self) -> bool:
        return self.b > self.a

    def count(self, value) -> int:
        return sum(1 for x in self if x == value)

    def index(self, value, *args) -> int:
        return list(self).index(value, *args)

    def __contains__(self, value) -> bool:
        return any(x == value for x in self)

    def __reversed__(self):
        return reversed(list(self))

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[x] for x in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        r = self.a + i
        t = self._checked()
        return (t.loff[r], t.llen[r], t.ldig[8 * r:8 * r + 8].hex())

    def __iter__(self):
        t = self._checked()
        for r in range(self.a, self.b):
            yield (t.loff[r], t.llen[r], t.ldig[8 * r:8 * r + 8].hex())

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __add__(self, other):
        return list(self) + list(other)

    def __eq__(self, other: object) -> bool:
        return loci_equal(self, other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(list(self))


class Row:
    """One turn of a ``Table``, with the fields of a ``Turn`` the door uses."""

    __slots__ = ("id", "role", "label", "bytes", "state", "source", "loci", "origin", "swept",
                 "residue", "big")
    records = None

    @property
    def held(self) -> str:
        return "swept" if self.state == "resident" and self.swept else self.state


class Table:
    """A checkpoint mapped into memory: the door's table from outside a run."""

    def __init__(self, path: Path, source: str, key: Key, mm: mmap.mmap, base: int,
                 arrays: dict[str, tuple[int, int, list[str]]], state: dict[str, Any]):
        self.path = path
        self.source = source
        self.key = key
        self._mm = mm
        view = memoryview(mm)
        self._view = view
        self._views: list[memoryview] = [view]
        try:
            self._columns(view, base, arrays, state)
        except BaseException:
            self.close()
            raise

    def _columns(self, view, base: int, arrays: dict, state: dict) -> None:
        self._arrays, self._base = arrays, base

        self._raw: dict[str, memoryview] = {}
        self._todo: dict[str, set[int]] = {}  # blocks of each column not yet checked

        def col(name: str, fmt: str, check: bool = False):
            off, n, digs = arrays[name]
            if fmt != "B" and (off % 8 or n % memoryview(b"").cast("B").cast(fmt).itemsize):
                raise Stale("a misaligned column")
            if len(digs) != max(1, -(-n // CHECK_BLOCK)):
                raise Stale(f"a damaged column ({name})")
            mv = view[base + off:base + off + n]
            self._views.append(mv)
            self._raw[name] = mv
            self._todo[name] = set(range(len(digs)))
            if check:
                self.need(name)
            if fmt != "B":
                mv = mv.cast(fmt)
                self._views.append(mv)
            return mv

        # checked now: what every use needs (ids, kinds, sources, where loci begin); the rest
        # block by block when first used (``need``, ``need_records``)
        self.ids_ = col("ids", "q", True)
        self.weights = col("weights", "q")
        self.meta = col("meta", "B", True)
        self.srcs = col("srcs", "i", True)
        self.under = col("under", "i")
        self.lstart = col("lstart", "q", True)
        self.starts = col("starts", "q")
        self.ends = col("ends", "q")
        self.loff = col("loff", "q")
        self.llen = col("llen", "q")
        self.ldig = col("ldig", "B")
        self.label_off = col("label_off", "q")
        self.labels = col("labels", "B")
        self._big_raw = col("big", "B")
        self._runs_raw = col("runs", "B", True)
        self._col = col  # for the columns checked only when used (the printed index)
        self.runs = msgspec.msgpack.decode(self._runs_raw)
        self._big: dict[int, list] | None = None
        self.state = state
        self.sources: list[str] = state["sources"]
        self.n = len(self.ids_)
        if not (len(self.weights) == len(self.meta) == len(self.srcs) == len(self.under) ==
                len(self.starts) == len(self.ends) == self.n and len(self.lstart) ==
                len(self.label_off) == self.n + 1 and len(self.loff) == len(self.llen) ==
                len(self.ldig) // 8 == (self.lstart[self.n] if self.n else 0)):
            raise Stale("the columns disagree")
        self._outer = _outermost(state["residues"])
        self._swept = {i: dict(items) for i, items in state["swept"]}
        self.in_hand = state["in_hand"]
        self.latest = self.ids_[self.n - 1] if self.n else None
        self.memo: dict[str, Any] = {}

    def need(self, *names: str) -> None:
        """Check whole columns against their digests (``Stale`` when one does not match)."""
        for name in names:
            todo = self._todo.get(name)
            if todo:
                self._check_blocks(name, sorted(todo))

    def need_records(self, a: int, b: int) -> None:
        """Check the blocks of the per-record columns that hold records ``[a, b)``."""
        if a >= b:
            return
        for name, size in (("loff", 8), ("llen", 8), ("ldig", 8)):
            todo = self._todo[name]
            if todo:
                lo, hi = (a * size) // CHECK_BLOCK, ((b * size) - 1) // CHECK_BLOCK
                blocks = [x for x in range(lo, hi + 1) if x in todo]
                if blocks:
                    self._check_blocks(name, blocks)

    def copy(self, name: str, into) -> None:
        """Append column ``name``'s bytes to ``into`` (an array or bytearray), checking the
        copy's blocks against their digests and dropping the mapped pages as it goes: the
        column is then in memory once, not twice."""
        raw, off = self._raw[name], len(memoryview(into).cast("B"))
        for x in range(0, max(len(raw), 1), CHECK_BLOCK):
            into.frombytes(raw[x:x + CHECK_BLOCK]) if isinstance(into, array) else \
                into.extend(raw[x:x + CHECK_BLOCK])
            self.let_go(name, x, x + CHECK_BLOCK)
        self._check_blocks(name, sorted(self._todo[name]),
                           memoryview(into).cast("B")[off:off + len(raw)])

    def _check_blocks(self, name: str, blocks, raw=None, drop: bool = False) -> None:
        raw = self._raw[name] if raw is None else raw
        digs, todo = self._arrays[name][2], self._todo[name]
        for x in blocks:
            got = blake3.blake3(raw[x * CHECK_BLOCK:(x + 1) * CHECK_BLOCK]).digest(length=8)
            if drop:
                self.let_go(name, x * CHECK_BLOCK, (x + 1) * CHECK_BLOCK)
            if got.hex() != digs[x]:
                raise Stale(f"a damaged column ({name})")
            todo.discard(x)

    def let_go(self, name: str, a: int, b: int) -> None:
        """Drop the mapped pages wholly inside bytes ``[a, b)`` of a column from this process
        (they stay in the page cache): for one pass over a column much larger than the rest."""
        advise = getattr(self._mm, "madvise", None)
        if advise is None or not hasattr(mmap, "MADV_DONTNEED"):
            return
        at = self._arrays[name][0] + self._base
        page = mmap.PAGESIZE
        lo, hi = -(-(at + a) // page) * page, (at + b) // page * page
        if hi > lo:
            try:
                advise(mmap.MADV_DONTNEED, lo, hi - lo)
            except (OSError, ValueError):
                pass

    def close(self) -> None:
        for v in reversed(self._views):
            v.release()
        self._views = []
        self._mm.close()

    # ------------------------------------------------------------------ the door's view

    def __len__(self) -> int:
        return self.n

    def ids(self):
        return self.ids_

    def label(self, i: int) -> str:
        return bytes(self.labels[self.label_off[i]:self.label_off[i + 1]]).decode(
            "utf-8", "surrogatepass")

    def turn_at(self, i: int) -> Row:
        self.need("weights", "under", "label_off", "labels", "big")
        if self._big is None:
            self._big = {int(k): v for k, v in msgspec.msgpack.decode(self._big_raw).items()}
        t = Row()
        m = self.meta[i]
        t.id = self.ids_[i]
        t.role = ROLES[m & 1]
        t.state = STATES[(m >> 1) & 3]
        t.origin = ORIGINS[(m >> 3) & 1]
        t.label = self.label(i)
        t.bytes = self.weights[i]
        t.source = self.sources[self.srcs[i]]
        t.loci = Loci((self, self.lstart[i], self.lstart[i + 1]))
        t.swept = self._swept.get(i, {})
        u = self.under[i]
        t.residue = self._outer[u] if u >= 0 else None
        t.big = self._big.get(i)
        return t

    def index_json(self, positions: Sequence[int] | None = None):
        """The index rows as the CLI's ``--json`` prints them, as byte slices of the
        checkpoint (its ``index`` column, digest-checked on first use); None when that column
        does not check out (the caller then builds the rows from the other columns)."""
        try:
            blob = self._col("index", "B")
            # checked whole before a byte is printed, each block's pages dropped once checked
            # (they stay in the page cache): the printing maps them again a piece at a time
            self._check_blocks("index", sorted(self._todo["index"]), drop=True)
            off = self._col("index_off", "q", True)
        except (Stale, KeyError):
            return None
        if len(off) != self.n + 1 or (self.n and off[self.n] != len(blob)):
            return None
        return self._index_slices(blob, off, positions)

    def _index_slices(self, blob, off, positions):
        yield b"["
        runs: list[tuple[int, int]] = []
        if positions is None:
            if self.n:
                runs.append((0, self.n))
        else:
            for i in positions:
                if runs and runs[-1][1] == i:
                    runs[-1] = (runs[-1][0], i + 1)
                else:
                    runs.append((i, i + 1))
        for k, (a, b) in enumerate(runs):
            end = off[b] - (1 if k == len(runs) - 1 else 0)  # no comma after the last row
            for x in range(off[a], end, CHECK_BLOCK):  # a long run a piece at a time, its
                y = min(end, x + CHECK_BLOCK)         # pages dropped once it is taken
                yield blob[x:y]
                self.let_go("index", x, y)
        yield b"]\n"

    def rows(self, positions: Sequence[int] | None = None, chunk: int = 8192):
        """Index rows (DESIGN.md's ``transcript index``) straight from the columns, in lists of
        at most ``chunk`` rows — the door's index from outside, in flat memory."""
        self.need("weights", "under", "label_off", "labels", "big")
        return self._rows(positions, chunk)

    def _rows(self, positions, chunk: int):
        if self._big is None:
            self._big = {int(k): v for k, v in msgspec.msgpack.decode(self._big_raw).items()}
        big = self._big
        ids, weights, meta, srcs, under = self.ids_, self.weights, self.meta, self.srcs, self.under
        sources, outer, swept = self.sources, self._outer, self._swept
        loff = self.label_off
        blob = self.labels.tobytes()
        text = blob.decode("utf-8", "surrogatepass")
        ascii_ = len(text) == len(blob)
        del blob
        held_of = [(*STATES, "?")[(m >> 1) & 3] for m in range(16)]
        role_of = [ROLES[m & 1] for m in range(16)]
        origin_of = [ORIGINS[(m >> 3) & 1] for m in range(16)]
        spans = [list(x) for x in outer]
        todo = range(self.n) if positions is None else positions
        out: list[dict] = []
        for i in todo:
            m = meta[i]
            held = held_of[m]
            if held == "resident" and i in swept and swept[i]:
                held = "swept"
            u = under[i]
            label = text[loff[i]:loff[i + 1]] if ascii_ else self.label(i)
            row = {"id": ids[i], "role": role_of[m], "label": label, "bytes": weights[i],
                   "held": held, "residue": spans[u] if u >= 0 else None,
                   "origin": origin_of[m], "source": sources[srcs[i]]}
            b = big.get(i) if big else None
            if b and held in ("resident", "swept"):
                row["blocks"] = [{"block": a, "bytes": n} for a, n in b]
            out.append(row)
            if len(out) >= chunk:
                yield out
                out = []
        if out:
            yield out

    @property
    def turns(self) -> list[Row]:
        return [self.turn_at(i) for i in range(self.n)]

    def wants(self, positions: Sequence[int] | None):
        """Owned ``(turn, source, loci)`` for the positions named (all: a view with the columns'
        fast paths for grep)."""
        if positions is None:
            return Wants(self)
        srcs, sources, lstart, ids = self.srcs, self.sources, self.lstart, self.ids_
        return [(ids[i], sources[srcs[i]], Loci((self, lstart[i], lstart[i + 1])))
                for i in positions]


def _outermost(res: list) -> list[tuple[int, int]]:
    """The outermost span over each residue, following parents (``r[7]``) once per residue:
    nested prefix cuts make chains thousands deep, so each chain is walked once and every
    residue on it takes the answer."""
    n = len(res)
    out: list[tuple[int, int] | None] = [None] * n
    for i in range(n):
        if out[i] is not None:
            continue
        chain = []
        x = i
        while out[x] is None and res[x][7] >= 0 and len(chain) <= n:
            chain.append(x)
            x = res[x][7]
            if not 0 <= x < n:
                raise Stale("a damaged residue")
        top = out[x] if out[x] is not None else (res[x][0], res[x][1])
        out[x] = top
        for y in chain:
            out[y] = top
    return out  # type: ignore[return-value]


class Wants(Sequence):
    """Every turn of a table as ``Want`` tuples made on demand, with the grep's fast paths:
    ``groups`` (positions by source), ``spans`` (each turn's byte span) and ``flat`` (every
    record's locus as flat arrays) read straight from the columns."""

    def __init__(self, t: Table):
        self.t = t

    def __len__(self) -> int:
        return self.t.n

    def __getitem__(self, i):
        t = self.t
        if isinstance(i, slice):
            return [self[x] for x in range(*i.indices(len(self)))]
        return (t.ids_[i], t.sources[t.srcs[i]], Loci((t, t.lstart[i], t.lstart[i + 1])))

    def groups(self) -> list[tuple[str, Sequence[int]]]:
        t = self.t
        runs = [(r[0], range(r[1], r[2])) for r in t.runs]
        if len({s for s, _ in runs}) == len(runs):
            return [(t.sources[s], r) for s, r in runs]
        merged: dict[int, list[int]] = {}
        for s, r in runs:
            merged.setdefault(s, []).extend(r)
        return [(t.sources[s], v) for s, v in merged.items()]

    def _run(self, idxs) -> list | None:
        if isinstance(idxs, range):
            for r in self.t.runs:
                if r[1] == idxs.start and r[2] == idxs.stop:
                    return r
        return None

    def spans(self, idxs: Sequence[int]):
        t = self.t
        t.need("starts", "ends")
        run = self._run(idxs)
        if run is not None:
            return (t.starts[idxs.start:idxs.stop], t.ends[idxs.start:idxs.stop]) if run[3] \
                else None
        if not isinstance(idxs, range):
            starts = array("q", (t.starts[i] for i in idxs))
            ends = array("q", (t.ends[i] for i in idxs))
        else:
            starts, ends = t.starts[idxs.start:idxs.stop], t.ends[idxs.start:idxs.stop]
        lst = t.lstart
        if isinstance(idxs, range):
            if any(lst[i] == lst[i + 1] for i in idxs):
                return None
        import operator

        if not all(map(operator.lt, ends[:-1], starts[1:])) or \
                not all(map(operator.lt, starts, ends)):
            return None
        return starts, ends

    def flat(self, idxs: Sequence[int]) -> tuple:
        t = self.t
        t.need("loff", "llen", "ldig")
        if not isinstance(idxs, range) or not len(idxs):
            return ()
        a, b = t.lstart[idxs.start], t.lstart[idxs.stop]
        offs, lens = t.loff, t.llen
        import operator

        run = self._run(idxs)
        if run is not None:
            return (offs, lens, _Digests(t.ldig), t.lstart[idxs.start:idxs.stop + 1]) \
                if run[4] else ()
        if not all(map(operator.le, map(operator.add, offs[a:b - 1], lens[a:b - 1]),
                       offs[a + 1:b])):
            return ()
        return offs, lens, _Digests(t.ldig), t.lstart[idxs.start:idxs.stop + 1]


def load(log: Path, source: str) -> Table:
    """The checkpoint beside ``log``, verified against the log (``Stale`` when it does not
    describe it: missing, damaged, another file's, or the log rewritten or truncated). A log
    that grew past ``key.end`` still loads: the caller folds the tail."""
    path = path_for(log)
    try:
        f = open(path, "rb")
    except OSError:
        raise Stale("no checkpoint") from None
    with f:
        try:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            raise Stale("an empty or unreadable checkpoint") from None
    try:
        if mm[:len(MAGIC)] != MAGIC or len(mm) < len(MAGIC) + 16:
            raise Stale("not a checkpoint")
        (hlen,) = struct.unpack_from("<Q", mm, len(mm) - 16)
        want = mm[len(mm) - 8:]
        h0 = len(mm) - 16 - hlen
        if h0 < len(MAGIC):
            raise Stale("a damaged header")
        if blake3.blake3(mm[h0:h0 + hlen]).digest(length=8) != want:
            raise Stale("a damaged header")  # each column has its own digest, checked on use
        try:
            head = msgspec.json.decode(mm[h0:h0 + hlen], type=Header)
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise Stale("a damaged header") from None
        if head.version != VERSION or head.source != source:
            raise Stale("another version or another file")
        for name, (off, n, _) in head.arrays.items():
            if off < len(MAGIC) or n < 0 or off + n > h0:
                raise Stale("a column outside the file")
        _check_key(log, head.key)
        try:
            return Table(path, source, head.key, mm, 0, head.arrays, head.state)
        except (KeyError, ValueError, TypeError, IndexError, AttributeError,
                msgspec.DecodeError) as e:  # a checkpoint of another layout
            raise Stale(f"a damaged checkpoint ({e})") from None
    except BaseException as e:
        if not mm.closed:
            try:
                mm.close()
            except BufferError:  # a view still held somewhere: the map goes with it
                pass
        if isinstance(e, (KeyError, ValueError, TypeError, IndexError, struct.error)):
            raise Stale("a damaged checkpoint") from None
        raise


def _check_key(log: Path, key: Key) -> None:
    """The first and the last covered records read back from the log and digest-checked."""
    try:
        with open(log, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < key.end:
                raise Stale("the log is shorter than the checkpoint")
            for off, length, dig in (key.first, key.last):
                f.seek(off)
                raw = f.read(length + 1)
                if len(raw) != length + 1 or raw[-1:] != b"\n" or digest(raw[:-1]) != dig:
                    raise Stale("the log does not hold the records the checkpoint covers")
            if key.last[0] + key.last[1] + 1 != key.end:
                raise Stale("a damaged key")
    except OSError:
        raise Stale("the log is unreadable") from None


# --------------------------------------------------------------------------- restoring


def restore(table: Table, *, loader=None) -> "Context":
    """See ``_restore``; the cyclic GC is paused meanwhile (as for a fold: many long-lived
    objects, no cycles) and what was built goes straight to the oldest generation."""
    import gc

    enabled = gc.isenabled()
    gc.disable()
    try:
        return _restore(table, loader)
    finally:
        gc.freeze()
        gc.unfreeze()
        if enabled:
            gc.enable()


def _restore(table: Table, loader) -> "Context":
    """A lazy ``Context`` (loci, not contents) equal to the fold the checkpoint saved; the
    fold goes on from it with ``Context.step``. Its turns are columns copied out of the map
    (``session.columns.Turns``: a few C-level copies, whatever the number of turns); a ``Turn``
    is made only for a row something touches. The turn in hand is made now: it may grow."""
    from .columns import Positions, Turns
    from .context import Context, ResidueEntry

    st = table.state
    ctx = Context(table.source, loader=loader, lazy=True)
    entries = [ResidueEntry((r[0], r[1]), r[2], r[3], r[4], r[5], tuple(r[6])) for r in
               st["residues"]]
    for e, r in zip(entries, st["residues"]):
        p = r[7]
        if not -1 <= p < len(entries):
            raise Stale("a damaged residue")
        e.parent = entries[p] if p >= 0 else None
        e._msg_len = r[8]
    ctx.residues = entries
    cols = Turns(entries, table.sources)
    for name in ("ids", "weights", "meta", "srcs", "under", "label_off", "labels", "lstart",
                 "loff", "llen", "ldig"):
        col = getattr(cols, name)
        del col[:]
        table.copy(name, col)
    table.need(*table._todo)
    if max(cols.meta, default=0) >= 16 or any(m & 6 == 6 for m in set(cols.meta)):
        raise Stale("a damaged meta column")
    if cols.under and not -1 <= min(cols.under) <= max(cols.under) < len(entries):
        raise Stale("a damaged under column")
    if cols.srcs and not 0 <= min(cols.srcs) <= max(cols.srcs) < len(table.sources):
        raise Stale("a damaged srcs column")
    cols.swept = {i: dict(items) for i, items in table._swept.items()}
    cols.base = table  # what a later save may copy from (its printed rows, its spans)
    ctx.turns = cols  # type: ignore[assignment]
    ctx._by_id = Positions(cols.ids)  # type: ignore[assignment]
    in_hand = st["in_hand"]
    if in_hand is not None:  # the turn in hand grows: made now, its loci a list
        k = ctx._by_id.get(in_hand)
        if k is None:
            raise Stale("a damaged turn in hand")
        t = cols[k]
        for j in range(k + 1, len(cols)):  # rows after it (none in a log we wrote): made too
            cols[j]
        for j in range(k, len(cols)):
            cols.made[j].loci = cols.loci_of(j)
        r = cols.lstart[k]
        del cols.lstart[k + 1:], cols.loff[r:], cols.llen[r:], cols.ldig[8 * r:]
        assert t.loci is cols.made[k].loci
    ctx.marks = {(k[0], k[1]): k[2] for k in st["marks"]}
    ctx.pending = dict(st["pending"])
    ctx.reach = st["reach"]
    ctx.id_floor = st["id_floor"]
    ctx.in_hand = in_hand
    started = st["started"]
    ctx.started = decode(started.encode("utf-8")) if started is not None else None
    ctx.ended = st["ended"]
    ctx.protocol_seen = st["protocol_seen"]
    ctx.last_input_tokens = st["last_input_tokens"]
    ctx.history_at_response = st["history_at_response"]
    ctx.records_folded = st["records_folded"]
    ctx._hist = st["hist"]
    return ctx


def _load_own(log: Path, source: str, turns: list) -> None:
    """Load the records of the log's own ``turns`` in one pass over one open file (in locus
    order, each record digest-checked before it is parsed), not one open per turn."""
    from .errors import LogCorrupt
    from .log import read_span

    raws = read_span(log, source, [x for t in turns for x in t.loci])
    for t in turns:
        recs = []
        for locus in t.loci:
            raw = next(raws)
            try:
                recs.append(decode(raw))
            except DECODE_ERRORS as e:
                raise LogCorrupt(source, locus[0], f"not a record ({e})") from None
        t.records = recs


def caught_up(table: Table, log: Path, *, loader=None) -> tuple["Context", Key]:
    """For an agent reopened to append: the table restored, the lines appended since folded,
    and every resident turn made and its records loaded through its loci (own turns from the
    log itself, inherited ones through ``loader``) — the table a full fold would give. The
    departed turns stay columns until something touches them."""
    ctx = restore(table, loader=with_own(log, table.source, loader))
    key = table.key
    from .resume import fold_more

    ctx, key = fold_more(log, ctx, key)
    turns = ctx.turns
    where = turns.positions("resident") if hasattr(turns, "positions") else range(len(turns))
    resident = [t for t in (turns[i] for i in where)
                if t.state == "resident" and t.records is None]
    _load_own(log, ctx.source, [t for t in resident if t.source == ctx.source])
    for t in resident:  # inherited: through the loader (digest-checked, confined)
        if t.records is None:
            if loader is None:
                from .errors import Refusal

                raise Refusal(f"inherited row {t.id} is resident but no loader can read "
                              f"{t.source}")
            t.records = loader(t.pointer)
    ctx.lazy = False
    ctx.loader = loader
    return ctx, key


def with_own(log: Path, source: str, loader):
    """A loader for a lazy fold: the log's own turns read from ``log`` itself, an ancestor's
    through ``loader`` (a fold loads a turn only for a mark or a sweep on it)."""
    from .errors import Refusal
    from .log import read_at

    def load(ptr):
        if ptr.source == source:
            return read_at(log, ptr)
        if loader is None:
            raise Refusal(f"no loader can read {ptr.source}")
        return loader(ptr)

    return load


def open_context(log: Path, source: str, *, loader=None) -> tuple["Context", TornTail | None]:
    """The whole table of a log from outside a run, every resident turn's records loaded (what
    ``mnemon context`` renders): from the checkpoint when it describes the log (caught up with
    the lines appended since), else the full fold. Any trouble on the checkpoint's path — a
    missing ancestor, a refused line — is left to the full fold to report, line and all."""
    from .resume import fold_file

    torn = find_torn_tail(log)
    size = torn.offset if torn is not None else log.stat().st_size
    if size >= MIN_BYTES:
        try:
            table = load(log, source)
        except Stale:
            table = None
        if table is not None:
            try:
                ctx, _ = caught_up(table, log, loader=loader)
                return ctx, torn
            except (SessionError, Stale):
                pass
    return fold_file(log, source, loader=loader)


# --------------------------------------------------------------------------- the outside path


def open_table(log: Path, source: str, *, loader=None, sources=None,
               display: str | None = None, save: bool = True, rebuild: bool = False) -> tuple[Table | Context, TornTail | None]:
    """The table of a log from outside a run: its checkpoint when it describes the log; caught
    up by folding the lines appended since; else a full lazy fold. A new or caught-up fold is
    saved as the checkpoint (``save``) and answered from it.

    Returns a ``Table``, or the lazy ``Context`` itself when the checkpoint cannot be written.
    Refusals of the fold (``LogRefused``) propagate, as from ``fold_file``.
    """
    torn = find_torn_tail(log)
    size = torn.offset if torn is not None else log.stat().st_size
    if size < MIN_BYTES:
        save = False
        table = None
    elif rebuild:  # a column was found damaged while in use: fold afresh
        table = None
    else:
        try:
            table = load(log, source)
        except Stale:
            table = None
    if table is not None:
        if size == table.key.end:
            return table, torn
    # the table must be folded or caught up: only now the fold's modules are loaded
    from .resume import fold_file, fold_more

    if table is not None:
        try:
            ctx = restore(table, loader=with_own(log, source, loader))
            key = table.key
        except Stale:
            table = None
    if table is not None:
        ctx, key = fold_more(log, ctx, key, display=display)
    else:
        ctx, _ = fold_file(log, source, loader=with_own(log, source, loader), display=display,
                           lazy=True)
        key = ctx.memo.pop("fold_key", None)
        if key is None:
            return ctx, torn
    if not save:
        return ctx, torn
    big = big_blocks(ctx, sources)
    if write(ctx, log, key, big) is None:
        return ctx, torn
    try:
        return load(log, source), torn
    except Stale:
        return ctx, torn


__all__ = ["Key", "Table", "Stale", "load", "write", "restore", "open_table", "path_for",
           "big_blocks", "SUFFIX"]
