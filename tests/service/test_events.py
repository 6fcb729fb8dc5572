"""Server-sent events consumed as a client does, resumed with Last-Event-ID; shutdown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import trio

from mnemon.lineage.view import open_agent
from mnemon.providers.scripted import ScriptedProvider
from mnemon.session.records import SessionEnded

from .util import live_service, slow_policy, sse_events

TOOL_SCRIPT = [
    {"blocks": [{"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "tu_1", "name": "transcript_index", "input": {}}],
     "stop_reason": "tool_use"},
    {"blocks": [{"type": "text", "text": "Found it."}], "stop_reason": "end_turn"},
]


async def test_an_agents_events_and_a_resume_without_gaps(tmp_path):
    async with live_service(tmp_path / "run", provider=ScriptedProvider(TOOL_SCRIPT)) as svc:
        aid = (await svc.client.post("/v1/agents", json={"prompt": "go"})).json()["id"]
        events = await sse_events(svc.client, f"/v1/agents/{aid}/events",
                                  until=lambda d: d["type"] == "ended")
        kinds = [d["type"] for _, d in events]
        assert kinds[:3] == ["started", "prompt", "turn_started"]
        assert "tool_results" in kinds and kinds[-1] == "ended"
        assistant = next(d for _, d in events if d["type"] == "assistant")
        assert assistant["tool_calls"] == [{"id": "tu_1", "name": "transcript_index",
                                            "input_bytes": 2}]
        results = next(d for _, d in events if d["type"] == "tool_results")
        assert results["results"][0]["bytes"] > 0 and "content" not in results["results"][0]
        ids = [i for i, _ in events]
        assert all(i.startswith(f"{aid}:") for i in ids)
        offsets = [int(i.split(":")[1]) for i in ids]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
        # drop after the third event, reconnect with its id: exactly the rest, nothing twice
        rest = await sse_events(svc.client, f"/v1/agents/{aid}/events", last_id=ids[2],
                                until=lambda d: d["type"] == "ended")
        assert [i for i, _ in rest] == ids[3:]
        assert [d for _, d in rest] == [d for _, d in events[3:]]
        # the ids are positions in the log itself: a new service over the same root agrees
    async with live_service(tmp_path / "run", read_only=True) as again:
        r = await again.client.get(f"/v1/agents/{aid}/events", params={"follow": "0"},
                                   headers={"Last-Event-ID": ids[5]})
        replayed = [line[4:] for line in r.text.splitlines() if line.startswith("id: ")]
        assert replayed == ids[6:]


async def test_the_run_stream_covers_every_agent_and_resumes_by_positions(tmp_path):
    async with live_service(tmp_path / "run",
                            provider=ScriptedProvider(policy=slow_policy(0.05))) as svc:
        first = (await svc.client.post("/v1/agents", json={"prompt": "one"})).json()["id"]
        await sse_events(svc.client, f"/v1/agents/{first}/events",
                         until=lambda d: d["type"] == "ended")
        events = await sse_events(svc.client, "/v1/events", until=lambda d: d["type"] == "ended")
        cut = events[-1][0]
        second = (await svc.client.post("/v1/agents", json={"prompt": "two"})).json()["id"]
        more = await sse_events(svc.client, "/v1/events", last_id=cut,
                                until=lambda d: d["type"] == "ended" and d["agent"] == second)
        assert {d["agent"] for _, d in more} == {second}
        recorded = [(i, d) for i, d in more if d["type"] != "text"]  # previews have no id
        assert recorded[0][1]["type"] == "started"
        last = dict(p.split(":") for p in recorded[-1][0].split(","))
        assert set(last) == {first, second}
        sizes = {a: (svc.root / "agents" / a / "record.jsonl").stat().st_size for a in last}
        assert int(last[second]) <= sizes[second] and int(last[first]) == sizes[first]


async def test_many_clients_see_the_same_stream(tmp_path):
    async with live_service(tmp_path / "run", provider=ScriptedProvider(TOOL_SCRIPT)) as svc:
        aid = (await svc.client.post("/v1/agents", json={"prompt": "go"})).json()["id"]
        seen: list[list] = []

        async def one():
            seen.append(await sse_events(svc.client, f"/v1/agents/{aid}/events",
                                         until=lambda d: d["type"] == "ended"))

        async with trio.open_nursery() as n:
            for _ in range(20):
                n.start_soon(one)
        assert len(seen) == 20 and all(s == seen[0] for s in seen)


async def test_stopping_the_service_cancels_running_agents_and_every_log_folds(tmp_path):
    async with live_service(tmp_path / "run",
                            provider=ScriptedProvider(policy=slow_policy(30))) as svc:
        ids = [(await svc.client.post("/v1/agents", json={"prompt": f"p{i}"})).json()["id"]
               for i in range(3)]
        await trio.sleep(0.2)
        states = [a["state"] for a in (await svc.client.get("/v1/agents")).json()["agents"]]
        assert states == ["running"] * 3
    for aid in ids:
        _root, _a, ctx, torn = open_agent(tmp_path / "run" / "agents" / aid)
        assert torn is None
        last = (tmp_path / "run" / "agents" / aid / "record.jsonl").read_bytes().splitlines()[-1]
        assert b'"t":"SessionEnded"' in last and b'"reason":"cancelled"' in last


class _Stall(BaseHTTPRequestHandler):
    """An OpenAI-compatible server that never answers in time."""

    def do_POST(self):  # noqa: N802
        time.sleep(20)

    def log_message(self, *a):
        pass


def test_sigterm_ends_the_service_cleanly_with_exit_0(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stall)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    root = tmp_path / "run"
    env = {**os.environ, "OPENAI_API_KEY": "sk-test", "MNEMON_TOKEN": "t" * 20}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mnemon", "serve", "--port", "0", "--run-root", str(root),
         "--provider", "openai", "--model", "gpt-4o-mini",
         "--base-url", f"http://127.0.0.1:{server.server_address[1]}/v1"],
        stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stderr.readline()
        assert "serving" in line, line
        url = line.rsplit(" on ", 1)[1].strip()
        headers = {"Authorization": "Bearer " + "t" * 20}
        aid = httpx.post(f"{url}/v1/agents", json={"prompt": "wait"}, headers=headers).json()["id"]
        time.sleep(0.5)
        assert httpx.get(f"{url}/v1/agents/{aid}", headers=headers).json()["state"] == "running"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        err = proc.stderr.read()
        assert "Traceback" not in err and err.strip().endswith("mnemon: stopped")
    finally:
        proc.kill()
        server.shutdown()
    _root, _a, ctx, torn = open_agent(root / "agents" / aid)
    assert torn is None
    assert b'"reason":"cancelled"' in (root / "agents" / aid / "record.jsonl").read_bytes().splitlines()[-1]


async def test_streamed_text_arrives_as_previews_without_ids(tmp_path):
    async with live_service(tmp_path / "run",
                            provider=ScriptedProvider(policy=slow_policy(0.3))) as svc:
        got: list = []

        async def watch():
            got.extend(await sse_events(svc.client, "/v1/events",
                                        until=lambda d: d["type"] == "ended"))

        async with trio.open_nursery() as n:
            n.start_soon(watch)
            await trio.sleep(0.1)
            await svc.client.post("/v1/agents", json={"prompt": "think"})
        texts = [(i, d) for i, d in got if d["type"] == "text"]
        assert texts == [(None, {"type": "text", "agent": "a1", "text": "done thinking"})]
        kinds = [d["type"] for _, d in got]
        assert kinds.index("text") < kinds.index("assistant")


async def test_a_stream_behind_the_memory_window_reads_the_file_and_misses_nothing(
        tmp_path, monkeypatch):
    from mnemon.orchestrator.service.events import Feed

    monkeypatch.setattr(Feed, "WINDOW", 2)
    script = TOOL_SCRIPT[:1] * 6 + TOOL_SCRIPT[1:]
    async with live_service(tmp_path / "run", provider=ScriptedProvider(script)) as svc:
        aid = (await svc.client.post("/v1/agents", json={"prompt": "go"})).json()["id"]
        full = await sse_events(svc.client, f"/v1/agents/{aid}/events",
                                until=lambda d: d["type"] == "ended")
        full = [(i, d) for i, d in full if i is not None]
        assert len(full) > 20
        assert svc.run.hub.feeds[aid].floor > 0, "the window moved"
        for k in (0, 3, len(full) // 2):
            rest = await sse_events(svc.client, f"/v1/agents/{aid}/events", last_id=full[k][0],
                                    until=lambda d: d["type"] == "ended")
            assert [(i, d) for i, d in rest if i is not None] == full[k + 1:]
        whole = await sse_events(svc.client, "/v1/events", until=lambda d: d["type"] == "ended")
        assert [d for i, d in whole if i is not None] == [d for _, d in full]
