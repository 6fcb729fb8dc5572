"""Typed answers on the wire: the exact request bodies ``mnemon ask --output`` sends to an
OpenAI-compatible and to an Anthropic server on loopback, field by field, for a schema with
nested objects, arrays, enums and optional fields; the answers they stream back, accepted,
retried or refused."""

from __future__ import annotations

import json

from mnemon.orchestrator.cli import main
from mnemon.providers.typed import OUTPUT_TOOL, OUTPUT_TOOL_DESCRIPTION

from .test_loopback import _Server
from .test_responses_loopback import KEY, Server, say

SCHEMA = {
    "title": "Report",
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1, "description": "the city's name"},
        "kind": {"enum": ["capital", "port"]},
        "where": {"type": "object",
                  "properties": {"lat": {"type": "number", "minimum": -90, "maximum": 90},
                                 "lon": {"type": "number"}},
                  "required": ["lat", "lon"]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
        "note": {"type": "string", "default": ""},
    },
    "required": ["city", "kind", "where"],
    "additionalProperties": False,
}
STRICT = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "the city's name"},
        "kind": {"enum": ["capital", "port"]},
        "where": {"type": "object",
                  "properties": {"lat": {"type": "number", "minimum": -90, "maximum": 90},
                                 "lon": {"type": "number"}},
                  "required": ["lat", "lon"], "additionalProperties": False},
        "tags": {"type": ["array", "null"], "items": {"type": "string"}, "maxItems": 5},
        "note": {"type": ["string", "null"]},
    },
    "required": ["city", "kind", "where", "tags", "note"],
    "additionalProperties": False,
}
ANSWER = {"city": "Lima", "kind": "capital", "where": {"lat": -12.05, "lon": -77.04},
          "tags": ["andes"], "note": None}


def _openai_sse(*, content: str | None = None, refusal: str | None = None) -> bytes:
    base = {"id": "chatcmpl-T1", "object": "chat.completion.chunk", "created": 1764484800,
            "model": "gpt-4o-2024-08-06"}
    delta = {"content": content} if content is not None else {"refusal": refusal}
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                              "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {**base, "choices": [], "usage": {"prompt_tokens": 900, "completion_tokens": 30,
                                          "prompt_tokens_details": {"cached_tokens": 0}}},
    ]
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


def _anthropic_sse(call_id: str, value: dict) -> bytes:
    raw = json.dumps(value)
    events = [
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_T1", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5-20250929", "content": [], "stop_reason": None,
            "usage": {"input_tokens": 800, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
            "type": "tool_use", "id": call_id, "name": OUTPUT_TOOL, "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
            "type": "input_json_delta", "partial_json": raw[:20]}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
            "type": "input_json_delta", "partial_json": raw[20:]}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                           "usage": {"output_tokens": 40}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return b"".join(f"event: {e}\ndata: {json.dumps(d)}\n\n".encode() for e, d in events)


def _ask(tmp_path, provider: str, server: _Server, base: str) -> list[str]:
    schema = tmp_path / "report.json"
    schema.write_text(json.dumps(SCHEMA))
    return ["ask", "Which city is the capital of Peru?", "--provider", provider,
            "--model", "gpt-4o" if provider == "openai" else "claude-sonnet-4-5",
            "--base-url", f"http://127.0.0.1:{server.port}{base}", "--context-window",
            "128000", "--run-root", str(tmp_path / "run"), "--output", str(schema), "--json"]


