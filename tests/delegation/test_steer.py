"""A parent steering its children: the projected cost of a child's first request against what
it cost; ``agents_status`` while a child is inside a tool call; a message that changes a
running child's next request; ``ask_parent`` approved and rejected by a scripted parent."""

from __future__ import annotations

import json

import pytest
import trio

from mnemon.orchestrator.delegation import status as status_of
from mnemon.orchestrator.settings import Settings
from mnemon.orchestrator.supervisor import open_supervisor
from mnemon.orchestrator.usertools import UserTool
from mnemon.providers.cache import CacheModel
from mnemon.providers.prices import cost_usd
from mnemon.providers.scripted import ScriptedProvider
from mnemon.session.records import Text, Usage

from .helpers import by_task, records, results, steering, text_of

LONG = "the facts of the case, " * 400  # ~9 KB a turn: a context worth caching


@pytest.mark.parametrize("kind", ["mnemon", "fresh"])
async def test_the_projected_cost_is_within_5_percent_of_the_first_request(tmp_path, kind):
    scripts = {"a1": [[("context_survey", {})], [("context_survey", {})],
                      [("agents_start", {"task": "kid: answer briefly", "kind": kind})],
                      [("agents_wait", {})]],
               "kid": [[Text("x" * 40)]]}
    provider = ScriptedProvider(policy=by_task(scripts, final={"a1": "ok " * 10}),
                                cache_model=CacheModel())
    async with open_supervisor(tmp_path, provider,
                               Settings(model="claude-sonnet-4-5", system=LONG)) as sup:
        root = await sup.ask("begin: " + LONG)
    (kid,) = root.children.values()
    started = json.loads(results(tmp_path)[2]["content"])
    projected = started["projected_usd"]
    first = next(r for r in records(tmp_path, kid.id)
                 if r["t"] == "ProviderCall" and r.get("usage"))
    actual = cost_usd(Usage(**first["usage"]), "claude-sonnet-4-5", "5m")
    assert projected == pytest.approx(actual, rel=0.05), (started, first["usage"])
    if kind == "mnemon":  # it reads the parent's prefix: most of its input is a cache read
        assert started["projected"]["cache_read_tokens"] > started["projected"]["input_tokens"]


async def test_agents_status_while_a_child_is_inside_a_tool_call(tmp_path):
    inside, release = trio.Event(), trio.Event()
    seen: list[dict] = []

    async def slow_fetch(url: str) -> str:
        """Fetch a page (slowly)."""
        inside.set()
        await release.wait()
        return "page"

    def status_step(request):
        return [("agents_status", {})]

    scripts = {"a1": [[("agents_start", {"task": "kid: fetch", "kind": "fresh",
                                         "budget_usd": 1.0})],
                      status_step, [("agents_wait", {})]],
               "kid": [[("slow_fetch", {"url": "https://example.org"})]]}
    base = by_task(scripts, final={"kid": "fetched it\nthe page says hello"})

    class Provider(ScriptedProvider):
        async def complete(self, request, **kw):
            if request.meta["agent"] == "a1" and len(request.messages) == 3:
                await inside.wait()  # the parent asks for status once the child is in its call
            return await super().complete(request, **kw)

    provider = Provider(policy=base, cache_model=CacheModel())
    async with open_supervisor(tmp_path, provider, Settings(model="scripted"),
                               user_tools=[UserTool(slow_fetch)]) as sup:
        async with trio.open_nursery() as n:
            async def go():
                seen.append({"root": await sup.ask("delegate")})
            n.start_soon(go)
            await inside.wait()
            with trio.fail_after(10):
                while len(results(tmp_path)) < 2:
                    await trio.sleep(0.01)
            release.set()
    status = json.loads(results(tmp_path)[1]["content"])
    (kid,) = status["agents"]
    assert kid["state"] == "running" and kid["in_tools"] == ["slow_fetch"]
    assert kid["turns"] == 1 and kid["tokens"] > 0 and kid["cost_usd"] > 0
    assert kid["budget"]["usd"] == 1.0 and 0 < kid["budget"]["spent_usd"] < 1.0
    # once it answered, its last line is what a status shows
    root = seen[0]["root"]
    assert status_of(next(iter(root.children.values())))["last_line"] == "the page says hello"


