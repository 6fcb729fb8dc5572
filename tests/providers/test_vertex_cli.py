"""``mnemon ask --provider vertex`` against a loopback server replaying recorded streams: the
streamRawPredict path of the project, location and model, the token as a bearer, a tool call
then the answer, RESOURCE_EXHAUSTED retried, usage and cache tokens priced, a refusal one line."""

from __future__ import annotations

import json

import pytest

from mnemon.orchestrator.cli import main
from mnemon.providers.prices import price_for
from tests.providers.conformance import fixture
from tests.providers.test_bedrock_cli import Replay, check_cost, check_trace

MODEL = "claude-sonnet-4-5@20250929"
PATH = ("/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/"
        f"{MODEL}:streamRawPredict")
TOKEN = "ya29.token-not-secret"


def sse(name: str) -> tuple[int, dict, bytes]:
    return 200, {"content-type": "text/event-stream"}, fixture("anthropic", name)


def recorded(name: str) -> tuple[int, dict, bytes]:
    rec = json.loads(fixture("vertex", name))
    return rec["status"], rec["headers"], json.dumps(rec["body"]).encode()


@pytest.fixture
def gcp(monkeypatch):
    monkeypatch.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", TOKEN)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "my-project")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us-east5")


def test_ask_with_a_tool_call_quota_retry_and_caching(tmp_path, capsys, gcp):
    answers = [sse("tool_use.sse"), recorded("error_429.json"), sse("final.sse")]
    with Replay(answers) as server:
        rc = main(["ask", "What is the weather in Paris?", "--provider", "vertex", "--model",
                   MODEL, "--base-url", server.url + "/v1", "--context-window", "200000",
                   "--run-root", str(tmp_path / "run"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["answer"] == "It is 18°C and sunny in Paris."
    assert [p for p, _, _ in server.seen] == [PATH] * 3
    assert all(h["authorization"] == f"Bearer {TOKEN}" for _, h, _ in server.seen)
    first, _, third = (json.loads(b) for _, _, b in server.seen)
    assert first["anthropic_version"] == "vertex-2023-10-16" and first["stream"] is True
    assert "model" not in first
    results = [b for m in third["messages"] for b in m["content"] if b["type"] == "tool_result"]
    assert results and "unknown tool 'get_weather'" in json.dumps(results[0]["content"])
    marks = [b["cache_control"] for b in [*third["tools"], *third.get("system", []),
                                          *(c for m in third["messages"] for c in m["content"])]
             if "cache_control" in b]
    assert 1 <= len(marks) <= 4 and all(m == {"type": "ephemeral"} for m in marks)

    run = tmp_path / "run"
    assert main(["verify", str(run)]) == 0
    recs = [json.loads(l) for l in (run / "agents" / "a1" / "record.jsonl").open()]
    calls = [r for r in recs if r["t"] == "ProviderCall"]
    assert [bool(c.get("error")) for c in calls] == [False, True, False]
    assert "RESOURCE_EXHAUSTED" in calls[1]["error"]
    assert next(r for r in recs if r["t"] == "SessionStarted")["provider"] == "vertex"
    assert TOKEN not in (run / "agents" / "a1" / "record.jsonl").read_text()
    p = price_for(MODEL)
    assert (p.input, p.output, p.cache_read, p.cache_write_5m) == (3.0, 15.0, 0.3, 3.75)
    check_cost(run, f"{MODEL}/us-east5", capsys)  # priced at its location (decision 0403)
    check_trace(run, "gcp.vertex_ai", capsys)


def test_a_bad_token_exits_1_with_one_line(tmp_path, capsys, gcp):
    with Replay([recorded("error_401.json")]) as server:
        rc = main(["ask", "hi", "--provider", "vertex", "--base-url", server.url,
                   "--run-root", str(tmp_path / "run")])
    err = capsys.readouterr().err
    lines = [l for l in err.splitlines() if l.strip()]
    assert rc == 1 and len(lines) == 1 and "Traceback" not in err
    assert "UNAUTHENTICATED" in lines[0]
    assert server.seen[0][0] == ("/projects/my-project/locations/us-east5/publishers/"
                                     "anthropic/models/claude-sonnet-4-5@20250929:"
                                     "streamRawPredict")


def test_no_project_is_a_usage_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", TOKEN)
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    rc = main(["ask", "hi", "--provider", "vertex", "--run-root", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.count("\n") == 0 and "GOOGLE_CLOUD_PROJECT is not set" in err
