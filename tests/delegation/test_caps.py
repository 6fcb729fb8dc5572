"""Budgets per child: a child capped below its siblings ends ``budget`` while they go on; a
parent cannot give more than it has left (property-tested over generated trees); the caps are
recorded and a reopened child is held to them."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from mnemon.orchestrator.caps import Caps, grant, left, reserved, tree_spend
from mnemon.orchestrator.node import AgentNode
from mnemon.orchestrator.settings import Settings
from mnemon.orchestrator.supervisor import open_supervisor
from mnemon.providers.cache import CacheModel
from mnemon.providers.scripted import ScriptedProvider
from mnemon.session.errors import Refusal

from .helpers import by_task, records, results, steering

SURVEY = [("context_survey", {})]


async def test_a_child_capped_below_its_siblings_ends_budget_while_they_go_on(tmp_path):
    scripts = {
        "a1": [[("agents_start", {"task": "capped: work", "kind": "fresh",
                                  "budget_tokens": 1500}),
                ("agents_start", {"task": "free one: work", "kind": "fresh"}),
                ("agents_start", {"task": "free two: work", "kind": "fresh"})],
               [("agents_wait", {})]],
        "capped": [SURVEY] * 6, "free one": [SURVEY] * 6, "free two": [SURVEY] * 6}
    provider = ScriptedProvider(policy=by_task(scripts), cache_model=CacheModel())
    async with open_supervisor(tmp_path, provider, Settings(model="scripted")) as sup:
        root = await sup.ask("delegate")
    kids = {c.id: c for c in root.children.values()}
    capped = next(c for c in kids.values() if c.cap_tokens == 1500)
    others = [c for c in kids.values() if c is not capped]
    assert capped.reason == "budget"
    assert all(c.reason == "done" and c.turns_taken == 7 for c in others)
    assert capped.turns_taken < 7
    # its cap is in its opening record, and the start answered with it and a projection
    opening = records(tmp_path, capped.id)[0]
    assert opening["t"] == "SessionStarted" and opening["budget"] == {"tokens": 1500}
    started = [json.loads(r["content"]) for r in results(tmp_path)
               if r["content"].startswith('{"agent"')]
    mine = next(s for s in started if s["agent"] == capped.id)
    assert mine["budget"] == {"tokens": 1500} and mine["projected_usd"] > 0
    # the parent was told, by a note its next request carried
    notes = [s["text"] for s in steering(tmp_path, "a1")]
    assert any(f"your child {capped.id} ended budget" in n for n in notes)
    # agents_wait's outcome says why
    waited = json.loads(results(tmp_path)[-1]["content"])
    assert {o["agent"]: o.get("reason") for o in waited}[capped.id] == "budget"


async def test_a_child_given_more_than_its_parent_has_left_is_refused_by_figure(tmp_path):
    scripts = {
        "a1": [[("agents_start", {"task": "big: x", "budget_tokens": 10_000_000})],
               [("agents_start", {"task": "turns: x", "max_turns": 99_999})],
               [("agents_start", {"task": "bad: x", "budget_usd": -1})]]}
    provider = ScriptedProvider(policy=by_task(scripts), cache_model=CacheModel())
    async with open_supervisor(tmp_path, provider,
                               Settings(model="scripted", task_budget_tokens=50_000)) as sup:
        root = await sup.ask("delegate")
    out = results(tmp_path)
    assert out[0]["is_error"] and "more than you have left to give" in out[0]["content"]
    assert out[1]["is_error"] and "more than you may take yourself" in out[1]["content"]
    assert out[2]["is_error"] and "positive" in out[2]["content"]
    assert not root.children


async def test_the_default_child_caps_are_lowered_to_what_is_left(tmp_path):
    scripts = {"a1": [[("agents_start", {"task": "kid: x", "kind": "fresh"})],
                      [("agents_wait", {})]]}
    provider = ScriptedProvider(policy=by_task(scripts), cache_model=CacheModel())
    s = Settings(model="scripted", task_budget_usd=0.5, child_budget_usd=5.0,
                 child_max_turns=3)
    async with open_supervisor(tmp_path, provider, s) as sup:
        root = await sup.ask("delegate")
    (kid,) = root.children.values()
    assert kid.cap_turns == 3
    assert kid.cap_usd is not None and kid.cap_usd < 0.5
    assert records(tmp_path, kid.id)[0]["budget"]["max_turns"] == 3


async def test_a_synod_sets_aside_every_members_cap_or_none(tmp_path):
    scripts = {"a1": [[("agents_synod", {"question": "q?", "n": 4, "budget_tokens": 30_000})],
                      [("agents_synod", {"question": "q?", "n": 2, "budget_tokens": 20_000})]]}
    provider = ScriptedProvider(policy=by_task(scripts), cache_model=CacheModel())
    async with open_supervisor(tmp_path, provider,
                               Settings(model="scripted", task_budget_tokens=100_000)) as sup:
        root = await sup.ask("delegate")
    out = results(tmp_path)
    assert out[0]["is_error"] and "more than you have left" in out[0]["content"]
    assert not out[1]["is_error"]
    assert sorted(c.cap_tokens for c in root.children.values()) == [20_000, 20_000]


# --------------------------------------------------------------------------- the split


def _node(aid: str, parent: AgentNode | None) -> AgentNode:
    n = AgentNode(aid, None, kind=None if parent is None else "fresh",
                  depth=0 if parent is None else parent.depth + 1, parent=parent)
    if parent is not None:
        parent.children[aid] = n
    return n


@settings(max_examples=200, deadline=None)
@given(top=st.floats(0.01, 10.0), ops=st.lists(st.tuples(
    st.integers(0, 50), st.one_of(st.none(), st.floats(0.0001, 12.0)),
    st.floats(0.0, 1.0), st.booleans()), max_size=25))
def test_a_parent_never_gives_more_than_it_has_left(top, ops):
    """Over generated trees: a cap is granted exactly when it fits what the giver has left,
    and at every capped agent what its tree spent plus what its capped children hold in
    reserve never passes its cap — the budget is split, never multiplied."""
    run = Settings(task_budget_usd=top)
    root = _node("a0", None)
    nodes = [root]
    for i, (pick, asked, spend, ends) in enumerate(ops):
        parent = nodes[pick % len(nodes)]
        if parent.state != "running":
            continue  # an ended agent starts nothing
        room = left(parent, run, (0, tree_spend(root)[1]))[1]
        try:
            caps = grant(parent, Caps(usd=asked), Caps(), run, (0, tree_spend(root)[1]), 250)
        except Refusal:
            assert asked is not None and asked > room + 1e-12
            continue
        assert asked is None or asked <= room + 1e-12
        child = _node(f"a{i + 1}", parent)
        child.cap_usd = caps.usd
        # it spends a share of what it may (its own cap, or what its giver had left)
        may = caps.usd if caps.usd is not None else room
        child.cost_usd = spend * may * 0.5
        if ends:
            child.state = "ended"
        nodes.append(child)
        for a in nodes:
            if a.cap_usd is not None:
                assert tree_spend(a)[1] + reserved(a)[1] <= a.cap_usd + 1e-9
        assert tree_spend(root)[1] + reserved(root)[1] <= top + 1e-9


def test_left_walks_to_the_nearest_capped_agent():
    root = _node("a1", None)
    mid = _node("a2", root)
    mid.cap_usd = 1.0
    low = _node("a3", mid)
    low.cost_usd = 0.25
    sib = _node("a4", mid)
    sib.cap_usd = 0.5
    sib.cost_usd = 0.125
    # mid's $1: a3's 0.25 spent, a4's cap (0.5, of which 0.125 spent: 0.375 still reserved)
    assert left(low, Settings(), (0, 0.0))[1] == pytest.approx(1.0 - 0.25 - 0.125 - 0.375)
    sib.state = "ended"  # an ended child holds nothing in reserve
    assert left(low, Settings(), (0, 0.0))[1] == pytest.approx(1.0 - 0.25 - 0.125)
