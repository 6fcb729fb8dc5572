"""The gate end to end: deny, ask (decided in code, by a person through the registry, by the
clock), edited input, and a pending approval that survives the process."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio

from mnemon.orchestrator.approvals import (AlreadyDecided, BadDecision, Decision,
                                           UnknownApproval)
from mnemon.orchestrator.mcp.config import McpServerSpec
from mnemon.orchestrator.policy import parse_policy
from mnemon.orchestrator.settings import Settings
from mnemon.orchestrator.supervisor import Supervisor, open_supervisor

from .conftest import Counter, caller, provider, records, verify

HERE = Path(__file__).resolve().parent

ASK_WRITES = {"default": "allow", "rule": [
    {"tool": "write", "when": {"path": "^/etc/"}, "action": "deny", "reason": "not /etc"},
    {"tool": "write", "action": "ask", "reason": "writes need a yes"}]}


def st(policy: dict | None, **kw) -> Settings:
    return Settings(system="t", model="claude-sonnet-4-5",
                    tool_policy=parse_policy(policy, "test-policy") if policy else None, **kw)


async def test_a_denied_mcp_tool_is_never_called_and_the_model_reads_why(tmp_path):
    """A real stdio MCP server, counting its calls: the denied call never reaches it, the
    allowed one does; the model reads the rule and its reason; the log verifies."""
    pytest.importorskip("mcp")
    calls = tmp_path / "calls.jsonl"
    server = McpServerSpec(name="tools", transport="stdio", command=sys.executable,
                           args=(str(HERE.parent / "mcp" / "toolserver.py"),),
                           env={"TOOLSERVER_CALLS": str(calls)}, tool_timeout_s=10.0,
                           startup_timeout_s=60.0)
    pol = {"rule": [{"tool": "tools__shout", "action": "deny", "reason": "no shouting"}]}
    model = caller(("c1", "tools__shout", {"text": "hi"}), ("c2", "tools__add", {"a": 1, "b": 2}))
    root = tmp_path / "run"
    with trio.fail_after(90):
        async with open_supervisor(root, provider(model), st(pol, mcp_servers=(server,))) as sup:
            node = await sup.ask("use the tools")
    assert node.reason == "done"
    lines = calls.read_text().splitlines() if calls.exists() else []
    assert [l for l in lines if "shout" in l] == []
    assert len([l for l in lines if '"add"' in l]) == 1
    denied, added = model.seen
    assert denied["is_error"] and "no shouting" in str(denied["content"])
    assert "test-policy rule 1" in str(denied["content"])
    assert "3" in str(added["content"])
    res = [r for rec in records(root) if rec["t"] == "ToolResults" for r in rec["results"]]
    assert res[0]["is_error"] and "test-policy rule 1" in res[0]["content"]
    verify(root)


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_a_decider_in_code_approves_rejects_and_edits(tmp_path, asynchronous):
    """A Python callback decides (sync or async): an approved call runs once; an edited one
    runs with the edited input; a rejected one never runs and the model reads the reason."""
    counter = Counter()
    model = caller(("c1", "write", {"path": "/tmp/a", "text": "one"}),
                   ("c2", "write", {"path": "/tmp/b", "text": "two"}),
                   ("c3", "write", {"path": "/tmp/c", "text": "three"}),
                   ("c4", "write", {"path": "/etc/x"}))
    asked = []

    def decide(p):
        asked.append(p.as_dict())
        return {"/tmp/a": Decision("approve"),
                "/tmp/b": Decision("approve", input={"path": "/tmp/B", "text": "edited"}),
                "/tmp/c": Decision("reject", reason="not that one")}[p.input["path"]]

    async def decide_async(p):
        await trio.sleep(0)
        return decide(p)

    root = tmp_path / "run"
    with trio.fail_after(30):
        async with open_supervisor(root, provider(model), st(ASK_WRITES),
                                   user_tools=[counter.tool]) as sup:
            sup.approvals.decider = decide_async if asynchronous else decide
            node = await sup.ask("write")
    assert node.reason == "done"
    assert counter.calls == [{"path": "/tmp/a", "text": "one"},
                             {"path": "/tmp/B", "text": "edited"}]
    assert [a["call_id"] for a in asked] == ["c1", "c2", "c3"]  # /etc is denied, never asked
    assert asked[0]["reason"] == "writes need a yes" and asked[0]["rule"] == "test-policy rule 2"
    a, b, c, d = model.seen
    assert not a["is_error"] and not b["is_error"] and "/tmp/B" in str(b["content"])
    assert c["is_error"] and "not that one" in str(c["content"])
    assert d["is_error"] and "not /etc" in str(d["content"])
    recs = records(root)
    req = [r for r in recs if r["t"] == "ApprovalRequested"]
    dec = [r for r in recs if r["t"] == "ApprovalDecided"]
    assert [r["call_id"] for r in req] == ["c1", "c2", "c3"]
    assert req[0]["input"] == {"path": "/tmp/a", "text": "one"} and req[0]["tool"] == "write"
    assert [(r["decision"], r["by"]) for r in dec] == [("approve", "callback")] * 2 + [
        ("reject", "callback")]
    assert dec[1]["input"] == {"path": "/tmp/B", "text": "edited"}
    verify(root)


async def test_an_agent_waits_for_a_person_while_others_go_on(tmp_path):
    """No decider: the request is listed, the agent waits, another agent finishes meanwhile;
    the decision comes in by the registry (404 / 409 / 400 as the service maps them)."""
    counter = Counter()

    def model(request, state):
        if request.meta["agent"] == "a1":
            return waiting(request, state)
        return other(request, state)

    waiting = caller(("c1", "write", {"path": "/tmp/a", "text": "x"}))
    other = caller(answer="the other one")
    root = tmp_path / "run"
    with trio.fail_after(30):
        async with open_supervisor(root, provider(model), st(ASK_WRITES),
                                   user_tools=[counter.tool]) as sup:
            a1 = sup.new_root("write")
            sup.start(a1)
            while not sup.approvals.pending():
                await trio.sleep(0.01)
            a2 = await sup.ask("something else")
            assert a2.reason == "done" and a1.state == "running"
            (p,) = sup.approvals.pending()
            assert p.as_dict()["agent"] == "a1" and p.call_id == "c1" and p.requested_at
            assert counter.calls == []
            with pytest.raises(BadDecision):
                sup.approvals.decide("a1", "c1", "maybe")
            with pytest.raises(BadDecision):
                sup.approvals.decide("a1", "c1", "reject", input={"path": "x"})
            with pytest.raises(UnknownApproval):
                sup.approvals.decide("a2", "c1", "approve")  # another agent's call
            with pytest.raises(UnknownApproval):
                sup.approvals.decide("a1", "nope", "approve")
            rec = sup.approvals.decide("a1", "c1", "approve", by="test")
            assert rec.decision == "approve"
            with pytest.raises(AlreadyDecided):
                sup.approvals.decide("a1", "c1", "approve")
            await a1.done.wait()
    assert a1.reason == "done" and len(counter.calls) == 1
    verify(root)


async def test_an_unanswered_ask_expires_as_a_rejection(tmp_path):
    counter = Counter()
    model = caller(("c1", "write", {"path": "/tmp/a"}))
    root = tmp_path / "run"
    pol = {**ASK_WRITES, "ask_timeout": 0.2}
    with trio.fail_after(30):
        async with open_supervisor(root, provider(model), st(pol),
                                   user_tools=[counter.tool]) as sup:
            node = await sup.ask("write")
    assert node.reason == "done" and counter.calls == []
    (dec,) = [r for r in records(root) if r["t"] == "ApprovalDecided"]
    assert dec["decision"] == "reject" and dec["by"] == "timeout"
    assert "no decision within 0.2 s" in model.seen[0]["content"]


async def test_a_pending_approval_survives_the_process(tmp_path):
    """The process dies while a call waits (the log as it was then is put back: no end
    recorded); a new supervisor resumes the run, the request is pending again — not asked
    twice — and approving it runs the tool once; the agent finishes; the log verifies."""
    counter = Counter()
    root = tmp_path / "run"
    log = root / "agents" / "a1" / "record.jsonl"
    model = caller(("c1", "write", {"path": "/tmp/a", "text": "x"}))
    with trio.fail_after(30):
        async with open_supervisor(root, provider(model), st(ASK_WRITES),
                                   user_tools=[counter.tool]) as sup:
            a1 = sup.new_root("write")
            sup.start(a1)
            while not sup.approvals.pending():
                await trio.sleep(0.01)
            at_crash = log.read_bytes()
            sup.cancel("a1")
    log.write_bytes(at_crash)  # as a SIGKILL would have left it
    assert counter.calls == []
    model2 = caller(answer="after the restart")  # a fresh model: no recorded turn again
    with trio.fail_after(30):
        async with open_supervisor(root, provider(model2), st(ASK_WRITES),
                                   user_tools=[counter.tool]) as sup:
            (node,) = sup.resume_run()
            sup.start(node)
            while not sup.approvals.pending():
                await trio.sleep(0.01)
            (p,) = sup.approvals.pending()
            assert (p.agent, p.call_id, p.tool) == ("a1", "c1", "write")
            sup.approvals.decide("a1", "c1", "approve")
            await node.done.wait()
    assert node.reason == "done" and node.answer == "after the restart"
    assert not model2.seen[0]["is_error"] and "wrote /tmp/a" in model2.seen[0]["content"]
    assert counter.calls == [{"path": "/tmp/a", "text": "x"}]
    recs = records(root)
    assert len([r for r in recs if r["t"] == "ApprovalRequested"]) == 1
    assert len([r for r in recs if r["t"] == "AssistantMessage"]) == 2
    verify(root)


async def test_an_approval_decided_before_the_stop_is_not_run_again(tmp_path):
    """A decision recorded, then the process died before the call's result: at most once —
    the resumed agent answers the call as not run again, and goes on."""
    counter = Counter()
    root = tmp_path / "run"
    log = root / "agents" / "a1" / "record.jsonl"
    model = caller(("c1", "write", {"path": "/tmp/a"}))
    snap = {}
    with trio.fail_after(30):
        async with open_supervisor(root, provider(model), st(ASK_WRITES),
                                   user_tools=[counter.tool]) as sup:
            a1 = sup.new_root("write")
            sup.start(a1)
            while not sup.approvals.pending():
                await trio.sleep(0.01)
            sup.approvals.decide("a1", "c1", "approve")
            snap["log"] = log.read_bytes()  # the decision is recorded; the result not yet
            await a1.done.wait()
    log.write_bytes(snap["log"])
    seen = caller(answer="ok")
    with trio.fail_after(30):
        async with open_supervisor(root, provider(seen), st(ASK_WRITES),
                                   user_tools=[counter.tool]) as sup:
            (node,) = sup.resume_run()
            await sup.run(node)
    assert node.reason == "done" and len(counter.calls) == 1  # the first process's run only
    assert seen.seen[0]["is_error"] and "not run again" in seen.seen[0]["content"]
    verify(root)


async def test_a_child_with_a_looser_policy_of_its_own_is_still_held_by_its_parents(tmp_path):
    """The parent's policy denies ``write`` and asks about ``agents_start`` (a built-in, gated
    like any tool); a child given settings of its own that allow everything is still denied
    ``write``: children only narrow."""
    counter = Counter()
    strict = {"default": "allow", "rule": [
        {"tool": "write", "action": "deny", "reason": "the parent says no"},
        {"tool": "agents_start", "action": "ask", "reason": "children cost"}]}
    loose = {"default": "allow"}

    def model(request, state):
        if request.meta["agent"] == "a1":
            return parent(request, state)
        return child(request, state)

    parent = caller(("p1", "agents_start", {"task": "write it", "kind": "fresh"}),
                    answer="parent done")
    child = caller(("k1", "write", {"path": "/tmp/x"}), answer="child done")
    asked = []
    root = tmp_path / "run"
    with trio.fail_after(30):
        async with open_supervisor(root, provider(model), st(strict),
                                   user_tools=[counter.tool]) as sup:
            sup.approvals.decider = lambda p: asked.append(p.tool) or Decision("reject")
            a1 = await sup.ask("delegate")
            kid = sup.new_child(a1, "write it", "fresh")
            kid.settings = st(loose)  # its own, looser
            await sup.run(kid)
    assert asked == ["agents_start"] and counter.calls == []
    assert "children cost" not in parent.seen[0]["content"]  # a rejection, by the callback
    assert parent.seen[0]["is_error"] and "rejected" in parent.seen[0]["content"]
    assert child.seen[0]["is_error"] and "the parent says no" in child.seen[0]["content"]
    verify(root)
