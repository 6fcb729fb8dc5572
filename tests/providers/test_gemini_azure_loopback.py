"""``mnemon ask --provider gemini | vertex (a Gemini model) | azure-openai`` against a real HTTP
server on loopback replaying recorded bytes: text, tool calls, streaming, a throttled attempt
retried, usage with cached tokens in the log and in ``mnemon cost``, Gemini's thought
signature sent back on its part, and the provider named as the OTel conventions name it."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from mnemon.orchestrator.cli import main
from mnemon.orchestrator.tracing.semconv import provider_name
from mnemon.providers.prices import cost_usd
from mnemon.session.log import iter_lines
from mnemon.session.records import Usage, decode

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SIG_CALL = "CtwCAdHtim9+pZsZ3UGBqkU4dRnAcUq9ALo6vYSm0Cj1ZGjObUTnqzVxc9t27VKQvfZl"


class Server:
    """Answers every POST with the next ``(status, content type, body)``, keeping each
    request's path, headers and bytes."""

    def __init__(self, answers: list[tuple[int, str, bytes]]):
        self.answers = list(answers)
        self.seen: list[tuple[str, dict[str, str], bytes]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802
                data = self.rfile.read(int(self.headers["content-length"]))
                outer.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()},
                                   data))
                status, ctype, body = outer.answers.pop(0)
                self.send_response(status)
                self.send_header("content-type", ctype)
                if status == 429:
                    self.send_header("retry-after", "0")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def fx(*parts: str) -> bytes:
    return FIXTURES.joinpath(*parts).read_bytes()


SSE, JSON = "text/event-stream", "application/json; charset=UTF-8"


def records(root: Path, agent: str = "a1") -> list:
    return [decode(line) for _, line in iter_lines(root / "agents" / agent / "record.jsonl")]


def calls_of(recs) -> list:
    return [r for r in recs if type(r).__name__ == "ProviderCall"]


