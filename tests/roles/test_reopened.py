"""Lineage on disk is the authority: an agent reopened by another process — a service started
again, a ``resume_agent`` with no parent — answers to the policies of the ancestors it was
started under, as it did while they ran (decision 0305)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import msgspec
import pytest
import trio
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from mnemon.lineage.runroot import create_run_root
from mnemon.orchestrator import logs
from mnemon.orchestrator.gate import effective_policy
from mnemon.orchestrator.policy import parse_policy
from mnemon.orchestrator.roles.load import as_roles
from mnemon.orchestrator.settings import Settings
from mnemon.orchestrator.supervisor import Supervisor
from mnemon.orchestrator.usertools import UserTool
from mnemon.providers.scripted import ScriptedProvider
from mnemon.session.errors import Refusal

pytest.importorskip("hypercorn")

from tests.helpers import rechain  # noqa: E402
from tests.service.util import live_service  # noqa: E402

written: list[str] = []


def write_note(text: str) -> str:
    """Write a note."""
    written.append(text)
    return "written"


NOTE = UserTool(write_note)
LEAD = {"system": "You lead.", "may_start": ["researcher"],
        "policy": {"rule": [{"tool": "write_note", "action": "deny",
                             "reason": "the lead's team writes no notes"}]}}
RESEARCHER = {"description": "finds facts", "system": "You research.", "tools": [NOTE]}


def model(request, state):
    """The lead asks a researcher; the researcher tries write_note on every prompt."""
    last = request.messages[-1]["content"]
    answered = any(b.get("type") == "tool_result" for b in last if isinstance(b, dict))
    if request.system == "You lead." and not answered:
        return [{"type": "tool_use", "id": "c1", "name": "ask_researcher",
                 "input": {"task": "look it up"}}], "tool_use"
    if request.system == "You research." and not answered:
        n = state["n"] = state.get("n", 0) + 1
        return [{"type": "tool_use", "id": f"w{n}", "name": "write_note",
                 "input": {"text": f"note {n}"}}], "tool_use"
    return [{"type": "text", "text": "done"}], "end_turn"


def _results(root: Path, agent: str) -> list[dict]:
    out = []
    for line in (root / "agents" / agent / "record.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["t"] == "ToolResults":
            out += rec["results"]
    return out


async def _settle(client, aid: str) -> dict:
    for _ in range(1500):
        got = (await client.get(f"/v1/agents/{aid}")).json()
        if got["state"] not in ("running", "open"):
            return got
        await trio.sleep(0.02)
    raise AssertionError(f"{aid} still running: {got}")


async def test_a_child_reopened_by_a_restarted_service_still_answers_to_its_lead(tmp_path):
    """The finding: the lead's role denies write_note; its researcher child is denied; the
    service stops and starts again; a prompt to the child while its lead is not running must
    still be denied."""
    written.clear()
    root = tmp_path / "run"
    settings = Settings(model="scripted",
                        roles=as_roles({"lead": LEAD, "researcher": RESEARCHER}, root="lead"))
    async with live_service(root, provider=ScriptedProvider(policy=model),
                            settings=settings) as svc:
        r = await svc.client.post("/v1/agents", json={"prompt": "go"})
        assert r.status_code == 201
        assert (await _settle(svc.client, "a1"))["answer"] == "done"
        assert (await _settle(svc.client, "a2"))["role"] == "researcher"
    denied = _results(root, "a2")
    assert denied[0]["is_error"] and "the lead's team writes no notes" in denied[0]["content"]
    assert written == []

    logs.quiet()
    async with live_service(root, provider=ScriptedProvider(policy=model),
                            settings=settings) as svc:
        r = await svc.client.post("/v1/agents/a2/prompt", json={"prompt": "write it now"})
        assert r.status_code == 202, r.text
        assert (await _settle(svc.client, "a2"))["answer"] == "done"
    again = _results(root, "a2")
    assert len(again) == 2
    assert again[1]["is_error"] and "the lead's team writes no notes" in again[1]["content"]
    assert written == []


async def test_the_started_record_carries_the_policy_and_a_process_without_roles_keeps_it(
        tmp_path):
    """The recorded policy needs no roles file: ``chat --resume`` or a service started
    without ``--roles`` judges the child as its lead's run did."""
    root = tmp_path / "run"
    create_run_root(root, "tests")
    roles = as_roles({"lead": LEAD, "researcher": RESEARCHER}, root="lead")
    sup = Supervisor(root, ScriptedProvider(), Settings(model="scripted", roles=roles))
    lead = sup.new_root("go")
    child = sup.new_child(lead, "look it up", "fresh", role="researcher")
    live = effective_policy(sup.env, child).decide("write_note", {"text": "x"})
    sup.close()
    started = json.loads((root / "agents" / child.id / "record.jsonl").read_text()
                         .splitlines()[0])
    assert [r["tool"] for layer in started["policy"] for r in layer["rules"]] == ["write_note"]

    bare = Supervisor(root, ScriptedProvider(), Settings(model="scripted"))
    node = bare.resume_agent(child.id)
    assert node.parent is None
    assert effective_policy(bare.env, node).decide("write_note", {"text": "x"}) == live
    assert live.action == "deny"
    bare.close()