async def test_a_message_changes_a_running_childs_next_request(tmp_path):
    requests: list = []
    inside, release = trio.Event(), trio.Event()

    async def wait_here() -> str:
        """Wait for a moment."""
        inside.set()
        await release.wait()
        return "waited"

    def send(request):
        return [("agents_send", {"agent": "a2", "text": "stop: use the second source"})]

    scripts = {"a1": [[("agents_start", {"task": "kid: research", "kind": "fresh"})],
                      send, [("agents_wait", {})],
                      [("agents_send", {"agent": "a2", "text": "too late"})]],
               "kid": [[("wait_here", {})]]}
    policy = by_task(scripts, seen=requests)

    class Provider(ScriptedProvider):
        async def complete(self, request, **kw):
            if request.meta["agent"] == "a1" and len(request.messages) == 3:
                await inside.wait()  # send while the child is inside its tool
            out = await super().complete(request, **kw)
            if request.meta["agent"] == "a1" and len(request.messages) == 5:
                release.set()  # the message is recorded: let the child's call end
            return out

    async with open_supervisor(tmp_path / "r", Provider(policy=policy,
                                                        cache_model=CacheModel()),
                               Settings(model="scripted"),
                               user_tools=[UserTool(wait_here)]) as sup:
        root = await sup.ask("delegate")
    kid_requests = [r for a, r in requests if a == "a2"]
    assert len(kid_requests) == 2
    assert "stop: use the second source" not in text_of(kid_requests[0])
    assert "[message from your parent a1] stop: use the second source" in \
        text_of(kid_requests[1])
    (msg,) = steering(tmp_path / "r", "a2")
    assert msg["by"] == "parent"
    sent = results(tmp_path / "r")
    assert json.loads(sent[1]["content"])["agent"] == "a2"
    late = sent[3]  # the child has ended: refused by name
    assert late["is_error"] and "agent a2 has ended (done)" in late["content"]
    assert root.children["a2"].messages == 1


# --------------------------------------------------------------------------- ask_parent

NOTES: list[str] = []


def write_note(text: str) -> str:
    """Write a note."""
    NOTES.append(text)
    return "written"


def _team(lead_policy=None) -> dict:
    lead = {"description": "leads", "system": "You are the lead.", "may_start": ["worker"]}
    if lead_policy is not None:
        lead["policy"] = lead_policy
    return {"lead": lead,
            "worker": {"description": "works", "system": "You work.", "kind": "fresh",
                       "tools": ["write_note"],
                       "policy": {"rule": [{"tool": "write_note", "action": "ask_parent",
                                            "reason": "notes are the lead's call"}]}}}


def _lead_then(decide: dict):
    """The lead starts a worker, waits (woken by its request), decides, waits again."""
    def decide_step(request):
        body = text_of(request)
        call = body.split('"call_id": "', 1)[1].split('"', 1)[0]
        return [("approvals_decide", {"agent": "a2", "call_id": call, **decide})]

    return {"a1": [[("agents_start", {"task": "worker: note it", "role": "worker"})],
                   [("agents_wait", {})], decide_step, [("agents_wait", {})]],
            "worker": [[("write_note", {"text": "the finding"})]]}


