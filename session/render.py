"""Rendering: the frontier as provider-neutral messages, a pure function of the table.

No clocks, no unordered containers, no paths: between two edits the rendered prefix is
byte-identical, because nondeterminism here is a prompt-cache bug. The harness states facts in
the user's voice; it never speaks as the model and never fabricates a prompt.

Below the fold: rendering reads the table (its frontier, a turn's records, a residue entry) and
imports only the turn, so the fold can weigh a residue by its message (``residue_message``, a
function of the entry alone) without a cycle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .constants import RESIDUE_MAX_BYTES
from .records import (
    AssistantMessage,
    Opaque,
    Steering,
    Text,
    Thinking,
    ToolResults,
    ToolUse,
    UserPrompt,
    compact,
)
from .turn import ResidueEntry, Turn

if TYPE_CHECKING:  # for annotations only: the fold imports rendering, never the reverse
    from .context import Context

Message = dict[str, Any]

INTERRUPTED = "no result was recorded for this call: the turn that made it was interrupted"


def replacement_label(turn: int, index: int, replacement: str) -> str:
    """How a swept block reads: visibly a replacement, with its read-back address."""
    return (f"[replacement for block {turn}.{index}, written when it was marked; the original "
            f"reads back with transcript_read(turns=[{turn}])] {replacement}")


def _fmt_bytes(n: int) -> str:
    if n >= 10 * 1024 * 1024:
        return f"{n / 1024 / 1024:.0f} MiB"
    if n >= 10 * 1024:
        return f"{n / 1024:.0f} KiB"
    return f"{n} bytes"


def _clip_utf8(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", "ignore")


def residue_message(ctx: "Context", r: "ResidueEntry") -> str:
    """One user-voice message under RESIDUE_MAX_BYTES naming the span, weight and note.

    A function of the residue entry alone (span, weight, note, who, the labels it recorded), so
    it never changes while the residue stands. The labels are listed only as far as they fit;
    the note (at most 240 bytes, ``repr``-quoted) and the read-back call always fit.
    """
    a, b = r.span
    who = "the model" if r.by == "model" else "the harness"
    head = f"[Turns {a}-{b} left the context ({_fmt_bytes(r.weight)}), evicted by {who}."
    if r.note is not None:
        head += f" Note left with them: {r.note!r}."
    tail = (f" They are still readable: transcript_read(turns=\"{a}-{b}\"), "
            "transcript_grep(pattern).]")
    if r.by == "harness" and r.labels:
        room = RESIDUE_MAX_BYTES - 1 - len(head.encode("utf-8")) - len(tail.encode("utf-8"))
        shown: list[str] = []
        for label in r.labels:
            cand = " User turns among them, newest first: " + ", ".join(shown + [repr(label)]) + "."
            if len(cand.encode("utf-8")) > room:
                break
            shown.append(repr(label))
        if shown:
            head += " User turns among them, newest first: " + ", ".join(shown) + "."
    return _clip_utf8(head + tail, RESIDUE_MAX_BYTES - 1)


def opening_line(turn_id: int) -> str:
    """The factual user line before a frontier that opens with an assistant turn.

    One wording whatever lies below: a fork carries no withdrawn turns, so a wording that
    depended on them would make a child's first message differ from its parent's and lose the
    whole cached prefix.
    """
    return (f"[The context opens at turn {turn_id}; any earlier turns remain readable with "
            "transcript_index and transcript_read.]")


def _block_out(b: Any, tid: int, idx: int, swept: dict[int, str]) -> dict[str, Any] | None:
    repl = swept.get(idx)
    if isinstance(b, Text):
        if repl is not None:
            return {"type": "text", "text": replacement_label(tid, idx, repl)}
        return {"type": "text", "text": b.text} if b.text else None
    if isinstance(b, Thinking):
        if repl is not None:
            return {"type": "text", "text": replacement_label(tid, idx, repl)}
        return {"type": "thinking", "text": b.text, "signature": b.signature}
    if isinstance(b, ToolUse):
        inp = b.input
        if repl is not None:
            inp = {"replacement": replacement_label(tid, idx, repl)}
        elif not isinstance(inp, dict):
            inp = {}
        return {"type": "tool_use", "id": b.id, "name": b.name, "input": inp}
    if isinstance(b, Opaque):
        if repl is not None:
            return {"type": "text", "text": replacement_label(tid, idx, repl)}
        return {"type": "opaque", "provider": b.provider, "block": b.block}
    raise TypeError(f"unknown block {b!r}")


def turn_messages(t: "Turn") -> list[Message]:
    """A resident turn as neutral messages (before merging)."""
    recs = t.records or []
    sw = t.swept
    idx = 0
    head: list[dict[str, Any]] = []
    role = t.role
    calls: list[str] = []
    results: dict[str, dict[str, Any]] = {}
    order: list[dict[str, Any]] = []
    steering: list[tuple[int, Steering]] = []
    # first pass: count message blocks so results and steering get their render indices
    for r in recs:
        if isinstance(r, UserPrompt):
            repl = sw.get(idx)
            text = replacement_label(t.id, idx, repl) if repl is not None else r.text
            if text:
                head.append({"type": "text", "text": text})
            idx += 1
        elif isinstance(r, AssistantMessage):
            for b in r.blocks:
                out = _block_out(b, t.id, idx, sw)
                if out is not None:
                    head.append(out)
                if isinstance(b, ToolUse):
                    calls.append(b.id)
                idx += 1
    for r in recs:
        if isinstance(r, ToolResults):
            for res in r.results:
                repl = sw.get(idx)
                content = replacement_label(t.id, idx, repl) if repl is not None else res.content
                block = {"type": "tool_result", "tool_use_id": res.tool_use_id,
                         "content": content, "is_error": res.is_error}
                results[res.tool_use_id] = block
                order.append(block)
                idx += 1
    for r in recs:
        if isinstance(r, Steering):
            steering.append((idx, r))
            idx += 1
    msgs: list[Message] = []
    steer = [b for b in (_steer(t.id, i, s, sw) for i, s in steering) if b is not None]
    if role == "user":
        msgs.append({"role": "user", "content": head + steer})
        return msgs
    msgs.append({"role": "assistant", "content": head})
    tail: list[dict[str, Any]] = []
    sent = set()
    for cid in calls:  # results directly follow their calls, in call order
        answer = results.get(cid)
        if answer is None:
            answer = {"type": "tool_result", "tool_use_id": cid, "content": INTERRUPTED,
                      "is_error": True}
        sent.add(cid)
        tail.append(answer)
    tail += steer
    if tail:
        msgs.append({"role": "user", "content": tail})
    return msgs


def _steer(tid: int, idx: int, s: Steering, sw: dict[int, str]) -> dict[str, Any] | None:
    """A steering block; an empty one is not sent (it keeps its block index)."""
    repl = sw.get(idx)
    text = replacement_label(tid, idx, repl) if repl is not None else s.text
    return {"type": "text", "text": text} if text else None


def _from_parent(ctx: "Context") -> dict[tuple, tuple] | None:
    """For a forked child's first render: the turns its parent's last render made, by the
    record objects they were made of — ``(id of the first record, their count, turn id,
    role)`` to the parent's memo entry. A mnemon child holds its parent's record objects
    (``lineage.fork.sharing_loader``) and the fork leaves the parent's table in the child's
    memo (``"render_from"``); taken once, so the child does not keep its parent's table."""
    parent = ctx.memo.pop("render_from", None)
    state = parent.memo.get("render") if parent is not None else None
    if state is None:
        return None
    out = {}
    for entry in state[0].values():
        item, recs = entry[0], entry[2]
        if entry[1] and recs and not entry[4] and len(recs) == entry[3]:  # a turn, as rendered
            out[(id(recs[0]), entry[3], item.id, item.role)] = entry
    return out


