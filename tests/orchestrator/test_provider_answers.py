"""``mnemon ask`` against a compatible server on loopback that leaves out what the API defines:
two parallel tool calls without ``id`` (the recorded stream with its ids taken out) run, get
ids of their own, and go back to the server with those ids, each result beside its call."""

from __future__ import annotations

import json
import re

from mnemon.orchestrator.cli import main

from .test_loopback import FIXTURES, _Server


def test_parallel_tool_calls_without_ids_run_and_go_back_with_their_ids(tmp_path, capsys,
                                                                       monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    first = re.sub(rb'"id":"call_[A-Za-z0-9]+",', b"",
                   (FIXTURES / "openai" / "parallel_tool_calls.sse").read_bytes())
    assert b'"id":"call_' not in first
    with _Server([first, (FIXTURES / "openai" / "final.sse").read_bytes()],
                 "/v1/chat/completions") as server:
        rc = main(["ask", "Weather in Paris and Tokyo?", "--provider", "openai", "--base-url",
                   f"http://127.0.0.1:{server.port}/v1", "--context-window", "200000",
                   "--run-root", str(tmp_path / "run"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["answer"] == "It is 18°C and sunny in Paris.", out
    (_, _, _), (_, _, second) = server.requests
    assistant = next(m for m in second["messages"] if m.get("tool_calls"))
    sent = [c["id"] for c in assistant["tool_calls"]]
    answered = [m["tool_call_id"] for m in second["messages"] if m["role"] == "tool"]
    assert len(set(sent)) == 3 and sent == answered
    assert all(re.fullmatch(r"call_[0-9a-f]{24}", i) for i in sent)
    assert main(["verify", str(tmp_path / "run")]) == 0