@pytest.mark.parametrize("decision", ["approve", "reject"])
async def test_ask_parent_decided_by_a_scripted_parent(tmp_path, decision):
    NOTES.clear()
    scripts = _lead_then({"decision": decision, "reason": "fine by me"
                          if decision == "approve" else "not now"})
    provider = ScriptedProvider(policy=by_task(scripts), cache_model=CacheModel())
    async with open_supervisor(tmp_path, provider, Settings(model="scripted"),
                               user_tools=[UserTool(write_note)], roles=_team(),
                               role="lead") as sup:
        await sup.ask("lead it")
    req = next(r for r in records(tmp_path, "a2") if r["t"] == "ApprovalRequested")
    assert req["to"] == "parent" and req["tool"] == "write_note"
    done = next(r for r in records(tmp_path, "a2") if r["t"] == "ApprovalDecided")
    assert done["decision"] == decision and done["by"] == "agent a1"
    # the lead was told by a note, and its wait woke to let it decide
    assert any("[approval asked] your child a2 asks to run write_note" in s["text"]
               for s in steering(tmp_path, "a1"))
    woke = json.loads(results(tmp_path)[1]["content"])
    assert woke["approvals"][0]["call_id"] == req["call_id"]
    worker_result = next(x for x in results(tmp_path, "a2"))
    if decision == "approve":
        assert NOTES == ["the finding"] and not worker_result.get("is_error")
    else:
        assert NOTES == [] and worker_result["is_error"] and "not now" in worker_result["content"]


async def test_a_parent_may_not_approve_what_it_could_not_make_itself(tmp_path):
    """The lead's own policy sends the same call to its parent: it has none, so its approval
    goes to a person (here: a decider that rejects, as ``mnemon ask`` has)."""
    NOTES.clear()
    scripts = _lead_then({"decision": "approve"})
    provider = ScriptedProvider(policy=by_task(scripts), cache_model=CacheModel())
    lead_policy = {"rule": [{"tool": "write_note", "action": "ask_parent"}]}
    async with open_supervisor(tmp_path, provider, Settings(model="scripted"),
                               user_tools=[UserTool(write_note)],
                               roles=_team(lead_policy), role="lead") as sup:
        asked = []

        def person(p):
            asked.append(p.as_dict())
            return "reject"

        sup.approvals.decider = person
        await sup.ask("lead it")
    decided = json.loads(results(tmp_path)[2]["content"])
    assert decided["escalated"] == "a person" and "ask_parent" in decided["why"]
    assert [a["call_id"] for a in asked] == [decided["call_id"]]
    done = next(r for r in records(tmp_path, "a2") if r["t"] == "ApprovalDecided")
    assert done["decision"] == "reject" and NOTES == []


async def test_children_of_one_response_replay_their_parent_once(tmp_path, monkeypatch):
    """Three ``agents_start`` calls of one response: the parent's last request is replayed into
    an empty cache once (``projection._replayed``), and each child is projected on its own copy
    of that cache — the same task projects the same cost, not a cheaper one read from the
    entries the child before it wrote."""
    replays = []
    usage_for = CacheModel.usage_for

    def counting(self, request, output_tokens, now, **kw):
        if now == 0.0:  # a projection's replay of the parent (the run's clock is never 0)
            replays.append(request)
        return usage_for(self, request, output_tokens, now, **kw)

    monkeypatch.setattr(CacheModel, "usage_for", counting)
    start = ("agents_start", {"task": "kid: answer briefly " + "in detail " * 300})
    scripts = {"a1": [[("context_survey", {})], [start, start, start], [("agents_wait", {})]],
               "kid": [[Text("x" * 40)]]}
    provider = ScriptedProvider(policy=by_task(scripts, final={"a1": "ok"}),
                                cache_model=CacheModel())
    async with open_supervisor(tmp_path, provider,
                               Settings(model="claude-sonnet-4-5", system=LONG)) as sup:
        root = await sup.ask("begin: " + LONG)
    assert len(root.children) == 3
    started = [s for s in map(json.loads, (r["content"] for r in results(tmp_path)))
               if isinstance(s, dict) and "projected" in s]
    assert len(started) == 3 and len(replays) == 1
    projected = [s["projected"] for s in started]
    assert projected[0]["cache_read_tokens"] > 0
    assert projected[1] == projected[0] and projected[2] == projected[0], projected
