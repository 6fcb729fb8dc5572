"""The context table's turns kept as columns, a ``Turn`` made only when something touches it.

A table restored from a checkpoint, or folded structurally (loci, not contents), holds hundreds
of thousands of turns of which a handful are ever looked at: the resident ones the renderer
needs, the ones an eviction or a sweep acts on. ``Turns`` keeps every turn's fields in flat
columns (``array``/``bytearray``: a few bytes per turn, a few per record) and behaves as the
id-ordered list of ``Turn`` the fold works on: indexing a row makes its ``Turn`` once and keeps
it (``made``); from then on that object *is* the row, and the fold mutates it as it would any
turn. The columns are authoritative only for rows not made. ``spill`` folds made rows back into
the columns (a structural fold does so as it goes, so its memory is the columns, not objects).

Invariant: rows ``[0, kl)`` (``kl = len(lstart) - 1``) have their loci in the per-record
columns and rows ``[0, kt)`` (``kt = len(meta)``) their other fields in the per-turn columns;
every row past either is made (the turn in hand, rows appended since the last spill), its loci a
list that may still grow. Every row's id is in ``ids`` at once (bisections need them).
"""

from __future__ import annotations

import bisect
import itertools
from array import array
from typing import Any, Iterator

from .turn import NO_SWEEPS, ResidueEntry, Turn
from .vocab import (
    META_ORIGIN,
    META_ROLE,
    META_STATE,
    ORIGIN_OF,
    ROLE_OF,
    STATE_OF,
    loci_equal,
    meta_of,
)


class Positions:
    """``Context._by_id`` for a ``Turns`` table: id → position by bisection over the ids
    column (ids only grow), so no dict of every id is built on restore."""

    __slots__ = ("ids",)

    def __init__(self, ids: array):
        self.ids = ids

    def get(self, tid: int, default: Any = None) -> Any:
        ids = self.ids
        i = bisect.bisect_left(ids, tid)
        return i if i < len(ids) and ids[i] == tid else default

    def __getitem__(self, tid: int) -> int:
        i = self.get(tid)
        if i is None:
            raise KeyError(tid)
        return i

    def __contains__(self, tid: int) -> bool:
        return self.get(tid) is not None

    def __setitem__(self, tid: int, pos: int) -> None:
        """A no-op: ``Turns.append`` records the row's id."""


