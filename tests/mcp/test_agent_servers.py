"""MCP servers of one agent's own (decision 0244): started in that agent's nursery before its
``SessionStarted`` (which lists their tools), called through the loop on the scripted provider,
stopped when that agent ends while the run goes on; a child's servers stop with the child, its
parent's stay; a crash mid-call is an error result; every log verifies."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import trio

from mnemon import ScriptedProvider, Settings, open_supervisor
from mnemon.orchestrator.mcp.config import McpServerSpec, parse_config
from mnemon.orchestrator.usertools import UserTool
from mnemon.session.errors import Refusal
from mnemon.session.records import SessionStarted, ToolResults, decode

from .test_client import END, call, turn, verify

HERE = Path(__file__).resolve().parent


def pid_server(name: str, pidfile: Path) -> McpServerSpec:
    """The test server over stdio, writing its process id first (to watch it stop)."""
    return McpServerSpec(
        name=name, transport="stdio", command=sys.executable, tool_timeout_s=5.0,
        args=("-c", f"import os, runpy, sys; open({str(pidfile)!r}, 'w').write(str(os.getpid()))"
                    f"; sys.argv = ['x']; runpy.run_path({str(HERE / 'toolserver.py')!r}, "
                    "run_name='__main__')"))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def wait_gone(pid: int) -> None:
    with trio.fail_after(15):
        while alive(pid):
            await trio.sleep(0.05)


def mine(agent: str, *blocks, stop: str = "tool_use") -> dict:
    """A script line played only by ``agent``."""
    return {**turn(*blocks, stop=stop), "agent": agent}


def opening(root: Path, agent: str) -> SessionStarted:
    first = (root / "agents" / agent / "record.jsonl").read_bytes().split(b"\n", 1)[0]
    st = decode(first)
    assert isinstance(st, SessionStarted)
    return st


def results(root: Path, agent: str) -> list[tuple[str, bool]]:
    out = []
    for line in (root / "agents" / agent / "record.jsonl").read_bytes().splitlines():
        rec = decode(line)
        if isinstance(rec, ToolResults):
            out.extend((r.content, r.is_error) for r in rec.results)
    return out


async def test_a_root_agents_own_server_stops_with_it_and_the_run_goes_on(tmp_path):
    """The tools are in the agent's ``SessionStarted`` with the server's schema and answer
    through the loop; once the agent has ended its server process is gone, and the next agent
    of the same run is offered none of them."""
    root, pidfile = tmp_path / "run", tmp_path / "pid"
    script = [mine("a1", call("c1", "own__add", a=2, b=3), call("c2", "own__shout", text="hi")),
              {**END, "agent": "a1"},
              mine("a2", call("d1", "own__add", a=1, b=1)),
              {**END, "agent": "a2"}]
    with trio.fail_after(90):
        async with open_supervisor(root, ScriptedProvider(script), Settings()) as sup:
            a1 = await sup.ask("use your server", mcp_servers=(pid_server("own", pidfile),))
            assert a1.reason == "done"
            await wait_gone(int(pidfile.read_text()))  # the agent ended; the run has not
            a2 = await sup.ask("no server of yours")
            assert a2.reason == "done"
    tools = {t["name"]: t for t in opening(root, "a1").tools}
    assert tools["own__add"]["input_schema"]["required"] == ["a", "b"]
    assert list(tools)[-6:] == ["own__add", "own__shout", "own__fail", "own__crash",
                                "own__hang", "own__odd_name_v2"]  # after the built-ins
    assert results(root, "a1") == [("5", False), ("HI", False)]
    assert not any(t["name"].startswith("own__") for t in opening(root, "a2").tools)
    (content, is_error), = results(root, "a2")
    assert is_error and content.startswith("unknown tool 'own__add'")
    assert (root / "mcp" / "a1" / "own.stderr").exists()
    verify(root)


async def test_a_crash_mid_call_is_an_error_result(tmp_path):
    """A per-agent server dying mid-call answers that call, and later ones, with error
    results; the agent goes on to its end."""
    root = tmp_path / "run"
    script = [turn(call("c1", "own__crash")), turn(call("c2", "own__add", a=1, b=1)), END]
    settings = Settings(agent_mcp_servers=(pid_server("own", tmp_path / "pid"),))
    with trio.fail_after(90):
        async with open_supervisor(root, ScriptedProvider(script), settings) as sup:
            node = await sup.ask("crash it")
    assert node.reason == "done"
    (crash, e1), (later, e2) = results(root, "a1")
    assert e1 and crash.startswith("MCP server own failed during crash")
    assert e2 and "MCP server own is not running" in later
    verify(root)


async def test_each_root_agent_starts_its_own_http_server_connection(tmp_path, nursery):
    """``Settings.agent_mcp_servers`` given to the run: every root agent connects for itself
    (streamable HTTP on loopback here); a hung call is a timeout, not a hung agent."""
    from hypercorn.config import Config
    from hypercorn.trio import serve

    from .toolserver import SERVER

    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = config.errorlog = None
    binds = await nursery.start(lambda task_status: serve(SERVER.streamable_http_app(), config,
                                                          task_status=task_status))
    spec, = parse_config({"mcpServers": {"web": {"type": "http", "url": binds[0] + "/mcp",
                                                 "tool_timeout_sec": 1}}})
    root = tmp_path / "run"
    script = [mine("a1", call("w1", "web__add", a=20, b=22), call("w2", "web__hang")),
              {**END, "agent": "a1"},
              mine("a2", call("w3", "web__add", a=1, b=2)), {**END, "agent": "a2"}]
    with trio.fail_after(90):
        async with open_supervisor(root, ScriptedProvider(script),
                                   Settings(agent_mcp_servers=(spec,))) as sup:
            async with trio.open_nursery() as agents:
                for task in ("one", "two"):
                    sup.start(sup.new_root(task), agents)
    assert results(root, "a1") == [("42", False),
                                   ("MCP server web did not answer hang within 1 s", True)]
    assert results(root, "a2") == [("3", False)]
    nursery.cancel_scope.cancel()
    verify(root)


async def test_children_inherit_the_table_and_a_childs_servers_stop_with_it(tmp_path):
    """A mnemon child is offered its parent's tools byte for byte and calls the parent's
    server; a fresh child given a server of its own is offered both; when that child ends its
    server is gone and the parent's still runs, until the parent ends."""
    root = tmp_path / "run"
    par_pid, kid_pid = tmp_path / "par.pid", tmp_path / "kid.pid"
    seen: dict[str, bool] = {}
    holder: dict = {}

    async def hatch() -> str:
        """Start a fresh child with a server of its own and wait for it."""
        sup, parent = holder["sup"], holder["sup"].agents["a1"]
        child = sup.new_child(parent, "use both servers", "fresh",
                              mcp_servers=(pid_server("kid", kid_pid),))
        await sup.spawn(child, parent.nursery)
        await child.done.wait()
        await wait_gone(int(kid_pid.read_text()))
        seen["parent server alive after the child"] = alive(int(par_pid.read_text()))
        return child.reason or ""

    script = [
        mine("a1", call("p1", "agents_start", task="add for me", kind="mnemon")),
        mine("a1", call("p2", "agents_wait")),
        mine("a1", call("p3", "hatch")),
        mine("a1", call("p4", "par__add", a=3, b=4)),
        {**END, "agent": "a1"},
        mine("a2", call("m1", "par__add", a=1, b=2)), {**END, "agent": "a2"},
        mine("a3", call("f1", "kid__add", a=5, b=5), call("f2", "par__shout", text="up")),
        {**END, "agent": "a3"},
    ]
    with trio.fail_after(120):
        async with open_supervisor(root, ScriptedProvider(script), Settings(),
                                   user_tools=[UserTool(hatch)]) as sup:
            holder["sup"] = sup
            a1 = await sup.ask("delegate", mcp_servers=(pid_server("par", par_pid),))
            assert a1.reason == "done"
            await wait_gone(int(par_pid.read_text()))
    assert seen == {"parent server alive after the child": True}
    parent_tools = opening(root, "a1").tools
    assert opening(root, "a2").tools == parent_tools  # a mnemon child's prefix is the parent's
    kid_tools = opening(root, "a3").tools
    assert kid_tools[:len(parent_tools)] == parent_tools
    assert [t["name"] for t in kid_tools[len(parent_tools):]][:2] == ["kid__add", "kid__shout"]
    assert results(root, "a2") == [("3", False)]
    assert results(root, "a3") == [("10", False), ("UP", False)]
    assert results(root, "a1")[-2:] == [("done", False), ("7", False)]
    assert (root / "mcp" / "a3" / "kid.stderr").exists()
    verify(root)


