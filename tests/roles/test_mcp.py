"""A role's own MCP servers (``mcp``): each fresh agent of the role starts them for itself and
stops them when it ends; its ``tools`` globs narrow what of them it is offered; its caller is
offered none of them."""

from __future__ import annotations

from pathlib import Path

import trio

from mnemon import ScriptedProvider, Settings, open_supervisor
from mnemon.orchestrator import logs

from tests.mcp.test_agent_servers import alive, mine, opening, pid_server, results, wait_gone
from tests.mcp.test_client import END, call, verify


async def test_a_roles_own_servers_start_and_stop_with_its_agent(tmp_path: Path):
    logs.quiet()
    root, pidfile = tmp_path / "run", tmp_path / "pid"
    roles = {"lead": {"may_start": ["calc"]},
             "calc": {"description": "adds", "system": "You add.", "tools": ["own__add"],
                      "mcp": [pid_server("own", pidfile)]}}
    script = [mine("a1", call("c1", "ask_calc", task="2 + 3?")),
              mine("a2", call("d1", "own__add", a=2, b=3)),
              {**END, "agent": "a2"},
              {**END, "agent": "a1"}]
    with trio.fail_after(90):
        async with open_supervisor(root, ScriptedProvider(script), Settings(), roles=roles,
                                   role="lead") as sup:
            lead = await sup.ask("add")
            assert lead.reason == "done"
            await wait_gone(int(pidfile.read_text()))
    calc = [t["name"] for t in opening(root, "a2").tools]
    assert "own__add" in calc and "own__shout" not in calc  # narrowed by the role's tools
    assert not any(t["name"].startswith("own__") for t in opening(root, "a1").tools)
    assert results(root, "a2") == [("5", False)]
    assert results(root, "a1") == [("done", False)]
    assert not alive(int(pidfile.read_text()))
    verify(root)