class Loci:
    """A closed turn's loci read from the per-record columns ``[a, b)`` of a ``Turns``: a
    sequence of ``(offset, length, digest)`` that builds no tuple until one is asked for (a
    made turn of a restored table holds this, not a list: its loci never change, and the
    per-record columns only ever grow past it).

    It holds the three columns, not the ``Turns``: a ``Turn`` is not tracked by the cyclic
    garbage collector, so a cycle table → made turn → its loci → table would never be freed
    (the whole table outliving its context)."""

    __slots__ = ("_off", "_len", "_dig", "_a", "_b")

    def __init__(self, turns: "Turns", a: int, b: int):
        self._off, self._len, self._dig = turns.loff, turns.llen, turns.ldig
        self._a, self._b = a, b

    def __len__(self) -> int:
        return self._b - self._a

    def __bool__(self) -> bool:
        return self._b > self._a

    def _at(self, r: int) -> tuple:
        return (self._off[r], self._len[r], self._dig[8 * r:8 * r + 8].hex())

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._at(self._a + x) for x in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._at(self._a + i)

    def __iter__(self):
        return map(self._at, range(self._a, self._b))

    def __eq__(self, other: object) -> bool:
        return loci_equal(self, other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(list(self))


class Turns:
    """The id-ordered turns of a table as columns plus the rows made so far (see the module)."""

    def __init__(self, residues: list[ResidueEntry], sources: list[str] | None = None):
        self.residues = residues  # the context's own list (append-only): ``under`` indexes it
        self.ids = array("q")
        self.weights = array("q")
        self.meta = bytearray()
        self.srcs = array("i")
        self.under = array("i")
        self.label_off = array("q", [0])
        self.labels = bytearray()
        self.lstart = array("q", [0])  # rows [0, k): where each row's loci begin
        self.loff = array("q")
        self.llen = array("q")
        self.ldig = bytearray()
        self.swept: dict[int, dict[int, str]] = {}  # rows not made: their sweeps
        self.sources: list[str] = list(sources or [])
        self._src_ix = {s: i for i, s in enumerate(self.sources)}
        self._res_ix: dict[int, int] = {}  # id(entry) -> position in residues
        self.made: dict[int, Turn] = {}
        self.base: Any = None  # the checkpoint (``Table``) restored from, if any

    # ------------------------------------------------------------------ as a list of Turn

    def __len__(self) -> int:
        return len(self.ids)

    def __bool__(self) -> bool:
        return len(self.ids) > 0

    def __getitem__(self, i):
        if type(i) is not int:
            if isinstance(i, slice):
                return [self[x] for x in range(*i.indices(len(self.ids)))]
            i = int(i)
        t = self.made.get(i)
        if t is not None:
            return t
        n = len(self.ids)
        if i < 0:
            i += n
            t = self.made.get(i)
            if t is not None:
                return t
        if not 0 <= i < n:
            raise IndexError("turn position out of range")
        t = self.made[i] = self._make(i)
        return t

    def __iter__(self) -> Iterator[Turn]:
        for i in range(len(self.ids)):
            yield self[i]

    def __reversed__(self) -> Iterator[Turn]:
        for i in range(len(self.ids) - 1, -1, -1):
            yield self[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Turns, list)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def append(self, t: Turn) -> None:
        """A new row, made (it is the turn in hand): only its id goes to the columns now, the
        rest when it is settled (``_settle``)."""
        self.made[len(self.ids)] = t
        self.ids.append(t.id)

    # ------------------------------------------------------------------ rows without a Turn

    def _src(self, source: str) -> int:
        s = self._src_ix.get(source)
        if s is None:
            s = self._src_ix[source] = len(self.sources)
            self.sources.append(source)
        return s

    def _res(self, entry: ResidueEntry | None) -> int:
        if entry is None:
            return -1
        ix = self._res_ix
        got = ix.get(id(entry))
        if got is None:
            for k in range(len(ix), len(self.residues)):
                ix[id(self.residues[k])] = k
            got = ix[id(entry)]
        return got

    def label(self, i: int) -> str:
        lo = self.label_off
        return self.labels[lo[i]:lo[i + 1]].decode("utf-8", "surrogatepass")

    def loci_of(self, i: int) -> list:
        """Row ``i``'s loci as ``(offset, length, digest)`` tuples (a row not made, ``i < k``)."""
        a, b = self.lstart[i], self.lstart[i + 1]
        off, ln, dig = self.loff, self.llen, self.ldig
        return [(off[r], ln[r], dig[8 * r:8 * r + 8].hex()) for r in range(a, b)]

    def want(self, i: int) -> tuple:
        """``(turn id, source, loci)`` of row ``i`` for the door, without making its ``Turn``."""
        t = self.made.get(i)
        if t is not None:
            return (t.id, t.source, t.loci)
        return (self.ids[i], self.sources[self.srcs[i]], self.loci_of(i))

    def origin_of(self, i: int) -> str:
        t = self.made.get(i)
        return t.origin if t is not None else ORIGIN_OF[self.meta[i]]

    def under_of(self, i: int) -> ResidueEntry | None:
        t = self.made.get(i)
        if t is not None:
            return t.under
        u = self.under[i]
        return self.residues[u] if u >= 0 else None

    def label_of(self, i: int) -> str:
        t = self.made.get(i)
        return t.label if t is not None else self.label(i)

    def weight_of(self, i: int) -> int:
        t = self.made.get(i)
        return t.bytes if t is not None else self.weights[i]

    def state_of(self, i: int) -> str:
        t = self.made.get(i)
        return t.state if t is not None else STATE_OF[self.meta[i]]

    def _make(self, i: int) -> Turn:
        m = self.meta[i]
        u = self.under[i]
        return Turn(self.ids[i], ROLE_OF[m], self.label(i), self.weights[i], STATE_OF[m],
                    self.sources[self.srcs[i]], Loci(self, self.lstart[i], self.lstart[i + 1]),
                    ORIGIN_OF[m], None,
                    dict(self.swept[i]) if i in self.swept else NO_SWEEPS,
                    self.residues[u] if u >= 0 else None)

    def positions(self, state: str) -> list[int]:
        """Positions of the rows in ``state`` (made rows as they stand), without making any."""
        want = META_STATE[state]
        meta, made = self.meta, self.made
        out = [i for i in range(len(meta)) if meta[i] & 6 == want and i not in made]
        out += [i for i, t in made.items() if t.state == state]
        out.sort()
        return out

    def count(self, *, role: str, origin: str) -> int:
        """Rows with this role and origin, from the meta column (neither ever changes)."""
        want = META_ROLE[role] | META_ORIGIN[origin]
        kt = len(self.meta)
        return sum(1 for m in self.meta if m & 9 == want) + sum(
            1 for i, t in self.made.items() if i >= kt and t.role == role and t.origin == origin)

    def first(self, state: str) -> int | None:
        """The position of the first row in ``state``, or None."""
        want = META_STATE[state]
        meta, made = self.meta, self.made
        best = None
        for i, t in made.items():
            if t.state == state and (best is None or i < best):
                best = i
        stop = len(meta) if best is None else min(best, len(meta))
        for i in range(stop):
            if meta[i] & 6 == want and i not in made:
                return i
        return best

    # ------------------------------------------------------------------ back to columns

    def _put(self, i: int, t: Turn) -> None:
        """Row ``i``'s mutable fields from its Turn into the columns."""
        self.weights[i] = t.bytes
        self.meta[i] = meta_of(t)
        self.under[i] = self._res(t.under)
        if t.swept:
            self.swept[i] = dict(t.swept)
        else:
            self.swept.pop(i, None)

    def _settle(self) -> int:
        """Give every row past the per-turn columns (rows appended since) its columns, from its
        ``Turn`` as it stands, in a few list-wide calls; the rows stay made. Returns where the
        per-turn columns ended before."""
        kt, n = len(self.meta), len(self.ids)
        if kt == n:
            return kt
        made = self.made
        rows = [made[i] for i in range(kt, n)]
        self.weights.extend([t.bytes for t in rows])
        self.meta.extend([META_ROLE[t.role] | META_STATE[t.state] | META_ORIGIN[t.origin]
                          for t in rows])
        src = self._src
        self.srcs.extend([src(t.source) for t in rows])
        res = self._res
        self.under.extend([-1 if t.under is None else res(t.under) for t in rows])
        labels = [t.label.encode("utf-8", "surrogatepass") for t in rows]
        at = len(self.labels)
        self.label_off.extend(itertools.accumulate(map(len, labels), initial=at))
        del self.label_off[-len(labels) - 1]  # ``initial`` repeats the last offset
        self.labels += b"".join(labels)
        return kt

    def _put_loci(self, rows: list[Turn]) -> None:
        """Append the loci of ``rows`` (in order) to the per-record columns."""
        loci = [t.loci for t in rows]
        flat = [x for ls in loci for x in ls]
        self.loff.extend([x[0] for x in flat])
        self.llen.extend([x[1] for x in flat])
        self.ldig += bytes.fromhex("".join([x[2] for x in flat]))
        r = self.lstart[-1]
        self.lstart.extend(itertools.accumulate(map(len, loci), initial=r))
        del self.lstart[-len(loci) - 1]

    def spill(self, keep: int | None = None) -> None:
        """Fold every made row except position ``keep`` (the turn in hand) back into the
        columns and forget its ``Turn``. Only for a structural table (no row holds records),
        and only where no one else holds a made ``Turn`` (between records of a fold)."""
        made = self.made
        if not made:
            return
        kl = len(self.lstart) - 1
        stop = len(self.ids) if keep is None else keep
        assert stop >= kl, "the turn in hand keeps its loci as a list"
        kt = self._settle()
        self._put_loci([made[i] for i in range(kl, stop)])
        for i in [i for i in made if i < stop]:
            t = made.pop(i)
            assert t.records is None, "spill is for a structural table"
            if i < kt:
                self._put(i, t)
            elif t.swept:
                self.swept[i] = dict(t.swept)

    def frozen(self) -> "Frozen":
        """Every row's columns as they stand (made rows folded in), for the checkpoint writer;
        the table itself is not changed."""
        n = len(self.ids)
        k = len(self.lstart) - 1
        self._settle()  # columns for rows appended since: stale for made rows, as any made row
        weights, meta, under = array("q", self.weights), bytearray(self.meta), \
            array("i", self.under)
        swept = dict(self.swept)
        for i, t in self.made.items():
            weights[i] = t.bytes
            meta[i] = meta_of(t)
            under[i] = self._res(t.under)
            if t.swept:
                swept[i] = dict(t.swept)
            else:
                swept.pop(i, None)
        # the rows whose loci are still lists (the turn in hand, rows folded since the last
        # spill): their loci as a tail after the columns', which are not copied
        lstart, loff, llen, ldig = array("q"), array("q"), array("q"), bytearray()
        r = len(self.loff)
        for i in range(k, n):
            for off, length, dig in self.made[i].loci:
                loff.append(off)
                llen.append(length)
                ldig += bytes.fromhex(dig)
            lstart.append(r + len(loff))
        return Frozen(self.ids, weights, meta, self.srcs, under, (self.lstart, lstart),
                      (self.loff, loff), (self.llen, llen), (self.ldig, ldig), self.label_off,
                      self.labels, swept, self.sources)

    @classmethod
    def of(cls, turns: list[Turn], residues: list[ResidueEntry]) -> "Turns":
        """A table of columns with the same rows as a list of turns, every row made (the
        list's own ``Turn`` objects: nothing is copied out of them until ``frozen``)."""
        out = cls(residues)
        for t in turns:
            out.append(t)
        return out


class Frozen:
    """A table's columns at one moment (``Turns.frozen``): what a checkpoint saves. The
    per-record columns and ``lstart`` are pairs ``(columns, tail)``: the table's own arrays
    and what the rows still holding lists add after them."""

    __slots__ = ("ids", "weights", "meta", "srcs", "under", "lstart", "loff", "llen", "ldig",
                 "label_off", "labels", "swept", "sources")

    def __init__(self, *cols):
        for name, v in zip(self.__slots__, cols):
            setattr(self, name, v)


__all__ = ["Turns", "Positions", "Frozen", "Loci"]
