"""Rendering is well-formed for every provider and deterministic, under random edits."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemon.session.constants import RESIDUE_MAX_BYTES
from mnemon.session.context import Context
from mnemon.session.records import (
    AssistantMessage,
    Cleared,
    Evicted,
    Marked,
    Residue,
    SessionStarted,
    Steering,
    Swept,
    Text,
    Thinking,
    ToolResult,
    ToolResults,
    ToolUse,
    UserPrompt,
)
from mnemon.session.render import INTERRUPTED, render, residue_message
from mnemon.session.resume import fold_file
from mnemon.session.turn import Turn
from tests.strategies import fresh_log, sessions

SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


def assert_well_formed(msgs: list[dict]) -> None:
    """The strictest provider's rules (Anthropic Messages), on the neutral messages."""
    if not msgs:
        return
    assert msgs[0]["role"] == "user", msgs[0]
    for i, m in enumerate(msgs):
        assert m["role"] in ("user", "assistant")
        assert m["content"], f"message {i} is empty"
        for b in m["content"]:
            if b["type"] == "text":
                assert b["text"], f"message {i} sends an empty text block"
        if i:
            assert msgs[i - 1]["role"] != m["role"], f"messages {i - 1} and {i} share a role"
        calls = [b["id"] for b in m["content"] if b["type"] == "tool_use"]
        results = [b for b in m["content"] if b["type"] == "tool_result"]
        if m["role"] == "assistant":
            assert not results
            if calls:
                nxt = msgs[i + 1] if i + 1 < len(msgs) else None
                assert nxt is not None and nxt["role"] == "user", "a tool call left unanswered"
                head = nxt["content"][:len(calls)]
                assert [b.get("tool_use_id") for b in head] == calls, "results not first, in order"
                assert all(b["type"] == "tool_result" for b in head)
        else:
            assert not calls
            if results:
                prev = msgs[i - 1] if i else None
                assert prev is not None and prev["role"] == "assistant", "a tool result with no call"
                prev_calls = [b["id"] for b in prev["content"] if b["type"] == "tool_use"]
                assert [b["tool_use_id"] for b in results] == prev_calls
                assert m["content"][:len(results)] == results


def _bytes(msgs) -> bytes:
    return json.dumps(msgs, ensure_ascii=False).encode("utf-8")


@SETTINGS
@given(records=sessions())
def test_render_well_formed_and_deterministic(tmp_path, records):
    log = fresh_log(tmp_path, records[0])
    for r in records[1:]:
        log.append(r)
        msgs = render(log.ctx)
        assert_well_formed(msgs)
        assert _bytes(render(log.ctx)) == _bytes(msgs)
        for item in log.ctx.frontier():
            if not hasattr(item, "role"):
                assert len(residue_message(log.ctx, item).encode()) < RESIDUE_MAX_BYTES
    log.close()
    folded, _ = fold_file(log.path, "agents/a1/record.jsonl")
    assert _bytes(render(folded)) == _bytes(render(log.ctx))


@SETTINGS
@given(records=sessions())
def test_incremental_render_equals_a_fresh_one_after_every_record(tmp_path, records):
    """The renderer's per-turn memo (kept across calls in ``ctx.memo``) never shows a stale
    turn: after each record — appends, evictions, marks, sweeps, clears — it gives what a
    render with no memo gives, and its byte count is the compact encoding's length."""
    from mnemon.session.records import compact
    from mnemon.session.render import rendered_bytes

    log = fresh_log(tmp_path, records[0])
    for r in records[1:]:
        log.append(r)
        msgs = render(log.ctx)  # memo from the previous record's render
        n = rendered_bytes(log.ctx, msgs)
        assert n == len(compact(msgs))
        log.ctx.memo.pop("render", None)
        log.ctx.memo.pop("rendered", None)
        fresh = render(log.ctx)
        assert _bytes(msgs) == _bytes(fresh)
        assert rendered_bytes(log.ctx, msgs) is None  # not the list last rendered any more
    log.close()


def test_rendered_messages_are_shared_not_remade_for_an_unchanged_turn():
    ctx = _ctx(UserPrompt(turn=1, text="look"), _call(2, "c1"),
               ToolResults(results=[ToolResult(tool_use_id="c1", content="out")]))
    first = render(ctx)
    again = render(ctx)
    assert again[0] is first[0]  # the first turn's message, from the memo
    ctx.step(AssistantMessage(turn=3, blocks=[Text("done")], stop_reason="end_turn", model=None,
                              usage=None))
    third = render(ctx)
    assert third[0] is first[0] and third[-1]["content"] == [{"type": "text", "text": "done"}]


