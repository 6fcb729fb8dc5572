"""The approval records in the fold: judged (asked once about an unanswered call of the turn in
hand, decided once, no result before the decision), kept per turn in hand, and carried by the
fold checkpoint."""

from __future__ import annotations

import pytest

from mnemon.session.context import Context
from mnemon.session.errors import Refusal
from mnemon.session.records import (ApprovalDecided, ApprovalRequested, AssistantMessage,
                                    SessionStarted, ToolResult, ToolResults, ToolUse,
                                    UserPrompt, decode, encode)


def base() -> Context:
    ctx = Context("agents/a1/record.jsonl")
    for rec in (SessionStarted(agent="a1"), UserPrompt(turn=1, text="go"),
                AssistantMessage(turn=2, blocks=[ToolUse("c1", "write", {"p": 1}),
                                                 ToolUse("c2", "read", {})],
                                 stop_reason="tool_use", model=None, usage=None)):
        line = encode(rec)
        ctx.step(rec, (0, len(line), "0" * 16))
    return ctx


def step(ctx: Context, rec) -> None:
    line = encode(rec)
    ctx.step(rec, (0, len(line), "0" * 16))


REQ = ApprovalRequested(call_id="c1", tool="write", input={"p": 1}, rule="p rule 1",
                        reason="why")


def test_requests_and_decisions_are_judged():
    ctx = base()
    with pytest.raises(Refusal, match="no approval is pending"):
        step(ctx, ApprovalDecided(call_id="c1", decision="approve"))
    with pytest.raises(Refusal, match="not an unanswered call"):
        step(ctx, ApprovalRequested(call_id="zz", tool="write", input={}))
    step(ctx, REQ)
    with pytest.raises(Refusal, match="a second approval request"):
        step(ctx, REQ)
    with pytest.raises(Refusal, match="still awaits its approval"):
        step(ctx, ToolResults(results=[ToolResult(tool_use_id="c1", content="x")]))
    step(ctx, ToolResults(results=[ToolResult(tool_use_id="c2", content="read")]))  # not asked
    step(ctx, ApprovalDecided(call_id="c1", decision="reject", reason="no", by="api"))
    with pytest.raises(Refusal, match="a second decision"):
        step(ctx, ApprovalDecided(call_id="c1", decision="approve"))
    step(ctx, ToolResults(results=[ToolResult(tool_use_id="c1", content="no", is_error=True)]))
    assert ctx.approvals["c1"][1].decision == "reject"
    step(ctx, UserPrompt(turn=3, text="next"))
    assert ctx.approvals == {}  # they belong to the turn in hand


def test_an_unknown_decision_does_not_decode():
    line = b'{"t":"ApprovalDecided","call_id":"c1","decision":"maybe"}'
    with pytest.raises(Exception):
        decode(line)


def test_the_records_change_nothing_sent():
    from mnemon.session.render import render

    a, b = base(), base()
    step(b, REQ)
    assert render(a) == render(b) and a.history_bytes() == b.history_bytes()


def test_the_fold_checkpoint_carries_a_pending_request(tmp_path, monkeypatch):
    """A log reopened from its checkpoint (no refold) still holds the request pending."""
    from mnemon.session.agentlog import AgentLog
    from mnemon.session.checkpoint import layout

    monkeypatch.setattr(layout, "MIN_BYTES", 0)
    src = "agents/a1/record.jsonl"
    path = tmp_path / src
    path.parent.mkdir(parents=True)
    (tmp_path / "run.json").write_text('{"format": 1}')
    alog = AgentLog.create(path, src, SessionStarted(agent="a1"))
    alog.prompt("go")
    alog.assistant([ToolUse("c1", "write", {"p": 1})], "tool_use", None, None)
    alog.append(REQ)
    alog.close(checkpoint=True)
    assert list(path.parent.glob("*")) != [path]  # a checkpoint beside the log
    again, _torn = AgentLog.resume(path, src)
    (req, dec), = again.ctx.approvals.values()
    assert req == REQ and dec is None
    again.append(ApprovalDecided(call_id="c1", decision="approve"))
    again.close()