async def test_a_mnemon_child_may_not_have_servers_of_its_own(tmp_path):
    """Its tools are its parent's (its prefix byte-identical), so the fork is refused before
    anything is written."""
    root = tmp_path / "run"
    async with open_supervisor(root, ScriptedProvider([END]), Settings()) as sup:
        parent = sup.new_root("a task")
        with pytest.raises(Refusal, match="fresh child"):
            sup.new_child(parent, "x", "mnemon", mcp_servers=(pid_server("s", tmp_path / "p"),))
        assert not (root / "agents" / "a2").exists()
        await sup.run(parent)
    verify(root)


async def test_an_agent_cancelled_while_its_server_starts_leaves_nothing(tmp_path):
    """A server that never answers the handshake holds the agent before its log opens;
    cancelling the agent then stops the server process and writes no log: nothing outlives the
    agent, and the run still verifies. ``spawn`` says why the agent has no log."""
    root, pidfile = tmp_path / "run", tmp_path / "pid"
    mute = McpServerSpec(name="mute", transport="stdio", command=sys.executable,
                         args=("-c", f"import os, time; open({str(pidfile)!r}, 'w')"
                                     ".write(str(os.getpid())); time.sleep(600)"),
                         startup_timeout_s=60)
    with trio.fail_after(60):
        async with open_supervisor(root, ScriptedProvider([END]), Settings()) as sup:
            node = sup.new_root("never asked", mcp_servers=(mute,))
            assert node.log is None
            with pytest.raises(Refusal, match="has not opened its log"):
                node.ctx
            said: list[str] = []

            async def start_it() -> None:
                try:
                    await sup.spawn(node, agents)
                except Refusal as e:
                    said.append(str(e))

            async with trio.open_nursery() as agents:
                agents.start_soon(start_it)
                while not pidfile.exists() or not pidfile.read_text():
                    await trio.sleep(0.05)
                node.scope.cancel()
            assert said == ["agent a1 ended before its log opened (cancelled)"]
            assert (node.state, node.log) == ("cancelled", None)
            await wait_gone(int(pidfile.read_text()))
    assert not (root / "agents" / "a1").exists()
    verify(root)


async def test_a_synod_after_its_parent_ended_has_the_parents_servers_again(tmp_path):
    """Children forked from an agent whose loop has ended (a job's synod) are offered its
    tools: its servers start again around their nursery, and stop when the synod is over."""
    root, pidfile = tmp_path / "run", tmp_path / "pid"
    script = [{**END, "agent": "a1"},
              mine("a2", call("s1", "par__add", a=2, b=2)), {**END, "agent": "a2"},
              mine("a3", call("s2", "par__add", a=2, b=2)), {**END, "agent": "a3"}]
    with trio.fail_after(90):
        async with open_supervisor(root, ScriptedProvider(script), Settings()) as sup:
            a1 = await sup.ask("think", mcp_servers=(pid_server("par", pidfile),))
            first = int(pidfile.read_text())
            await wait_gone(first)
            result = await sup.synod(a1, "two plus two?", n=2)
            again = int(pidfile.read_text())
            assert again != first
            await wait_gone(again)
    assert [c["state"] for c in result.children] == ["ended", "ended"]
    assert results(root, "a2") == results(root, "a3") == [("4", False)]
    assert opening(root, "a2").tools == opening(root, "a1").tools
    verify(root)
