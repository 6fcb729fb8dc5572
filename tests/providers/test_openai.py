"""OpenAI Chat Completions and compatibles: encode, decode, streamed chunks, errors, sending."""

from __future__ import annotations

import json
import random

import httpx
import pytest
import trio

from mnemon.providers.base import Request
from mnemon.providers.errors import ContextTooLong, InvalidRequest, RateLimited, ServerError, StreamInterrupted
from mnemon.providers.openai import (
    STOP_REASONS,
    OpenAIProvider,
    decode_response,
    encode_request,
    parse_stream,
)
from mnemon.providers.retry import RetryPolicy
from mnemon.session.records import Opaque, Text, Thinking, ToolUse, Usage
from tests.providers.conformance import WEATHER, fixture, openai_transport, user


def provider(transport: httpx.MockTransport, **kw) -> OpenAIProvider:
    return OpenAIProvider(httpx.AsyncClient(transport=transport), "sk-secret", "gpt-4.1",
                          rng=random.Random(0), **kw)


def error_response(status: int, name: str, headers: dict | None = None) -> httpx.Response:
    return httpx.Response(status, headers=headers or {}, content=fixture("openai", name))


class TestEncode:
    def test_messages(self):
        """System first; tool_use → tool_calls with JSON-string arguments; tool_result → role
        tool; thinking and foreign opaque dropped; tools as functions; usage streamed."""
        req = Request(system="Be terse.", tools=[WEATHER], breakpoints=[0, 3], messages=[
            user("weather in Paris and Tokyo?"),
            {"role": "assistant", "content": [
                {"type": "thinking", "text": "two calls", "signature": "sig"},
                {"type": "opaque", "provider": "anthropic", "block": {"type": "redacted_thinking"}},
                {"type": "text", "text": "Checking both."},
                {"type": "tool_use", "id": "call_1", "name": "get_weather",
                 "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "call_2", "name": "get_weather",
                 "input": '{"city": "To'},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "18C", "is_error": False},
                {"type": "tool_result", "tool_use_id": "call_2", "content": "cut", "is_error": True},
                {"type": "text", "text": "Be quick."},
            ]},
        ])
        body = encode_request(req, model="gpt-4.1", stream=True)
        assert body["model"] == "gpt-4.1"
        assert body["max_completion_tokens"] == 8192
        assert body["stream_options"] == {"include_usage": True}
        assert body["tools"] == [{"type": "function", "function": {
            "name": "get_weather", "description": WEATHER.description,
            "parameters": WEATHER.input_schema}}]
        assert body["messages"] == [
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": "weather in Paris and Tokyo?"},
            {"role": "assistant", "content": "Checking both.", "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
                {"id": "call_2", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city": "To'}},
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
            {"role": "tool", "tool_call_id": "call_2", "content": "cut"},
            {"role": "user", "content": "Be quick."},
        ]
        assert "cache_control" not in json.dumps(body)

    def test_openai_opaque_passed_back_and_empty_assistant_skipped(self):
        req = Request(system=None, messages=[
            user("hi"),
            {"role": "assistant", "content": [
                {"type": "text", "text": "hello"},
                {"type": "opaque", "provider": "openai", "block": {"audio": {"id": "audio_1"}}}]},
            {"role": "assistant", "content": [{"type": "thinking", "text": "x", "signature": None}]},
            user("more")])
        body = encode_request(req, model="m", max_tokens_field="max_tokens")
        assert body["max_tokens"] == 8192
        assert body["messages"][1] == {"role": "assistant", "content": "hello",
                                       "audio": {"id": "audio_1"}}
        assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]


class TestDecode:
    def test_completion_with_parallel_calls_and_cached_usage(self):
        r = decode_response(json.loads(fixture("openai", "completion.json")))
        assert r.stop_reason == "tool_use"
        assert r.blocks == [
            ToolUse("call_Paris0001", "get_weather", {"city": "Paris", "unit": "celsius"}),
            ToolUse("call_Tokyo0002", "get_weather", {"city": "Tokyo", "unit": "celsius"}),
        ]
        assert r.usage == Usage(input_tokens=2006 - 1920, output_tokens=300,
                                cache_read_tokens=1920, cache_write_tokens=0)
        assert r.usage.total_input == 2006

    def test_stream_text(self):
        r = parse_stream(fixture("openai", "text.sse"))
        assert r.blocks == [Text("Hello! How can I help?")]
        assert r.stop_reason == "end_turn"
        assert r.model == "gpt-4.1-2025-04-14"
        assert r.usage == Usage(input_tokens=19, output_tokens=7)

    def test_stream_tool_call_usage_with_cache(self):
        r = parse_stream(fixture("openai", "tool_call.sse"))
        assert r.blocks == [ToolUse("call_DdmO9pD3xa9XTPNJ32zg2hcA", "get_weather",
                                    {"city": "Paris", "unit": "celsius"})]
        assert r.usage == Usage(input_tokens=512, output_tokens=18, cache_read_tokens=2048)

    def test_stream_parallel_tool_calls_by_index(self):
        r = parse_stream(fixture("openai", "parallel_tool_calls.sse"))
        assert r.blocks == [
            ToolUse("call_Paris0001", "get_weather", {"city": "Paris"}),
            ToolUse("call_Tokyo0002", "get_weather", {"city": "Tokyo"}),
            ToolUse("call_Time0003", "get_time", {}),
        ]
        assert r.stop_reason == "tool_use"

    def test_length_cut_keeps_raw_arguments(self):
        r = parse_stream(fixture("openai", "length_cut.sse"))
        assert r.stop_reason == "max_tokens"
        assert r.blocks == [ToolUse("call_WriteFile01", "write_file",
                                    '{"path":"notes.md","content":"# Notes\\nLine one of a long fi')]

    def test_reasoning_content_becomes_thinking(self):
        r = parse_stream(fixture("openai", "reasoning.sse"))
        assert r.blocks == [Thinking("The user greets me. Reply briefly.", None), Text("Hi there.")]
        assert r.usage == Usage(input_tokens=14, output_tokens=26)

    def test_missing_done(self):
        with pytest.raises(StreamInterrupted, match=r"\[DONE\]"):
            parse_stream(fixture("openai", "no_done.sse"))

    def test_error_chunk_mid_stream(self):
        with pytest.raises(StreamInterrupted) as info:
            parse_stream(fixture("openai", "midstream_error.sse"))
        assert info.value.retryable and info.value.error_type == "server_error"

    def test_stop_reasons_in_anthropic_words(self):
        assert STOP_REASONS["stop"] == "end_turn"
        assert STOP_REASONS["tool_calls"] == "tool_use"
        assert STOP_REASONS["length"] == "max_tokens"
        assert STOP_REASONS["content_filter"] == "refusal"
        body = {"choices": [{"index": 0, "finish_reason": "content_filter",
                             "message": {"role": "assistant", "content": None,
                                         "refusal": "I can't help with that."}}]}
        r = decode_response(body)
        assert r.stop_reason == "refusal" and r.blocks == [Text("I can't help with that.")]

    def test_audio_kept_opaque(self):
        body = {"choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "hi",
                                         "audio": {"id": "audio_1", "transcript": "hi"}}}]}
        assert decode_response(body).blocks[-1] == Opaque("openai", {"audio": {
            "id": "audio_1", "transcript": "hi"}})


