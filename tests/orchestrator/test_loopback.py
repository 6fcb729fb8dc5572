"""``mnemon ask`` against a real HTTP server on loopback, for each wire format: the adapter's
request goes over a socket, the streamed answer comes back as SSE, a tool call is answered and
sent back in the provider's own shape, and the run root verifies."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from mnemon.orchestrator.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "providers" / "fixtures"


class _Server:
    def __init__(self, bodies: list[bytes], path: str):
        self.bodies = list(bodies)
        self.requests: list[tuple[str, dict, dict]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                length = int(self.headers["content-length"])
                body = json.loads(self.rfile.read(length))
                outer.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()},
                                       body))
                if self.path != path or not outer.bodies:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = outer.bodies.pop(0)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize("provider, path, base, key", [
    ("openai", "/v1/chat/completions", "/v1", "OPENAI_API_KEY"),
    ("anthropic", "/v1/messages", "", "ANTHROPIC_API_KEY"),
])
def test_ask_over_a_real_socket(tmp_path, capsys, monkeypatch, provider, path, base, key):
    monkeypatch.setenv(key, "test-key-not-secret")
    sse = FIXTURES / provider
    first = (sse / ("tool_call.sse" if provider == "openai" else "tool_use.sse")).read_bytes()
    with _Server([first, (sse / "final.sse").read_bytes()], path) as server:
        rc = main(["ask", "What is the weather in Paris?", "--provider", provider,
                   "--base-url", f"http://127.0.0.1:{server.port}{base}", "--context-window",
                   "200000", "--run-root", str(tmp_path / "run"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["answer"] == "It is 18°C and sunny in Paris."
    assert len(server.requests) == 2
    (_, headers, req1), (_, _, req2) = server.requests
    if provider == "openai":
        assert headers["authorization"] == "Bearer test-key-not-secret"
        assert req1["stream"] is True and req1["stream_options"] == {"include_usage": True}
        tool_msgs = [m for m in req2["messages"] if m["role"] == "tool"]
        assert tool_msgs and "unknown tool 'get_weather'" in tool_msgs[0]["content"]
        assert any(t["function"]["name"] == "context_evict" for t in req1["tools"])
    else:
        assert headers["x-api-key"] == "test-key-not-secret"
        assert headers["anthropic-version"] == "2023-06-01"
        results = [b for m in req2["messages"] for b in m["content"]
                   if isinstance(b, dict) and b.get("type") == "tool_result"]
        assert results and "unknown tool 'get_weather'" in json.dumps(results[0]["content"])
        thinking = [b for m in req2["messages"] if m["role"] == "assistant" for b in m["content"]
                    if b.get("type") == "thinking"]
        assert thinking and thinking[0]["signature"], "thinking is passed back with its signature"
        marks = [b for m in req2["messages"] for b in m["content"]
                 if isinstance(b, dict) and "cache_control" in b]
        assert 1 <= len(marks) <= 4
    assert main(["verify", str(tmp_path / "run")]) == 0
    log = (tmp_path / "run" / "agents" / "a1" / "record.jsonl").read_text()
    assert "test-key-not-secret" not in log, "no secret is ever recorded"


def test_a_provider_that_refuses_the_key_exits_1_with_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "wrong-key")

    class Server(_Server):
        def __init__(self):
            super().__init__([], "/v1/messages")
            body = (FIXTURES / "anthropic" / "error_401.json").read_bytes()
            handler = self.httpd.RequestHandlerClass

            def do_POST(h):  # noqa: N802
                h.rfile.read(int(h.headers["content-length"]))
                h.send_response(401)
                h.send_header("content-type", "application/json")
                h.send_header("content-length", str(len(body)))
                h.end_headers()
                h.wfile.write(body)

            handler.do_POST = do_POST

    with Server() as server:
        rc = main(["ask", "hi", "--provider", "anthropic", "--base-url",
                   f"http://127.0.0.1:{server.port}", "--run-root", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert rc == 1
    lines = [l for l in err.splitlines() if l.strip()]
    assert "Traceback" not in err and len(lines) == 1
    assert lines[0].startswith("mnemon: the agent ended with failed: provider:")
    recs = [json.loads(l) for l in (tmp_path / "run/agents/a1/record.jsonl").open()]
    calls = [r for r in recs if r["t"] == "ProviderCall"]
    assert len(calls) == 1 and calls[0]["error"], "a 401 is not retried"
    assert recs[-1]["t"] == "SessionEnded" and recs[-1]["reason"].startswith("failed: provider")
    assert "wrong-key" not in (tmp_path / "run/agents/a1/record.jsonl").read_text()