def _shared(parent: dict[tuple, tuple] | None, t: "Turn", recs: list) -> tuple | None:
    """The parent's memo entry of an unswept turn made of exactly these record objects, with
    this id and role, or None."""
    if parent is None:
        return None
    entry = parent.get((id(recs[0]), len(recs), t.id, t.role))
    if entry is None or len(entry[2]) != len(recs):
        return None
    for a, b in zip(entry[2], recs):
        if a is not b:
            return None
    return entry


def _entry(ctx: "Context", item: Any, turn: bool,
           parent: dict[tuple, tuple] | None = None) -> tuple:
    """A frontier item's memo entry: (item, whether a turn, its records, their count, swept,
    its items, the messages with content, each message's weight: the sum of its blocks' compact
    sizes and their count, all the byte count needs of them). A residue entry never
    changes while it stands; a turn is remade when any of the four after the flag differ.

    A turn's messages are a function of its records, its swept blocks, its id and its role
    (``turn_messages``): an unswept turn of a forked child made of the records its parent
    rendered takes the parent's messages (``parent``: ``_from_parent``) — the same block
    objects, which the cache model knows by identity, so a child's projected cost and its
    first request hash only what it added (decision 0473)."""
    if turn:
        recs, sw = item.records, item.swept
        key = (recs, len(recs) if recs is not None else -1, sw, tuple(sw.items()))
        if recs and not sw and (got := _shared(parent, item, recs)) is not None:
            return (item, turn, *key, got[6], got[7])
        msgs = turn_messages(item)
    else:
        msgs = [{"role": "user", "content": [{"type": "text",
                                              "text": residue_message(ctx, item)}]}]
        key = (None, -1, None, ())
    msgs = [m for m in msgs if m["content"]]
    # each message's weight: its blocks' compact sizes and their count (what ``render`` adds
    # to the byte count; one int, not a list of them — the memo outlives many collections)
    return (item, turn, *key, msgs,
            tuple([sum([len(compact(b)) + 1 for b in m["content"]]) for m in msgs]))


