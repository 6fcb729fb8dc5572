"""One tool pipeline (decision 0328): every tool a model calls answers the ``Tool`` protocol, is
handed a narrow ``ToolContext``, says how it may run, and is dispatched once through the agent's
table, behind its policy's gate. Real supervisor runs on the scripted provider, read back from
the real logs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

import mnemon
from mnemon.orchestrator.policy import parse_policy
from mnemon.orchestrator.settings import Settings
from mnemon.orchestrator.supervisor import open_supervisor
from mnemon.orchestrator.tools import BUILTINS, ToolBase, ToolContext, UserTool, as_tool, tool
from mnemon.orchestrator.tools.base import is_tool
from mnemon.orchestrator.tools.gate import Gated
from mnemon.orchestrator.tools.table import ToolTable
from mnemon.providers.cache import CacheModel
from mnemon.providers.scripted import ScriptedProvider
from mnemon.session.records import Text, ToolUse

REPO = Path(__file__).resolve().parents[2]


def records(root: Path, agent: str = "a1") -> list[dict]:
    return [json.loads(line) for line in
            (root / "agents" / agent / "record.jsonl").read_text().splitlines()]


def results_of(root: Path, agent: str = "a1") -> list[dict]:
    return [x for r in records(root, agent) if r["t"] == "ToolResults" for x in r["results"]]


def one_response(calls: list[tuple[str, dict]]):
    """The root makes these calls in one response, then answers."""
    def policy(request, state):
        state["i"] = state.get("i", 0) + 1
        if state["i"] == 1:
            return [ToolUse(f"c{k}", name, args) for k, (name, args) in enumerate(calls)], \
                "tool_use"
        return [Text("finished")], "end_turn"
    return policy


async def run(tmp_path: Path, calls, tools, **settings):
    root = tmp_path / "run"
    async with open_supervisor(root, ScriptedProvider(policy=one_response(calls),
                                                      cache_model=CacheModel()),
                               Settings(model="scripted", **settings),
                               user_tools=tools) as sup:
        node = await sup.ask("go")
    return root, sup, node


class Clock:
    """Who ran when: each call notes its start and end as it runs."""

    def __init__(self):
        self.events: list[tuple[str, str]] = []

    def tool(self, name: str, mode: str, delay: float = 0.05):
        clock = self

        class Timed(ToolBase):
            def __init__(self):
                self.name, self.mode = name, mode
                self.description = f"{name}, {mode}"
                self.schema = {"type": "object", "properties": {"k": {"type": "integer"}}}

            async def call(self, ctx: ToolContext, input: dict) -> str:
                clock.events.append(("start", f"{name}{input['k']}"))
                await trio.sleep(delay)
                clock.events.append(("end", f"{name}{input['k']}"))
                return f"{name}{input['k']} done"
        return Timed()

    def overlapped(self, a: str, b: str) -> bool:
        """Whether ``a`` and ``b`` were running at one moment."""
        i = {(k, n): j for j, (k, n) in enumerate(self.events)}
        return i[("start", a)] < i[("end", b)] and i[("start", b)] < i[("end", a)]


# --------------------------------------------------------------------------- the protocol


def test_every_tool_answers_the_protocol():
    """Built-ins, a ``@tool`` function and a class of one's own all answer ``Tool``; a plain
    function does not until it is made one."""
    def plain(x: int) -> int:
        return x

    assert all(is_tool(t) for t in BUILTINS)
    assert is_tool(tool(plain)) and is_tool(UserTool(plain, mode="serial"))
    assert not is_tool(plain) and is_tool(as_tool(plain))
    assert mnemon.Tool is mnemon.orchestrator.tools.Tool
    assert mnemon.ToolContext is ToolContext
    with pytest.raises(TypeError, match="mode 'sometimes' is not one of shared, serial"):
        UserTool(plain, mode="sometimes")
    with pytest.raises(TypeError, match="neither a Tool nor a function"):
        as_tool(42)


def test_each_built_in_says_how_it_may_run():
    """The loop asks the tool, never a name list: the context's edits and the agents tools
    that start or stop agents run exclusive; reads, the survey and waiting run shared."""
    modes = {t.name: t.mode for t in BUILTINS}
    assert modes == {"context_survey": "shared", "context_evict": "exclusive",
                     "context_mark": "exclusive", "transcript_index": "shared",
                     "transcript_read": "shared", "transcript_grep": "shared",
                     "agents_start": "exclusive", "agents_wait": "shared",
                     "agents_cancel": "exclusive", "agents_synod": "exclusive",
                     "agents_status": "shared", "agents_send": "exclusive",
                     "approvals_decide": "exclusive"}
    loop = (REPO / "orchestrator" / "loop.py").read_text()
    for name in modes:  # the loop names no tool: it dispatches through the table
        assert name not in loop, name
    assert "EXCLUSIVE" not in loop


async def test_a_tool_of_ones_own_is_handed_the_call_and_its_agent(tmp_path):
    seen = {}

    class Where(ToolBase):
        name = "where_am_i"
        description = "Say which agent and call this is."
        schema = {"type": "object", "properties": {}}

        async def call(self, ctx: ToolContext, input: dict) -> str:
            seen.update(agent=ctx.agent, call=ctx.call_id, tool=ctx.tool, depth=ctx.depth,
                        window=ctx.settings.context_window, turns=len(ctx.context.turns),
                        scope=ctx.cancel_scope is not None)
            return json.dumps({"agent": ctx.agent})

    root, _sup, _node = await run(tmp_path, [("where_am_i", {})], [Where()],
                                  context_window=64_000)
    assert seen == {"agent": "a1", "call": "c0", "tool": "where_am_i", "depth": 0,
                    "window": 64_000, "turns": 2, "scope": True}
    assert results_of(root) == [{"tool_use_id": "c0", "content": '{"agent": "a1"}',
                                 "is_error": False}]
    started = records(root)[0]
    assert [t["name"] for t in started["tools"]][-1] == "where_am_i"


async def test_a_function_names_its_context_and_the_model_never_sees_it(tmp_path):
    got = []

    @tool
    async def note(text: str, ctx: ToolContext) -> str:
        """Keep a note."""
        got.append((ctx.agent, ctx.call_id, text))
        return "kept"

    assert "ctx" not in note.definition.input_schema["properties"]
    root, _sup, _node = await run(tmp_path, [("note", {"text": "hello"})], [note])
    assert got == [("a1", "c0", "hello")]
    assert results_of(root)[0]["content"] == "kept"
    # a call naming ``ctx`` is input that does not fit, answered as such
    root2, _sup, _node = await run(tmp_path / "b", [("note", {"text": "x", "ctx": 1})], [note])
    assert results_of(root2)[0]["is_error"] and "invalid input for note" in \
        results_of(root2)[0]["content"]


def test_the_context_hands_out_no_environment():
    """Nothing a call is handed reaches the supervisor or the run's environment."""
    public = [n for n in dir(ToolContext) if not n.startswith("_")]
    assert set(ToolContext.__slots__) == {"_env", "_node", "call_id", "tool"}
    for name in ("env", "supervisor", "spawner", "provider", "approvals", "roles"):
        assert name not in public, name


