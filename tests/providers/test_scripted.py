"""The scripted provider: scripts, policies, per-agent state, usage from the cache model."""

from __future__ import annotations

import json

import pytest
import trio

from mnemon.providers.base import Request
from mnemon.providers.cache import CacheModel
from mnemon.providers.scripted import EXHAUSTED, ScriptedProvider, load_script
from mnemon.session.records import Text, ToolUse

BIG = "q" * 6000


def req(agent: str, *texts: str) -> Request:
    return Request(system="sys " + BIG, meta={"agent": agent},
                   messages=[{"role": "user", "content": [{"type": "text", "text": t}]}
                             for t in texts])


def write_script(tmp_path, lines) -> str:
    path = tmp_path / "script.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    return str(path)


async def test_plays_a_jsonl_script_then_says_it_is_exhausted(tmp_path):
    path = write_script(tmp_path, [
        {"blocks": [{"type": "text", "text": "Looking."},
                    {"type": "tool_use", "id": "tu_1", "name": "bash",
                     "input": {"command": "ls"}}], "stop_reason": "tool_use"},
        {"blocks": [{"type": "text", "text": "Done."}]},
    ])
    p = ScriptedProvider(path)
    r1 = await p.complete(req("a1", "go"))
    assert r1.blocks == [Text("Looking."), ToolUse("tu_1", "bash", {"command": "ls"})]
    assert (r1.stop_reason, r1.model) == ("tool_use", "scripted")
    r2 = await p.complete(req("a1", "go"))
    assert (r2.blocks, r2.stop_reason) == ([Text("Done.")], "end_turn")  # inferred
    r3 = await p.complete(req("a1", "go"))
    assert (r3.blocks, r3.stop_reason) == ([Text(EXHAUSTED)], "end_turn")


async def test_each_agent_has_its_own_cursor_and_routed_lines():
    p = ScriptedProvider([
        {"blocks": [{"type": "text", "text": "parent only"}], "agent": "a1"},
        {"blocks": [{"type": "text", "text": "everyone"}]},
    ])
    assert (await p.complete(req("a2", "x"))).blocks == [Text("everyone")]
    assert (await p.complete(req("a1", "x"))).blocks == [Text("parent only")]
    assert (await p.complete(req("a1", "x"))).blocks == [Text("everyone")]
    assert (await p.complete(req("a2", "x"))).blocks == [Text(EXHAUSTED)]


async def test_policy_with_per_agent_state():
    seen = []

    async def policy(request, state):
        state["n"] = state.get("n", 0) + 1
        seen.append(request.meta["agent"])
        return [{"type": "text", "text": f"{request.meta['agent']} #{state['n']}"}], None

    p = ScriptedProvider(policy=policy)
    out = [(await p.complete(req(agent, "hi"))).blocks[0].text for agent in ("a1", "a1", "a2")]
    assert out == ["a1 #1", "a1 #2", "a2 #1"]


async def test_usage_from_a_shared_cache_model():
    cm = CacheModel()
    parent = ScriptedProvider(policy=lambda r, s: ([Text("x" * 40)], "end_turn"), cache_model=cm)
    child = ScriptedProvider(policy=lambda r, s: ([Text("y")], "end_turn"), cache_model=cm)
    first = await parent.complete(req("a1", BIG))
    assert first.usage.cache_write_tokens > 0 and first.usage.cache_read_tokens == 0
    assert first.usage.output_tokens == len(b'{"type":"text","text":"' + b"x" * 40 + b'"}') // 4 + 1
    second = await child.complete(req("a2", BIG))
    assert second.usage.cache_read_tokens == first.usage.total_input


async def test_simulated_latency_on_the_clock(autojump_clock):
    attempts = []
    p = ScriptedProvider(policy=lambda r, s: ([Text("ok")], "end_turn"), latency_s=2.5)
    t0 = trio.current_time()
    r = await p.complete(req("a1", "hi"), on_attempt=lambda *a: attempts.append(a))
    assert trio.current_time() - t0 == pytest.approx(2.5)
    assert attempts == [(1, pytest.approx(2.5), r.usage, None)]


async def test_default_policy_without_script():
    r = await ScriptedProvider().complete(req("a1", "what is up"))
    assert r.blocks == [Text("(scripted) You said: what is up")]


def test_bad_script_line_named(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"blocks": []}\nnot json\n')
    with pytest.raises(ValueError, match="bad.jsonl:2"):
        load_script(path)
    with pytest.raises(ValueError):
        ScriptedProvider([], policy=lambda r, s: ([], None))
