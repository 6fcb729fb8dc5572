"""Cancel random subtrees of a 3-level lineage mid-turn, 500 times: no orphaned task, no provider
call after the cancel, every log ends with ``SessionEnded{reason}`` and folds."""

from __future__ import annotations

import json
import random

import pytest
import trio
import trio.testing

from mnemon.lineage.runroot import agent_source
from mnemon.lineage.view import open_agent
from mnemon.orchestrator import logs
from mnemon.orchestrator.settings import Settings
from mnemon.orchestrator.supervisor import open_supervisor
from mnemon.providers.scripted import ScriptedProvider

ROUNDS = 500


@pytest.fixture(autouse=True)
def _quiet():
    logs.quiet()


def _tree_policy(calls: list, rng: random.Random):
    """Depth 0 and 1 start two mnemon children and wait; depth 2 works for a few turns. Every
    call thinks for a random while, and is noted (agent, time it started)."""

    async def policy(request, state):
        agent, depth = request.meta["agent"], request.meta["depth"]
        calls.append((agent, trio.current_time()))
        await trio.sleep(rng.uniform(0.01, 0.3))
        k = state["k"] = state.get("k", 0) + 1
        tu = lambda name, **inp: {"type": "tool_use", "id": f"{agent}-{k}-{name}",  # noqa: E731
                                   "name": name, "input": inp}
        if depth < 2:
            if k == 1:
                return [tu("agents_start", task="a"), {**tu("agents_start", task="b"),
                                                        "id": f"{agent}-{k}-b"}], "tool_use"
            if k == 2:
                return [tu("agents_wait")], "tool_use"
            return [{"type": "text", "text": "all done"}], "end_turn"
        if k < 4:
            return [tu("transcript_index")], "tool_use"
        return [{"type": "text", "text": "leaf done"}], "end_turn"

    return policy


async def _one_round(tmp, seed: int) -> dict:
    rng = random.Random(seed)
    calls: list = []
    root = tmp / f"r{seed}"
    settings = Settings(model="scripted", max_agents=16)
    cancelled_at = None
    victims: set[str] = set()
    async with open_supervisor(root, ScriptedProvider(policy=_tree_policy(calls, rng)),
                               settings) as sup:
        top = sup.new_root("go", agent_id="a1")
        sup.start(top)
        await trio.sleep(rng.uniform(0.05, 1.2))
        live = [n for n in sup.agents.values() if n.state == "running"]
        if live:
            victim = rng.choice(live)
            victims = {victim.id, *victim.descendants()}
            running_then = {a for a in victims if sup.agents[a].state == "running"}
            cancelled_at = trio.current_time()
            victim.scope.cancel()
            with trio.fail_after(30):
                await victim.done.wait()
        with trio.fail_after(60):
            await top.done.wait()
    # leaving the supervisor's block returned: no task of any agent is left (Trio's nursery)
    for aid, node in sup.agents.items():
        assert node.done.is_set() and node.state != "running", aid
        recs = [json.loads(line) for line in (root / agent_source(aid)).read_text().splitlines()]
        assert recs[-1]["t"] == "SessionEnded" and recs[-1]["reason"], aid
        assert sum(r["t"] == "SessionEnded" for r in recs) == 1, aid
        open_agent(root / "agents" / aid)
    if cancelled_at is not None:
        late = [(a, t) for a, t in calls if a in victims and t > cancelled_at]
        assert not late, f"provider called after the cancel: {late}"
        for aid in running_then:
            assert sup.agents[aid].state == "cancelled", (aid, sup.agents[aid].reason)
    return {"cancelled": cancelled_at is not None, "victims": len(victims)}


async def test_random_subtree_cancels(tmp_path, autojump_clock):
    seen = [await _one_round(tmp_path, seed) for seed in range(ROUNDS)]
    assert sum(s["cancelled"] for s in seen) > ROUNDS * 0.8
    assert any(s["victims"] >= 3 for s in seen), "some cancels took a whole subtree"
    assert any(s["victims"] == 1 for s in seen), "some cancels took a leaf"