# --------------------------------------------------------------------------- how calls run


async def test_serial_calls_take_turns_shared_ones_overlap(tmp_path):
    c = Clock()
    tools = [c.tool("read", "shared"), c.tool("write", "serial")]
    calls = [("write", {"k": 1}), ("read", {"k": 1}), ("write", {"k": 2}), ("read", {"k": 2}),
             ("write", {"k": 3})]
    root, _sup, _node = await run(tmp_path, calls, tools)
    assert not c.overlapped("write1", "write2") and not c.overlapped("write2", "write3")
    ends = [n for k, n in c.events if k == "end" and n.startswith("write")]
    assert ends == ["write1", "write2", "write3"]  # in call order
    assert c.overlapped("read1", "read2") and c.overlapped("read1", "write1")
    assert [r["tool_use_id"] for r in results_of(root)] == ["c0", "c1", "c2", "c3", "c4"]


async def test_an_exclusive_call_waits_for_the_serial_ones_before_it_and_holds_the_rest(
        tmp_path):
    c = Clock()
    tools = [c.tool("read", "shared"), c.tool("write", "serial"), c.tool("lock", "exclusive")]
    calls = [("write", {"k": 1}), ("lock", {"k": 1}), ("read", {"k": 1}), ("write", {"k": 2})]
    await run(tmp_path, calls, tools)
    order = [f"{k} {n}" for k, n in c.events]
    assert order.index("end write1") < order.index("start lock1")
    assert order.index("end lock1") < order.index("start read1")
    assert order.index("end lock1") < order.index("start write2")


# --------------------------------------------------------------------------- the gate


async def test_the_gate_wraps_the_table_and_judges_every_tool_alike(tmp_path):
    """A policy makes the agent's table a ``Gated`` one; a denied tool of one's own is not run
    and the model reads the rule, exactly as a denied built-in."""
    ran = []

    @tool(mode="serial")
    def erase(path: str) -> str:
        """Erase a file."""
        ran.append(path)
        return "erased"

    pol = parse_policy({"rule": [{"tool": "erase", "action": "deny", "reason": "never"},
                                 {"tool": "context_evict", "action": "deny",
                                  "reason": "keep it"}]}, "p.toml")
    root, sup, node = await run(tmp_path, [("erase", {"path": "x"}),
                                           ("context_evict", {"from": 1, "to": 1})],
                                [erase], tool_policy=pol)
    assert ran == []
    got = results_of(root)
    assert [r["is_error"] for r in got] == [True, True]
    assert got[0]["content"] == ("the tool call erase was denied by the policy (p.toml rule 1): "
                                 "never")
    assert "keep it" in got[1]["content"]
    assert isinstance(sup.env.table_for(node), Gated)
    assert isinstance(sup.env.table_for(node, gate=False), ToolTable)


async def test_without_a_policy_the_table_is_the_tools_themselves(tmp_path):
    _root, sup, node = await run(tmp_path, [], [])
    table = sup.env.table_for(node)
    assert isinstance(table, ToolTable)
    assert table.get("transcript_grep").mode == "shared" and table.get("nothing") is None
    assert table.definitions() is table.definitions()  # one list while the tools are the same


async def test_an_unknown_tool_and_a_crash_are_answers_not_failures(tmp_path):
    @tool
    def boom() -> str:
        """Fail."""
        raise RuntimeError("kaput")

    root, _sup, node = await run(tmp_path, [("nope", {}), ("boom", {})], [boom])
    got = results_of(root)
    assert got[0]["is_error"] and got[0]["content"].startswith("unknown tool 'nope'; the known "
                                                               "tools are: context_survey")
    assert got[1] == {"tool_use_id": "c1", "content": "tool boom failed: RuntimeError: kaput",
                      "is_error": True}
    assert node.state == "ended"
