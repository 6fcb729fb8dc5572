"""Anthropic Messages: encode, decode, the streamed assembler, errors, sending."""

from __future__ import annotations

import json
import random

import httpx
import pytest
import trio

from mnemon.providers.anthropic import (
    AnthropicProvider,
    decode_response,
    encode_request,
    parse_stream,
)
from mnemon.providers.base import Request
from mnemon.providers.cache import flatten
from mnemon.providers.errors import (
    AuthError,
    ContextTooLong,
    InvalidRequest,
    Overloaded,
    RateLimited,
    StreamInterrupted,
)
from mnemon.providers.retry import RetryPolicy
from mnemon.session.records import Opaque, Text, Thinking, ToolUse, Usage
from tests.providers.conformance import WEATHER, anthropic_transport, fixture, user


def provider(transport: httpx.MockTransport, **kw) -> AnthropicProvider:
    return AnthropicProvider(httpx.AsyncClient(transport=transport), "sk-ant-secret",
                             "claude-sonnet-4-5", rng=random.Random(0), **kw)


def sse_response(name: str, **kw) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "text/event-stream"},
                          content=fixture("anthropic", name), **kw)


def error_response(status: int, name: str, headers: dict | None = None) -> httpx.Response:
    return httpx.Response(status, headers=headers or {}, content=fixture("anthropic", name))


