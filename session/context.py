"""The context table and its one fold, ``Context.step``.

One structure: ``turns`` holds every turn this lineage recorded, in id order, each *Here* (its
records in memory) or *There* (a Pointer and a departure). Residues nest by containment.
Everything else — the frontier, history bytes, rendering, the index, the eviction plan — is a
projection computed on call.

``step(record, locus)`` judges a record (``check``) and then applies it (``apply``): the live
agent and a resume run exactly this code, so a replayed file gives the live table.
"""

from __future__ import annotations

import bisect
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import msgspec

from .constants import NOTE_MAX_BYTES, OPENING_CHARS
from .errors import Refusal
from .records import (
    FORENSIC,
    AssistantMessage,
    Cleared,
    Evicted,
    Inherited,
    Linked,
    Locus,
    Marked,
    Opaque,
    Pointer,
    Record,
    Residue,
    Rewound,
    SessionEnded,
    SessionStarted,
    Steering,
    Swept,
    Text,
    Thinking,
    ToolResults,
    ToolUse,
    Usage,
    UserPrompt,
    compact,
    encode,
)

Loader = Callable[[Pointer], list[Record]]
"""Loads an inherited turn's records through its Pointer (digest-checked)."""


def clip_label(text: str) -> str:
    """A turn's label: its opening text on one line, clipped to OPENING_CHARS characters."""
    return text[:OPENING_CHARS].replace("\r", " ").replace("\n", " ")


def check_note(note: str | None) -> None:
    if note is None:
        return
    size = len(note.encode("utf-8"))
    if size > NOTE_MAX_BYTES:
        raise Refusal(f"a note is at most {NOTE_MAX_BYTES} bytes — this one has {size}")
    for ch in note:
        if ch in "\n\r\u2028\u2029" or unicodedata.category(ch) == "Cc":
            raise Refusal("a note is one line of printable text — it may not contain a line "
                          f"break or control character ({ch!r})")


_NO_SWEEPS: Any = MappingProxyType({})
"""A turn's sweeps until its first one: shared and read-only, so opening a turn allocates no dict
(a sweep gives the turn a dict of its own)."""


class Turn(msgspec.Struct, gc=False, eq=False, repr_omit_defaults=True):
    """One turn of the table. A msgspec Struct: made once per turn by every resume, its
    constructor is native; it holds no reference cycle, so the cyclic GC never scans it."""

    id: int
    role: str  # "user" | "assistant"
    label: str
    bytes: int
    state: str  # "resident" | "evicted" | "withdrawn"
    source: str  # the log file (relative to the run root) that first recorded it
    loci: list[Locus]
    origin: str = "own"  # "own" | "inherited"
    records: list[Record] | None = None  # Here when not None
    swept: dict[int, str] = _NO_SWEEPS  # block index -> replacement
    under: "ResidueEntry | None" = None  # the residue that took it (nesting resolved on read)

    @property
    def residue(self) -> tuple[int, int] | None:
        """The outermost residue over it (kept when it is withdrawn later), or None."""
        return None if self.under is None else self.under.outermost().span

    @property
    def held(self) -> str:
        if self.state == "resident" and self.swept:
            return "swept"
        return self.state

    @property
    def pointer(self) -> Pointer:
        return Pointer(self.source, list(self.loci))

    @property
    def here(self) -> bool:
        return self.records is not None

    def _key(self) -> tuple:
        return (self.id, self.role, self.label, self.bytes, self.state, self.source, self.loci,
                self.origin, self.records, self.swept, self.residue)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Turn) and self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]


@dataclass(slots=True)
class ResidueEntry:
    span: tuple[int, int]
    note: str | None
    by: str
    weight: int  # bytes of the turns under it when they left (nested included, withdrawn not)
    withdrawn: bool = False
    labels: tuple[str, ...] = ()  # labels of the user turns it covers, newest first, at most 3
    parent: "ResidueEntry | None" = field(default=None, compare=False, repr=False)
    _msg_len: int | None = field(default=None, compare=False, repr=False)

    @property
    def first(self) -> int:
        return self.span[0]

    @property
    def last(self) -> int:
        return self.span[1]

    @property
    def outer(self) -> bool:
        """Not swallowed by a later residue."""
        return self.parent is None

    def outermost(self) -> "ResidueEntry":
        root = self
        while root.parent is not None:
            root = root.parent
        node = self
        while node.parent is not None and node.parent is not root:  # path compression
            node.parent, node = root, node.parent
        return root

    def contains(self, other: tuple[int, int]) -> bool:
        return self.span[0] <= other[0] and other[1] <= self.span[1]

    def as_record(self) -> Residue:
        return Residue(span=self.span, note=self.note, by=self.by)  # type: ignore[arg-type]


