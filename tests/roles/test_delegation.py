"""Delegation by name, from Python: a lead that may start a researcher and a reviewer; each role
gets its own system prompt, model, tools, policy and output type; a start outside ``may_start``
is an error result naming the allowed roles; ``ask_<role>`` answers with the child's answer or
typed output; a role's depth cap and budget hold; a run without roles is as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mnemon.orchestrator import logs
from mnemon.orchestrator.cli import main
from mnemon.orchestrator.gate import effective_policy
from mnemon.orchestrator.roles.spec import RolesError
from mnemon.orchestrator.settings import Settings
from mnemon.orchestrator.supervisor import open_supervisor
from mnemon.orchestrator.tooldefs import BUILTIN
from mnemon.orchestrator.usertools import UserTool
from mnemon.providers.scripted import ScriptedProvider
from mnemon.providers.typed import OUTPUT_TOOL

VERDICT = {"title": "Verdict", "type": "object",
           "properties": {"ok": {"type": "boolean"}, "note": {"type": "string"}},
           "required": ["ok", "note"], "additionalProperties": False}

written: list[str] = []


def lookup(q: str) -> str:
    """Look a question up."""
    return f"found: {q} is 42"


def read_notes() -> str:
    """Read the notes."""
    return "notes: 42"


def write_note(text: str) -> str:
    """Write a note."""
    written.append(text)
    return "written"


TOOLS = [UserTool(lookup), UserTool(read_notes), UserTool(write_note)]


def team(**over) -> dict:
    t = {
        "lead": {"description": "plans and delegates", "system": "You are the lead.",
                 "model": "claude-opus-4-1", "may_start": ["researcher", "reviewer"]},
        "researcher": {"description": "finds facts", "system": "You research.",
                       "model": "claude-haiku-4-5", "tools": ["lookup"]},
        "reviewer": {"description": "checks a claim", "system": "You review.",
                     "model": "claude-haiku-4-5", "tools": ["read_*", "write_*"],
                     "policy": {"rule": [{"tool": "write_*", "action": "deny",
                                          "reason": "a reviewer does not write"}]},
                     "output": VERDICT},
    }
    for k, v in over.items():
        t[k] = {**t.get(k, {}), **v}
    return t


def _records(root: Path, agent: str) -> list[dict]:
    return [json.loads(line) for line in
            (root / "agents" / agent / "record.jsonl").read_bytes().split(b"\n") if line]


class Model:
    """Plays every role, told apart by its system prompt; ``seen`` holds each request."""

    def __init__(self, lead_calls: list[tuple[str, dict]]):
        self.lead_calls = lead_calls
        self.seen: list[dict] = []

    def __call__(self, request, state):
        tools = [t.name for t in request.tools]
        self.seen.append({"system": request.system, "model": request.model, "tools": tools,
                          "agent": request.meta["agent"], "output": request.output})
        n = state["n"] = state.get("n", 0) + 1
        last = request.messages[-1]["content"]
        results = [b for b in last if isinstance(b, dict) and b.get("type") == "tool_result"] \
            if isinstance(last, list) else []
        state.setdefault("results", []).extend(results)
        if request.system == "You are the lead.":
            if n <= len(self.lead_calls):
                name, inp = self.lead_calls[n - 1]
                return [{"type": "tool_use", "id": f"c{n}", "name": name, "input": inp}], \
                    "tool_use"
            return [{"type": "text", "text": "lead done"}], "end_turn"
        if request.system == "You research.":
            if n == 1:
                return [{"type": "tool_use", "id": "r1", "name": "lookup",
                         "input": {"q": "the answer"}}], "tool_use"
            return [{"type": "text", "text": "the answer is 42"}], "end_turn"
        if request.system == "You review.":
            if n == 1:
                return [{"type": "tool_use", "id": "w1", "name": "write_note",
                         "input": {"text": "sneaky"}}], "tool_use"
            return [{"type": "tool_use", "id": "f1", "name": OUTPUT_TOOL,
                     "input": {"ok": True, "note": "checked"}}], "tool_use"
        return [{"type": "text", "text": "plain child"}], "end_turn"


async def _run(tmp_path: Path, lead_calls, roles=None, settings=None, **kw):
    logs.quiet()
    written.clear()
    model = Model(lead_calls)
    root = tmp_path / "run"
    async with open_supervisor(root, ScriptedProvider(policy=model), settings or Settings(),
                               user_tools=TOOLS, roles=team() if roles is None else roles,
                               role="lead", **kw) as sup:
        node = await sup.ask("Find the answer and have it reviewed.")
    return root, node, model, sup


def _results(root: Path, agent: str) -> dict[str, dict]:
    out = {}
    for r in _records(root, agent):
        if r["t"] == "ToolResults":
            for res in r["results"]:
                out[res["tool_use_id"]] = res
    return out


async def test_a_lead_delegates_by_name_and_each_role_runs_as_it_says(tmp_path):
    root, lead, model, sup = await _run(tmp_path, [
        ("ask_researcher", {"task": "what is the answer?"}),
        ("ask_reviewer", {"task": "check: the answer is 42"})])
    assert lead.reason == "done" and lead.role == "lead"
    res = _results(root, lead.id)
    assert res["c1"]["content"] == "the answer is 42" and not res["c1"]["is_error"]
    # the reviewer's typed output is the tool's answer, as JSON
    assert json.loads(res["c2"]["content"]) == {"ok": True, "note": "checked"}
    by_system = {}
    for s in model.seen:
        by_system.setdefault(s["system"], []).append(s)
    lead_req = by_system["You are the lead."][0]
    assert lead_req["model"] == "claude-opus-4-1"
    assert {"ask_researcher", "ask_reviewer", "lookup", "read_notes",
            "write_note"} <= set(lead_req["tools"])
    research = by_system["You research."]
    assert {r["model"] for r in research} == {"claude-haiku-4-5"}
    assert "lookup" in research[0]["tools"] and "write_note" not in research[0]["tools"]
    assert not any(t.startswith("ask_") for t in research[0]["tools"])
    review = by_system["You review."]
    assert review[0]["output"] is not None
    # the reviewer was offered write_note by its tools' glob, but its policy denies it
    assert written == []
    agents = {r["agent"]: r for r in
              (_records(root, a)[0] for a in ("a1", "a2", "a3"))}
    assert [agents[a].get("role") for a in ("a1", "a2", "a3")] == ["lead", "researcher",
                                                                   "reviewer"]
    assert agents["a2"]["model"] == "claude-haiku-4-5" and agents["a2"]["system"] == "You research."
    assert agents["a2"]["kind"] == "fresh" and agents["a2"]["parent"] == "a1"
    assert [t["name"] for t in agents["a2"]["tools"]][-1] == "lookup"
    assert agents["a3"]["output_type"]["name"] == "Verdict"
    denied = _results(root, "a3")["w1"]
    assert denied["is_error"] and "a reviewer does not write" in denied["content"]
    calls = [r for r in _records(root, "a2") if r["t"] == "ProviderCall"]
    assert calls and {c["model"] for c in calls} == {"claude-haiku-4-5"}
    assert main(["verify", str(root)]) == 0


async def test_agents_start_with_a_role_and_a_refused_one_naming_the_allowed(tmp_path):
    roles = team(researcher={"may_start": []})
    root, lead, model, sup = await _run(tmp_path, [
        ("agents_start", {"task": "research", "role": "researcher"}),
        ("agents_start", {"task": "write", "role": "writer"}),
        ("agents_wait", {}),
    ], roles=roles)
    res = _results(root, lead.id)
    started = json.loads(res["c1"]["content"])
    assert started["role"] == "researcher" and started["kind"] == "fresh"
    assert res["c2"]["is_error"]
    assert res["c2"]["content"] == "there is no role 'writer'; you may start: researcher, reviewer"
    lead_req = next(s for s in model.seen if s["system"] == "You are the lead.")
    start_def = next(t for t in sup.env.roles.builtins_for(lead, BUILTIN)
                     if t.name == "agents_start")
    assert start_def.input_schema["properties"]["role"]["enum"] == ["researcher", "reviewer"]
    assert "researcher: finds facts" in start_def.input_schema["properties"]["role"][
        "description"]
    assert lead_req["tools"][:len(BUILTIN)] == [t.name for t in BUILTIN]


async def test_a_role_may_start_only_its_may_start(tmp_path):
    """A researcher (may start none) asking for a reviewer is refused, naming none."""
    class Researcher(Model):
        def __call__(self, request, state):
            if request.system == "You research.":
                self.seen.append({"system": request.system})
                n = state["n"] = state.get("n", 0) + 1
                if n == 1:
                    return [{"type": "tool_use", "id": "x1", "name": "agents_start",
                             "input": {"task": "t", "role": "reviewer"}}], "tool_use"
                return [{"type": "text", "text": "gave up"}], "end_turn"
            return super().__call__(request, state)

    logs.quiet()
    root = tmp_path / "run"
    async with open_supervisor(root, ScriptedProvider(policy=Researcher(
            [("ask_researcher", {"task": "go"})])), Settings(), user_tools=TOOLS,
            roles=team(), role="lead") as sup:
        await sup.ask("go")
    res = _results(root, "a2")["x1"]
    assert res["is_error"] and res["content"] == ("the researcher role may not start "
                                                  "'reviewer'; you may start: no role")


async def test_a_roles_depth_cap_holds(tmp_path):
    roles = team(researcher={"max_depth": 0})
    root, lead, model, sup = await _run(tmp_path, [("ask_researcher", {"task": "go"})],
                                        roles=roles)
    res = _results(root, lead.id)["c1"]
    assert res["is_error"] and res["content"] == ("an agent of the researcher role runs at "
                                                  "depth 0 at most; this one would be at depth 1")


async def test_a_failed_child_is_an_error_naming_it(tmp_path):
    roles = team(reviewer={"budget": {"tokens": 1}})
    root, lead, model, sup = await _run(tmp_path, [("ask_reviewer", {"task": "check"})],
                                        roles=roles)
    res = _results(root, lead.id)["c1"]
    # a budget of one token: the reviewer's first turn spends it, and it stops
    assert res["is_error"] and res["content"].startswith("agent a2 (reviewer) ended budget")


async def test_a_child_without_a_role_keeps_its_parents(tmp_path):
    root, lead, model, sup = await _run(tmp_path, [
        ("agents_start", {"task": "fork me"}), ("agents_wait", {})])
    first = _records(root, "a2")[0]
    assert first["role"] == "lead" and first["kind"] == "mnemon"
    # a mnemon child keeps its parent's prefix: the same system, model and tools
    lead_first = _records(root, "a1")[0]
    assert [first[k] for k in ("system", "model", "tools")] == \
        [lead_first[k] for k in ("system", "model", "tools")]


async def test_a_run_without_roles_is_as_before(tmp_path):
    logs.quiet()
    root = tmp_path / "run"
    seen = []

    def model(request, state):
        seen.append(request)
        n = state["n"] = state.get("n", 0) + 1
        if n == 1:
            return [{"type": "tool_use", "id": "c1", "name": "agents_start",
                     "input": {"task": "x", "role": "researcher"}}], "tool_use"
        return [{"type": "text", "text": "ok"}], "end_turn"

    async with open_supervisor(root, ScriptedProvider(policy=model), Settings()) as sup:
        node = await sup.ask("go")
    assert sup.env.roles is None
    assert seen[0].tools == BUILTIN
    assert "role" not in _records(root, node.id)[0]
    res = _results(root, node.id)["c1"]
    assert res["is_error"] and res["content"] == "this run has no roles; start a child without one"


async def test_an_unknown_role_for_the_root_is_refused(tmp_path):
    with pytest.raises(RolesError):
        async with open_supervisor(tmp_path / "r", ScriptedProvider(), Settings(),
                                   roles=team(), role="boss"):
            pass


async def test_settings_carry_roles_from_python(tmp_path):
    from mnemon.orchestrator.roles.load import as_roles

    logs.quiet()
    model = Model([("ask_researcher", {"task": "q"})])
    async with open_supervisor(tmp_path / "run", ScriptedProvider(policy=model),
                               Settings(roles=as_roles(team(), root="lead")),
                               user_tools=TOOLS) as sup:
        node = await sup.ask("go")
    assert node.role == "lead" and node.reason == "done"
    assert {s["system"] for s in model.seen} == {"You are the lead.", "You research."}


async def test_a_mnemon_role_forks_its_caller_and_keeps_its_prefix(tmp_path):
    """A mnemon role's agent is a fork of its caller: the caller's system, model and tools (its
    prefix byte-identical), under the role's own policy and output type."""
    roles = team(lead={"may_start": ["researcher", "reviewer", "critic"]},
                 critic={"kind": "mnemon", "description": "critiques the plan",
                         "policy": {"default": "deny"}})
    root, lead, model, sup = await _run(tmp_path, [
        ("agents_start", {"task": "critique", "role": "critic"}), ("agents_wait", {})],
        roles=roles)
    started = json.loads(_results(root, lead.id)["c1"]["content"])
    assert (started["role"], started["kind"]) == ("critic", "mnemon")
    lead_first, critic_first = _records(root, "a1")[0], _records(root, "a2")[0]
    assert critic_first["role"] == "critic" and critic_first["kind"] == "mnemon"
    for key in ("system", "model", "tools", "provider"):
        assert critic_first.get(key) == lead_first.get(key), key
    critic_reqs = [s for s in model.seen if s["agent"] == "a2"]
    lead_reqs = [s for s in model.seen if s["agent"] == "a1"]
    assert critic_reqs and critic_reqs[0]["tools"] == lead_reqs[0]["tools"]
    assert critic_reqs[0]["model"] == "claude-opus-4-1"
    # its own policy (deny everything) holds, though its tools are its caller's
    assert sup.env.roles.roles["critic"].policy.default == "deny"
    assert effective_policy(sup.env, sup.agents["a2"]).decide("lookup", {}).action == "deny"
    assert effective_policy(sup.env, sup.agents["a1"]) is None  # the lead has no policy


