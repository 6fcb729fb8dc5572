"""The context table and its one fold, ``Context.step``.

One structure: ``turns`` holds every turn this lineage recorded, in id order, each *Here* (its
records in memory) or *There* (a Pointer and a departure). Residues nest by containment.
Everything else — the frontier, history bytes, rendering, the index, the eviction plan — is a
projection computed on call.

``step(record, locus)`` judges a record (``check``) and then applies it (``apply``): the live
agent and a resume run exactly this code, so a replayed file gives the live table.

This module owns the table's state, its lookups and projections, and the applying; the table's
rows are ``session.turn``'s, the judging ``session.judge``'s, a link's judgement and install
``session.inherited``'s (both bases of ``Context``). The names callers have always imported from
here (``Turn``, ``ResidueEntry``, ``BlockRef``, ``turn_blocks``, ``clip_label``,
``check_note``, ``Loader``) still are.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from typing import Any

from .blocks import BlockRef, turn_blocks
from .columns import Positions, Turns
from .constants import OPENING_CHARS
from .errors import Refusal
from .inherited import Linking
from .judge import Judgement, check_note
from .records import (
    FORENSIC,
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessage,
    Cleared,
    Evicted,
    Inherited,
    Locus,
    Marked,
    Opaque,
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
    WorkspaceSnapshot,
    encode,
    size_of,
)
from .render import residue_message
from .turn import (
    NO_SWEEPS,
    Loader,
    ResidueEntry,
    Turn,
    clip_label,
    newest_labels,
)


def _turn_id(t: Turn) -> int:
    return t.id


_FORENSIC = frozenset(FORENSIC)


class Context(Judgement, Linking):
    """The context table of one agent. ``step`` is the only way it changes (``step_link`` is
    ``step`` of a link whose rows are read in pieces). Its bases are parts of it, kept in
    their own modules: ``Judgement`` (``check``: refuse, naming the state) and ``Linking`` (an
    ``Inherited`` link judged and installed)."""

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
        # the turn in hand's approvals: call id -> [ApprovalRequested, ApprovalDecided | None]
        self.approvals: dict[str, list] = {}
        self.reach = 0
        self.id_floor = 1
        self.in_hand: int | None = None
        self.started: SessionStarted | None = None
        self.workspace: WorkspaceSnapshot | None = None  # the latest (docs/workspace.md)
        self.ended: str | None = None
        self.protocol_seen = False
        self.last_input_tokens: int | None = None  # the last response's total input
        self.history_at_response: int = 0  # history bytes when that response was requested
        self.records_folded = 0
        # memos of projections over what never changes once folded (an inherited link's
        # resolved pointers, for the door); not part of the table, never compared
        self.memo: dict[str, Any] = {}
        self._hist = 0
        # bumped by every change to a turn already in the table other than a record appended
        # to the turn in hand (an eviction, a sweep, a clear or rewind, a link installed,
        # records loaded on a reopen): between two bumps the frontier only grows at its end, so
        # a render checks its last item and the turns opened since (``session.render``)
        self.edits = 0

    # ------------------------------------------------------------------ equality (the fold law)

    def _state(self) -> tuple:
        return (self.turns, self.residues, self.marks, self.pending, self.approvals, self.reach,
                self.id_floor, self.in_hand, self.ended, self.last_input_tokens, self.history_at_response,
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
        """Resident turns not under a residue and outermost residues, in id order. (``_items``
        over the whole table, made as a list directly: every render reads it.)"""
        turns = self.turns
        if type(turns) is not list:
            return list(self._items(0, len(turns)))
        out: list[Turn | ResidueEntry] = []
        add = out.append
        i, hi = 0, len(turns)
        while i < hi:
            t = turns[i]
            state = t.state
            if state == "resident":
                add(t)
                i += 1
            elif state == "evicted" and t.under is not None:
                r = t.under.outermost()
                add(r)
                i = self._index_after(r.last, i + 1)
            else:
                i += 1
        return out

    def _items(self, lo: int, hi: int) -> Iterator[Turn | ResidueEntry]:
        """Frontier items among ``turns[lo:hi]``, jumping over each residue's turns."""
        turns = self.turns
        if type(turns) is not list:  # columns: a departed row's state and residue, no Turn
            yield from self._items_of_columns(lo, hi)  # type: ignore[misc]  # make: no int
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
        turns: Any = self.turns
        if type(turns) is not list:  # columns: bisect the ids, make no Turn
            return bisect.bisect_right(turns.ids, tid, lo=lo)
        return bisect.bisect_right(turns, tid, lo=lo, key=_turn_id)

    def _index_from(self, tid: int, lo: int = 0) -> int:
        """Index of the first turn with id >= tid."""
        turns: Any = self.turns
        if type(turns) is not list:
            return bisect.bisect_left(turns.ids, tid, lo=lo)
        return bisect.bisect_left(turns, tid, lo=lo, key=_turn_id)

    def use_columns(self) -> None:
        """Keep this (still empty) table's turns as columns (``session.columns.Turns``): a
        ``Turn`` is made only for a row something touches. For a structural fold, whose memory
        is then the columns, not one object per turn."""
        assert not self.turns, "only an empty table changes how it keeps its turns"
        turns = Turns(self.residues)
        self.turns = turns  # type: ignore[assignment]
        self._by_id = Positions(turns.ids)  # type: ignore[assignment]

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
        if locus is not None and (fast := _STEPS.get(type(record))) is not None:
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
        if self.approvals:
            self.approvals = {}

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
        if self.approvals:
            self.approvals = {}
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
        if self.approvals:
            self._check_answered(rec)
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

    # ------------------------------------------------------------------ apply
    # (``check``, the judging, is ``Judgement.check``; a link's install is ``Linking``'s)

    def apply(self, record: Record, locus: Locus | None = None) -> None:
        """Apply a judged record. ``locus`` is where its line lies in this agent's log."""
        if locus is None:
            line = encode(record)
            locus = (0, len(line), "")
        self.records_folded += 1
        kind = type(record)
        if kind in _FORENSIC:  # first: two of a turn's four records (TurnStarted, ProviderCall)
            if type(record) is SessionStarted:
                self.started = record
            elif type(record) is SessionEnded:
                self.ended = record.reason
            elif type(record) is WorkspaceSnapshot:
                self.workspace = record
            elif type(record) is ApprovalRequested:
                self.approvals[record.call_id] = [record, None]
            elif type(record) is ApprovalDecided:
                self.approvals[record.call_id][1] = record
            return
        # by the exact class, ``type(record) is C``, which mypy narrows (as in ``check``, 0352)
        if type(record) is UserPrompt:
            self.protocol_seen = True
            self._open(record.turn, "user", clip_label(record.text), record, locus)
            self.pending = {}
            return
        if type(record) is AssistantMessage:
            self.protocol_seen = True
            tid = record.turn
            label = ""
            pending: dict[str, int] = {}
            for b in record.blocks:
                tb = type(b)
                if tb is ToolUse:
                    pending[b.id] = tid  # type: ignore[union-attr]
                elif tb is Text and not label and b.text:  # type: ignore[union-attr]
                    label = b.text  # type: ignore[union-attr]
            self._open(tid, "assistant", clip_label(label) if label else "", record, locus)
            self.pending = pending
            usage = record.usage
            if usage is not None:
                self.last_input_tokens = (usage.input_tokens + usage.cache_read_tokens
                                          + usage.cache_write_tokens)
                self.history_at_response = self._hist - locus[1]
            return
        self.protocol_seen = True
        if type(record) is Inherited:
            self._install(record)
            return
        t = self.turns[self._by_id[self.in_hand]]  # type: ignore[index]
        t.loci.append(locus)
        if t.records is not None:
            t.records.append(record)
        if t.state == "resident":
            t.bytes += locus[1]
            self._hist += locus[1]
        if type(record) is ToolResults:
            pending = self.pending
            for r in record.results:
                pending.pop(r.tool_use_id, None)
        elif kind is not Steering:
            self._extend(record)

    def _open(self, tid: int, role: str, label: str, record: Record, locus: Locus) -> None:
        if self.approvals:
            self.approvals = {}
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
                    if t.swept is NO_SWEEPS:
                        t.swept = {}
                    t.swept[key[1]] = repl
                    self.edits += 1
            case Cleared():
                self._withdraw(above=0)
            case Rewound(to=to):
                self._withdraw(above=to)

    def _evict(self, res: Residue) -> None:
        """Move the frontier items in the span under one new residue; older residues nest."""
        a, b = res.span
        self.edits += 1
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
        self.edits += 1
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
            r._msg_len = len(residue_message(self, r).encode("utf-8"))
        return r._msg_len

    # ------------------------------------------------------------------ projections

    def history_bytes(self) -> int:
        """Turns' bytes and residue messages' length over the frontier.

        Kept as a running total by the fold so weighing is O(1) per boundary; property tests
        hold it equal to ``history_bytes_projection`` (the definition) after every record.
        """
        return self._hist

    def history_bytes_projection(self) -> int:
        total = 0
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
        if s.tools:  # a child's opening holds its parent's list: sized once (``size_of``)
            n += size_of(s.tools)
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
            return turns.count(role=role, origin=origin)  # type: ignore[call-arg]
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

