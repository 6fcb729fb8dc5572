"""``mnemon mcp RUN_ROOT`` driven by the ``mcp`` SDK's own client, over stdio and streamable
HTTP on loopback: each tool answers what the CLI's ``--json`` prints, refusals are error
results, and HTTP needs the bearer token."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx2
import pytest
import trio
from mcp import Client, StdioServerParameters

from mnemon.orchestrator.cli import main
from mnemon.orchestrator.mcp.door import DOOR_TOOLS, RunDoor
from mnemon.orchestrator.mcp.server import build_server, serve_http

TOKEN = "t" * 24


def cli_json(capsys, *argv: str):
    capsys.readouterr()
    assert main([*argv]) == 0
    return json.loads(capsys.readouterr().out)


def answers(capsys, root):
    """(tool, arguments, the CLI's --json answer) for every tool on the demo run."""
    a3, a1 = str(root / "agents" / "a3"), str(root / "agents" / "a1")
    tree = cli_json(capsys, "tree", str(root), "--json")
    return [
        ("tree", {}, tree),
        ("agents_list", {}, [{k: r[k] for k in ("agent", "parent", "kind", "turns", "state")}
                             for r in tree]),
        ("transcript_index", {"agent": "a3"},
         cli_json(capsys, "transcript", "index", a3, "--json")),
        ("transcript_read", {"agent": "a3", "turns": "1-3"},
         cli_json(capsys, "transcript", "read", a3, "--turns", "1-3", "--json")),
        ("transcript_read", {"agent": "a1", "turns": [2]},
         cli_json(capsys, "transcript", "read", a1, "--turns", "2", "--json")),
        ("transcript_grep", {"agent": "a3", "pattern": "VESPER"},
         cli_json(capsys, "transcript", "grep", a3, "VESPER", "--json")),
        ("transcript_grep", {"agent": "a2", "pattern": "codeword", "turns": "1-5"},
         cli_json(capsys, "transcript", "grep", str(root / "agents" / "a2"), "codeword",
                  "--turns", "1-5", "--json")),
        ("context_survey", {"agent": "a1"}, cli_json(capsys, "context", a1, "--json")),
    ]


REFUSED = [
    ("transcript_index", {"agent": "../a1"}, "agent id"),
    ("transcript_index", {"agent": "a9"}, "no agent 'a9'"),
    ("transcript_read", {"agent": "a1"}, "needs 'turns'"),
    ("transcript_read", {"agent": "a1", "turns": "999"}, "999"),
    ("transcript_grep", {"agent": "a1", "pattern": "("}, "pattern"),
    ("transcript_grep", {"agent": "a1", "pattern": "x", "path": "/etc"}, "takes no 'path'"),
    ("nonesuch", {}, "unknown tool"),
]


async def check(client, cases) -> None:
    listed = await client.list_tools()
    assert [t.name for t in listed.tools] == list(DOOR_TOOLS)
    for t in listed.tools:
        assert t.input_schema == DOOR_TOOLS[t.name][1]
    for name, args, expected in cases:
        result = await client.call_tool(name, args)
        assert not result.is_error, result.content[0].text
        assert json.loads(result.content[0].text) == expected, name
    for name, args, words in REFUSED:
        result = await client.call_tool(name, args)
        assert result.is_error, (name, args)
        assert words in result.content[0].text, result.content[0].text


async def test_stdio_answers_equal_the_cli(demo_root, capsys):
    cases = answers(capsys, demo_root)
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "mnemon", "mcp", str(demo_root)])
    with trio.fail_after(60):
        async with Client(params) as client:
            await check(client, cases)


async def test_http_answers_with_the_token_only(demo_root, capsys, nursery):
    cases = answers(capsys, demo_root)
    server = build_server(RunDoor(demo_root))
    binds = await nursery.start(lambda task_status: serve_http(
        server, token=TOKEN, host="127.0.0.1", port=0, task_status=task_status))
    url = binds[0] + "/mcp"
    with trio.fail_after(60):
        async with httpx2.AsyncClient() as bare:
            r = await bare.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            assert r.status_code == 401
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"},
                                  timeout=httpx2.Timeout(30, read=60))
        from mcp.client.streamable_http import streamable_http_client

        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            await check(client, cases)
    nursery.cancel_scope.cancel()


@pytest.mark.parametrize("argv, words", [
    (["--http", "--host", "0.0.0.0"], "without a token"),
    (["--http", "--port", "70000"], "--port"),
])
def test_mcp_command_refuses(demo_root, capsys, monkeypatch, argv, words):
    monkeypatch.delenv("MNEMON_TOKEN", raising=False)
    assert main(["mcp", str(demo_root), *argv]) == 2
    assert words in capsys.readouterr().err


def test_mcp_command_refuses_a_directory_outside_any_run(tmp_path, capsys):
    assert main(["mcp", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "not inside a run root" in err and len(err.splitlines()) == 1


async def test_mcp_http_command_prints_its_address_and_token_then_stops_on_sigint(demo_root):
    """``mnemon mcp RUN --http --port 0``: the address and a generated token on stderr; the token
    opens the door; SIGINT ends it with exit 0."""
    import os
    import re
    import signal

    env = {k: v for k, v in os.environ.items() if k != "MNEMON_TOKEN"}
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "mnemon", "mcp", str(demo_root), "--http", "--port", "0"],
        stderr=subprocess.PIPE, env=env)
    try:
        with trio.fail_after(60):
            seen = b""
            while b"token" not in seen or not seen.endswith(b"\n"):
                chunk = await proc.stderr.receive_some()
                assert chunk, seen
                seen += chunk
            text = seen.decode()
            url = re.search(r"at (http://\S+/mcp)", text).group(1)
            token = re.search(r"token (\S+)", text).group(1)
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
            from mcp.client.streamable_http import streamable_http_client

            async with http, Client(streamable_http_client(url, http_client=http)) as client:
                result = await client.call_tool("agents_list", {})
                assert [r["agent"] for r in json.loads(result.content[0].text)] == \
                    ["a1", "a2", "a3"]
            proc.send_signal(signal.SIGINT)
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