async def test_a_log_from_before_the_field_is_judged_by_its_ancestors_roles(tmp_path):
    """A log with no recorded policy: its ancestors' logs are walked, each recorded role
    standing for its policy; a role the reopening run does not know is refused by name."""
    root = tmp_path / "run"
    create_run_root(root, "tests")
    roles = as_roles({"lead": LEAD, "researcher": RESEARCHER}, root="lead")
    sup = Supervisor(root, ScriptedProvider(), Settings(model="scripted", roles=roles))
    sup._policy_record = lambda node: None  # as a version before the field wrote it
    lead = sup.new_root("go")
    child = sup.new_child(lead, "look it up", "fresh", role="researcher")
    sup.close()
    opening = json.loads((root / "agents" / child.id / "record.jsonl").read_text()
                         .splitlines()[0])
    assert "policy" not in opening  # (a tool's description may say "policy")

    again = Supervisor(root, ScriptedProvider(), Settings(model="scripted", roles=roles))
    node = again.resume_agent(child.id)
    assert effective_policy(again.env, node).decide("write_note", {}).action == "deny"
    again.close()
    bare = Supervisor(root, ScriptedProvider(), Settings(model="scripted"))
    with pytest.raises(Refusal, match="agent a2 was started as the researcher role, which "
                                      "this run does not know"):
        bare.resume_agent(child.id)
    bare.close()


async def test_a_damaged_recorded_policy_is_refused_not_read_as_none(tmp_path):
    root = tmp_path / "run"
    create_run_root(root, "tests")
    pol = parse_policy({"rule": [{"tool": "x", "action": "deny"}]}, "p.toml")
    sup = Supervisor(root, ScriptedProvider(), Settings(model="scripted", tool_policy=pol))
    sup.new_root("go")
    sup.close()
    path = root / "agents" / "a1" / "record.jsonl"
    lines = path.read_text().splitlines()
    first = json.loads(lines[0])
    first["policy"][0]["rules"][0]["action"] = "maybe"
    first.pop("c")  # (a foreign tool that keeps the chain: the policy is what is refused)
    rechain(path, [json.dumps(first, separators=(",", ":")), *lines[1:]])
    again = Supervisor(root, ScriptedProvider(), Settings(model="scripted"))
    with pytest.raises(Refusal, match="agent a1's SessionStarted"):
        again.resume_agent("a1")
    again.close()


# --------------------------------------------------------------------------- the property

TOOLS = ("write_note", "read_notes", "agents_start", "fs__write")
ARGS = ({}, {"path": "/etc/passwd"}, {"path": "/tmp/x"}, {"text": "secret plan"})
_rule = st.fixed_dictionaries({
    "tool": st.sampled_from([*TOOLS, "fs__*", "*", "*_notes"]),
    "action": st.sampled_from(["allow", "ask", "deny"]),
}, optional={"when": st.sampled_from([{"path": "^/etc/"}, {"text": "secret"}]),
             "reason": st.sampled_from(["r1", "r2"]),
             })
_policy = st.fixed_dictionaries({"default": st.sampled_from(["allow", "ask", "deny"]),
                                 "rule": st.lists(_rule, max_size=3)},
                                optional={"ask_timeout": st.sampled_from([5, 60])})
_maybe_policy = st.one_of(st.none(), _policy)


