"""``mnemon mcp RUN_ROOT --agents``: another harness delegates to mnemon agents through the
official MCP client — over stdio to the real command on the scripted provider (start an agent,
wait for it, read its answer and its transcript), and in-process against a supervisor whose
scripted model waits (status while it runs, a message its next request carries, children
with caps, cancelling, and the refusals)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import trio
from mcp import Client, StdioServerParameters

from mnemon.orchestrator.cli import main
from mnemon.orchestrator.mcp.agents import AGENT_TOOLS, AgentDesk
from mnemon.orchestrator.mcp.door import DOOR_TOOLS, RunDoor
from mnemon.orchestrator.mcp.server import build_server
from mnemon.orchestrator.settings import Settings
from mnemon.orchestrator.supervisor import open_supervisor
from mnemon.providers.scripted import ScriptedProvider
from mnemon.session.records import Text, ToolUse


def _json(result):
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


def _error(result) -> str:
    assert result.is_error, result.content[0].text
    return result.content[0].text


def _records(root, agent):
    return [json.loads(x) for x in
            (root / "agents" / agent / "record.jsonl").read_text().splitlines()]


async def test_stdio_starts_an_agent_waits_for_it_and_reads_its_answer(tmp_path):
    root = tmp_path / "run"  # new: --agents makes it
    team = tmp_path / "team.toml"
    team.write_text('[roles.helper]\ndescription = "helps"\nsystem = "You help."\n')
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "mnemon", "mcp", str(root), "--agents", "--provider", "scripted",
        "--budget-usd", "5", "--roles", str(team)])
    with trio.fail_after(90):
        async with Client(params) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            assert names == [*DOOR_TOOLS, *AGENT_TOOLS]
            started = _json(await client.call_tool("agents_start", {
                "task": "find the codeword ORCHID-5", "budget_tokens": 50_000, "max_turns": 5}))
            aid = started["agent"]
            assert aid == "a1" and started["kind"] == "root"
            assert started["budget"] == {"tokens": 50_000, "max_turns": 5}
            assert started["projected_usd"] > 0
            assert started["projected"]["cache_write_tokens"] > 0  # a root shares no cache
            waited = _json(await client.call_tool("agents_wait", {"agents": [aid],
                                                                  "timeout_s": 60}))
            assert not waited["timed_out"]
            (out,) = waited["agents"]
            assert out["state"] == "ended" and \
                out["answer"] == "(scripted) You said: find the codeword ORCHID-5"
            status = _json(await client.call_tool("agents_status", {}))["agents"]
            assert status[0]["agent"] == aid and status[0]["state"] == "ended"
            assert status[0]["budget"]["tokens"] == 50_000
            assert status[0]["budget"]["spent_tokens"] > 0
            # its transcript through the door's tools, as any run's
            grep = _json(await client.call_tool("transcript_grep", {"agent": aid,
                                                                    "pattern": "ORCHID-\\d"}))
            assert grep["total"] == 2
            assert _error(await client.call_tool("agents_send", {"agent": aid, "text": "hi"})) \
                .startswith(f"agent {aid} has ended")
            # the run's roles (--roles): an agent of one runs as it says
            helper = _json(await client.call_tool("agents_start", {"task": "help",
                                                                   "role": "helper"}))
            assert helper["role"] == "helper"
            await client.call_tool("agents_wait", {})
            assert "no role 'nobody'" in _error(await client.call_tool(
                "agents_start", {"task": "x", "role": "nobody"}))
    opening = _records(root, "a1")[0]
    assert opening["t"] == "SessionStarted" and opening["budget"] == {"tokens": 50_000,
                                                                       "max_turns": 5}
    helped = _records(root, "a2")[0]
    assert helped["role"] == "helper" and helped["system"] == "You help."
    done = subprocess.run([sys.executable, "-m", "mnemon", "verify", str(root)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


async def test_the_door_alone_stays_the_default(demo_root):
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "mnemon", "mcp", str(demo_root)])
    with trio.fail_after(60):
        async with Client(params) as client:
            assert [t.name for t in (await client.list_tools()).tools] == list(DOOR_TOOLS)
            assert "unknown tool" in _error(await client.call_tool("agents_start",
                                                                   {"task": "x"}))


@pytest.mark.parametrize("argv, words", [
    (["--provider", "openai"], "--provider: only with --agents"),
    (["--budget-usd", "1", "--policy", "p.toml"], "--budget-usd, --policy: only with --agents"),
])
def test_run_flags_without_agents_are_refused(demo_root, capsys, argv, words):
    assert main(["mcp", str(demo_root), *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


def test_agents_over_a_directory_that_is_no_run_root_is_refused(tmp_path, capsys):
    (tmp_path / "stray.txt").write_text("x")
    assert main(["mcp", str(tmp_path), "--agents"]) == 2
    assert "not empty and holds no run.json" in capsys.readouterr().err


def _texts(request) -> str:
    return repr(request.messages)


async def test_status_messages_children_caps_cancel_and_refusals(tmp_path):
    go = trio.Event()
    seen: dict[str, list[str]] = {}

    async def policy(request, state):
        agent = request.meta["agent"]
        seen.setdefault(agent, []).append(_texts(request))
        i = state["i"] = state.get("i", 0) + 1
        if "forever" in seen[agent][0]:
            await trio.sleep_forever()
        if agent == "a1" and i == 1:
            await go.wait()
            return [ToolUse("t1", "context_survey", {})], "tool_use"
        return [Text(f"{agent} answers")], "end_turn"

    provider = ScriptedProvider(policy=policy)
    async with open_supervisor(tmp_path, provider, Settings(model="scripted",
                                                            budget_usd=2.0)) as sup:
        desk = AgentDesk(sup)
        server = build_server(RunDoor(tmp_path), desk=desk)
        with trio.fail_after(60):
            async with Client(server) as client:
                call = client.call_tool
                a1 = _json(await call("agents_start", {"task": "work slowly"}))["agent"]
                while "a1" not in seen:
                    await trio.sleep(0.01)
                st = _json(await call("agents_status", {"agents": [a1]}))["agents"][0]
                assert st["state"] == "running" and st["turns"] == 0
                # a message: recorded now, carried by its next request
                sent = _json(await call("agents_send", {"agent": a1, "text": "use PLAN-B"}))
                assert sent["messages"] == 1
                # a child of the running agent, its caps split from what the run has left
                assert "more than you have left" in _error(await call("agents_start", {
                    "task": "kid", "parent": a1, "kind": "fresh", "budget_usd": 3}))
                kid = _json(await call("agents_start", {"task": "kid: look", "parent": a1,
                                                        "kind": "fresh", "budget_usd": 0.5}))
                assert kid["parent"] == a1 and kid["budget"] == {"usd": 0.5}
                assert "projected_usd" in kid
                kw = _json(await call("agents_wait", {"agents": [kid["agent"]]}))
                assert kw["agents"][0]["answer"] == f"{kid['agent']} answers"
                go.set()
                w = _json(await call("agents_wait", {"timeout_s": 30}))
                assert not w["timed_out"]
                assert [o["agent"] for o in w["agents"]] == [a1]  # the started ones running
                assert w["agents"][0]["answer"] == "a1 answers"
                # an agent that never answers: the wait times out, a cancel ends it
                a3 = _json(await call("agents_start", {"task": "think forever"}))["agent"]
                w = _json(await call("agents_wait", {"agents": [a3], "timeout_s": 0.2}))
                assert w["timed_out"] and w["agents"][0]["state"] == "running"
                out = _json(await call("agents_cancel", {"agent": a3}))
                assert out["state"] == "cancelled"
                # refusals, each an error result of one line
                for name, args, words in [
                    ("agents_send", {"agent": "a9", "text": "x"}, "no agent 'a9' runs"),
                    ("agents_send", {"agent": a3, "text": "x"}, "has cancelled"),
                    ("agents_cancel", {"agent": a1}, "not running"),
                    ("agents_start", {"task": "x", "kind": "mnemon"}, "name a running 'parent'"),
                    ("agents_start", {"task": "x", "budget_usd": -1}, "positive"),
                    ("agents_start", {"task": "x", "max_turns": True}, "wrong type"),
                    ("agents_start", {"task": "  "}, "may not be empty"),
                    ("agents_start", {"task": "x", "parent": a1}, "not running"),
                    ("agents_start", {"task": "x", "path": "/"}, "takes no 'path'"),
                    ("agents_wait", {"timeout_s": 99_999}, "at most"),
                    ("agents_status", {"agents": ["a9"]}, "no agent 'a9'"),
                ]:
                    text = _error(await call(name, args))
                    assert words in text and "\n" not in text, (name, text)
                # the server going away: what still runs is cancelled and records its end
                a5 = _json(await call("agents_start", {"task": "think forever again"}))["agent"]
                while a5 not in seen:
                    await trio.sleep(0.01)
                await desk.close()
                assert sup.agents[a5].state == "cancelled"
    assert "PLAN-B" not in seen["a1"][0] and "[message from a person] use PLAN-B" in seen["a1"][1]
    steer = [r for r in _records(tmp_path, "a1") if r["t"] == "Steering"]
    assert [r["by"] for r in steer] == ["user"]
    assert _records(tmp_path, kid["agent"])[0]["budget"] == {"usd": 0.5}
    assert _records(tmp_path, a3)[-1]["reason"] == "cancelled"
    assert _records(tmp_path, a5)[-1]["reason"] == "cancelled"


async def test_http_agents_behind_the_token_and_sigint_ends_a_running_agent_recorded(tmp_path):
    """``mnemon mcp RUN --agents --http``: the same tools over streamable HTTP with the token;
    SIGINT ends the server with exit 0, its agent's log ended."""
    import os
    import re
    import signal

    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    root = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k != "MNEMON_TOKEN"}
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "mnemon", "mcp", str(root), "--agents", "--http", "--port", "0",
         "--provider", "scripted"], stderr=subprocess.PIPE, env=env)
    try:
        with trio.fail_after(90):
            seen = b""
            while b"token" not in seen or not seen.endswith(b"\n"):
                chunk = await proc.stderr.receive_some()
                assert chunk, seen
                seen += chunk
            text = seen.decode()
            assert "(agents: provider scripted)" in text
            url = re.search(r"at (http://\S+/mcp)", text).group(1)
            token = re.search(r"token (\S+)", text).group(1)
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                      timeout=httpx2.Timeout(30, read=60))
            async with http, Client(streamable_http_client(url, http_client=http)) as client:
                a = _json(await client.call_tool("agents_start", {"task": "quick one"}))
                w = _json(await client.call_tool("agents_wait", {"agents": [a["agent"]]}))
                assert w["agents"][0]["answer"] == "(scripted) You said: quick one"
                listed = [t.name for t in (await client.list_tools()).tools]
                assert "agents_cancel" in listed
            proc.send_signal(signal.SIGINT)
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert _records(root, "a1")[-1]["t"] == "SessionEnded"


