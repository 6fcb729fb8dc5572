"""The split, where a run's budget went: ``mnemon cost`` shows each capped agent's caps beside
what its tree (it and its descendants) spent, and ``mnemon tree`` each agent's caps and the
messages it was sent — read off a real run on the scripted provider, whose parent gives a child
caps, sends it a message, and the child starts a grandchild of its own."""

from __future__ import annotations

import json
import subprocess
import sys

import trio

from mnemon.orchestrator.costs import FIELDS, run_cost, splits
from mnemon.orchestrator.settings import Settings
from mnemon.orchestrator.supervisor import open_supervisor
from mnemon.providers.scripted import ScriptedProvider
from mnemon.session.records import Text, ToolUse

CAPS = {"usd": 0.5, "tokens": 90_000, "max_turns": 4}


async def _run(root):
    sent = trio.Event()

    async def policy(request, state):
        agent = request.meta["agent"]
        i = state["i"] = state.get("i", 0) + 1
        if agent == "a1":
            steps = [("agents_start", {"task": "kid: look", "kind": "fresh", "budget_usd": 0.5,
                                       "budget_tokens": 90_000, "max_turns": 4}),
                     ("agents_send", {"agent": "a2", "text": "look under the mat"}),
                     ("agents_wait", {})]
            if i == 3:
                sent.set()
            if i <= len(steps):
                return [ToolUse(f"p{i}", *steps[i - 1])], "tool_use"
            return [Text("parent done")], "end_turn"
        if agent == "a2":
            if i == 1:
                await sent.wait()
                return [ToolUse("k1", "agents_start", {"task": "grandkid: x",
                                                       "kind": "fresh"})], "tool_use"
            if i == 2:
                return [ToolUse("k2", "agents_wait", {})], "tool_use"
            return [Text("kid done")], "end_turn"
        return [Text("grandkid done")], "end_turn"

    with trio.fail_after(60):
        async with open_supervisor(root, ScriptedProvider(policy=policy),
                                   Settings(model="scripted")) as sup:
            node = await sup.ask("delegate")
    assert node.reason == "done"


def _mnemon(*argv: str) -> str:
    done = subprocess.run([sys.executable, "-m", "mnemon", *argv], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_cost_shows_each_caps_beside_its_trees_spend_and_tree_the_caps_and_messages(
        tmp_path):
    root = tmp_path / "run"
    await _run(root)
    rows = {r.agent: r for r in run_cost(root)}
    assert set(rows) == {"a1", "a2", "a3"} and rows["a3"].parent == "a2"
    tree_tokens = sum(getattr(rows[a], f) for a in ("a2", "a3") for f in FIELDS)
    tree_usd = rows["a2"].cost_usd + rows["a3"].cost_usd
    want = {"usd": 0.5, "spent_usd": round(tree_usd, 6), "tokens": 90_000,
            "spent_tokens": tree_tokens, "max_turns": 4}
    assert splits(rows.values()) == {"a2": want}
    assert rows["a3"].cost_usd > 0  # the grandchild's spend is in its parent's tree

    doc = json.loads(_mnemon("cost", str(root), "--json"))
    by = {r["agent"]: r for r in doc["agents"]}
    assert by["a2"]["budget"] == want
    assert "budget" not in by["a1"] and "budget" not in by["a3"]
    text = _mnemon("cost", str(root))
    line = next(x for x in text.splitlines() if x.startswith("a2 ") and "$0.5000" in x)
    share = f"{100 * tree_usd / 0.5:.0f}%"
    assert f"${tree_usd:.4f} ({share})" in line and "90000" in line
    assert "capped agent" in text and "its tree spent" in text

    tree = {r["agent"]: r for r in json.loads(_mnemon("tree", str(root), "--json"))}
    assert tree["a2"]["budget"] == CAPS and tree["a2"]["messages"] == 1
    assert "budget" not in tree["a1"] and "messages" not in tree["a1"]
    drawn = _mnemon("tree", str(root))
    kid = next(x for x in drawn.splitlines() if "a2 [fresh]" in x)
    assert kid.endswith("· cap $0.50, 90000 tokens, 4 turns · 1 message received")


async def test_a_run_without_caps_has_no_split(tmp_path):
    root = tmp_path / "run"
    async with open_supervisor(root, ScriptedProvider(), Settings(model="scripted")) as sup:
        await sup.ask("hello")
    assert splits(run_cost(root)) == {}
    text = _mnemon("cost", str(root))
    assert "capped agent" not in text
    assert "budget" not in _mnemon("cost", str(root), "--json")
