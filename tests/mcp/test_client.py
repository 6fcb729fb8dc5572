"""MCP servers' tools offered to an agent and called through the loop on the scripted provider:
a server of our own over stdio and over streamable HTTP on loopback, one that crashes mid-call,
one that hangs; every server stops with the run, and every log verifies."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from mnemon import ScriptedProvider, Settings, open_supervisor
from mnemon.orchestrator.mcp.client import tool_name
from mnemon.orchestrator.mcp.config import McpConfigError, McpServerSpec, load_config, \
    parse_config
from mnemon.session.records import ToolResults, decode

HERE = Path(__file__).resolve().parent
STDIO = McpServerSpec(name="tools", transport="stdio", command=sys.executable,
                      args=(str(HERE / "toolserver.py"),), tool_timeout_s=2.0,
                      startup_timeout_s=30.0)


def call(tid: str, name: str, **args) -> dict:
    return {"type": "tool_use", "id": tid, "name": name, "input": args}


def turn(*blocks, stop="tool_use") -> dict:
    return {"blocks": list(blocks), "stop_reason": stop}


END = turn({"type": "text", "text": "done"}, stop="end_turn")


def results(root: Path, agent: str = "a1") -> list[dict]:
    out = []
    for line in (root / "agents" / agent / "record.jsonl").read_bytes().splitlines():
        rec = decode(line)
        if isinstance(rec, ToolResults):
            out.extend({"content": r.content, "is_error": r.is_error} for r in rec.results)
    return out


def verify(root: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "mnemon", "verify", str(root)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


async def run(root: Path, settings: Settings, script: list[dict]):
    with trio.fail_after(60):
        async with open_supervisor(root, ScriptedProvider(script), settings) as sup:
            node = await sup.ask("use the tools")
            started = node.ctx.started
            return sup, node, started


async def test_stdio_tools_through_the_loop_and_a_crash(tmp_path):
    root = tmp_path / "run"
    script = [
        turn(call("c1", "tools__add", a=2, b=3), call("c2", "tools__shout", text="hi"),
             call("c3", "tools__fail"), call("c4", tool_name("tools", "odd.name/v2"))),
        turn(call("c5", "tools__crash")),
        turn(call("c6", "tools__add", a=1, b=1)),
        END,
    ]
    sup, node, started = await run(root, Settings(mcp_servers=(STDIO,)), script)
    assert node.reason == "done"
    names = [t["name"] for t in started.tools]
    assert "tools__add" in names and "tools__odd_name_v2" in names
    add = next(t for t in started.tools if t["name"] == "tools__add")
    assert add["input_schema"]["required"] == ["a", "b"]  # the server's own schema
    got = results(root)
    assert got[:4] == [{"content": "5", "is_error": False},
                       {"content": "HI", "is_error": False},
                       {"content": "no such thing", "is_error": True},
                       {"content": "called odd.name/v2", "is_error": False}]
    assert got[4]["is_error"] and "MCP server tools" in got[4]["content"]  # crashed mid-call
    assert got[5]["is_error"] and "is not running" in got[5]["content"]  # an error, not a crash
    assert (root / "mcp" / "tools.stderr").exists()
    verify(root)


async def test_a_hung_call_times_out_and_the_server_stays_usable(tmp_path):
    root = tmp_path / "run"
    script = [turn(call("h1", "tools__hang")), turn(call("h2", "tools__add", a=4, b=5)), END]
    sup, node, _ = await run(root, Settings(mcp_servers=(STDIO,)), script)
    got = results(root)
    assert got[0] == {"content": "MCP server tools did not answer hang within 2 s",
                      "is_error": True}
    assert got[1] == {"content": "9", "is_error": False}
    assert node.reason == "done"
    verify(root)


async def test_http_server_on_loopback(tmp_path, nursery):
    from hypercorn.config import Config
    from hypercorn.trio import serve

    from .toolserver import SERVER

    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = config.errorlog = None
    binds = await nursery.start(lambda task_status: serve(SERVER.streamable_http_app(), config,
                                                          task_status=task_status))
    spec = parse_config({"mcpServers": {"web": {"type": "http", "url": binds[0] + "/mcp",
                                                "headers": {"X-Test": "1"},
                                                "tool_timeout_sec": 2}}})[0]
    root = tmp_path / "run"
    script = [turn(call("w1", "web__add", a=20, b=22), call("w2", "web__hang")), END]
    sup, node, _ = await run(root, Settings(mcp_servers=(spec,)), script)
    assert results(root) == [
        {"content": "42", "is_error": False},
        {"content": "MCP server web did not answer hang within 2 s", "is_error": True}]
    nursery.cancel_scope.cancel()
    verify(root)


async def test_a_server_that_does_not_start_is_an_error_result(tmp_path):
    bad = McpServerSpec(name="nope", transport="stdio", command=sys.executable,
                        args=("-c", "import sys; sys.exit(1)"), startup_timeout_s=20)
    root = tmp_path / "run"
    sup, node, started = await run(root, Settings(mcp_servers=(bad,)),
                                   [turn(call("n1", "nope__x")), END])
    assert node.reason == "done"
    assert results(root)[0]["is_error"]  # unknown tool: the server offered none
    verify(root)


async def test_servers_stop_with_the_run(tmp_path):
    """No server process outlives the supervisor that started it."""
    import os

    pidfile = tmp_path / "pid"
    spec = McpServerSpec(name="tools", transport="stdio", command=sys.executable,
                         args=("-c", f"import os, runpy, sys; open({str(pidfile)!r}, 'w')"
                                     f".write(str(os.getpid())); sys.argv = ['x']; "
                                     f"runpy.run_path({str(HERE / 'toolserver.py')!r}, "
                                     "run_name='__main__')"))
    await run(tmp_path / "run", Settings(mcp_servers=(spec,)),
              [turn(call("a", "tools__add", a=1, b=2)), END])
    pid = int(pidfile.read_text())
    with trio.fail_after(10):
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            await trio.sleep(0.05)


def test_tool_names_keep_to_the_providers_rules():
    import re

    assert tool_name("fs", "read_file") == "fs__read_file"
    assert tool_name("fs", "a.b/c") == "fs__a_b_c"
    long = tool_name("server", "x" * 100)
    assert len(long) == 64 and re.match(r"^[a-zA-Z0-9_-]{1,64}$", long)
    assert long != tool_name("server", "x" * 99)


def test_config_shapes(tmp_path, monkeypatch):
    (tmp_path / "c.json").write_text(json.dumps({"mcpServers": {
        "fs": {"command": "npx", "args": ["-y", "fs-server", "${HOME_DIR:-/tmp}"],
               "env": {"K": "${KEY}"}},
        "web": {"type": "http", "url": "http://127.0.0.1:9/mcp",
                "headers": {"Authorization": "Bearer ${KEY}"}},
        "off": {"command": "x", "enabled": False}}}))
    (tmp_path / "c.toml").write_text('[mcp_servers.docs]\ncommand = "docs-mcp"\n'
                                     'tool_timeout_sec = 5\n'
                                     '[mcp_servers.remote]\nurl = "https://example.test/mcp"\n'
                                     'bearer_token_env_var = "KEY"\n')
    env = {"KEY": "k3y"}
    fs, web = load_config(tmp_path / "c.json", env)
    assert (fs.transport, fs.args, fs.env) == ("stdio", ("-y", "fs-server", "/tmp"), {"K": "k3y"})
    assert (web.transport, web.headers) == ("http", {"Authorization": "Bearer k3y"})
    docs, remote = load_config(tmp_path / "c.toml", env)
    assert docs.tool_timeout_s == 5.0 and remote.headers == {"Authorization": "Bearer k3y"}


@pytest.mark.parametrize("entry, words", [
    ({"command": "x", "colour": "red"}, "unknown key 'colour'"),
    ({"type": "sse", "url": "http://x"}, "SSE"),
    ({"type": "http"}, "needs 'url'"),
    ({"args": ["x"]}, "needs 'command'"),
    ({"command": "${NOPE}"}, "${NOPE} is not set"),
])
def test_config_refusals(entry, words):
    with pytest.raises(McpConfigError, match=words.replace("$", r"\$").replace("{", r"\{")
                       .replace("}", r"\}")):
        parse_config({"mcpServers": {"s": entry}}, {})


def test_mcp_option_errors_are_one_line(tmp_path, capsys):
    from mnemon.orchestrator.cli import main

    (tmp_path / "bad.json").write_text('{"servers": {}}')
    assert main(["ask", "hi", "--mcp", str(tmp_path / "bad.json"),
                 "--run-root", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert "mcpServers" in err and len(err.splitlines()) == 1


def test_a_run_without_mcp_servers_never_imports_the_sdk(tmp_path):
    """The SDK is loaded only by a run given servers (and by ``mnemon mcp``)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "mnemon", "ask", "hi",
                           "--run-root", str(tmp_path / "run")], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    mods = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
            if line.startswith("import time:") and "|" in line}
    assert not {m for m in mods if m.split(".")[0] in ("mcp", "mcp_types", "prompt_toolkit")}
