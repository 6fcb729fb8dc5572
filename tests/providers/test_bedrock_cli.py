"""``mnemon ask --provider bedrock`` against a loopback server replaying recorded event-stream
frames: a tool call then the answer, each request signed (checked server-side against
botocore's signer where it is installed), throttling retried, usage and cache tokens recorded
and priced at Bedrock's price, a refusal one line."""

from __future__ import annotations

import json

import pytest

from mnemon.orchestrator.cli import main
from mnemon.providers.prices import price_for
from tests.providers.conformance import fixture
from tests.providers.test_answers import Server

MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
PATH = f"/model/{MODEL}/invoke-with-response-stream"
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"


class Replay(Server):
    """The answers server of test_answers.py, answering each POST with the next recorded
    answer — (status, headers, body bytes) — and keeping (path, headers, body) of each
    request."""

    def __init__(self, answers: list[tuple[int, dict, bytes]]):
        super().__init__(404, None, b"")
        self.answers = list(answers)
        self.seen: list[tuple[str, dict, bytes]] = []
        self.url = self.base
        outer = self

        def do_POST(h):  # noqa: N802
            body = h.rfile.read(int(h.headers["content-length"]))
            outer.seen.append((h.path, {k.lower(): v for k, v in h.headers.items()}, body))
            status, headers, data = outer.answers.pop(0) if outer.answers else (404, {}, b"")
            h.send_response(status)
            for k, v in headers.items():
                h.send_header(k, v)
            h.send_header("content-length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)

        self.httpd.RequestHandlerClass.do_POST = do_POST  # type: ignore[attr-defined]


def frames(name: str) -> tuple[int, dict, bytes]:
    return 200, {"content-type": "application/vnd.amazon.eventstream"}, fixture("bedrock", name)


def recorded(name: str) -> tuple[int, dict, bytes]:
    rec = json.loads(fixture("bedrock", name))
    return rec["status"], rec["headers"], json.dumps(rec["body"]).encode()


@pytest.fixture
def aws(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", "session-token-not-secret")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)


def _botocore_agrees(path: str, headers: dict, body: bytes, base: str) -> None:
    """Recompute the signature with botocore at the request's own x-amz-date."""
    auth = pytest.importorskip("botocore.auth")
    from datetime import datetime
    from unittest import mock

    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    when = datetime.strptime(headers["x-amz-date"], "%Y%m%dT%H%M%SZ")
    ref = AWSRequest(method="POST", url=base + path, data=body,
                     headers={"content-type": headers["content-type"],
                              "accept": headers["accept"]})
    with mock.patch.object(auth, "get_current_datetime", lambda *a, **k: when):
        auth.SigV4Auth(Credentials("AKIDEXAMPLE", SECRET, "session-token-not-secret"),
                       "bedrock", "us-east-1").add_auth(ref)
    assert headers["authorization"] == ref.headers["Authorization"]


def test_ask_with_a_tool_call_throttling_and_caching(tmp_path, capsys, aws):
    answers = [frames("tool_use.bin"), recorded("error_429.json"), frames("final.bin")]
    with Replay(answers) as server:
        rc = main(["ask", "What is the weather in Paris?", "--provider", "bedrock", "--model",
                   MODEL, "--base-url", server.url, "--context-window", "200000",
                   "--run-root", str(tmp_path / "run"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["answer"] == "It is 18°C and sunny in Paris."
    assert [p for p, _, _ in server.seen] == [PATH] * 3
    for path, headers, body in server.seen:
        assert headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
        _botocore_agrees(path, headers, body, server.url)
    first, _, third = (json.loads(b) for _, _, b in server.seen)
    assert first["anthropic_version"] == "bedrock-2023-05-31" and "model" not in first
    results = [b for m in third["messages"] for b in m["content"] if b["type"] == "tool_result"]
    assert results and "unknown tool 'get_weather'" in json.dumps(results[0]["content"])
    marks = [b["cache_control"] for b in [*third["tools"], *third.get("system", []),
                                          *(c for m in third["messages"] for c in m["content"])]
             if "cache_control" in b]
    assert 1 <= len(marks) <= 4 and all(m == {"type": "ephemeral"} for m in marks)
    thinking = [b for m in third["messages"] if m["role"] == "assistant" for b in m["content"]
                if b["type"] == "thinking"]
    assert thinking and thinking[0]["signature"], "thinking goes back with its signature"

    run = tmp_path / "run"
    assert main(["verify", str(run)]) == 0
    recs = [json.loads(l) for l in (run / "agents" / "a1" / "record.jsonl").open()]
    calls = [r for r in recs if r["t"] == "ProviderCall"]
    assert [bool(c.get("error")) for c in calls] == [False, True, False]
    assert "ThrottlingException" in calls[1]["error"]
    assert next(r for r in recs if r["t"] == "SessionStarted")["provider"] == "bedrock"
    log = (run / "agents" / "a1" / "record.jsonl").read_text()
    assert SECRET not in log and "session-token-not-secret" not in log
    assert price_for(MODEL).input == pytest.approx(3.3), "a us. profile pays the regional 10%"
    check_cost(run, MODEL, capsys)
    check_trace(run, "aws.bedrock", capsys)


def check_trace(run, provider: str, capsys) -> None:
    """``mnemon trace`` names the cloud on every ``chat`` span, as the GenAI conventions do."""
    from tests.tracing.receiver import attrs

    capsys.readouterr()
    assert main(["trace", str(run), "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    chats = [attrs(s["attributes"]) for rs in body["resourceSpans"] for ss in rs["scopeSpans"]
             for s in ss["spans"]]
    chats = [a for a in chats if a["gen_ai.operation.name"] == "chat"]
    assert len(chats) == 3 and {a["gen_ai.provider.name"] for a in chats} == {provider}


def check_cost(run, model: str, capsys) -> None:
    """``mnemon cost`` counts the cache reads and writes the stream reported, at the model's
    price on its cloud."""
    capsys.readouterr()
    assert main(["cost", str(run), "--json"]) == 0
    total = json.loads(capsys.readouterr().out)["total"]
    assert total["cache_read_tokens"] > 0 and total["cache_write_tokens"] > 0
    p = price_for(model)
    want = (total["input_tokens"] * p.input + total["output_tokens"] * p.output
            + total["cache_read_tokens"] * p.cache_read
            + total["cache_write_tokens"] * p.cache_write_5m) / 1e6
    assert total["cost_usd"] == pytest.approx(want, abs=1e-6)


def test_access_denied_exits_1_with_one_line(tmp_path, capsys, aws):
    with Replay([recorded("error_403.json")]) as server:
        rc = main(["ask", "hi", "--provider", "bedrock", "--base-url", server.url,
                   "--run-root", str(tmp_path / "run")])
    err = capsys.readouterr().err
    lines = [l for l in err.splitlines() if l.strip()]
    assert rc == 1 and len(lines) == 1 and "Traceback" not in err
    assert "AccessDeniedException: You don't have access" in lines[0]
    assert len(server.seen) == 1, "a 403 is not retried"


def test_no_region_is_a_usage_error(tmp_path, capsys, monkeypatch):
    for v in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "k")
    rc = main(["ask", "hi", "--provider", "bedrock", "--run-root", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.count("\n") == 0 and "AWS_REGION is not set" in err