class TestEncode:
    def history(self) -> list[dict]:
        return [
            user("weather in Paris?"),
            {"role": "assistant", "content": [
                {"type": "thinking", "text": "call the tool", "signature": "sig-1"},
                {"type": "opaque", "provider": "anthropic",
                 "block": {"type": "redacted_thinking", "data": "abc"}},
                {"type": "opaque", "provider": "openai", "block": {"audio": {"id": "x"}}},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                 "input": {"city": "Paris"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C",
                 "is_error": False}]},
        ]

    def test_shape(self):
        """System as blocks, tools, thinking with its signature, opaque passed back verbatim."""
        req = Request(system="Be terse.", messages=self.history(), tools=[WEATHER],
                      breakpoints=[])
        body = encode_request(req, model="claude-sonnet-4-5", stream=True)
        assert body["model"] == "claude-sonnet-4-5"
        assert body["max_tokens"] == 8192
        assert body["stream"] is True
        assert body["system"] == [{"type": "text", "text": "Be terse."}]
        assert body["tools"] == [{"name": "get_weather", "description": WEATHER.description,
                                  "input_schema": WEATHER.input_schema}]
        assert body["messages"][1]["content"] == [
            {"type": "thinking", "thinking": "call the tool", "signature": "sig-1"},
            {"type": "redacted_thinking", "data": "abc"},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
             "input": {"city": "Paris"}},
        ]
        assert body["messages"][2]["content"] == [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"}]
        assert "cache_control" not in json.dumps(body)

    def test_explicit_breakpoints_get_cache_control(self):
        """Indices follow providers.cache.flatten: tools, system, message blocks."""
        req = Request(system="Be terse.", messages=self.history(), tools=[WEATHER],
                      breakpoints=[1, 8])
        body = encode_request(req, model="m", cache_ttl="1h")
        assert body["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
        assert body["messages"][2]["content"][0]["cache_control"] == {"type": "ephemeral",
                                                                      "ttl": "1h"}
        assert json.dumps(body).count("cache_control") == 2

    def test_breakpoint_on_uncacheable_block_moves_back(self):
        """Thinking cannot carry cache_control; a dropped block neither: the nearest earlier
        block that can takes it."""
        req = Request(system=None, messages=self.history(), breakpoints=[1])  # the thinking
        body = encode_request(req, model="m")
        assert body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
        req = Request(system=None, messages=self.history(), breakpoints=[3])  # openai opaque
        body = encode_request(req, model="m")
        assert body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}

    def test_default_breakpoints(self):
        """Without explicit ones: end of tools+system, end of the previous request, last."""
        msgs = self.history() + [
            {"role": "assistant", "content": [{"type": "text", "text": "18C in Paris."}]},
            user("and Tokyo?")]
        req = Request(system="Be terse.", messages=msgs, tools=[WEATHER])
        assert len(flatten(req)) == 11
        body = encode_request(req, model="m")
        assert "cache_control" in body["system"][0]
        assert "cache_control" in body["messages"][2]["content"][0]  # the tool result
        assert "cache_control" in body["messages"][-1]["content"][-1]
        assert json.dumps(body).count("cache_control") == 3

    def test_dropped_blocks(self):
        """Empty text, unsigned thinking and foreign opaque blocks are not sent; a message left
        empty is not sent either."""
        req = Request(system=None, breakpoints=[], messages=[
            user("hi"),
            {"role": "assistant", "content": [
                {"type": "thinking", "text": "from elsewhere", "signature": None},
                {"type": "text", "text": ""}]},
            user("again")])
        body = encode_request(req, model="m")
        assert [m["role"] for m in body["messages"]] == ["user", "user"]

    def test_request_max_tokens_and_model(self):
        req = Request(system=None, messages=[user("x")], max_tokens=100, model="claude-haiku-4-5")
        body = encode_request(req, model="claude-sonnet-4-5")
        assert (body["model"], body["max_tokens"]) == ("claude-haiku-4-5", 100)


class TestDecode:
    def test_message_with_opaque_blocks(self):
        """Redacted thinking and server-tool blocks are kept verbatim as opaque."""
        body = json.loads(fixture("anthropic", "message.json"))
        r = decode_response(body)
        assert r.stop_reason == "tool_use"
        assert r.model == "claude-sonnet-4-5-20250929"
        assert r.usage == Usage(input_tokens=2095, output_tokens=503, cache_read_tokens=0,
                                cache_write_tokens=2051)
        assert [type(b) for b in r.blocks] == [Opaque, Text, Opaque, Opaque, ToolUse]
        assert r.blocks[0] == Opaque("anthropic", body["content"][0])
        assert r.blocks[2].block["type"] == "server_tool_use"
        assert r.blocks[4] == ToolUse("toolu_01A09q90qw90lq917835lq9", "get_weather",
                                      {"city": "Paris", "unit": "celsius"})

    def test_stream_tool_use_with_thinking_and_cache_usage(self):
        r = parse_stream(fixture("anthropic", "tool_use.sse"))
        assert r.blocks == [
            Thinking("The user wants the weather; call get_weather for Paris.",
                     "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"),
            Text("Let me check the weather."),
            ToolUse("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather",
                    {"city": "Paris", "unit": "celsius"}),
        ]
        assert r.stop_reason == "tool_use"
        assert r.usage == Usage(input_tokens=472, output_tokens=89, cache_read_tokens=2048,
                                cache_write_tokens=1500)
        assert r.usage.total_input == 472 + 2048 + 1500

    def test_stream_split_anywhere(self):
        """The same body fed one byte at a time assembles the same response."""
        from mnemon.providers.anthropic import MessageAssembler, _feed_event
        from mnemon.providers.sse import SSEDecoder
        raw = fixture("anthropic", "tool_use.sse").replace(b"\n", b"\r\n")
        dec, asm = SSEDecoder(), MessageAssembler()
        for i in range(len(raw)):
            for ev in dec.feed(raw[i:i + 1]):
                _feed_event(asm, ev.event, ev.data)
        for ev in dec.flush():
            _feed_event(asm, ev.event, ev.data)
        assert asm.finish() == parse_stream(fixture("anthropic", "tool_use.sse"))

    def test_max_tokens_cut_keeps_raw_input(self):
        r = parse_stream(fixture("anthropic", "max_tokens_cut.sse"))
        assert r.stop_reason == "max_tokens"
        (call,) = r.blocks
        assert isinstance(call, ToolUse)
        assert call.input == '{"path": "notes.md", "content": "# Notes\\nLine one of a long fi'

    def test_overloaded_error_event_is_retryable(self):
        with pytest.raises(StreamInterrupted) as info:
            parse_stream(fixture("anthropic", "overloaded_midstream.sse"))
        assert info.value.retryable and info.value.error_type == "overloaded_error"

    def test_stream_without_message_stop(self):
        with pytest.raises(StreamInterrupted, match="message_stop"):
            parse_stream(fixture("anthropic", "truncated.sse"))

    def test_non_retryable_error_event(self):
        raw = (b'event: error\ndata: {"type":"error","error":{"type":"invalid_request_error",'
               b'"message":"prompt is too long: 210000 tokens > 200000 maximum"}}\n\n')
        with pytest.raises(ContextTooLong):
            parse_stream(raw)


class TestSending:
    async def test_url_headers_and_no_secret_in_repr(self):
        seen: list[httpx.Request] = []
        p = provider(anthropic_transport(seen), base_url="https://proxy.example/")
        r = await p.complete(Request(system="s", messages=[user("hi")]))
        assert r.stop_reason == "end_turn"
        (req,) = seen
        assert str(req.url) == "https://proxy.example/v1/messages"
        assert req.headers["x-api-key"] == "sk-ant-secret"
        assert req.headers["content-type"] == "application/json"
        assert "sk-ant" not in repr(p)

    async def test_non_streaming(self):
        def serve(req: httpx.Request) -> httpx.Response:
            assert "stream" not in json.loads(req.content)
            return httpx.Response(200, content=fixture("anthropic", "message.json"))
        p = provider(httpx.MockTransport(serve), stream=False)
        r = await p.complete(Request(system=None, messages=[user("hi")]))
        assert r.stop_reason == "tool_use" and len(r.blocks) == 5

    async def test_provider_max_tokens_setting(self):
        seen: list[httpx.Request] = []
        p = provider(anthropic_transport(seen), max_tokens=32000)
        await p.complete(Request(system=None, messages=[user("hi")]))
        assert json.loads(seen[0].content)["max_tokens"] == 32000

    async def test_overloaded_mid_stream_is_retried_once_without_duplicate(self, autojump_clock):
        served = iter(["overloaded_midstream.sse", "text.sse"])
        attempts = []
        p = provider(httpx.MockTransport(lambda req: sse_response(next(served))))
        r = await p.complete(Request(system=None, messages=[user("hi")]),
                             on_attempt=lambda *a: attempts.append(a))
        assert [b.text for b in r.blocks] == ["Hello! How can I help?"]
        assert [(a[0], a[2] is None, a[3] is None) for a in attempts] == [
            (1, True, False), (2, False, True)]
        assert "overloaded_error" in attempts[0][3]

    async def test_429_retry_after_honoured(self, autojump_clock):
        served = iter([error_response(429, "error_429.json", {"retry-after": "7"}),
                       sse_response("text.sse")])
        p = provider(httpx.MockTransport(lambda req: next(served)))
        t0 = trio.current_time()
        r = await p.complete(Request(system=None, messages=[user("hi")]))
        assert r.stop_reason == "end_turn"
        assert trio.current_time() - t0 == pytest.approx(7.0)

    @pytest.mark.parametrize("status,name,cls", [
        (400, "error_400.json", InvalidRequest),
        (400, "error_context.json", ContextTooLong),
        (401, "error_401.json", AuthError),
    ])
    async def test_errors_not_retried(self, status, name, cls):
        attempts = []
        p = provider(httpx.MockTransport(lambda req: error_response(status, name)))
        with pytest.raises(cls) as info:
            await p.complete(Request(system=None, messages=[user("hi")]),
                             on_attempt=lambda *a: attempts.append(a))
        assert len(attempts) == 1
        assert info.value.status == status
        assert not info.value.retryable
        assert "\n" not in str(info.value)

    async def test_529_exhausts_attempts(self, autojump_clock):
        attempts = []
        p = provider(httpx.MockTransport(lambda req: error_response(529, "error_529.json")))
        with pytest.raises(Overloaded):
            await p.complete(Request(system=None, messages=[user("hi")]),
                             on_attempt=lambda *a: attempts.append(a))
        assert len(attempts) == 6

    async def test_rate_limit_class(self, autojump_clock):
        p = provider(httpx.MockTransport(lambda req: error_response(429, "error_429.json")),
                     retry=RetryPolicy(max_attempts=1))
        with pytest.raises(RateLimited) as info:
            await p.complete(Request(system=None, messages=[user("hi")]))
        assert "rate limit" in str(info.value)
