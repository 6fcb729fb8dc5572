"""Reading a checkpoint: ``load`` verifies it against the log, ``Table`` is the door's table.

``load`` maps ``record.jsonl.fold`` read-only and checks that it describes the log: the header
against its own digest, its version and source, and the first and the last record it covers read
back from the log and digest-checked (``Stale`` otherwise: missing, damaged, another file's, the
log rewritten or truncated). A log that grew past the key still loads: the caller folds the tail.

``Table`` is the checkpoint mapped into memory, its columns read in place — the door's table
from outside a run: an outside ``read`` or ``index`` costs a map and a bisection, not a fold,
and memory stays flat in the log's size (the pages touched, not the table). Each column is
digest-checked by blocks when first used, so a damaged one is caught (``Stale``) before it is
believed. ``Row``, ``Loci`` and ``Wants`` are the shapes the door reads: a turn, its loci, and
every turn with the grep's fast paths.

Nothing here folds: the fold's modules are not even imported on this path.
"""

from __future__ import annotations

import mmap
import operator
import struct
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import blake3
import msgspec

from ..vocab import ORIGINS, ROLES, STATES, loci_equal
from . import layout
from .header import check_key, header_bytes
from .layout import MAGIC, VERSION, Header, Key, Stale, path_for

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
            if len(digs) != max(1, -(-n // layout.CHECK_BLOCK)):
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
                block = layout.CHECK_BLOCK
                lo, hi = (a * size) // block, ((b * size) - 1) // block
                blocks = [x for x in range(lo, hi + 1) if x in todo]
                if blocks:
                    self._check_blocks(name, blocks)

    def copy(self, name: str, into) -> None:
        """Append column ``name``'s bytes to ``into`` (an array or bytearray), checking the
        copy's blocks against their digests and dropping the mapped pages as it goes: the
        column is then in memory once, not twice."""
        raw, off = self._raw[name], len(memoryview(into).cast("B"))
        block = layout.CHECK_BLOCK
        for x in range(0, max(len(raw), 1), block):
            into.frombytes(raw[x:x + block]) if isinstance(into, array) else \
                into.extend(raw[x:x + block])
            self.let_go(name, x, x + block)
        self._check_blocks(name, sorted(self._todo[name]),
                           memoryview(into).cast("B")[off:off + len(raw)])

    def _check_blocks(self, name: str, blocks, raw=None, drop: bool = False) -> None:
        raw = self._raw[name] if raw is None else raw
        digs, todo = self._arrays[name][2], self._todo[name]
        block = layout.CHECK_BLOCK
        for x in blocks:
            got = blake3.blake3(raw[x * block:(x + 1) * block]).digest(length=8)
            if drop:
                self.let_go(name, x * block, (x + 1) * block)
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
        block = layout.CHECK_BLOCK
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
            for x in range(off[a], end, block):  # a long run a piece at a time, its
                y = min(end, x + block)         # pages dropped once it is taken
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
        h0, raw = header_bytes(mm)
        try:
            head = msgspec.json.decode(raw, type=Header)
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise Stale("a damaged header") from None
        if head.version != VERSION or head.source != source:
            raise Stale("another version or another file")
        for name, (off, n, _) in head.arrays.items():
            if off < len(MAGIC) or n < 0 or off + n > h0:
                raise Stale("a column outside the file")
        check_key(log, head.key.first, head.key.last, head.key.end)
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


__all__ = ["Table", "Row", "Loci", "Wants", "load"]