@SETTINGS
@given(records=sessions(), cut=st.integers(min_value=0, max_value=200))
def test_a_child_made_of_its_parents_records_renders_as_alone(records, cut):
    """A table made of the same record objects as another (a forked mnemon child holds its
    parent's: ``lineage.fork.sharing_loader``), told so as the fork tells it (``render_from``):
    its first render takes the other's messages for those turns (the same block objects, so
    the cache model knows them by identity), and is what it would render alone — also once the
    two have gone apart, each with records of its own (sweeps, evictions, new turns) after the
    first ``cut``. The hint is taken once: the child does not keep its parent's table."""
    from mnemon.session.records import compact

    a, b = Context("agents/a1/record.jsonl"), Context("agents/a1/record.jsonl")
    k = min(cut, len(records))
    for r in records[:k]:
        a.step(r)
        b.step(r)
    first = render(a)
    b.memo["render_from"] = a
    second = render(b)
    assert "render_from" not in b.memo
    assert _bytes(first) == _bytes(second)
    made = {t.id: e for t, e in ((x[0], x[1]) for x in a.memo["render"][1])
            if isinstance(t, Turn)}
    for item, entry in ((x[0], x[1]) for x in b.memo["render"][1]):
        if isinstance(item, Turn) and item.records and not item.swept:
            assert entry[6] is made[item.id][6], "the turn's messages are shared, not made again"
    for r in records[k:]:  # the second goes on alone: what it renders is its own
        b.step(r)
        got = render(b)
        n = len(compact(got))
        b.memo.clear()
        assert _bytes(got) == _bytes(render(b)) and len(compact(render(b))) == n
    assert _bytes(render(a)) == _bytes(first)  # and the first is unchanged by it


def test_a_child_whose_parent_went_on_takes_only_the_turns_as_they_were():
    """A parent that appended to a turn after its last render: the child (holding the turn as
    it is now) does not take the parent's stale messages for it; a swept turn is not taken."""
    parent = _ctx(UserPrompt(turn=1, text="look"), _call(2, "c1"))
    render(parent)
    done = ToolResults(results=[ToolResult(tool_use_id="c1", content="out")])
    parent.step(done)  # turn 2 grew after the render
    alone = Context("agents/a1/record.jsonl")
    for r in (SessionStarted(agent="a1"), *parent.turns[0].records, *parent.turns[1].records):
        alone.step(r)
    child = Context("agents/a1/record.jsonl")
    for r in (SessionStarted(agent="a1"), *parent.turns[0].records, *parent.turns[1].records):
        child.step(r)
    child.memo["render_from"] = parent
    got = render(child)
    assert _bytes(got) == _bytes(render(alone))
    assert got[-1]["content"][0]["content"] == "out"  # the result, not the interrupted call


def _ctx(*records) -> Context:
    ctx = Context("agents/a1/record.jsonl")
    ctx.step(SessionStarted(agent="a1"))
    for r in records:
        ctx.step(r)
    return ctx


def _call(tid, *ids, text="go"):
    return AssistantMessage(turn=tid, blocks=[Text(text)] + [ToolUse(i, "bash", {"n": i}) for i in ids],
                            stop_reason="tool_use", model=None, usage=None)


def test_results_follow_calls_in_call_order_and_steering_after():
    ctx = _ctx(UserPrompt(turn=1, text="hi"), _call(2, "a", "b"),
               Steering(text="nudge", by="harness"),
               ToolResults(results=[ToolResult(tool_use_id="b", content="B")]),
               ToolResults(results=[ToolResult(tool_use_id="a", content="A")]),
               UserPrompt(turn=3, text="next"))
    msgs = render(ctx)
    assert_well_formed(msgs)
    tail = msgs[2]["content"]
    assert [b.get("tool_use_id") or b["text"] for b in tail] == ["a", "b", "nudge", "next"]


def test_interrupted_call_gets_a_factual_error_result():
    ctx = _ctx(UserPrompt(turn=1, text="hi"), _call(2, "a", "b"),
               ToolResults(results=[ToolResult(tool_use_id="a", content="A")]),
               AssistantMessage(turn=3, blocks=[Text("moving on")], stop_reason="end_turn",
                                model=None, usage=None))
    msgs = render(ctx)
    assert_well_formed(msgs)
    res = msgs[2]["content"]
    assert res[1] == {"type": "tool_result", "tool_use_id": "b", "content": INTERRUPTED,
                      "is_error": True}


def test_opening_assistant_turn_gets_a_factual_user_line():
    ctx = _ctx(UserPrompt(turn=1, text="hi"), Cleared(),
               AssistantMessage(turn=2, blocks=[Text("alone")], stop_reason="end_turn", model=None,
                                usage=None))
    msgs = render(ctx)
    assert msgs[0]["role"] == "user" and "turn 2" in msgs[0]["content"][0]["text"]
    assert msgs[1] == {"role": "assistant", "content": [{"type": "text", "text": "alone"}]}