@st.composite
def lineages(draw):
    """A run's policy, three roles (r0 may start r1 and r2, r1 may start r2; some mnemon) each
    with or without a policy, and a tree of agents: each new one a root or a child of an
    earlier agent, fresh or mnemon, of a role its parent may start or of its parent's."""
    run = draw(_maybe_policy)
    roles = {}
    for i in range(3):
        body: dict = {"may_start": [f"r{j}" for j in range(i + 1, 3)]}
        p = draw(_maybe_policy)
        if p is not None:
            body["policy"] = p
        if i > 0 and draw(st.booleans()):
            body["kind"] = "mnemon"
        roles[f"r{i}"] = body
    use_roles = draw(st.booleans())
    agents = []  # (parent index or None, kind, role or None)
    for i in range(draw(st.integers(1, 6))):
        parent = draw(st.one_of(st.none(), st.integers(0, i - 1))) if i else None
        if parent is None:
            agents.append((None, None, None))
            continue
        role = None
        if use_roles and draw(st.booleans()):
            role = draw(st.sampled_from(["r1", "r2"]))
        kind = draw(st.sampled_from(["fresh", "mnemon"]))
        agents.append((parent, kind, role))
    return run, (roles if use_roles else None), agents


def _verdicts(sup, node):
    pol = effective_policy(sup.env, node)
    if pol is None:
        return None
    return ([pol.decide(t, a) for t in TOOLS for a in ARGS], pol.timeout_s)


def _build(root: Path, run, roles, agents):
    settings = Settings(model="scripted",
                        tool_policy=parse_policy(run, "run.toml") if run else None,
                        roles=as_roles(roles, root="r0") if roles else None)
    sup = Supervisor(root, ScriptedProvider(), settings)
    nodes = []
    for parent, kind, role in agents:
        if parent is None:
            nodes.append(sup.new_root("task"))
            continue
        p = nodes[parent]
        if p is None:
            nodes.append(None)
            continue
        try:
            nodes.append(sup.new_child(p, "task", kind, role=role))
        except Refusal:  # a start its roles refuse (a kind the role is not, a role not allowed)
            nodes.append(None)
    return settings, sup, nodes


@hsettings(max_examples=60, deadline=None,
           suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(lineages(), st.booleans())
def test_a_reopened_agent_is_judged_exactly_as_the_live_one_was(lineage, same_process_config):
    """For generated lineages and policies: every agent, reopened alone (no live parent) by a
    process given the same settings — or none of its roles and policy — decides every call as
    it did live: the same action, rule and reason, and the same ask timeout."""
    run, roles, agents = lineage
    logs.quiet()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "run"
        create_run_root(root, "tests")
        settings, sup, nodes = _build(root, run, roles, agents)
        live = {n.id: _verdicts(sup, n) for n in nodes if n is not None}
        sup.close()
        again_settings = settings if same_process_config else Settings(model="scripted")
        for aid, want in live.items():
            again = Supervisor(root, ScriptedProvider(), again_settings)
            node = again.resume_agent(aid)
            got = _verdicts(again, node)
            again.close()
            if want is None:
                assert got is None
                continue
            assert got is not None
            assert [(v.action, v.rule, v.reason) for v in got[0]] == \
                [(v.action, v.rule, v.reason) for v in want[0]], aid
            assert got[1] == want[1]


async def test_a_child_reopened_alone_still_spends_against_its_leads_budget(tmp_path):
    """The lead role's budget covers its whole tree: a researcher reopened without its lead
    counts what the lead and the rest of its tree spent (read from their logs) with its own."""
    from mnemon.orchestrator.costs import agent_cost
    from mnemon.orchestrator.supervisor import open_supervisor

    written.clear()
    logs.quiet()
    root = tmp_path / "run"
    team = {"lead": LEAD, "researcher": RESEARCHER}
    async with open_supervisor(root, ScriptedProvider(policy=model),
                               Settings(model="scripted"), roles=team, role="lead") as sup:
        await sup.ask("go")
    spent = {a: agent_cost(root / "agents" / a / "record.jsonl", a, price_as="scripted")
             for a in ("a1", "a2")}
    lead_tokens = sum(getattr(spent["a1"], f) for f in (
        "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"))
    mine = sum(getattr(spent["a2"], f) for f in (
        "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"))
    assert lead_tokens > 0 and mine > 0

    def reopened(budget: int):
        roles = as_roles({"lead": {**LEAD, "budget": {"tokens": budget}},
                          "researcher": RESEARCHER}, root="lead")
        again = Supervisor(root, ScriptedProvider(), Settings(model="scripted", roles=roles))
        node = again.resume_agent("a2")
        try:
            return node, again.over_budget(node)
        finally:
            again.close()

    node, why = reopened(lead_tokens + mine)
    assert node.parent is None and why == (f"{lead_tokens + mine} tokens used of the lead "
                                           f"role's budget of {lead_tokens + mine} (agent a1)")
    node, why = reopened(lead_tokens + mine + 1)
    assert why is None