LABELS_LISTED = 3


def newest_labels(items: "Iterator[Turn | ResidueEntry] | list[Turn | ResidueEntry]") -> tuple[str, ...]:
    """Labels of the user turns among items (in id order), newest first, at most 3."""
    out: list[str] = []
    for it in reversed(list(items)):
        if isinstance(it, Turn):
            if it.role == "user" and it.label and it.state != "withdrawn":
                out.append(it.label)
        else:
            out.extend(it.labels)
        if len(out) >= LABELS_LISTED:
            break
    return tuple(out[:LABELS_LISTED])


FrontierItem = "Turn | ResidueEntry"


# --------------------------------------------------------------------------- blocks


@dataclass(frozen=True)
class BlockRef:
    """One content block inside a turn, addressed ``turn.index`` in render order."""

    turn: int
    index: int
    kind: str  # text | thinking | tool_use | opaque | tool_result | prompt | steering
    value: Any  # the Block, ToolResult, or Steering/UserPrompt record

    @property
    def address(self) -> str:
        return f"{self.turn}.{self.index}"

    @property
    def text(self) -> str:
        """The block's text as the door searches and measures it."""
        v = self.value
        if self.kind in ("text", "thinking", "prompt", "steering"):
            return v.text
        if self.kind == "tool_result":
            return v.content
        if self.kind == "tool_use":
            return compact(v.input).decode("utf-8")
        return compact(v.block).decode("utf-8")

    @property
    def length(self) -> int:
        return len(self.text.encode("utf-8"))


def turn_blocks(turn_id: int, records: list[Record]) -> list[BlockRef]:
    """A turn's blocks in render order: message blocks, tool results, then steering."""
    head: list[BlockRef] = []
    results: list[Any] = []
    steering: list[Any] = []
    for r in records:
        if isinstance(r, AssistantMessage):
            for b in r.blocks:
                head.append(BlockRef(turn_id, 0, b.__struct_config__.tag, b))  # type: ignore[attr-defined]
        elif isinstance(r, UserPrompt):
            head.append(BlockRef(turn_id, 0, "prompt", r))
        elif isinstance(r, ToolResults):
            results.extend(r.results)
        elif isinstance(r, Steering):
            steering.append(r)
    out = head + [BlockRef(turn_id, 0, "tool_result", x) for x in results] + [
        BlockRef(turn_id, 0, "steering", s) for s in steering]
    return [BlockRef(turn_id, i, b.kind, b.value) for i, b in enumerate(out)]


# --------------------------------------------------------------------------- the table


def _turn_id(t: Turn) -> int:
    return t.id


_FORENSIC = frozenset(FORENSIC)


class _Link:
    """A link being installed (``Context._link_begin``): its residue entries, the outermost
    ones and their first ids, and over the rows appended so far the running sum of the evicted
    rows' weights (``prefix[i]``: rows before position ``i``) and the positions of the evicted
    user rows with a label."""

    __slots__ = ("entries", "outer", "firsts", "prefix", "users")

    def __init__(self, entries: list[ResidueEntry], outer: list[ResidueEntry],
                 firsts: list[int]):
        from array import array

        self.entries, self.outer, self.firsts = entries, outer, firsts
        self.prefix = array("q", [0])
        self.users = array("q")


