"""Child creation is one policy subject (decision 0307): a rule on ``agents_start`` governs every
way a model starts a child — ``agents_start`` itself, with a role or without, ``agents_synod``,
``ask_<role>`` — as docs/policy.md's example says."""

from __future__ import annotations

import pytest

from mnemon.orchestrator import Decision
from mnemon.orchestrator.policy import parse_policy
from mnemon.orchestrator.settings import Settings
from mnemon.orchestrator.supervisor import open_supervisor
from mnemon.providers.cache import CacheModel
from mnemon.providers.scripted import ScriptedProvider
from mnemon.session.records import Text, ToolUse

from .conftest import records

TEAM = {"lead": {"may_start": ["researcher", "reviewer"]},
        "researcher": {"description": "finds facts"},
        "reviewer": {"description": "checks a claim"}}


def model(tool: str, args: dict):
    """The root makes one call, then answers; any child answers at once."""
    def policy(request, state):
        if request.meta["depth"] > 0:
            return [Text("child done")], "end_turn"
        state["i"] = state.get("i", 0) + 1
        if state["i"] == 1:
            return [ToolUse("c1", tool, args)], "tool_use"
        return [Text("finished")], "end_turn"
    return policy


async def _run(tmp_path, tool, args, rules, *, decider=None):
    pol = parse_policy({"rule": rules}, "policy.toml")
    root = tmp_path / "run"
    async with open_supervisor(root, ScriptedProvider(policy=model(tool, args),
                                                      cache_model=CacheModel()),
                               Settings(model="scripted", tool_policy=pol),
                               roles=TEAM, role="lead") as sup:
        if decider is not None:
            sup.approvals.decider = decider
        node = await sup.ask("go")
    results = [x for r in records(root, node.id) if r["t"] == "ToolResults" for x in r["results"]]
    return root, sup, results


DENY = [{"tool": "agents_start", "action": "deny", "reason": "no new children"}]


@pytest.mark.parametrize("tool,args", [
    ("agents_start", {"task": "look it up"}),
    ("agents_start", {"task": "look it up", "role": "researcher"}),
    ("agents_synod", {"question": "is it 42?", "n": 3}),
    ("ask_researcher", {"task": "look it up"}),
], ids=["agents_start", "agents_start-role", "agents_synod", "ask_role"])
async def test_denying_agents_start_stops_every_way_a_child_is_started(tmp_path, tool, args):
    root, sup, results = await _run(tmp_path, tool, args, DENY)
    assert list(sup.agents) == ["a1"]
    assert not (root / "agents" / "a2").exists()
    assert len(results) == 1 and results[0]["is_error"]
    assert results[0]["content"] == (f"the tool call {tool} was denied by the policy "
                                     "(policy.toml rule 1): no new children")


async def test_a_when_on_role_tells_the_roles_apart_whichever_tool_starts_them(tmp_path):
    rules = [{"tool": "agents_start", "when": {"role": "^researcher$"}, "action": "deny",
              "reason": "no research today"}]
    _root, sup, results = await _run(tmp_path, "ask_researcher", {"task": "t"}, rules)
    assert list(sup.agents) == ["a1"] and results[0]["is_error"]
    assert "no research today" in results[0]["content"]
    _root, sup, results = await _run(tmp_path / "b", "ask_reviewer", {"task": "t"}, rules)
    assert [(a, n.role) for a, n in sup.agents.items()] == [("a1", "lead"), ("a2", "reviewer")]
    assert results == [{"tool_use_id": "c1", "content": "child done", "is_error": False}]


async def test_asking_about_agents_start_asks_about_a_synod_and_a_rejection_starts_none(
        tmp_path):
    asked = []

    def decider(req):
        asked.append((req.tool, req.rule))
        return Decision("reject", reason="not now")

    rules = [{"tool": "agents_start", "action": "ask", "reason": "a new child costs money"}]
    root, sup, results = await _run(tmp_path, "agents_synod", {"question": "q", "n": 2}, rules,
                                    decider=decider)
    assert asked == [("agents_synod", "policy.toml rule 1")]
    assert list(sup.agents) == ["a1"]
    assert results[0]["is_error"] and "not now" in results[0]["content"]
    reqs = [r for r in records(root) if r["t"] == "ApprovalRequested"]
    assert [(r["tool"], r["reason"]) for r in reqs] == [("agents_synod",
                                                         "a new child costs money")]


async def test_a_call_that_starts_no_child_is_judged_by_its_own_name_alone(tmp_path):
    _root, sup, results = await _run(tmp_path, "agents_wait", {}, DENY)
    assert results[0]["is_error"] is False
