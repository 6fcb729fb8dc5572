"""Errors the user can act on, at the service's edges: one line and exit 2 from the CLI with
nothing written; one JSON ``{"error"}`` with a 4xx naming the thing from HTTP — a port in use,
a run root or results file the system will not make, a NUL in a path, a wrong token told from
none, a stopped agent's recorded approval, the paths a browser or an MCP host asks for on its
own (the icon, OAuth discovery) — and the headers the page is served with."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import trio

from mnemon.lineage.runroot import RunRootError, create_run_root

from .util import TOKEN, live_service

pytest.importorskip("hypercorn")
pytest.importorskip("starlette")

REPO = Path(__file__).resolve().parents[2]


def _mnemon(*argv: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mnemon", *argv], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})})


def _taken() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


@pytest.mark.parametrize("argv", [
    ["serve", "--run-root", "{tmp}/run"],
    ["serve"],  # (a run root of its own under ./mnemon-runs)
    ["serve", "{tmp}/old"],  # read-only over an existing run
    ["mcp", "{tmp}/old", "--http"],
])
def test_a_port_in_use_is_one_line_exit_2_and_nothing_is_written(tmp_path, argv):
    old = create_run_root(tmp_path / "old", "tests")
    before = sorted(p.name for p in old.rglob("*"))
    work = tmp_path / "cwd"
    work.mkdir()
    held = _taken()
    port = held.getsockname()[1]
    try:
        r = _mnemon(*(a.format(tmp=tmp_path) for a in argv), "--port", str(port), cwd=work)
    finally:
        held.close()
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"127.0.0.1:{port}" in r.stderr and "in use" in r.stderr, r.stderr
    assert "--port 0" in r.stderr  # what to do about it
    assert not (tmp_path / "run").exists()
    assert list(work.iterdir()) == []
    assert sorted(p.name for p in old.rglob("*")) == before


def test_a_run_root_the_system_will_not_make_is_one_line_on_the_cli(tmp_path):
    (tmp_path / "afile").write_text("x")
    r = _mnemon("serve", "--run-root", str(tmp_path / "afile" / "run"), "--port", "0",
                cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "afile/run" in r.stderr and "Not a directory" in r.stderr
    with pytest.raises(RunRootError, match="cannot make the run root"):
        create_run_root(tmp_path / "a\0b", "tests")


async def test_a_job_path_the_system_cannot_use_is_a_422_naming_it(tmp_path):
    import shutil

    job_dir = tmp_path / "job"
    shutil.copytree(REPO / "docs" / "examples" / "capitals", job_dir)
    job = str(job_dir / "capitals.toml")
    (tmp_path / "afile").write_text("x")
    cases = [
        ({"run_root": str(tmp_path / "afile" / "run")}, "afile/run", "Not a directory"),
        ({"run_root": "/proc/mnemon-no-such-run"}, "/proc/mnemon-no-such-run", "cannot make"),
        ({"run_root": str(tmp_path / "r\0un")}, "r\\x00un", "NUL"),
        ({"path": job + "\0.toml"}, "capitals.toml\\x00", "NUL"),
        ({"run_root": str(tmp_path / "ok"), "output": str(tmp_path / "afile" / "o.jsonl")},
         "afile", "not a directory"),
        ({"run_root": str(tmp_path / "ok"), "output": str(tmp_path)}, str(tmp_path),
         "is a directory"),
    ]
    async with live_service(tmp_path / "run") as svc:
        for extra, names, words in cases:
            r = await svc.client.post("/v1/jobs", json={"path": job, **extra})
            assert r.status_code == 422, (extra, r.status_code, r.text)
            err = r.json()["error"]
            assert names in err and words in err, err
        assert (await svc.client.get("/v1/jobs")).json()["jobs"] == []
    assert not (tmp_path / "ok").exists() and not (tmp_path / "r\0un").exists()


async def test_static_names_the_package_does_not_hold_are_404_without_a_token(tmp_path):
    async with live_service(tmp_path / "run") as svc:
        async with httpx.AsyncClient(base_url=svc.base, timeout=20) as bare:
            for path in ("/static/app.js%00.css", "/static/%00", "/static/index.html",
                         "/static/..%2frun.json", "/static/nope.js"):
                r = await bare.get(path)
                assert r.status_code == 404, (path, r.status_code)
                assert "error" in r.json()
            assert (await bare.get("/static/app.js")).status_code == 200


async def test_a_wrong_token_is_told_from_no_token(tmp_path):
    async with live_service(tmp_path / "run") as svc:
        async with httpx.AsyncClient(base_url=svc.base, timeout=20) as bare:
            cases = {None: "a bearer token is required",
                     "Bearer": "a bearer token is required",
                     "Basic dXNlcjpwYXNz": "the Authorization header is not Bearer",
                     "Bearer " + TOKEN[:-1] + "X": "the bearer token is wrong",
                     ("Bearer " + TOKEN + "é").encode(): "the bearer token is wrong"}
            for header, words in cases.items():
                r = await bare.get("/v1/run", headers={"Authorization": header} if header else {})
                assert r.status_code == 401 and words in r.json()["error"], (header, r.text)
            assert (await svc.client.get("/v1/run")).status_code == 200


async def test_the_icon_and_oauth_discovery_answer_without_a_token(tmp_path):
    async with live_service(tmp_path / "run") as svc:
        async with httpx.AsyncClient(base_url=svc.base, timeout=20) as bare:
            r = await bare.get("/favicon.ico")
            assert r.status_code == 204 and r.content == b""
            for path in ("/.well-known/oauth-protected-resource",
                         "/.well-known/oauth-authorization-server",
                         "/.well-known/oauth-protected-resource/v1",
                         "/.well-known/openid-configuration"):
                r = await bare.get(path)
                assert r.status_code == 404, path
                assert "www-authenticate" not in r.headers
                assert "bearer token" in r.json()["error"]
            r = await bare.post("/register", json={"client_name": "x"})  # still needs the token
            assert r.status_code == 401


async def test_the_page_static_and_api_answers_carry_the_security_headers(tmp_path):
    async with live_service(tmp_path / "run") as svc:
        async with httpx.AsyncClient(base_url=svc.base, timeout=20) as bare:
            answers = [await bare.get("/"), await bare.get("/static/app.js"),
                       await bare.get("/static/app.css"), await bare.get("/v1/run"),
                       await svc.client.get("/v1/run"), await bare.get("/v1/health")]
    for r in answers:
        csp = r.headers.get("content-security-policy", "")
        assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp, r.url
        assert "unsafe-eval" not in csp and "'unsafe-inline'" not in csp.split("style-src")[0]
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["x-frame-options"] == "DENY"
    assert answers[0].headers["content-type"].startswith("text/html")


async def test_a_stopped_agents_recorded_approval_is_409_resume_it_first(tmp_path):
    """An agent stopped while it waited on a person (its log ends ``cancelled`` with the
    request in it), served again: deciding the request is a 409 saying to resume the agent —
    it has the request, it is not running — not a 404 saying it has none."""
    from mnemon.orchestrator.policy import parse_policy
    from mnemon.orchestrator.settings import Settings
    from mnemon.orchestrator.supervisor import open_supervisor

    from ..policy.conftest import Counter, caller, provider

    policy = parse_policy({"rule": [{"tool": "write", "action": "ask"}]}, "test-policy")
    settings = Settings(system="t", model="scripted", tool_policy=policy)
    root = tmp_path / "run"
    counter = Counter()
    with trio.fail_after(30):
        async with open_supervisor(root, provider(caller(("c1", "write", {"path": "x"}))),
                                   settings, user_tools=[counter.tool]) as sup:
            node = sup.new_root("write it")
            sup.start(node)
            while not sup.approvals.pending():
                await trio.sleep(0.01)
            node.scope.cancel()
            await node.done.wait()
    assert node.reason == "cancelled" and counter.calls == []

    with trio.fail_after(60):
        async with live_service(root, settings=settings) as svc:
            assert (await svc.client.get("/v1/approvals")).json() == {"approvals": []}
            r = await svc.client.post("/v1/agents/a1/approvals/c1", json={"decision": "approve"})
            assert r.status_code == 409, r.text
            assert "not running" in r.json()["error"] and "resume it first" in r.json()["error"]
            r = await svc.client.post("/v1/agents/a1/approvals/c9", json={"decision": "approve"})
            assert r.status_code == 404  # a call it never asked about: still unknown
    assert counter.calls == []


async def test_mcp_over_http_tells_the_token_mistake_and_has_no_oauth(tmp_path):
    pytest.importorskip("mcp")
    from mnemon.orchestrator.mcp.door import RunDoor
    from mnemon.orchestrator.mcp.server import build_server, serve_http

    root = create_run_root(tmp_path / "run", "tests")
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(lambda task_status: serve_http(
            build_server(RunDoor(root)), token=TOKEN, host="127.0.0.1", port=0,
            task_status=task_status))
        async with httpx.AsyncClient(base_url=binds[0], timeout=20) as bare:
            ask = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            r = await bare.post("/mcp", json=ask)
            assert r.status_code == 401 and r.json() == {"error": "a bearer token is required"}
            r = await bare.post("/mcp", json=ask, headers={"Authorization": "Bearer nope-nope"})
            assert r.status_code == 401 and r.json() == {"error": "the bearer token is wrong"}
            for path in ("/.well-known/oauth-protected-resource/mcp",
                         "/.well-known/oauth-authorization-server"):
                r = await bare.get(path)
                assert r.status_code == 404 and "bearer token" in r.json()["error"], path
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("command", ["serve", "mcp"])
def test_help_says_how_long_a_token_is(tmp_path, command):
    r = _mnemon(command, "--help", cwd=tmp_path)
    assert r.returncode == 0
    assert "at least 16 characters" in " ".join(r.stdout.split())