class Context:
    """The context table of one agent. ``step`` is the only way it changes (``step_link`` is
    ``step`` of a link whose rows are read in pieces)."""

    def __init__(self, source: str = "", *, loader: Loader | None = None, lazy: bool = False):
        self.source = source
        self.loader = loader
        # lazy: a structural table — loci, not contents. No turn holds its records (inherited
        # resident rows are not loaded); the fold loads a turn through ``loader`` only when it
        # needs its blocks (a mark, a sweep). What the door reads from outside a run.
        self.lazy = lazy
        self.turns: list[Turn] = []
        self._by_id: dict[int, int] = {}
        self.residues: list[ResidueEntry] = []
        self.marks: dict[tuple[int, int], str] = {}
        self.pending: dict[str, int] = {}  # tool_use id -> turn, for the turn in hand
        self.reach = 0
        self.id_floor = 1
        self.in_hand: int | None = None
        self.started: SessionStarted | None = None
        self.ended: str | None = None
        self.protocol_seen = False
        self.last_input_tokens: int | None = None  # the last response's total input
        self.history_at_response: int = 0  # history bytes when that response was requested
        self.records_folded = 0
        # memos of projections over what never changes once folded (an inherited link's
        # resolved pointers, for the door); not part of the table, never compared
        self.memo: dict[str, Any] = {}
        self._hist = 0

    # ------------------------------------------------------------------ equality (the fold law)

    def _state(self) -> tuple:
        return (self.turns, self.residues, self.marks, self.pending, self.reach, self.id_floor,
                self.in_hand, self.ended, self.last_input_tokens, self.history_at_response,
                self._hist)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Context) and self._state() == other._state()

    # ------------------------------------------------------------------ lookup

    def turn(self, tid: int) -> Turn | None:
        i = self._by_id.get(tid)
        return None if i is None else self.turns[i]

    @property
    def latest(self) -> int | None:
        return self.turns[-1].id if self.turns else None

    def next_id(self) -> int:
        """The id the log mints next: ``max(reach + 1, id_floor)``."""
        return max(self.reach + 1, self.id_floor)

    def frontier(self) -> list[Turn | ResidueEntry]:
        """Resident turns not under a residue and outermost residues, in id order."""
        return list(self._items(0, len(self.turns)))

    def _items(self, lo: int, hi: int) -> Iterator[Turn | ResidueEntry]:
        """Frontier items among ``turns[lo:hi]``, jumping over each residue's turns."""
        turns = self.turns
        if type(turns) is not list:  # columns: a departed row's state and residue, no Turn
            yield from self._items_of_columns(lo, hi)
            return
        i = lo
        while i < hi:
            t = turns[i]
            if t.state == "resident":
                yield t
                i += 1
            elif t.state == "evicted" and t.under is not None:
                r = t.under.outermost()
                yield r
                i = self._index_after(r.last, i + 1)
            else:
                i += 1

    def _items_of_columns(self, lo: int, hi: int, *, make: bool = True
                          ) -> Iterator[Turn | ResidueEntry | int]:
        """Frontier items of a table kept as columns; a resident turn as its ``Turn``, or as its
        position when not ``make``."""
        turns: Any = self.turns
        i = lo
        while i < hi:
            state = turns.state_of(i)
            if state == "resident":
                yield turns[i] if make else i
                i += 1
            elif state == "evicted" and (under := turns.under_of(i)) is not None:
                r = under.outermost()
                yield r
                i = self._index_after(r.last, i + 1)
            else:
                i += 1

    def _index_after(self, tid: int, lo: int = 0) -> int:
        """Index of the first turn with id > tid."""
        if type(self.turns) is not list:  # columns: bisect the ids, make no Turn
            return bisect.bisect_right(self.turns.ids, tid, lo=lo)
        return bisect.bisect_right(self.turns, tid, lo=lo, key=_turn_id)

    def _index_from(self, tid: int, lo: int = 0) -> int:
        """Index of the first turn with id >= tid."""
        if type(self.turns) is not list:
            return bisect.bisect_left(self.turns.ids, tid, lo=lo)
        return bisect.bisect_left(self.turns, tid, lo=lo, key=_turn_id)

    def use_columns(self) -> None:
        """Keep this (still empty) table's turns as columns (``session.columns.Turns``): a
        ``Turn`` is made only for a row something touches. For a structural fold, whose memory
        is then the columns, not one object per turn."""
        from .columns import Positions, Turns

        assert not self.turns, "only an empty table changes how it keeps its turns"
        self.turns = Turns(self.residues)  # type: ignore[assignment]
        self._by_id = Positions(self.turns.ids)  # type: ignore[assignment]

    def spill(self) -> None:
        """Fold the turns a structural fold has finished with back into the columns (see
        ``use_columns``); the turn in hand stays a ``Turn``. A no-op for a list of turns."""
        if type(self.turns) is not list and self.lazy:
            keep = None if self.in_hand is None else self._by_id.get(self.in_hand)
            self.turns.spill(keep)  # type: ignore[attr-defined]

    def outermost_residues(self) -> list[ResidueEntry]:
        """Live residues not nested in another, in id order."""
        return sorted((r for r in self.residues if not r.withdrawn and r.parent is None),
                      key=lambda r: r.span)

    def blocks(self, tid: int) -> list[BlockRef]:
        t = self.turn(tid)
        if t is None:
            return []
        records = t.records
        if records is None:
            if not (self.lazy and t.state == "resident" and self.loader is not None):
                return []
            records = self.loader(t.pointer)
        return turn_blocks(tid, records)

    # ------------------------------------------------------------------ the fold

    def step(self, record: Record, locus: Locus | None = None) -> None:
        """Judge the record, then apply it. Raises ``Refusal`` naming the state.

        The four records a log is made of (prompts, messages, tool results, steering) take a
        path where ``check`` and ``apply`` are written out together — the same judgement, in
        the same order, before anything changes — because a resume runs this once per line;
        property tests hold it equal to ``check`` then ``apply`` on random logs.
        """
        fast = _STEPS.get(type(record)) if locus is not None else None
        if fast is not None:
            fast(self, record, locus)
        else:
            self.check(record)
            self.apply(record, locus)

    def _step_user(self, rec: UserPrompt, locus: Locus) -> None:
        if self.started is None:
            raise Refusal("a log opens with SessionStarted")
        tid = rec.turn
        if tid <= self.reach or tid < self.id_floor:
            self._check_new_id(tid)
        self.records_folded += 1
        self.protocol_seen = True
        n = locus[1]
        label = rec.text[:OPENING_CHARS]
        if "\n" in label or "\r" in label:
            label = label.replace("\r", " ").replace("\n", " ")
        self._by_id[tid] = len(self.turns)
        self.turns.append(Turn(tid, "user", label, n, "resident", self.source, [locus], "own",
                               None if self.lazy else [rec]))
        self.reach = self.in_hand = tid
        self._hist += n
        self.pending = {}

    def _step_assistant(self, rec: AssistantMessage, locus: Locus) -> None:
        if self.started is None:
            raise Refusal("a log opens with SessionStarted")
        tid = rec.turn
        if tid <= self.reach or tid < self.id_floor:
            self._check_new_id(tid)
        label = ""
        pending: dict[str, int] = {}
        for b in rec.blocks:
            tb = type(b)
            if tb is ToolUse:
                if b.id in pending:  # type: ignore[union-attr]
                    raise Refusal("duplicate tool_use ids in one message")
                pending[b.id] = tid  # type: ignore[union-attr]
            elif tb is Text and not label:
                label = b.text  # type: ignore[union-attr]
        self.records_folded += 1
        self.protocol_seen = True
        n = locus[1]
        if label:
            label = label[:OPENING_CHARS]
            if "\n" in label or "\r" in label:
                label = label.replace("\r", " ").replace("\n", " ")
        self._by_id[tid] = len(self.turns)
        self.turns.append(Turn(tid, "assistant", label, n, "resident", self.source, [locus],
                               "own", None if self.lazy else [rec]))
        self.reach = self.in_hand = tid
        self._hist += n
        self.pending = pending
        usage = rec.usage
        if usage is not None:
            self.last_input_tokens = (usage.input_tokens + usage.cache_read_tokens
                                      + usage.cache_write_tokens)
            self.history_at_response = self._hist - n

    def _step_results(self, rec: ToolResults, locus: Locus) -> None:
        if self.started is None:
            raise Refusal("a log opens with SessionStarted")
        if self.in_hand is None:
            raise Refusal("a ToolResults record extends the turn in hand — no turn is open yet")
        pending = self.pending
        results = rec.results
        if len(results) == 1:
            uid = results[0].tool_use_id
            if uid not in pending:
                raise Refusal(f"a tool result with no pending call ({uid}) in turn "
                              f"{self.in_hand}")
        else:
            seen: set[str] = set()
            for r in results:
                if r.tool_use_id not in pending or r.tool_use_id in seen:
                    raise Refusal(f"a tool result with no pending call ({r.tool_use_id}) in "
                                  f"turn {self.in_hand}")
                seen.add(r.tool_use_id)
        self._extend_turn(rec, locus)
        for r in results:
            del pending[r.tool_use_id]

    def _step_steering(self, rec: Steering, locus: Locus) -> None:
        if self.started is None:
            raise Refusal("a log opens with SessionStarted")
        if self.in_hand is None:
            raise Refusal("a Steering record extends the turn in hand — no turn is open yet")
        self._extend_turn(rec, locus)

    def _extend_turn(self, rec: Record, locus: Locus) -> None:
        """Apply's common part for a record that extends the turn in hand."""
        self.records_folded += 1
        self.protocol_seen = True
        t = self.turns[self._by_id[self.in_hand]]  # type: ignore[index]
        t.loci.append(locus)
        if t.records is not None:
            t.records.append(rec)
        if t.state == "resident":
            n = locus[1]
            t.bytes += n
            self._hist += n

    def check(self, record: Record) -> None:
        """Judge a record against the table; raises ``Refusal`` naming the state."""
        kind = type(record)
        if kind is SessionStarted:
            if self.started is not None or self.records_folded:
                raise Refusal("a log opens with SessionStarted, once — this is a second one")
            return
        if self.started is None:
            raise Refusal("a log opens with SessionStarted")
        if kind is UserPrompt:
            if record.turn < self.reach + 1 or record.turn < self.id_floor:  # type: ignore[union-attr]
                self._check_new_id(record.turn)  # type: ignore[union-attr]
            return
        if kind is AssistantMessage:
            if record.turn < self.reach + 1 or record.turn < self.id_floor:  # type: ignore[union-attr]
                self._check_new_id(record.turn)  # type: ignore[union-attr]
            ids = [b.id for b in record.blocks if type(b) is ToolUse]  # type: ignore[union-attr]
            if len(ids) > 1 and len(set(ids)) != len(ids):
                raise Refusal("duplicate tool_use ids in one message")
            return
        if kind in _FORENSIC:
            return
        if kind is Inherited:
            self._check_inherited(record)  # type: ignore[arg-type]
            return
        if self.in_hand is None:
            raise Refusal(f"a {kind.__name__} record extends the turn in hand — no turn is open "
                          "yet")
        if kind is ToolResults:
            pending = self.pending
            seen: set[str] = set()
            for r in record.results:  # type: ignore[union-attr]
                if r.tool_use_id not in pending or r.tool_use_id in seen:
                    raise Refusal(f"a tool result with no pending call ({r.tool_use_id}) in "
                                  f"turn {self.in_hand}")
                seen.add(r.tool_use_id)
            return
        self._check_extension(record)

    def _check_new_id(self, tid: int) -> None:
        floor = self.next_id()
        if tid < floor:
            if tid <= self.reach:
                raise Refusal(f"ids must increase: turn {tid} after turn {self.reach}")
            raise Refusal(f"turn {tid} is below the id floor {self.id_floor} of this lineage")

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

    def _check_extension(self, record: Record) -> None:
        match record:
            case ToolResults(results=results):
                seen: set[str] = set()
                for r in results:
                    if r.tool_use_id not in self.pending or r.tool_use_id in seen:
                        raise Refusal(f"a tool result with no pending call ({r.tool_use_id}) in "
                                      f"turn {self.in_hand}")
                    seen.add(r.tool_use_id)
            case Evicted(residue=res):
                check_note(res.note)
                self.check_span(res.span)
            case Marked(block=block, replacement=repl):
                self.check_mark(block, repl)
            case Swept(blocks=blocks):
                if not blocks:
                    raise Refusal("a sweep names at least one block")
                for b in blocks:
                    if tuple(b) not in self.marks:
                        raise Refusal(f"block {b[0]}.{b[1]} has no pending mark")
            case Rewound(to=to):
                latest = self.latest or 0
                if to < 0 or to > latest:
                    raise Refusal(f"cannot rewind to turn {to} — the latest is {latest}")
                for r in self.outermost_residues():
                    if r.first <= to < r.last:
                        raise Refusal(f"rewinding to {to} would split the residue {list(r.span)}")
            case Steering() | Cleared():
                pass

    def _earliest(self) -> str:
        """Names the earliest turn still resident (a residue's turns are not in the context)."""
        fid = self.earliest_resident()
        if fid is None:
            return "no turn is in it now"
        return f"the earliest still in it is {fid}"

    def check_span(self, span: tuple[int, int]) -> None:
        """Judge an eviction span; the order is the note (done), unknown, in hand, split, left."""
        a, b = span
        if a > b:
            raise Refusal(f"the span [{a}, {b}] runs backwards")
        latest = self.latest
        for x in (a, b):
            if self.turn(x) is None:
                if latest is None:
                    raise Refusal(f"turn {x} is not recorded — no turn is recorded yet")
                raise Refusal(f"turn {x} is not recorded — the latest is {latest}")
        if self.in_hand is not None and a <= self.in_hand <= b:
            raise Refusal(f"{self.in_hand} is the turn in hand; an eviction keeps the work in hand")
        outer = self.outermost_residues()
        for r in outer:
            overlaps = r.first <= b and a <= r.last
            if overlaps and not (a <= r.first and r.last <= b):
                raise Refusal(f"[{a}, {b}] would split the residue [{r.first}, {r.last}]")
        starts = {r.first for r in outer}
        ends = {r.last for r in outer}
        ta, tb = self.turn(a), self.turn(b)
        assert ta is not None and tb is not None
        for x, t, edge in ((a, ta, starts), (b, tb, ends)):
            if t.state == "resident" or (t.state == "evicted" and x in edge):
                continue
            raise Refusal(f"turn {x} has already left your context — {self._earliest()}")
        takes_turn = ta.state == "resident" or tb.state == "resident" or any(
            isinstance(it, Turn) for it in self._items(self._index_from(a), self._index_after(b)))
        if not takes_turn and any(r.span == (a, b) for r in outer):
            raise Refusal(f"[{a}, {b}] is already one residue — nothing would leave")

    def check_mark(self, block: tuple[int, int], replacement: str) -> None:
        tid, idx = block
        t = self.turn(tid)
        latest = self.latest
        if t is None:
            raise Refusal(f"turn {tid} is not recorded — the latest is {latest}")
        if t.state != "resident":
            raise Refusal(f"turn {tid} has already left your context — {self._earliest()}")
        if tid == self.in_hand:
            raise Refusal(f"{tid} is the turn in hand; a mark keeps the work in hand")
        blocks = self.blocks(tid)
        if not 0 <= idx < len(blocks):
            raise Refusal(f"turn {tid} has no block {idx} — its blocks are {tid}.0 to "
                          f"{tid}.{len(blocks) - 1}" if blocks else f"turn {tid} has no blocks")
        if idx in t.swept:
            raise Refusal(f"block {tid}.{idx} is already swept")
        if not replacement:
            raise Refusal("a replacement may not be empty")
        size, have = len(replacement.encode("utf-8")), blocks[idx].length
        if size >= have:
            raise Refusal(f"the replacement ({size} bytes) must be shorter than block {tid}.{idx} "
                          f"({have} bytes)")

    def _turns_in(self, a: int, b: int) -> Iterator[Turn]:
        turns = self.turns
        for i in range(self._index_from(a), len(turns)):
            t = turns[i]
            if t.id > b:
                break
            yield t

    # ------------------------------------------------------------------ apply

    def apply(self, record: Record, locus: Locus | None = None) -> None:
        """Apply a judged record. ``locus`` is where its line lies in this agent's log."""
        if locus is None:
            line = encode(record)
            locus = (0, len(line), "")
        self.records_folded += 1
        kind = type(record)
        if kind is UserPrompt:
            self.protocol_seen = True
            self._open(record.turn, "user", clip_label(record.text), record, locus)  # type: ignore[union-attr]
            self.pending = {}
            return
        if kind is AssistantMessage:
            self.protocol_seen = True
            tid = record.turn  # type: ignore[union-attr]
            label = ""
            pending: dict[str, int] = {}
            for b in record.blocks:  # type: ignore[union-attr]
                tb = type(b)
                if tb is ToolUse:
                    pending[b.id] = tid  # type: ignore[union-attr]
                elif tb is Text and not label and b.text:  # type: ignore[union-attr]
                    label = b.text  # type: ignore[union-attr]
            self._open(tid, "assistant", clip_label(label) if label else "", record, locus)
            self.pending = pending
            usage = record.usage  # type: ignore[union-attr]
            if usage is not None:
                self.last_input_tokens = (usage.input_tokens + usage.cache_read_tokens
                                          + usage.cache_write_tokens)
                self.history_at_response = self._hist - locus[1]
            return
        if kind in _FORENSIC:
            if kind is SessionStarted:
                self.started = record  # type: ignore[assignment]
            elif kind is SessionEnded:
                self.ended = record.reason  # type: ignore[union-attr]
            return
        self.protocol_seen = True
        if kind is Inherited:
            self._install(record)  # type: ignore[arg-type]
            return
        t = self.turns[self._by_id[self.in_hand]]  # type: ignore[index]
        t.loci.append(locus)
        if t.records is not None:
            t.records.append(record)
        if t.state == "resident":
            t.bytes += locus[1]
            self._hist += locus[1]
        if kind is ToolResults:
            pending = self.pending
            for r in record.results:  # type: ignore[union-attr]
                pending.pop(r.tool_use_id, None)
        elif kind is not Steering:
            self._extend(record)

    def _open(self, tid: int, role: str, label: str, record: Record, locus: Locus) -> None:
        turn = Turn(tid, role, label, locus[1], "resident", self.source, [locus], "own",
                    None if self.lazy else [record])
        self._by_id[tid] = len(self.turns)
        self.turns.append(turn)
        self.reach = tid
        self.in_hand = tid
        self._hist += locus[1]

    def _extend(self, record: Record) -> None:
        match record:
            case ToolResults(results=results):
                for r in results:
                    self.pending.pop(r.tool_use_id, None)
            case Evicted(residue=res):
                self._evict(res)
            case Marked(block=block, replacement=repl):
                self.marks[tuple(block)] = repl  # type: ignore[index]
            case Swept(blocks=blocks):
                for b in blocks:
                    key = (b[0], b[1])
                    repl = self.marks.pop(key)
                    t = self.turn(key[0])
                    assert t is not None
                    ref = self.blocks(key[0])[key[1]]
                    delta = len(repl.encode("utf-8")) - ref.length
                    t.bytes += delta
                    self._hist += delta
                    if t.swept is _NO_SWEEPS:
                        t.swept = {}
                    t.swept[key[1]] = repl
            case Cleared():
                self._withdraw(above=0)
            case Rewound(to=to):
                self._withdraw(above=to)

    def _evict(self, res: Residue) -> None:
        """Move the frontier items in the span under one new residue; older residues nest."""
        a, b = res.span
        entry = ResidueEntry((a, b), res.note, res.by, 0)
        items = list(self._items(self._index_from(a), self._index_after(b)))
        weight = 0
        for it in items:
            if isinstance(it, Turn):
                weight += it.bytes
                self._hist -= it.bytes
                it.state = "evicted"
                it.records = None
                it.under = entry
                if self.marks:
                    self._drop_marks(it.id)
            else:
                weight += it.weight
                self._hist -= self._residue_len(it)
                it.parent = entry
        entry.weight = weight
        entry.labels = newest_labels(items)
        self.residues.append(entry)
        self._hist += self._residue_len(entry)

    def _withdraw(self, *, above: int) -> None:
        """Withdraw every turn and residue with id > ``above`` (clear: above=0)."""
        for r in self.residues:
            if not r.withdrawn and r.parent is None and r.first > above:
                self._hist -= self._residue_len(r)
        for r in self.residues:
            if not r.withdrawn and r.first > above:
                r.withdrawn = True
        for t in self.turns[self._index_after(above):]:
            if t.state != "withdrawn":
                if t.state == "resident":
                    self._hist -= t.bytes
                t.state = "withdrawn"
                t.records = None
                self._drop_marks(t.id)

    def _drop_marks(self, tid: int) -> None:
        if self.marks:
            for key in [k for k in self.marks if k[0] == tid]:
                del self.marks[key]

    def _residue_len(self, r: ResidueEntry) -> int:
        """The residue message's length; the message is a function of the entry alone."""
        if r._msg_len is None:
            from .render import residue_message

            r._msg_len = len(residue_message(self, r).encode("utf-8"))
        return r._msg_len

    def _install(self, rec: Inherited) -> None:
        """Install a link: O((rows + residues) log residues), whatever the nesting depth."""
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

    # ------------------------------------------------------------------ projections

    def history_bytes(self) -> int:
        """Turns' bytes and residue messages' length over the frontier.

        Kept as a running total by the fold so weighing is O(1) per boundary; property tests
        hold it equal to ``history_bytes_projection`` (the definition) after every record.
        """
        return self._hist

    def history_bytes_projection(self) -> int:
        total = 0
        from .render import residue_message

        turns: Any = self.turns
        if type(turns) is not list:  # columns: a resident row's weight, no Turn made for it
            for it in self._items_of_columns(0, len(turns), make=False):
                total += turns.weight_of(it) if type(it) is int else len(
                    residue_message(self, it).encode("utf-8"))  # type: ignore[arg-type]
            return total
        for item in self.frontier():
            total += item.bytes if isinstance(item, Turn) else len(
                residue_message(self, item).encode("utf-8"))
        return total

    def overhead_bytes(self) -> int:
        """System prompt and tool definitions, as recorded in SessionStarted."""
        s = self.started
        if s is None:
            return 0
        n = len((s.system or "").encode("utf-8"))
        if s.tools:
            n += len(compact(s.tools))
        return n

    def used_tokens(self, tokens_per_byte: float | None = None) -> int:
        """The last response's input plus what was added since, at the measured ratio."""
        hb = self.history_bytes()
        if self.last_input_tokens is None:
            tpb = tokens_per_byte or (self.started.tokens_per_byte if self.started and
                                      self.started.tokens_per_byte else 0.25)
            return int((hb + self.overhead_bytes()) * tpb)
        tpb = tokens_per_byte or self.last_input_tokens / max(
            1, self.history_at_response + self.overhead_bytes())
        return max(0, int(self.last_input_tokens + (hb - self.history_at_response) * tpb))

    def resident(self) -> list[Turn]:
        """The resident turns, in id order (a table kept as columns makes no other Turn)."""
        turns = self.turns
        if type(turns) is not list:
            return [turns[i] for i in turns.positions("resident")]  # type: ignore[attr-defined]
        return [t for t in turns if t.state == "resident"]

    def count(self, *, role: str, origin: str) -> int:
        """How many turns have this role and origin (both fixed when a turn opens)."""
        turns = self.turns
        if type(turns) is not list:
            return turns.count(role=role, origin=origin)  # type: ignore[attr-defined]
        return sum(1 for t in turns if t.origin == origin and t.role == role)

    def earliest_resident(self) -> int | None:
        if type(self.turns) is not list:
            i = self.turns.first("resident")  # type: ignore[attr-defined]
            return None if i is None else self.turns.ids[i]  # type: ignore[attr-defined]
        for t in self.turns:
            if t.state == "resident":
                return t.id
        return None

    def pending_calls(self) -> list[ToolUse]:
        if self.in_hand is None:
            return []
        t = self.turn(self.in_hand)
        if t is None or t.records is None or t.role != "assistant":
            return []
        msg = t.records[0]
        assert isinstance(msg, AssistantMessage)
        return [b for b in msg.blocks if isinstance(b, ToolUse) and b.id in self.pending]


_STEPS: dict[type, Callable[[Context, Any, Locus], None]] = {
    UserPrompt: Context._step_user,
    AssistantMessage: Context._step_assistant,
    ToolResults: Context._step_results,
    Steering: Context._step_steering,
}

__all__ = ["Context", "Turn", "ResidueEntry", "BlockRef", "turn_blocks", "clip_label", "check_note",
           "Loader", "Usage", "Thinking", "Opaque"]