def _changed(hit: tuple, turn: "Turn") -> bool:
    """Whether a turn's memo entry (``_entry``) no longer describes it."""
    recs, sw = turn.records, turn.swept
    return (hit[2] is not recs or hit[3] != (len(recs) if recs is not None else -1)
            or hit[4] is not sw or bool(sw and hit[5] != tuple(sw.items())))


def render(ctx: "Context") -> list[Message]:
    """The frontier as neutral messages: well-formed for every provider.

    The first message is the user's; each tool call is answered in the next message; adjacent
    messages of the same role are merged; no message is empty.

    Incremental: each turn's messages are kept in ``ctx.memo`` and made again only when the turn
    changed (a record appended, its records loaded or dropped, a block swept), so a turn costs
    what changed, not the whole context. The memo holds the turn itself, so an id is never
    reused under it; turns that left the frontier leave the memo. The longest run of frontier
    items unchanged since the last render, from the first, is not merged again: the messages
    and the byte count as they stood after its last item are taken up again (between edits a
    turn's render costs its own turn). While nothing in the table was edited since the last
    render (``Context.edits``) that run is found without walking the frontier: it is every old
    item but perhaps the last (the turn in hand, which may have grown), and the items after it
    are the turns opened since (decision 0474). The messages are shared between renders and
    must not be mutated (no caller does: adapters copy what they send).
    """
    state = ctx.memo.get("render")
    old, seq, raw, raw_sizes = state[:4] if state is not None else ({}, [], [], [])
    turns = ctx.turns
    if state is not None and seq and state[4] == ctx.edits and state[6] is turns \
            and type(turns) is list:
        # nothing in the table was edited since the last render (``Context.edits``): the
        # frontier is that render's, then the turns opened since (each resident); of the old
        # items only the last, the turn in hand, can have grown
        j = len(seq)
        item, hit = seq[-1][0], seq[-1][1]
        if hit[1] and _changed(hit, item):
            j -= 1
        rest = ([item] if j < len(seq) else []) + turns[state[5]:]
        first = seq[0][0]
    else:
        frontier = ctx.frontier()
        # the items unchanged from the first: same object, and a turn as it was rendered
        # (``_changed`` inlined: this walk runs over the whole frontier)
        j, lim = 0, min(len(seq), len(frontier))
        while j < lim:
            item, hit = seq[j][0], seq[j][1]
            if frontier[j] is not item:
                break
            if hit[1]:  # a turn's entry: still its records, as many, its swept blocks as were
                recs, sw = item.records, item.swept  # type: ignore[union-attr]
                if hit[2] is not recs or hit[3] != (len(recs) if recs is not None else -1) \
                        or hit[4] is not sw or (sw and hit[5] != tuple(sw.items())):
                    break
            j += 1
        rest = frontier[j:]
        first = frontier[0] if frontier else None
    if j:
        _, _, n_out, last, last_sizes, n = seq[j - 1]
        out: list[Message] = raw[:n_out]
        sizes: list[int] = raw_sizes[:n_out]
        if n_out:  # the last message as it stood then (a later item may have merged into it)
            out[-1], sizes[-1] = last, last_sizes
        new_seq = seq[:j]
    else:
        out, sizes, new_seq, n = [], [], [], 1
    if j == len(seq) or (j == len(seq) - 1 and rest):
        memo = old  # appended to, or its last item changed: every earlier entry still stands
        if j < len(seq) and seq[j][0] is not rest[0]:
            memo.pop(id(seq[j][0]), None)  # the last item left the frontier
    else:  # an edit inside the frontier: keep the entries of the items still on it only
        memo = {id(x[0]): x[1] for x in new_seq}
    parent = _from_parent(ctx) if "render_from" in ctx.memo else None
    for item in rest:
        hit = old.get(id(item))
        if hit is None or hit[0] is not item:
            hit = _entry(ctx, item, isinstance(item, Turn), parent)
        elif hit[1] and _changed(hit, item):
            hit = _entry(ctx, item, True)
        memo[id(item)] = hit
        for m, z in zip(hit[6], hit[7]):
            if out and out[-1]["role"] == m["role"]:
                out[-1] = {"role": m["role"], "content": out[-1]["content"] + m["content"]}
                sizes[-1] += z
                n += z  # the blocks and their commas, in the message before
            else:
                out.append(m)
                sizes.append(z)
                n += _HEAD[m["role"]] + z + 1 + 1  # its head, blocks and commas, '],' ','
        new_seq.append((item, hit, len(out), out[-1] if out else None,
                        sizes[-1] if sizes else None, n))
    # (the next render copies ``out``; the table's edits, its turns and their number then)
    ctx.memo["render"] = (memo, new_seq, out, sizes, ctx.edits, len(turns), turns)
    if out and out[0]["role"] != "user":
        if first is None:
            first = rest[0]
        tid = first.id if isinstance(first, Turn) else first.first
        line = {"type": "text", "text": opening_line(tid)}
        out = [{"role": "user", "content": [line]}, *out]
        n += _HEAD["user"] + len(compact(line)) + 3
    # ``n`` is the byte size of ``compact(out)``, counted as it grew: '[' + messages joined by
    # ',' + ']', each message '{"role":"<role>","content":[' + blocks joined by ',' + ']}' —
    # 1 + len(out) + the sum over messages of (head + blocks' sizes + their count + 1)
    if not out:
        n = 2
    ctx.memo["rendered"] = (out, n)
    return out


_HEAD = {role: len(f'{{"role":"{role}","content":[') for role in ("user", "assistant")}


def rendered_bytes(ctx: "Context", messages: list[Message]) -> int | None:
    """``len(compact(messages))`` when ``messages`` is the list ``render(ctx)`` last returned
    (known without encoding it again), else None."""
    got = ctx.memo.get("rendered")
    return got[1] if got is not None and got[0] is messages else None
