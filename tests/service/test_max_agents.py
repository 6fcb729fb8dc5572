"""``max_agents`` counts the agents running at once (decision 0306): a service that has
started more agents than the limit over its life still starts the next one; past the limit
at once, the refusal names the count and how to raise it; ``serve --max-agents`` sets it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from http.server import ThreadingHTTPServer

import httpx
import pytest
import trio

from mnemon.orchestrator.settings import Settings
from mnemon.providers.scripted import ScriptedProvider

pytest.importorskip("hypercorn")

from tests.service.test_events import _Stall  # noqa: E402
from tests.service.util import live_service  # noqa: E402


def held(release: trio.Event):
    """A scripted model that answers a prompt holding "hold" only once ``release`` is set."""
    async def policy(request, state):
        texts = [b.get("text", "") for m in request.messages for b in m["content"]
                 if isinstance(b, dict)]
        if any("hold" in t for t in texts):
            await release.wait()
        return [{"type": "text", "text": "ok"}], "end_turn"
    return policy


async def _ended(client, aid: str) -> None:
    for _ in range(500):
        if (await client.get(f"/v1/agents/{aid}")).json()["state"] != "running":
            return
        await trio.sleep(0.02)
    raise AssertionError(f"{aid} did not end")


async def test_a_service_starts_more_agents_over_time_than_its_limit(tmp_path):
    release = trio.Event()
    async with live_service(tmp_path / "run", provider=ScriptedProvider(policy=held(release)),
                            settings=Settings(model="scripted", max_agents=2)) as svc:
        for i in range(5):  # one after another: never more than one running
            r = await svc.client.post("/v1/agents", json={"prompt": f"quick {i}"})
            assert r.status_code == 201, r.text
            await _ended(svc.client, r.json()["id"])
        for i in range(2):
            r = await svc.client.post("/v1/agents", json={"prompt": f"hold {i}"})
            assert r.status_code == 201, r.text
        full = await svc.client.post("/v1/agents", json={"prompt": "one more"})
        assert full.status_code == 409
        assert full.json() == {"error": (
            "this run already has 2 agents running, the most it allows at once (max_agents 2): "
            "wait for one to end, or raise the limit (mnemon serve --max-agents N, "
            "Settings(max_agents=N))")}
        release.set()
        await _ended(svc.client, "a7")
        r = await svc.client.post("/v1/agents", json={"prompt": "after"})
        assert r.status_code == 201, r.text
        assert r.json()["id"] == "a8"  # the refused one spent no id


def test_serve_max_agents_sets_the_limit_and_a_bad_one_is_one_line(tmp_path):
    bad = subprocess.run([sys.executable, "-m", "mnemon", "serve", "--max-agents", "0",
                          "--run-root", str(tmp_path / "bad")], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == ["mnemon: --max-agents must be at least 1, not 0"]
    assert not (tmp_path / "bad").exists()

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stall)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {**os.environ, "OPENAI_API_KEY": "sk-test", "MNEMON_TOKEN": "t" * 20}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mnemon", "serve", "--port", "0", "--max-agents", "1",
         "--run-root", str(tmp_path / "run"), "--provider", "openai", "--model", "gpt-4o-mini",
         "--base-url", f"http://127.0.0.1:{server.server_address[1]}/v1"],
        stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stderr.readline()
        assert "serving" in line, line
        url = line.rsplit(" on ", 1)[1].strip()
        headers = {"Authorization": "Bearer " + "t" * 20}
        first = httpx.post(f"{url}/v1/agents", json={"prompt": "wait"}, headers=headers)
        assert first.status_code == 201
        second = httpx.post(f"{url}/v1/agents", json={"prompt": "wait"}, headers=headers)
        assert second.status_code == 409
        assert "1 agent running" in second.json()["error"]
        assert "(max_agents 1)" in second.json()["error"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        server.shutdown()
