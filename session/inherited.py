"""A fork's opening, ``Inherited``, judged and installed into the table.

A mnemon child's log opens with one ``Inherited`` record: a row and a Pointer for every turn of
its parent's table, and the parent's residues (nested). Installing it puts every row in the
child's table — a resident one loaded through its pointer (or, in a structural table, left to
its loci), a departed one under the outermost residue over it — and weighs the residues from
the rows, in O((rows + residues) log residues) whatever the nesting depth. The judgement comes
first and is the same whether the record is folded whole (``Context.step``) or its rows come in
pieces (``Context.step_link``, fed by ``session.link`` for a long line).

``Linking`` is a part of ``Context`` (its base class): it works on the table's fields and
imports no module above the turn.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .errors import Refusal
from .judge import check_note
from .records import Inherited, Linked, Residue
from .turn import LABELS_LISTED, ResidueEntry, Turn

if TYPE_CHECKING:  # the table's fields, as this part uses them (session.fields)
    from .fields import TableFields as _Table
else:
    _Table = object


class _Link:
    """A link being installed (``Context._link_begin``): its residue entries, the outermost
    ones and their first ids, and over the rows appended so far the running sum of the evicted
    rows' weights (``prefix[i]``: rows before position ``i``) and the positions of the evicted
    user rows with a label."""

    __slots__ = ("entries", "outer", "firsts", "prefix", "users")

    def __init__(self, entries: list[ResidueEntry], outer: list[ResidueEntry],
                 firsts: list[int]):
        self.entries, self.outer, self.firsts = entries, outer, firsts
        self.prefix = array("q", [0])
        self.users = array("q")


class Linking(_Table):
    """The judgement and the install of a link (a base of ``Context``)."""

    def _check_inherited(self, rec: Inherited) -> None:
        covered = self._check_link_head(rec.residues)
        prev = self._check_link_rows(rec.turns, 0, covered)
        self._check_id_floor(rec.id_floor, prev)

    def _check_link_head(self, residues: list[Residue]) -> Callable[[int], bool]:
        """The judgement of a link's place and residues (before its rows): answers whether a
        turn id lies under one of the residues."""
        if self.protocol_seen:
            raise Refusal("Inherited only opens a log — it must come before every other "
                          "protocol record")
        spans = [r.span for r in residues]
        for r in residues:
            check_note(r.note)
            if r.span[0] > r.span[1]:
                raise Refusal(f"the residue {list(r.span)} runs backwards")
        # laminar: sorted by start (widest first), each span must fit inside or after the last
        # open one — O(R log R), not pairwise
        stack: list[tuple[int, int]] = []
        for a, b in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1][1] < a:
                stack.pop()
            if stack and b > stack[-1][1]:
                c, d = stack[-1]
                raise Refusal(f"the residues [{c}, {d}] and [{a}, {b}] overlap without nesting")
            stack.append((a, b))
        outer: list[tuple[int, int]] = []  # the outermost spans, disjoint, in order
        for a, b in sorted(spans, key=lambda s: (s[0], -s[1])):
            if not outer or a > outer[-1][1]:
                outer.append((a, b))
        firsts = [a for a, _ in outer]

        def covered(tid: int) -> bool:
            k = bisect.bisect_right(firsts, tid) - 1
            return k >= 0 and outer[k][1] >= tid

        return covered

    @staticmethod
    def _check_link_rows(links: list[Linked], prev: int, covered: Callable[[int], bool]) -> int:
        """The judgement of a link's rows, in order after the row with id ``prev`` (0: none);
        returns the last row's id."""
        for link in links:
            row = link.row
            if row.id <= prev:
                raise Refusal(f"inherited rows must have increasing ids: {row.id} after {prev}")
            prev = row.id
            if row.held == "evicted" and not covered(row.id):
                raise Refusal(f"inherited row {row.id} is held evicted outside every residue")
            if row.held in ("resident", "swept") and covered(row.id):
                raise Refusal(f"inherited row {row.id} is held {row.held} inside a residue")
            if row.role not in ("user", "assistant"):
                raise Refusal(f"inherited row {row.id} has role {row.role!r}")
        return prev

    @staticmethod
    def _check_id_floor(id_floor: int | None, prev: int) -> None:
        if id_floor is not None and id_floor <= prev:
            raise Refusal(f"id_floor {id_floor} is not above the inherited rows (latest {prev})")

    def _install(self, rec: Inherited) -> None:
        """Install a link: O((rows + residues) log residues), whatever the nesting depth."""
        self.edits += 1  # (``Context.edits``)
        link = self._link_begin(rec.residues)
        self._link_rows(link, rec.turns)
        self._link_end(link, rec.id_floor)

    def step_link(self, head: Inherited, pieces: Iterable[list[Linked]]) -> None:
        """``step`` of an ``Inherited`` record whose rows come in pieces: ``head`` is the record
        without its rows (``turns`` empty), ``pieces`` yields the rows in order. The same
        judgement and the same install as ``step`` of the whole record, row by row, but only
        one piece of rows is held at a time, and a structural table (``use_columns``) spills
        each piece to its columns (``session.link`` reads a long link this way).

        A refusal may come after some pieces are installed: the caller throws the table away
        (a fold stops there)."""
        if self.started is None:
            raise Refusal("a log opens with SessionStarted")
        covered = self._check_link_head(head.residues)
        if head.turns:
            raise Refusal("a link read in pieces has its rows in the pieces only")
        self.records_folded += 1
        self.protocol_seen = True
        self.edits += 1  # (``Context.edits``)
        link = self._link_begin(head.residues)
        prev = 0
        for links in pieces:
            prev = self._check_link_rows(links, prev, covered)
            self._link_rows(link, links)
            self.spill()
        self._check_id_floor(head.id_floor, prev)
        self._link_end(link, head.id_floor)

    def _link_begin(self, residues: list[Residue]) -> "_Link":
        """A link's residues as entries, nested, in the table (their weights and labels come
        with ``_link_end``, once the rows are in)."""
        entries = [ResidueEntry((r.span[0], r.span[1]), r.note, r.by, 0) for r in residues]
        # nesting (the family is laminar, ``check`` saw to it): each residue's parent is the
        # smallest one containing it; of equal spans the one listed first stays outermost
        order = sorted(range(len(entries)), key=lambda i: (entries[i].first, -entries[i].last, i))
        stack: list[ResidueEntry] = []
        for i in order:
            e = entries[i]
            while stack and stack[-1].last < e.first:
                stack.pop()
            e.parent = stack[-1] if stack and stack[-1].contains(e.span) else None
            stack.append(e)
        outer = sorted((e for e in entries if e.parent is None), key=lambda e: e.first)
        self.residues.extend(entries)
        return _Link(entries, outer, [e.first for e in outer])

    def _link_rows(self, link: "_Link", links: list[Linked]) -> None:
        """Append a link's rows (after those already appended), each under the outermost
        residue over it; keep the running sums ``_link_end`` weighs the residues with."""
        outer, outer_firsts = link.outer, link.firsts
        prefix, users = link.prefix, link.users
        total = prefix[-1]
        turns = self.turns
        by_id = self._by_id
        lazy = self.lazy
        for item in links:
            row = item.row
            at = item.at
            state = "resident" if row.held in ("resident", "swept") else row.held
            records = None
            if state == "resident" and not lazy:
                if self.loader is None:
                    raise Refusal(f"inherited row {row.id} is resident but no loader can read "
                                  f"{at.source}")
                records = self.loader(at)
            under = None
            if state != "resident":
                k = bisect.bisect_right(outer_firsts, row.id) - 1
                if k >= 0 and outer[k].last >= row.id:
                    under = outer[k]
                if state == "evicted":
                    total += row.bytes
                    if row.role == "user" and row.label:
                        users.append(len(turns))
            t = Turn(row.id, row.role, row.label, row.bytes, state, at.source,
                     [tuple(x) for x in at.loci], "inherited", records,  # type: ignore[misc]
                     dict(row.swept or []), under)
            by_id[row.id] = len(turns)
            turns.append(t)
            prefix.append(total)
            self.reach = row.id

    def _link_end(self, link: "_Link", id_floor: int | None) -> None:
        """Weights and labels of the link's residues from the running sums over the evicted
        rows (not a walk per residue); the fold's scalars after a link."""
        turns: Any = self.turns
        columns = type(turns) is not list
        ids = turns.ids if columns else [t.id for t in turns]
        prefix, users = link.prefix, link.users
        for e in link.entries:
            lo = bisect.bisect_left(ids, e.first)
            hi = bisect.bisect_right(ids, e.last)
            e.weight = prefix[hi] - prefix[lo]
            a, b = bisect.bisect_left(users, lo), bisect.bisect_left(users, hi)
            e.labels = tuple(turns.label_of(users[j]) if columns else turns[users[j]].label
                             for j in range(b - 1, max(a, b - LABELS_LISTED) - 1, -1))
        self.id_floor = id_floor if id_floor is not None else self.reach + 1
        self.in_hand = None
        self._hist = self.history_bytes_projection()


__all__ = ["Linking"]