class TestSending:
    async def test_url_and_auth(self):
        seen: list[httpx.Request] = []
        p = provider(openai_transport(seen), base_url="http://localhost:11434/v1/")
        await p.complete(Request(system=None, messages=[user("hi")]))
        assert str(seen[0].url) == "http://localhost:11434/v1/chat/completions"
        assert seen[0].headers["authorization"] == "Bearer sk-secret"
        assert json.loads(seen[0].content)["max_tokens"] == 8192  # a compatible server
        assert "sk-secret" not in repr(p)

    async def test_non_streaming(self):
        def serve(req: httpx.Request) -> httpx.Response:
            body = json.loads(req.content)
            assert "stream" not in body and body["max_completion_tokens"] == 8192
            return httpx.Response(200, content=fixture("openai", "completion.json"))
        p = provider(httpx.MockTransport(serve), stream=False)
        r = await p.complete(Request(system=None, messages=[user("hi")]))
        assert len(r.blocks) == 2

    async def test_429_then_success(self, autojump_clock):
        served = iter([error_response(429, "error_429.json", {"retry-after-ms": "1400"}),
                       httpx.Response(200, content=fixture("openai", "text.sse"))])
        attempts = []
        p = provider(httpx.MockTransport(lambda req: next(served)))
        t0 = trio.current_time()
        r = await p.complete(Request(system=None, messages=[user("hi")]),
                             on_attempt=lambda *a: attempts.append(a))
        assert r.blocks == [Text("Hello! How can I help?")]
        assert trio.current_time() - t0 == pytest.approx(1.4)
        assert [a[0] for a in attempts] == [1, 2]
        assert attempts[0][3].startswith("RateLimited: HTTP 429")

    async def test_missing_done_retried(self, autojump_clock):
        served = iter(["no_done.sse", "text.sse"])
        p = provider(httpx.MockTransport(
            lambda req: httpx.Response(200, content=fixture("openai", next(served)))))
        r = await p.complete(Request(system=None, messages=[user("hi")]))
        assert r.blocks == [Text("Hello! How can I help?")]

    @pytest.mark.parametrize("status,name,cls", [
        (400, "error_400.json", InvalidRequest),
        (400, "error_context.json", ContextTooLong),
    ])
    async def test_errors_not_retried(self, status, name, cls):
        attempts = []
        p = provider(httpx.MockTransport(lambda req: error_response(status, name)))
        with pytest.raises(cls):
            await p.complete(Request(system=None, messages=[user("hi")]),
                             on_attempt=lambda *a: attempts.append(a))
        assert len(attempts) == 1

    async def test_server_error_retried_then_raised(self, autojump_clock):
        p = provider(httpx.MockTransport(lambda req: error_response(500, "error_500.json")),
                     retry=RetryPolicy(max_attempts=3))
        with pytest.raises(ServerError):
            await p.complete(Request(system=None, messages=[user("hi")]))

    async def test_connection_error_mapped(self, autojump_clock):
        def refuse(req):
            raise httpx.ConnectError("connection refused")
        p = provider(httpx.MockTransport(refuse), retry=RetryPolicy(max_attempts=2))
        from mnemon.providers.errors import ProviderConnectionError
        with pytest.raises(ProviderConnectionError) as info:
            await p.complete(Request(system=None, messages=[user("hi")]))
        assert isinstance(info.value.__cause__, httpx.ConnectError)

    async def test_timeout_mapped(self, autojump_clock):
        def slow(req):
            raise httpx.ReadTimeout("read timed out")
        p = provider(httpx.MockTransport(slow), retry=RetryPolicy(max_attempts=1))
        from mnemon.providers.errors import ProviderTimeout
        with pytest.raises(ProviderTimeout):
            await p.complete(Request(system=None, messages=[user("hi")]))

    async def test_rate_limited_class(self):
        p = provider(httpx.MockTransport(lambda req: error_response(429, "error_429.json")),
                     retry=RetryPolicy(max_attempts=1))
        with pytest.raises(RateLimited):
            await p.complete(Request(system=None, messages=[user("hi")]))
