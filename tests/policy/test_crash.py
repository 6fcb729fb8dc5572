"""``mnemon serve`` killed with SIGKILL and started again over the same run root: the agents
a crash left running are resumed (no recorded turn is requested again), and a pending approval
is listed again, approved, run once; the logs verify. The model is an OpenAI-compatible server
on loopback that counts its requests; the tool a real stdio MCP server that counts its calls."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

pytest.importorskip("hypercorn")

HERE = Path(__file__).resolve().parent
TOKEN = "crash-test-token-0123456789"


def _chunk(delta: dict, finish: str | None = None, usage: dict | None = None) -> bytes:
    body = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-4.1", "choices": ([{"index": 0, "delta": delta,
                                             "finish_reason": finish}] if usage is None else []),
            "usage": usage}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def tool_call(cid: str, name: str, args: dict) -> bytes:
    return b"".join([
        _chunk({"role": "assistant", "content": None, "tool_calls": [
            {"index": 0, "id": cid, "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}]}),
        _chunk({}, "tool_calls"),
        _chunk({}, usage={"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}),
        b"data: [DONE]\n\n"])


def text(answer: str) -> bytes:
    return b"".join([
        _chunk({"role": "assistant", "content": answer}), _chunk({}, "stop"),
        _chunk({}, usage={"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105}),
        b"data: [DONE]\n\n"])


class Model:
    """The model on loopback: its answer is chosen by the step a request is at (how many
    assistant messages it carries), so it is stateless across restarts of the service;
    ``hold`` (a step) is answered only once ``release`` is set — a request in flight.
    ``pick(body)`` chooses; a subclass may choose otherwise (by the task, as the delegation
    tests do): it answers ``(what is recorded in requests, whether to hold, the bytes)``."""

    def __init__(self, steps: list[bytes], hold: int | None = None):
        self.steps = steps
        self.hold = hold
        self.requests: list = []
        self.held = threading.Event()
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                seen, hold, data = outer.pick(body)
                outer.requests.append(seen)
                if hold and not outer.release.is_set():
                    outer.held.set()
                    outer.release.wait(60)
                    return  # the service that sent it is gone
                try:
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def pick(self, body: dict) -> tuple:
        step = sum(1 for m in body["messages"] if m["role"] == "assistant")
        return step, step == self.hold, self.steps[min(step, len(self.steps) - 1)]

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


class Service:
    """``mnemon serve`` in its own process, on a free port."""

    def __init__(self, root: Path, model: Model, *extra: str):
        env = {**os.environ, "OPENAI_API_KEY": "test-key-not-secret", "MNEMON_TOKEN": TOKEN}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mnemon", "serve", "--run-root", str(root), "--port", "0",
             "--provider", "openai", "--base-url", model.url, "--model", "gpt-4.1",
             "--context-window", "100000", *extra],
            env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        deadline = time.monotonic() + 60
        self.base = None
        self.head: list[str] = []  # what it said before it served
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.head.append(line)
            if " on http://" in line:
                self.base = line.rsplit(" on ", 1)[1].strip()
                break
        assert self.base, f"the service did not start (exit {self.proc.poll()})"
        self.client = httpx.Client(base_url=self.base, timeout=20,
                                   headers={"Authorization": f"Bearer {TOKEN}"})

    def wait(self, predicate, what: str, timeout: float = 60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = predicate()
            if got:
                return got
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self.client.close()

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(60)
        self.client.close()
        return code


def verify(root: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "mnemon", "verify", str(root)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def state_of(svc: Service, aid: str) -> str:
    return svc.client.get(f"/v1/agents/{aid}").json()["state"]


def test_a_service_killed_mid_request_resumes_its_agent(tmp_path):
    """Two turns recorded, the third in flight: SIGKILL. Started again, the agent resumes by
    itself and finishes; the recorded turns were each requested once."""
    model = Model([tool_call("k1", "context_survey", {}), tool_call("k2", "context_survey", {}),
                   text("finished after the crash")], hold=2)
    root = tmp_path / "run"
    try:
        svc = Service(root, model)
        assert svc.client.post("/v1/agents", json={"prompt": "work"}).status_code == 201
        assert model.held.wait(60)
        svc.kill()
        assert model.requests == [0, 1, 2]
        model.release.set()
        svc = Service(root, model)
        view = svc.wait(lambda: (v := svc.client.get("/v1/agents/a1").json())["state"]
                        == "ended" and v, "the agent to end")
        assert view["reason"] == "done" and view["answer"] == "finished after the crash"
        assert svc.stop() == 0
    finally:
        model.close()
    assert model.requests == [0, 1, 2, 2]  # only the unrecorded request is sent again
    verify(root)


def test_no_resume_leaves_the_agent_until_asked(tmp_path):
    model = Model([tool_call("k1", "context_survey", {}), text("done")], hold=1)
    root = tmp_path / "run"
    try:
        svc = Service(root, model)
        svc.client.post("/v1/agents", json={"prompt": "work"})
        assert model.held.wait(60)
        svc.kill()
        model.release.set()
        svc = Service(root, model, "--no-resume")
        time.sleep(0.5)
        assert state_of(svc, "a1") == "open" and model.requests == [0, 1]
        r = svc.client.post("/v1/agents/a1/resume")
        assert r.status_code == 202
        svc.wait(lambda: state_of(svc, "a1") == "ended", "the agent to end")
        assert svc.client.post("/v1/agents/a1/resume").status_code == 409
        assert svc.client.post("/v1/agents/a9/resume").status_code == 404
        assert svc.stop() == 0
    finally:
        model.close()
    assert model.requests == [0, 1, 1]
    verify(root)


def test_a_pending_approval_survives_a_sigkill(tmp_path):
    """The agent waits on an approval; SIGKILL; started again, the request is listed,
    approved over HTTP, the tool (a stdio MCP server counting calls) runs once, the agent
    finishes, and every log verifies."""
    pytest.importorskip("mcp")
    calls = tmp_path / "calls.jsonl"
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"tools": {
        "command": sys.executable, "args": [str(HERE.parent / "mcp" / "toolserver.py")],
        "env": {"TOOLSERVER_CALLS": str(calls)}}}}))
    (tmp_path / "policy.toml").write_text(
        '[[rule]]\ntool = "tools__shout"\naction = "ask"\nreason = "loud"\n')
    opts = ("--mcp", str(tmp_path / "mcp.json"), "--policy", str(tmp_path / "policy.toml"))
    model = Model([tool_call("s1", "tools__shout", {"text": "hi"}), text("shouted")])
    root = tmp_path / "run"
    try:
        svc = Service(root, model, *opts)
        svc.client.post("/v1/agents", json={"prompt": "shout"})
        svc.wait(lambda: svc.client.get("/v1/approvals").json()["approvals"], "the request")
        svc.kill()
        assert not calls.exists()
        svc = Service(root, model, *opts)
        (p,) = svc.wait(lambda: svc.client.get("/v1/approvals").json()["approvals"],
                        "the request, listed again")
        assert (p["agent"], p["call_id"], p["tool"], p["input"]) == ("a1", "s1", "tools__shout",
                                                                     {"text": "hi"})
        r = svc.client.post("/v1/agents/a1/approvals/s1", json={"decision": "approve"})
        assert r.status_code == 200
        view = svc.wait(lambda: (v := svc.client.get("/v1/agents/a1").json())["state"]
                        == "ended" and v, "the agent to end")
        assert view["reason"] == "done" and view["answer"] == "shouted"
        assert svc.stop() == 0
    finally:
        model.close()
    lines = [json.loads(l) for l in calls.read_text().splitlines()]
    assert [l["name"] for l in lines] == ["shout"]
    assert model.requests == [0, 1]
    verify(root)


def test_sigterm_while_an_approval_waits_then_resume_on_request(tmp_path):
    """SIGTERM still cancels cleanly (exit 0, the log ends ``cancelled`` and verifies); started
    again, the agent is left ended; ``POST …/resume`` brings its request back, and approving it
    runs the tool once."""
    pytest.importorskip("mcp")
    calls = tmp_path / "calls.jsonl"
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"tools": {
        "command": sys.executable, "args": [str(HERE.parent / "mcp" / "toolserver.py")],
        "env": {"TOOLSERVER_CALLS": str(calls)}}}}))
    (tmp_path / "policy.toml").write_text('[[rule]]\ntool = "tools__*"\naction = "ask"\n')
    opts = ("--mcp", str(tmp_path / "mcp.json"), "--policy", str(tmp_path / "policy.toml"))
    model = Model([tool_call("s1", "tools__add", {"a": 2, "b": 3}), text("added")])
    root = tmp_path / "run"
    try:
        svc = Service(root, model, *opts)
        svc.client.post("/v1/agents", json={"prompt": "add"})
        svc.wait(lambda: svc.client.get("/v1/approvals").json()["approvals"], "the request")
        assert svc.stop() == 0
        verify(root)
        svc = Service(root, model, *opts)
        time.sleep(0.3)
        assert svc.client.get("/v1/approvals").json()["approvals"] == []
        assert state_of(svc, "a1") == "cancelled"
        assert svc.client.post("/v1/agents/a1/resume").status_code == 202
        (p,) = svc.wait(lambda: svc.client.get("/v1/approvals").json()["approvals"],
                        "the request, after the resume")
        assert p["call_id"] == "s1"
        r = svc.client.post("/v1/agents/a1/approvals/s1", json={"decision": "approve"})
        assert r.status_code == 200
        view = svc.wait(lambda: (v := svc.client.get("/v1/agents/a1").json())["state"]
                        == "ended" and v, "the agent to end")
        assert view["answer"] == "added"
        assert svc.stop() == 0
    finally:
        model.close()
    assert [json.loads(l)["name"] for l in calls.read_text().splitlines()] == ["add"]
    assert model.requests == [0, 1]
    verify(root)


def test_a_log_that_does_not_fold_does_not_stop_the_service(tmp_path):
    """A hand-broken log in the run root: the service says it is not resuming, and serves."""
    model = Model([text("fine")])
    root = tmp_path / "run"
    try:
        svc = Service(root, model)
        svc.client.post("/v1/agents", json={"prompt": "one"})
        svc.wait(lambda: state_of(svc, "a1") == "ended", "the agent to end")
        assert svc.stop() == 0
        log = root / "agents" / "a1" / "record.jsonl"
        lines = log.read_text().splitlines()
        log.write_text("\n".join(l for l in lines if '"SessionEnded"' not in l)
                       + '\n{"t":"ApprovalDecided","call_id":"zz","decision":"approve"}\n')
        svc = Service(root, model)
        assert svc.client.get("/v1/health").status_code == 200
        assert svc.client.get("/v1/agents").status_code == 200
        assert any("not resuming" in line for line in svc.head), svc.head
        assert svc.stop() == 0
    finally:
        model.close()
