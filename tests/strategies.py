"""Hypothesis strategies for the session layer: valid record sequences, texts, notes.

``sessions()`` draws a whole valid log as a list of records (``SessionStarted`` first). It drives
a live ``Context`` while it draws, so every record it emits is one ``Context.step`` accepts:
tool results answer pending calls, eviction spans are frontier-item boundaries that
``check_span`` accepts, marks are on resident blocks with shorter replacements, sweeps name
pending marks, rewinds never land strictly inside a residue. Other test suites may reuse these.
"""

from __future__ import annotations

from hypothesis import strategies as st

from mnemon.session.constants import NOTE_MAX_BYTES
from mnemon.session.context import Context, ResidueEntry, Turn
from mnemon.session.errors import Refusal
from mnemon.session.records import (
    AssistantMessage,
    Cleared,
    Evicted,
    Marked,
    Opaque,
    ProviderCall,
    Record,
    Residue,
    Rewound,
    SessionStarted,
    Steering,
    Swept,
    Text,
    Thinking,
    ToolResult,
    ToolResults,
    ToolUse,
    TurnStarted,
    Usage,
    UserPrompt,
)

# Characters that have bitten JSON-lines writers: quotes, backslashes, line breaks, U+2028,
# a NUL, multi-byte text and an astral-plane emoji.
NASTY = "\"\\\n\r\t\x00\x1f\u2028\u2029é中😀 "
texts = st.text(alphabet=st.sampled_from("abcdefghij xyz0123" + NASTY), max_size=60)
plain_words = st.text(alphabet=st.sampled_from("abcdefghijklmnop qrstuvwxyz,.;:'!?-é中😀"),
                      min_size=1, max_size=40)


@st.composite
def notes(draw, valid: bool = True):
    """A residue note: one line of printable text within NOTE_MAX_BYTES, or None."""
    if draw(st.booleans()):
        return None
    text = draw(st.text(alphabet=st.sampled_from("abc xyz'\"\\é中😀()"), max_size=80))
    while len(text.encode("utf-8")) > NOTE_MAX_BYTES:
        text = text[:-1]
    return text


usages = st.one_of(st.none(), st.builds(
    Usage, input_tokens=st.integers(0, 5000), output_tokens=st.integers(0, 500),
    cache_read_tokens=st.integers(0, 50_000), cache_write_tokens=st.integers(0, 5000)))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(plain_words, inner, max_size=3),
    max_leaves=6)
tool_inputs = st.dictionaries(plain_words, json_values, max_size=3)


@st.composite
def blocks(draw, tid: int) -> list:
    """An assistant message's blocks: text (possibly empty), thinking, tool calls, opaque."""
    out: list = []
    n = draw(st.integers(0, 4))
    calls = 0
    for _ in range(n):
        kind = draw(st.sampled_from(["text", "text", "tool_use", "tool_use", "thinking", "opaque"]))
        if kind == "text":
            out.append(Text(draw(texts)))
        elif kind == "thinking":
            out.append(Thinking(draw(texts), draw(st.none() | st.just("sig=="))))
        elif kind == "opaque":
            out.append(Opaque("anthropic", {"type": "redacted_thinking", "data": draw(plain_words)}))
        else:
            calls += 1
            inp = draw(tool_inputs | st.just("{\"cut\": "))  # a string: cut off mid-JSON
            out.append(ToolUse(f"tu_{tid}_{calls}", draw(st.sampled_from(["bash", "read", "edit"])),
                               inp))
    if not out:
        out.append(Text(draw(texts)))
    return out


def frontier_spans(ctx: Context) -> list[tuple[int, int]]:
    """Every span over contiguous frontier items (the newest excluded) that check_span accepts."""
    items = ctx.frontier()
    spans = []
    for i in range(len(items)):
        for j in range(i, len(items)):
            a = items[i].id if isinstance(items[i], Turn) else items[i].first
            b = items[j].id if isinstance(items[j], Turn) else items[j].last
            try:
                ctx.check_span((a, b))
            except Refusal:
                continue
            spans.append((a, b))
    return spans


def markable(ctx: Context) -> list[tuple[int, int, int]]:
    """``(turn, index, length)`` of blocks a mark may name (resident, not in hand, not swept)."""
    out = []
    for t in ctx.turns:
        if t.state != "resident" or t.id == ctx.in_hand or t.records is None:
            continue
        for ref in ctx.blocks(t.id):
            if ref.index not in t.swept and ref.length >= 2:
                out.append((t.id, ref.index, ref.length))
    return out