def test_empty_text_blocks_are_not_sent_but_keep_their_index():
    ctx = _ctx(UserPrompt(turn=1, text="hi"),
               AssistantMessage(turn=2, blocks=[Text(""), Text("long enough text here")],
                                stop_reason="end_turn", model=None, usage=None),
               UserPrompt(turn=3, text="x"),
               Marked(block=(2, 1), replacement="short"), Swept(blocks=[(2, 1)]))
    msgs = render(ctx)
    assert msgs[1]["content"] == [{"type": "text", "text": msgs[1]["content"][0]["text"]}]
    assert "block 2.1" in msgs[1]["content"][0]["text"]
    assert msgs[1]["content"][0]["text"].endswith("short")


def test_swept_tool_use_keeps_id_and_name_and_swept_thinking_is_text():
    ctx = _ctx(UserPrompt(turn=1, text="hi"),
               AssistantMessage(turn=2, blocks=[Thinking("a long chain of thought", "sig"),
                                                ToolUse("c1", "bash", {"command": "cat big.txt"})],
                                stop_reason="tool_use", model=None, usage=None),
               ToolResults(results=[ToolResult(tool_use_id="c1", content="x" * 100)]),
               UserPrompt(turn=3, text="next"),
               Marked(block=(2, 0), replacement="thought"), Marked(block=(2, 1), replacement="cat"),
               Marked(block=(2, 2), replacement="100 x"),
               Swept(blocks=[(2, 0), (2, 1), (2, 2)]))
    msgs = render(ctx)
    assert_well_formed(msgs)
    a = msgs[1]["content"]
    assert a[0]["type"] == "text" and "block 2.0" in a[0]["text"]
    assert a[1]["type"] == "tool_use" and a[1]["id"] == "c1" and a[1]["name"] == "bash"
    assert "block 2.1" in a[1]["input"]["replacement"]
    assert "block 2.2" in msgs[2]["content"][0]["content"]


def test_residue_message_is_bounded_quotes_the_note_and_lists_user_labels():
    recs = []
    for i in range(1, 41, 2):
        recs += [UserPrompt(turn=i, text=f"question {i} " + "é" * 200),
                 AssistantMessage(turn=i + 1, blocks=[Text("y" * 5000)], stop_reason="end_turn",
                                  model=None, usage=None)]
    ctx = _ctx(*recs, UserPrompt(turn=41, text="now"),
               Evicted(residue=Residue(span=(1, 40), note="ü" * 120, by="harness")))
    r = ctx.frontier()[0]
    msg = residue_message(ctx, r)
    assert len(msg.encode()) < RESIDUE_MAX_BYTES
    assert "[1, 40]" in msg or "1-40" in msg
    assert repr("ü" * 120)[:20] in msg
    assert "question 39" in msg and "question 35" in msg and "question 33" not in msg
    # the model's eviction names no labels
    ctx2 = _ctx(*recs, UserPrompt(turn=41, text="now"),
                Evicted(residue=Residue(span=(1, 40), note="n", by="model")))
    assert "question" not in residue_message(ctx2, ctx2.frontier()[0])


def test_a_render_after_appends_only_does_not_walk_the_frontier(monkeypatch):
    """Between edits (``Context.edits``: an eviction, a sweep, a clear, a rewind, a link) the
    frontier only grows at its end: a render takes the last render's items and the turns opened
    since, and does not make the frontier again (a long context's render costs its new turn,
    not its length). After an edit it does, and both give what a render with no memo gives."""
    ctx = _ctx(UserPrompt(turn=1, text="look"), _call(2, "c1"),
               ToolResults(results=[ToolResult(tool_use_id="c1", content="out")]))
    render(ctx)
    walks = []
    made = Context.frontier
    monkeypatch.setattr(Context, "frontier", lambda self: walks.append(1) or made(self))
    for tid in range(3, 40, 2):
        ctx.step(UserPrompt(turn=tid, text=f"more {tid}"))
        got = render(ctx)
        ctx.step(_call(tid + 1, f"c{tid}"))
        ctx.step(Steering(text="steer", by="user"))  # the turn in hand grows after its render
        got = render(ctx)
        ctx.step(ToolResults(results=[ToolResult(tool_use_id=f"c{tid}", content=f"r{tid}")]))
        got = render(ctx)
    assert walks == []
    fresh = Context("agents/a1/record.jsonl")
    for t in ctx.turns:
        for r in ([SessionStarted(agent="a1")] if t is ctx.turns[0] else []) + t.records:
            fresh.step(r)
    assert _bytes(got) == _bytes(render(fresh))
    ctx.step(Evicted(residue=Residue(span=(1, 4), note="early", by="model")))
    walks.clear()
    after = render(ctx)
    assert walks == [1]  # an edit: the frontier made again
    ctx.memo.clear()
    assert _bytes(after) == _bytes(render(ctx))
