"""The judgement half of the fold: whether the table takes a record, refusing it by its state.

``Context.step(record)`` judges a record and then applies it; this module is the judging. Every
refusal names the state (DESIGN.md, "Refusals name the state"): "turn 350 has already left your
context — the earliest still in it is 351", "[12, 40] would split the residue [30, 45]". Nothing
here changes the table. The judgement of an ``Inherited`` link (its place, residues and rows) is
``session.inherited``'s, beside its install.

``Judgement`` is a part of ``Context`` (its base class): it reads the table's fields and
projections and imports no module above the turn.
"""

from __future__ import annotations

import unicodedata
from typing import TYPE_CHECKING

from .constants import NOTE_MAX_BYTES
from .errors import Refusal
from .records import (
    FORENSIC,
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessage,
    Cleared,
    Evicted,
    Inherited,
    Marked,
    Record,
    Rewound,
    SessionStarted,
    Steering,
    Swept,
    ToolResults,
    ToolUse,
    UserPrompt,
)
from .turn import Turn

if TYPE_CHECKING:  # the table's fields, as this part reads them (session.fields)
    from .fields import TableFields as _Table
else:
    _Table = object

def check_note(note: str | None) -> None:
    """A residue's note: one line of printable text, at most NOTE_MAX_BYTES UTF-8 bytes."""
    if note is None:
        return
    size = len(note.encode("utf-8"))
    if size > NOTE_MAX_BYTES:
        raise Refusal(f"a note is at most {NOTE_MAX_BYTES} bytes — this one has {size}")
    for ch in note:
        if ch in "\n\r\u2028\u2029" or unicodedata.category(ch) == "Cc":
            raise Refusal("a note is one line of printable text — it may not contain a line "
                          f"break or control character ({ch!r})")


_FORENSIC = frozenset(FORENSIC)


class Judgement(_Table):
    """``check`` and the judgements it is made of (a base of ``Context``)."""

    def check(self, record: Record) -> None:
        """Judge a record against the table; raises ``Refusal`` naming the state."""
        # dispatch by the exact class, ``type(record) is C``: mypy narrows it as it does
        # ``match``, and on msgspec classes a ``case C()`` that fails costs 4x as much (0352)
        kind = type(record)
        if kind is SessionStarted:
            if self.started is not None or self.records_folded:
                raise Refusal("a log opens with SessionStarted, once — this is a second one")
            return
        if self.started is None:
            raise Refusal("a log opens with SessionStarted")
        if kind in _FORENSIC:  # first: two of a turn's four records (TurnStarted, ProviderCall)
            if type(record) is ApprovalRequested or type(record) is ApprovalDecided:
                self._check_approval(record)
            return
        if type(record) is UserPrompt:
            if record.turn < self.reach + 1 or record.turn < self.id_floor:
                self._check_new_id(record.turn)
            return
        if type(record) is AssistantMessage:
            if record.turn < self.reach + 1 or record.turn < self.id_floor:
                self._check_new_id(record.turn)
            ids = [b.id for b in record.blocks if type(b) is ToolUse]
            if len(ids) > 1 and len(set(ids)) != len(ids):
                raise Refusal("duplicate tool_use ids in one message")
            return
        if type(record) is Inherited:
            self._check_inherited(record)
            return
        if self.in_hand is None:
            raise Refusal(f"a {kind.__name__} record extends the turn in hand — no turn is open "
                          "yet")
        if type(record) is ToolResults:
            pending = self.pending
            seen: set[str] = set()
            for r in record.results:
                if r.tool_use_id not in pending or r.tool_use_id in seen:
                    raise Refusal(f"a tool result with no pending call ({r.tool_use_id}) in "
                                  f"turn {self.in_hand}")
                seen.add(r.tool_use_id)
            if self.approvals:
                self._check_answered(record)
            return
        self._check_extension(record)

    def _check_approval(self, record: ApprovalRequested | ApprovalDecided) -> None:
        """An ``ApprovalRequested`` names an unanswered call of the turn in hand, asked about
        once; an ``ApprovalDecided`` a request still waiting, with a known decision."""
        cid = record.call_id
        if isinstance(record, ApprovalRequested):
            if cid not in self.pending:
                raise Refusal(f"an approval request for {cid}, which is not an unanswered call "
                              f"of the turn in hand ({self.in_hand})")
            if cid in self.approvals:
                raise Refusal(f"a second approval request for the call {cid}")
            return
        entry = self.approvals.get(cid)
        if entry is None:
            raise Refusal(f"a decision on the call {cid}, for which no approval is pending")
        if entry[1] is not None:
            raise Refusal(f"a second decision on the call {cid} (already "
                          f"{entry[1].decision})")
        if record.decision not in ("approve", "reject"):
            raise Refusal(f"a decision is approve or reject, not "
                          f"{record.decision!r}")

    def _check_answered(self, record: ToolResults) -> None:
        """A call whose approval is still pending has no result yet: it has not run."""
        for r in record.results:
            entry = self.approvals.get(r.tool_use_id)
            if entry is not None and entry[1] is None:
                raise Refusal(f"a tool result for the call {r.tool_use_id}, which still awaits "
                              "its approval")

    def _check_new_id(self, tid: int) -> None:
        floor = self.next_id()
        if tid < floor:
            if tid <= self.reach:
                raise Refusal(f"ids must increase: turn {tid} after turn {self.reach}")
            raise Refusal(f"turn {tid} is below the id floor {self.id_floor} of this lineage")


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
                for o in self.outermost_residues():
                    if o.first <= to < o.last:
                        raise Refusal(f"rewinding to {to} would split the residue {list(o.span)}")
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


__all__ = ["Judgement", "check_note"]