async def test_a_fresh_role_cannot_be_started_as_a_fork(tmp_path):
    root, lead, model, sup = await _run(tmp_path, [
        ("agents_start", {"task": "x", "role": "researcher", "kind": "mnemon"})])
    res = _results(root, lead.id)["c1"]
    assert res["is_error"] and res["content"] == "the researcher role is a fresh agent, not mnemon"


async def test_a_childs_role_cannot_loosen_its_callers_policy(tmp_path):
    """The lead's policy denies lookup; the researcher's own allows everything: the researcher's
    call is still denied, naming the lead's rule."""
    roles = team(lead={"policy": {"rule": [{"tool": "lookup", "action": "deny",
                                            "reason": "no lookups in this team"}]}},
                 researcher={"policy": {"default": "allow", "rule": [
                     {"tool": "lookup", "action": "allow"}]}})
    root, lead, model, sup = await _run(tmp_path, [("ask_researcher", {"task": "q"})],
                                        roles=roles)
    denied = _results(root, "a2")["r1"]
    assert denied["is_error"] and "no lookups in this team" in denied["content"]
    assert "lead policy rule 1" in denied["content"]


async def test_a_resumed_agent_keeps_its_role(tmp_path):
    root, lead, model, sup = await _run(tmp_path, [("ask_researcher", {"task": "q"})])
    logs.quiet()
    async with open_supervisor(root, ScriptedProvider(policy=model), Settings(),
                               user_tools=TOOLS, roles=team(), role="lead") as again:
        node = again.resume_agent("a2")
        assert node.role == "researcher"
        assert again.settings_for(node).system == "You research."
        assert again.settings_for(node).model == "claude-haiku-4-5"
        assert "lookup" in again.tools_for(node) and "write_note" not in again.tools_for(node)
        node.log.close()


async def test_a_role_naming_no_tool_of_the_run_is_refused_when_the_run_opens(tmp_path):
    with pytest.raises(RolesError, match="role researcher: tools names 'lookup'"):
        async with open_supervisor(tmp_path / "r", ScriptedProvider(), Settings(),
                                   roles=team(), role="lead"):  # no user tools given
            pass