async def test_status_names_the_tool_an_agent_is_in(tmp_path):
    """``agents_status`` over MCP while an agent's tool call runs: ``in_tools`` names it (read
    off the supervisor's tables), and it is gone once the call returns."""
    from mnemon.orchestrator.tools.function import UserTool

    entered, leave = trio.Event(), trio.Event()

    async def slow_lookup(q: str) -> str:
        """Look something up, slowly."""
        entered.set()
        await leave.wait()
        return "found"

    def policy(request, state):
        i = state["i"] = state.get("i", 0) + 1
        if i == 1:
            return [ToolUse("t1", "slow_lookup", {"q": "x"})], "tool_use"
        return [Text("done")], "end_turn"

    async with open_supervisor(tmp_path, ScriptedProvider(policy=policy),
                               Settings(model="scripted"),
                               user_tools=[UserTool(slow_lookup)]) as sup:
        with trio.fail_after(60):
            async with Client(build_server(RunDoor(tmp_path), desk=AgentDesk(sup))) as client:
                aid = _json(await client.call_tool("agents_start", {"task": "look"}))["agent"]
                await entered.wait()
                st = _json(await client.call_tool("agents_status", {}))["agents"][0]
                assert st["state"] == "running" and st["in_tools"] == ["slow_lookup"]
                # the service's view of the same agent, off the same tables
                from mnemon.orchestrator.service.runs import Run

                run = Run(tmp_path, read_only=False, settings=Settings(model="scripted"))
                run.sup = sup
                view = await trio.to_thread.run_sync(
                    lambda: run.view(aid, live=run.live()))
                assert view.in_tools == ["slow_lookup"] and view.state == "running"
                leave.set()
                out = _json(await client.call_tool("agents_wait", {"agents": [aid]}))
                assert out["agents"][0]["answer"] == "done"
                st = _json(await client.call_tool("agents_status", {}))["agents"][0]
                assert "in_tools" not in st
                assert run.view(aid).in_tools == []