def rewind_targets(ctx: Context) -> list[int]:
    latest = ctx.latest or 0
    bad = set()
    for r in ctx.outermost_residues():
        bad.update(range(r.first, r.last))
    return [x for x in range(0, latest + 1) if x not in bad]


ACTIONS = ["prompt", "assistant", "assistant", "assistant", "results", "results", "results",
           "steering", "evict", "evict", "mark", "sweep", "clear", "rewind", "forensic"]


@st.composite
def sessions(draw, max_records: int = 40, agent: str = "a1") -> list[Record]:
    """A valid log as records, ``SessionStarted`` first; every one is accepted by ``step``."""
    ctx = Context(f"agents/{agent}/record.jsonl")
    started = SessionStarted(agent=agent, at="2026-11-30T00:00:00Z",
                             system=draw(st.none() | st.just("You are terse.")))
    out: list[Record] = [started]
    ctx.step(started)
    n = draw(st.integers(1, max_records))
    for _ in range(n):
        action = draw(st.sampled_from(ACTIONS))
        rec: Record | None = None
        if ctx.in_hand is None and action not in ("prompt", "assistant", "forensic"):
            action = draw(st.sampled_from(["prompt", "assistant"]))
        if action == "prompt":
            tid = ctx.next_id() + draw(st.integers(0, 2))
            rec = UserPrompt(turn=tid, text=draw(texts))
        elif action == "assistant":
            tid = ctx.next_id() + draw(st.integers(0, 2))
            bl = draw(blocks(tid))
            has_calls = any(isinstance(b, ToolUse) for b in bl)
            rec = AssistantMessage(turn=tid, blocks=bl,
                                   stop_reason="tool_use" if has_calls else "end_turn",
                                   model=draw(st.none() | st.just("m-1")), usage=draw(usages))
        elif action == "results":
            pending = [c.id for c in ctx.pending_calls()]
            if pending:
                chosen = draw(st.lists(st.sampled_from(pending), min_size=1, unique=True))
                rec = ToolResults(results=[ToolResult(tool_use_id=c, content=draw(texts),
                                                      is_error=draw(st.booleans()))
                                           for c in chosen])
        elif action == "steering":
            rec = Steering(text=draw(texts), by=draw(st.sampled_from([None, "harness", "user"])))
        elif action == "evict":
            spans = frontier_spans(ctx)
            if spans:
                span = draw(st.sampled_from(spans))
                rec = Evicted(residue=Residue(span=span, note=draw(notes()),
                                             by=draw(st.sampled_from(["model", "harness"]))))
        elif action == "mark":
            cands = markable(ctx)
            if cands:
                tid, idx, length = draw(st.sampled_from(cands))
                repl = draw(st.text(alphabet="rplc", min_size=1, max_size=length - 1))
                rec = Marked(block=(tid, idx), replacement=repl)
        elif action == "sweep":
            if ctx.marks:
                keys = sorted(ctx.marks)
                rec = Swept(blocks=draw(st.lists(st.sampled_from(keys), min_size=1, unique=True)))
        elif action == "clear":
            if draw(st.integers(0, 3)) == 0:
                rec = Cleared()
        elif action == "rewind":
            targets = rewind_targets(ctx)
            if targets:
                rec = Rewound(to=draw(st.sampled_from(targets)))
        else:
            rec = draw(st.sampled_from([
                TurnStarted(turn=ctx.next_id(), at="2026-11-30T00:00:01Z"),
                ProviderCall(attempt=1, latency_s=0.5, usage=Usage(input_tokens=3)),
                ProviderCall(attempt=2, latency_s=0.1, error="overloaded")]))
        if rec is None:
            continue
        ctx.step(rec)
        out.append(rec)
    return out


def fold_records(records: list[Record], source: str = "agents/a1/record.jsonl",
                 lengths: list[int] | None = None) -> Context:
    """The table ``step`` builds from records alone (loci are the encoded lines' lengths, or
    ``lengths``: the lines as a chained log holds them)."""
    ctx = Context(source)
    for i, r in enumerate(records):
        ctx.step(r, None if lengths is None else (0, lengths[i], ""))
    return ctx


__all__ = ["sessions", "notes", "texts", "blocks", "tool_inputs", "usages", "frontier_spans",
           "markable", "rewind_targets", "fold_records", "ResidueEntry", "NASTY"]


def fresh_log(tmp_path, first: Record, source: str = "agents/a1/record.jsonl"):
    """An agent log at ``source`` under ``tmp_path`` opened with ``first``: hypothesis reuses a
    test's ``tmp_path`` across examples, so the previous example's file goes first."""
    from mnemon.session.agentlog import AgentLog

    path = tmp_path / source
    if path.exists():
        path.unlink()
    return AgentLog.create(path, source, first)