def test_openai_is_asked_with_a_strict_json_schema(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    with _Server([_openai_sse(content=json.dumps(ANSWER))], "/v1/chat/completions") as server:
        rc = main(_ask(tmp_path, "openai", server, "/v1"))
    out = json.loads(capsys.readouterr().out)
    assert rc == 0, out
    [(path, _headers, body)] = server.requests
    assert path == "/v1/chat/completions"
    assert set(body) == {"model", "messages", "max_tokens", "tools", "response_format",
                         "stream", "stream_options"}
    assert body["model"] == "gpt-4o"
    assert body["messages"] == [{"role": "user", "content": "Which city is the capital of Peru?"}]
    fmt = body["response_format"]
    assert set(fmt) == {"type", "json_schema"} and fmt["type"] == "json_schema"
    assert set(fmt["json_schema"]) == {"name", "schema", "strict"}
    assert fmt["json_schema"]["name"] == "Report"
    assert fmt["json_schema"]["strict"] is True
    sent = fmt["json_schema"]["schema"]
    assert sent == STRICT
    for name, prop in STRICT["properties"].items():  # field by field, for the record
        assert sent["properties"][name] == prop, name
    assert all(t["function"]["name"] != OUTPUT_TOOL for t in body["tools"])
    # the stand-in null for the optional note is dropped before validation
    assert out["output"] == {k: v for k, v in ANSWER.items() if k != "note"}
    assert out["reason"] == "done"


def test_an_openai_refusal_ends_failed_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    with _Server([_openai_sse(refusal="I'm sorry, I cannot help with that.")],
                 "/v1/chat/completions") as server:
        rc = main(_ask(tmp_path, "openai", server, "/v1"))
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert rc == 1 and out["reason"] == "failed: refused" and out["output"] is None
    assert len(server.requests) == 1  # a refusal is not retried
    assert "failed: refused" in captured.err


def test_anthropic_is_asked_with_a_final_answer_tool_and_told_what_did_not_fit(
        tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
    missing = {k: v for k, v in ANSWER.items() if k not in ("where", "note")}
    good = {k: v for k, v in ANSWER.items() if k != "note"}
    with _Server([_anthropic_sse("toolu_A", missing), _anthropic_sse("toolu_B", good)],
                 "/v1/messages") as server:
        rc = main(_ask(tmp_path, "anthropic", server, ""))
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["output"] == good
    (_, headers, first), (_, _, second) = server.requests
    assert headers["x-api-key"] == "test-key-not-secret"
    assert set(first) == {"model", "max_tokens", "messages", "tools", "stream"}
    assert "output_format" not in first and "response_format" not in first
    final = first["tools"][-1]
    final.pop("cache_control", None)  # a breakpoint may sit at the end of the tools
    assert set(final) == {"name", "description", "input_schema"}
    assert final["name"] == OUTPUT_TOOL
    assert final["description"] == OUTPUT_TOOL_DESCRIPTION
    assert final["input_schema"] == SCHEMA  # the output type itself, not the strict rewrite
    for name, prop in SCHEMA["properties"].items():
        assert final["input_schema"]["properties"][name] == prop, name
    assert [t["name"] for t in first["tools"]].count(OUTPUT_TOOL) == 1
    # the retry: the call is answered with its problems, as an error result
    result = second["messages"][-1]["content"][-1]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_A"
    assert result["is_error"] is True
    assert "$.where: is required but missing" in result["content"]
    assert "Call final_answer again" in result["content"]
    assert second["tools"][-1]["name"] == OUTPUT_TOOL


def test_the_responses_api_is_asked_with_a_strict_text_format(tmp_path, capsys, monkeypatch):
    """``openai-responses``: the output type as ``text.format`` (``json_schema``, strict), the
    answer read from the ``output_text`` and validated like any other."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    schema = tmp_path / "report.json"
    schema.write_text(json.dumps(SCHEMA))
    with Server([say("resp_T1", json.dumps(ANSWER))]) as server:
        rc = main(["ask", "Which city is the capital of Peru?", "--provider", "openai-responses",
                   "--base-url", server.url, "--context-window", "128000", "--run-root",
                   str(tmp_path / "run"), "--output", str(schema), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0, out
    [body] = server.bodies_sent
    fmt = body["text"]["format"]
    assert fmt == {"type": "json_schema", "name": "Report", "schema": STRICT, "strict": True}
    assert "response_format" not in body
    assert out["output"] == {k: v for k, v in ANSWER.items() if k != "note"}