def chat_spans(capsys, run: Path) -> list[dict]:
    """The ``chat`` spans of ``mnemon trace RUN --json``, each one's attributes as a dict."""
    from tests.tracing.receiver import attrs

    assert main(["trace", str(run), "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    spans = [attrs(s["attributes"]) for rs in body["resourceSpans"] for ss in rs["scopeSpans"]
             for s in ss["spans"]]
    return [a for a in spans if a["gen_ai.operation.name"] == "chat"]


def cost_row(capsys, run: Path) -> dict:
    assert main(["cost", str(run), "--json"]) == 0
    return json.loads(capsys.readouterr().out)["agents"][0]


def test_gemini_tool_call_signature_retry_usage_and_cost(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "AIza-not-secret")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    run = tmp_path / "run"
    with Server([(429, JSON, fx("gemini", "error_429.json")),
                 (200, SSE, fx("gemini", "function_call.sse")),
                 (200, SSE, fx("gemini", "after_call.sse"))]) as server:
        rc = main(["ask", "What is the weather in Paris?", "--provider", "gemini",
                   "--base-url", server.url + "/v1beta", "--system", "Be terse.",
                   "--run-root", str(run), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["answer"] == "It is 18°C and sunny in Paris."
    assert len(server.seen) == 3 and server.seen[0][2] == server.seen[1][2], "429 resent as is"
    path, headers, _ = server.seen[0]
    assert path == "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    assert headers["x-goog-api-key"] == "AIza-not-secret"
    first, second = json.loads(server.seen[1][2]), json.loads(server.seen[2][2])
    assert first["systemInstruction"] == {"parts": [{"text": "Be terse."}]}
    assert any(d["name"] == "context_evict" for d in first["tools"][0]["functionDeclarations"])
    model_turn = second["contents"][1]
    assert model_turn["role"] == "model" and model_turn["parts"] == [{
        "functionCall": {"name": "get_weather", "args": {"location": "Paris"}},
        "thoughtSignature": SIG_CALL}]
    (answer,) = second["contents"][2]["parts"]
    assert answer["functionResponse"]["name"] == "get_weather"
    assert "unknown tool 'get_weather'" in answer["functionResponse"]["response"]["error"]

    recs = records(run)
    calls = calls_of(recs)
    assert [c.attempt for c in calls] == [1, 2, 1]
    assert calls[0].usage is None and calls[0].error.startswith("RateLimited")
    assert calls[1].usage == Usage(input_tokens=1024, output_tokens=146, cache_read_tokens=4096,
                                   reasoning_tokens=128)
    assert calls[2].usage == Usage(input_tokens=110, output_tokens=14, cache_read_tokens=5120)
    started = next(r for r in recs if type(r).__name__ == "SessionStarted")
    assert started.provider == "gemini" and provider_name(started.provider) == "gcp.gemini"
    assert "AIza-not-secret" not in (run / "agents/a1/record.jsonl").read_text()

    chats = chat_spans(capsys, run)
    assert len(chats) == 3 and {c["gen_ai.provider.name"] for c in chats} == {"gcp.gemini"}
    row = cost_row(capsys, run)
    assert (row["input_tokens"], row["cache_read_tokens"], row["output_tokens"]) == (
        1134, 9216, 160)
    expected = sum(cost_usd(c.usage, "gemini-2.5-pro") for c in calls[1:])
    assert row["cost_usd"] == pytest.approx(expected, abs=1e-6)
    assert expected == pytest.approx((1134 * 1.25 + 9216 * 0.125 + 160 * 10.0) / 1e6)


def test_vertex_gemini_streams_text_with_a_bearer_token(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "proj-1")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "us-central1")
    monkeypatch.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.not-secret")
    run = tmp_path / "run"
    with Server([(200, SSE, fx("gemini", "text.sse"))]) as server:
        rc = main(["ask", "Six times seven?", "--provider", "vertex", "--model",
                   "gemini-2.5-flash", "--base-url", server.url + "/v1", "--run-root", str(run),
                   "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["answer"] == "The answer is 42."
    path, headers, _ = server.seen[0]
    assert path == ("/v1/projects/proj-1/locations/us-central1/publishers/google/models/"
                    "gemini-2.5-flash:streamGenerateContent?alt=sse")
    assert headers["authorization"] == "Bearer ya29.not-secret"
    recs = records(run)
    assert provider_name(next(r for r in recs if type(r).__name__ == "SessionStarted")
                         .provider) == "gcp.vertex_ai"
    turn = next(r for r in recs if type(r).__name__ == "AssistantMessage")
    assert turn.blocks[-1].provider == "gemini", "the closing signed part is kept"
    assert chat_spans(capsys, run)[0]["gen_ai.provider.name"] == "gcp.vertex_ai"
    row = cost_row(capsys, run)
    assert row["cache_read_tokens"] == 1024 and row["input_tokens"] == 1037


def test_gemini_error_is_one_line_exit_2_or_failure(tmp_path, capsys, monkeypatch):
    """A request the API refuses (a bad key) is not retried and says the API's message."""
    monkeypatch.setenv("GEMINI_API_KEY", "bad")
    with Server([(400, JSON, fx("gemini", "error_400_key.json"))]) as server:
        rc = main(["ask", "hi", "--provider", "gemini", "--base-url", server.url + "/v1beta",
                   "--run-root", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert rc != 0 and "API key not valid" in err and len(server.seen) == 1


def test_gemini_without_a_key_exits_2(tmp_path, capsys, monkeypatch):
    for v in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(v, raising=False)
    rc = main(["ask", "hi", "--provider", "gemini", "--run-root", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert rc == 2 and "GEMINI_API_KEY" in err and len(err.strip().splitlines()) == 1


def test_azure_chat_tool_call_then_text(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-not-secret")
    monkeypatch.delenv("AZURE_OPENAI_AD_TOKEN", raising=False)
    monkeypatch.setenv("OPENAI_API_VERSION", "2024-10-21")
    run = tmp_path / "run"
    with Server([(429, JSON, fx("azure", "error_429.json")),
                 (200, SSE, fx("azure", "chat_tool_call.sse")),
                 (200, SSE, fx("azure", "chat_text.sse"))]) as server:
        monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", server.url)
        rc = main(["ask", "What is the weather in Paris?", "--provider", "azure-openai",
                   "--model", "gpt-4o", "--run-root", str(run), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["answer"] == "It is 18°C and sunny in Paris."
    assert [s[0] for s in server.seen] == [
        "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"] * 3
    assert all(s[1]["api-key"] == "azure-not-secret" for s in server.seen)
    second = json.loads(server.seen[2][2])
    assert second["messages"][-1]["role"] == "tool"
    assert second["messages"][-1]["tool_call_id"] == "call_8fXbq2Lr0dWm3PzT6yQvKs1N"
    recs = records(run)
    calls = calls_of(recs)
    assert [c.attempt for c in calls] == [1, 2, 1]
    assert calls[2].usage == Usage(input_tokens=314, output_tokens=9, cache_read_tokens=1536)
    assert provider_name(next(r for r in recs if type(r).__name__ == "SessionStarted")
                         .provider) == "azure.ai.openai"
    assert {c["gen_ai.provider.name"] for c in chat_spans(capsys, run)} == {"azure.ai.openai"}
    row = cost_row(capsys, run)
    expected = sum(cost_usd(c.usage, "gpt-4o") for c in calls[1:])
    assert row["cost_usd"] == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("name", ["gemini", "vertex", "azure-openai", "azure-openai-responses"])
def test_batch_engine_refuses_in_one_line(tmp_path, capsys, name):
    """Gemini and Azure have batch APIs, but not through this engine yet: one line naming
    the provider, before anything runs."""
    job = tmp_path / "job.toml"
    job.write_text(f'[provider]\nname = "{name}"\nmodel = "gemini-2.5-pro"\n\n'
                   '[[tasks]]\nid = "k1"\nprompt = "hi"\n')
    rc = main(["run", str(job), "--engine", "batch"])
    err = capsys.readouterr().err
    # vertex: Claude's and Gemini's share the refusal of decision 0400 (batch through storage)
    assert rc == 2 and (f"the {name} provider has no batch API" in err or
                        f"does not support the {name} provider here" in err)
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "job.run").exists()


def test_a_job_and_a_role_select_them(tmp_path, capsys, monkeypatch):
    """A job's ``[provider] name = "gemini"`` runs its task on Gemini; a roles file may name
    each of the new providers."""
    from mnemon.orchestrator.roles.spec import parse_roles

    monkeypatch.setenv("GEMINI_API_KEY", "AIza-not-secret")
    with Server([(200, SSE, fx("gemini", "text.sse"))]) as server:
        job = tmp_path / "job.toml"
        job.write_text(f'[provider]\nname = "gemini"\nmodel = "gemini-2.5-flash"\n'
                       f'base_url = "{server.url}/v1beta"\n\n'
                       '[[tasks]]\nid = "k1"\nprompt = "Six times seven?"\n')
        rc = main(["run", str(job)])
    capsys.readouterr()
    assert rc == 0
    assert server.seen[0][0] == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    rows = [json.loads(l) for l in (tmp_path / "job.run" / "results.jsonl").read_text()
            .splitlines()]
    assert [r["status"] for r in rows] == ["done"]
    roles = parse_roles({"roles": {
        name.replace("-", "_"): {"description": "d", "provider": name, "model": "gemini-2.5-pro"}
        for name in ("gemini", "vertex", "azure-openai", "azure-openai-responses")}})
    assert {r.provider for r in roles.roles.values()} == {
        "gemini", "vertex", "azure-openai", "azure-openai-responses"}


def test_gemini_typed_answer_through_the_final_answer_tool(tmp_path, capsys, monkeypatch):
    """``--output`` on Gemini: the final-answer tool is offered last, its call is the answer."""
    monkeypatch.setenv("GEMINI_API_KEY", "AIza-not-secret")
    schema = tmp_path / "city.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"city": {"type": "string"}},
                                  "required": ["city"]}))
    answer = {"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "final_answer", "args": {"city": "Paris"}},
         "thoughtSignature": "c2ln"}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 900, "candidatesTokenCount": 8,
                          "totalTokenCount": 908}, "modelVersion": "gemini-2.5-flash"}
    with Server([(200, SSE, b"data: " + json.dumps(answer).encode() + b"\r\n\r\n")]) as server:
        rc = main(["ask", "Capital of France?", "--provider", "gemini", "--model",
                   "gemini-2.5-flash", "--base-url", server.url + "/v1beta", "--output",
                   str(schema), "--run-root", str(tmp_path / "run")])
    assert rc == 0 and json.loads(capsys.readouterr().out) == {"city": "Paris"}
    (declarations,) = json.loads(server.seen[0][2])["tools"]
    last = declarations["functionDeclarations"][-1]
    assert last["name"] == "final_answer"
    assert last["parametersJsonSchema"]["properties"] == {"city": {"type": "string"}}
