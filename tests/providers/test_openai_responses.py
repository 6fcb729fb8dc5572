"""OpenAI's Responses API: encode, decode, streamed events, errors, stored chains, sending.

The server's bytes are the recorded fixtures in ``fixtures/openai_responses/`` (their provenance
in its README): the official SDK's snapshot, the API reference's examples, and streams composed
in the reference's shapes where neither records a reasoning item with its encrypted content.
"""

from __future__ import annotations

import json
import random

import httpx
import msgspec
import pytest
import trio

from mnemon.providers import anthropic as anthropic_wire
from mnemon.providers import openai as chat_wire
from mnemon.providers.base import Request, ToolDef
from mnemon.providers.errors import (
    ContextTooLong,
    InvalidRequest,
    ProviderConfigError,
    RateLimited,
    StreamInterrupted,
)
from mnemon.providers.openai_responses import (
    INCLUDE,
    PROVIDER,
    EventAssembler,
    ResponsesProvider,
    decode_response,
    encode_input,
    encode_request,
    parse_stream,
    prompt_cache_key,
)
from mnemon.providers.retry import RetryPolicy
from mnemon.providers.select import make_provider
from mnemon.providers.sse import SSEDecoder
from mnemon.session.records import Opaque, Text, Thinking, ToolUse, Usage
from tests.providers.conformance import WEATHER, assistant, fixture, tool_results, user

F = "openai_responses"


def raw(name: str) -> bytes:
    return fixture(F, name)


def event(name: str) -> dict:
    return json.loads(raw(name))


def sse(*events: dict) -> bytes:
    """Events as a stream, each ``data:`` line the event's compact JSON."""
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e, separators=(',', ':'))}\n\n"
                    .encode() for e in events)


def done_items(name: str) -> list[tuple[dict, bytes]]:
    """Each ``response.output_item.done`` item of a recorded stream: the item, and its bytes
    exactly as the server sent them (checked to be a slice of the fixture)."""
    out = []
    body = raw(name)
    for line in body.splitlines():
        if line.startswith(b"data: ") and b'"response.output_item.done"' in line:
            item = json.loads(line[6:])["item"]
            text = json.dumps(item, separators=(",", ":"), ensure_ascii=False).encode()
            assert text in body, "the item is compact on the wire: its bytes are a slice"
            out.append((item, text))
    return out


REASONING = {"type": "opaque", "provider": PROVIDER, "block": {
    "id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "gAAAA-one"}}


def provider(transport: httpx.MockTransport, **kw) -> ResponsesProvider:
    return ResponsesProvider(httpx.AsyncClient(transport=transport), "sk-secret", "gpt-5.1",
                             rng=random.Random(0), **kw)


class TestEncode:
    def test_items_in_block_order(self):
        """User text → input_text message; an assistant's thinking is dropped, its reasoning
        item goes verbatim where it stood, text → output_text message, tool_use →
        function_call with JSON-string arguments; tool results → function_call_output;
        another provider's opaque blocks and Chat Completions' audio are not sent."""
        req = Request(system="Be terse.", tools=[WEATHER], messages=[
            user("weather in Paris?"),
            {"role": "assistant", "content": [
                {"type": "thinking", "text": "**Checking**", "signature": None},
                REASONING,
                {"type": "opaque", "provider": "anthropic", "block": {"type": "redacted_thinking"}},
                {"type": "opaque", "provider": "openai", "block": {"audio": {"id": "a1"}}},
                {"type": "text", "text": "Checking."},
                {"type": "text", "text": ""},
                {"type": "text", "text": "One moment."},
                {"type": "tool_use", "id": "call_1", "name": "get_weather",
                 "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "call_2", "name": "get_weather",
                 "input": '{"city": "To'},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "18C",
                 "is_error": False},
                {"type": "tool_result", "tool_use_id": "call_2", "content": "cut",
                 "is_error": True},
                {"type": "text", "text": "Be quick."},
                {"type": "text", "text": "Really."},
            ]},
        ])
        assert encode_input(req) == [
            {"type": "message", "role": "user",
             "content": [{"type": "input_text", "text": "weather in Paris?"}]},
            REASONING["block"],
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": "Checking."},
                         {"type": "output_text", "text": "One moment."}]},
            {"type": "function_call", "call_id": "call_1", "name": "get_weather",
             "arguments": '{"city":"Paris"}'},
            {"type": "function_call", "call_id": "call_2", "name": "get_weather",
             "arguments": '{"city": "To'},
            {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
            {"type": "function_call_output", "call_id": "call_2", "output": "cut"},
            {"type": "message", "role": "user",
             "content": [{"type": "input_text", "text": "Be quick."},
                         {"type": "input_text", "text": "Really."}]},
        ]

    def test_codex_reasoning_items_go_back(self):
        """The Codex importer keeps a rollout's reasoning item as ``Opaque("openai")``: it is
        this API's item and goes back; nothing else of provider ``openai`` does."""
        item = {"type": "reasoning", "summary": [], "content": None,
                "encrypted_content": "gAAAA-codex"}
        req = Request(system=None, messages=[user("hi"), {"role": "assistant", "content": [
            {"type": "opaque", "provider": "openai", "block": item},
            {"type": "opaque", "provider": "openai", "block": {"type": "web_search_call"}},
            {"type": "text", "text": "ok"}]}])
        assert encode_input(req)[1] == item
        assert [i.get("type") for i in encode_input(req)] == ["message", "reasoning", "message"]

    def test_body(self):
        """instructions, function tools with strict, max_output_tokens, tool_choice,
        stateless (store false, encrypted reasoning included), a prompt cache key, stream."""
        req = Request(system="Be terse.", tools=[WEATHER], messages=[user("hi")],
                      tool_choice="get_weather", max_tokens=512, model="gpt-5.1",
                      meta={"agent": "a1", "lineage": "a1"})
        body = encode_request(req, stream=True)
        assert list(body) == ["model", "instructions", "input", "tools", "tool_choice",
                              "max_output_tokens", "store", "include", "prompt_cache_key",
                              "stream"]
        assert body["instructions"] == "Be terse."
        assert body["tools"] == [{"type": "function", "name": "get_weather",
                                  "description": WEATHER.description,
                                  "parameters": WEATHER.input_schema, "strict": False}]
        assert body["tool_choice"] == {"type": "function", "name": "get_weather"}
        assert body["max_output_tokens"] == 512
        assert body["store"] is False and body["include"] == INCLUDE == [
            "reasoning.encrypted_content"]
        assert "previous_response_id" not in body
        for choice in ("auto", "none", "required"):
            req.tool_choice = choice
            assert encode_request(req)["tool_choice"] == choice
        req.tool_choice, req.tools = None, []
        body = encode_request(req)
        assert "tools" not in body and "tool_choice" not in body and "stream" not in body

    def test_prompt_cache_key_per_lineage(self):
        """A fork (same system, tools, model, lineage) shares its parent's key; another
        lineage or another system prompt gets another key; no clock, no path."""
        base = dict(system="S", tools=[WEATHER], messages=[user("x")], model="gpt-5.1")
        parent = Request(**base, meta={"agent": "a1", "lineage": "a1"})
        child = Request(**base, meta={"agent": "a3", "lineage": "a1", "parent": "a1"})
        fresh = Request(**base, meta={"agent": "a4", "lineage": "a4", "parent": "a1"})
        other = Request(**{**base, "system": "T"}, meta={"agent": "a1", "lineage": "a1"})
        key = prompt_cache_key(parent, None)
        assert key == prompt_cache_key(child, None) and key.startswith("mnemon-")
        assert key != prompt_cache_key(fresh, None) and key != prompt_cache_key(other, None)

    def test_other_adapters_never_send_these_items(self):
        req = Request(system=None, messages=[user("hi"), {"role": "assistant", "content": [
            {"type": "thinking", "text": "summary", "signature": None}, REASONING,
            {"type": "text", "text": "ok"}]}])
        assert "gAAAA-one" not in json.dumps(anthropic_wire.encode_request(req))
        assert "gAAAA-one" not in json.dumps(chat_wire.encode_request(req))

    def test_tool_choice_on_the_other_adapters(self):
        req = Request(system=None, tools=[WEATHER], messages=[user("hi")], tool_choice="required")
        assert anthropic_wire.encode_request(req)["tool_choice"] == {"type": "any"}
        assert chat_wire.encode_request(req)["tool_choice"] == "required"
        req.tool_choice = "get_weather"
        assert anthropic_wire.encode_request(req)["tool_choice"] == {
            "type": "tool", "name": "get_weather"}
        assert chat_wire.encode_request(req)["tool_choice"] == {
            "type": "function", "function": {"name": "get_weather"}}


class TestDecode:
    def test_sdk_snapshot_text(self):
        r = decode_response(json.loads(raw("sdk_output_text.json")))
        assert r.blocks == [Text(
            "I can't provide real-time updates, but you can easily check the current weather "
            "in San Francisco using a weather website or app. Typically, San Francisco has "
            "cool, foggy summers and mild winters, so it's good to be prepared for variable "
            "weather!")]
        assert r.stop_reason == "end_turn" and r.model == "gpt-4o-mini-2024-07-18"
        assert r.usage == Usage(input_tokens=14, output_tokens=50, reasoning_tokens=0)
        assert r.id == "resp_689a0b2545288193953c892439b42e2800b2e36c65a1fd4b"

    def test_reference_function_call(self):
        r = decode_response(json.loads(raw("reference_function_call.json")))
        assert r.blocks == [ToolUse("call_unLAR8MvFNptuiZK6K6HCy5k", "get_current_weather",
                                    {"location": "Boston, MA", "unit": "celsius"})]
        assert r.stop_reason == "tool_use"
        assert r.usage == Usage(input_tokens=291, output_tokens=23, reasoning_tokens=0)

    def test_reference_reasoning_usage(self):
        """Reasoning tokens are inside output_tokens (priced there) and kept apart."""
        r = decode_response(json.loads(raw("reference_reasoning.json")))
        assert r.usage == Usage(input_tokens=81, output_tokens=1035, cache_read_tokens=0,
                                reasoning_tokens=832)
        assert r.blocks == [Text("The classic tongue twister...")]

    def test_reasoning_item_kept_whole_and_opaque(self):
        body = json.loads(raw("composed_reasoning_call.json"))
        r = decode_response(body)
        reasoning, call = body["output"]
        assert r.blocks == [
            Thinking("**Checking the weather**\n\nThe user wants Paris; call get_weather.", None),
            Opaque(PROVIDER, reasoning),
            ToolUse("call_6rXqJ2aM0bQ9", "get_weather", {"city": "Paris", "unit": "celsius"})]
        assert r.usage == Usage(input_tokens=296, output_tokens=172, cache_read_tokens=1024,
                                reasoning_tokens=128)
        # and what goes back is the item itself, key order and all
        back = encode_input(Request(system=None, messages=[assistant(r.blocks)]))
        assert back[0] == reasoning and list(back[0]) == list(reasoning)

    def test_reference_stream(self):
        """The reference's streamed example (its ``...`` line is a field no one knows)."""
        r = parse_stream(raw("reference_stream_text.sse"))
        assert r.blocks == [Text("Hi there! How can I assist you today?")]
        assert r.stop_reason == "end_turn" and r.model == "gpt-5.4"
        assert r.usage == Usage(input_tokens=37, output_tokens=11, reasoning_tokens=0)

    def test_streamed_reasoning_and_call(self):
        """Arguments in deltas, the reasoning item from output_item.done, the same Response as
        the non-streamed body."""
        r = parse_stream(raw("composed_reasoning_call.sse"))
        assert r == decode_response(json.loads(raw("composed_reasoning_call.json")))
        assert r.id == "resp_0d6a2f3b9c1e4a50"

    def test_split_anywhere(self):
        body = raw("composed_reasoning_text.sse")
        whole = parse_stream(body)
        for size in (1, 7, 64):
            a = EventAssembler()
            d = SSEDecoder()
            for i in range(0, len(body), size):
                for ev in d.feed(body[i:i + size]):
                    a.feed(ev.data)
            for ev in d.flush():
                a.feed(ev.data)
            assert a.finish() == whole
        assert whole.blocks[-1] == Text("It is 18°C and sunny in Paris.")

    def test_text_preview(self):
        seen: list[str] = []
        a = EventAssembler()
        a.on_text = seen.append
        for ev in SSEDecoder().feed(raw("composed_reasoning_text.sse")):
            a.feed(ev.data)
        assert "".join(seen) == "It is 18°C and sunny in Paris."

    def test_assembled_without_output_item_done(self):
        """An item whose done never came is built from its added event and its deltas (the
        reference's function-call done event carries the arguments whole)."""
        added = {"type": "response.output_item.added", "output_index": 1, "item": {
            "type": "function_call", "id": "item-abc", "call_id": "call_9", "name": "get_weather",
            "arguments": ""}, "sequence_number": 0}
        done = event("event_response.function_call_arguments.done.json")
        final = event("event_response.completed.json")
        final["response"]["output"] = []
        r = parse_stream(sse(added, done, final))
        assert r.blocks == [ToolUse("call_9", "get_weather", {"arg": 123})]
        assert r.stop_reason == "tool_use"

    def test_reference_completed_event_alone(self):
        """A terminal event whose output is filled stands for the whole response."""
        r = parse_stream(sse(event("event_response.completed.json")))
        assert r.blocks and all(isinstance(b, Text) for b in r.blocks)
        assert r.stop_reason == "end_turn"

    def test_incomplete_is_a_max_tokens_turn(self):
        r = parse_stream(sse(event("event_response.created.json"),
                             event("event_response.incomplete.json")))
        assert r.stop_reason == "max_tokens" and r.blocks == []
        body = dict(event("event_response.incomplete.json")["response"])
        body["incomplete_details"] = {"reason": "content_filter"}
        assert decode_response(body).stop_reason == "refusal"

    def test_failed_server_error_is_retried(self):
        with pytest.raises(StreamInterrupted) as info:
            parse_stream(sse(event("event_response.created.json"),
                             event("event_response.failed.json")))
        assert info.value.retryable and info.value.error_type == "server_error"
        assert "The model failed to generate a response." in str(info.value)
        with pytest.raises(StreamInterrupted):  # non-streamed: the same
            decode_response(event("event_response.failed.json")["response"])

    def test_error_event_is_named_and_not_retried(self):
        with pytest.raises(InvalidRequest) as info:
            parse_stream(sse(event("event_response.created.json"),
                             event("event_error.json")))
        assert not info.value.retryable
        assert "ERR_SOMETHING" in str(info.value) and "Something went wrong" in str(info.value)
        too_long = {"type": "error", "code": "context_length_exceeded",
                    "message": "Your input exceeds the context window.", "param": "input"}
        with pytest.raises(ContextTooLong):
            parse_stream(sse(too_long))
        limited = {"type": "error", "error": {"type": "tokens", "code": "rate_limit_exceeded",
                                              "message": "slow down"}}
        with pytest.raises(StreamInterrupted):
            parse_stream(sse(limited))

    def test_undecodable_event(self):
        """The reference's function-call delta example is not JSON as printed."""
        body = (b"data: " + raw("event_response.function_call_arguments.delta.json")
                .replace(b"\n", b" ") + b"\n\n")
        with pytest.raises(StreamInterrupted, match="undecodable"):
            parse_stream(body)

    def test_cut_stream(self):
        """A stream that stops before response.completed is never half a turn."""
        body = raw("composed_reasoning_call.sse")
        cut = body[:body.index(b"event: response.completed")]
        with pytest.raises(StreamInterrupted, match="without response.completed"):
            parse_stream(cut)


def serve(*bodies: bytes, log: list | None = None, status: int = 200, headers=None):
    queue = list(bodies)

    def handler(req: httpx.Request) -> httpx.Response:
        if log is not None:
            log.append(req)
        return httpx.Response(status, headers=headers or {}, content=queue.pop(0))
    return httpx.MockTransport(handler)


class TestSending:
    async def test_url_headers_and_no_secret_in_repr(self):
        log: list[httpx.Request] = []
        p = provider(serve(raw("reference_stream_text.sse"), log=log),
                     base_url="https://example.test/v1/")
        r = await p.complete(Request(system="S", messages=[user("hi")]))
        assert r.blocks == [Text("Hi there! How can I assist you today?")]
        (req,) = log
        assert str(req.url) == "https://example.test/v1/responses"
        assert req.headers["authorization"] == "Bearer sk-secret"
        body = json.loads(req.content)
        assert body["stream"] is True and body["model"] == "gpt-5.1"
        assert body["max_output_tokens"] == 8192
        assert "sk-secret" not in repr(p)

    async def test_non_streaming(self):
        p = provider(serve(raw("reference_function_call.json")), stream=False)
        r = await p.complete(Request(system=None, messages=[user("hi")]))
        assert r.stop_reason == "tool_use"

    async def test_cut_stream_retried_once_without_duplicate(self, autojump_clock):
        body = raw("composed_reasoning_call.sse")
        cut = body[:body.index(b"event: response.completed")]
        attempts: list = []
        p = provider(serve(cut, body))
        r = await p.complete(Request(system=None, messages=[user("hi")]),
                             on_attempt=lambda *a: attempts.append(a))
        assert [a[0] for a in attempts] == [1, 2]
        assert attempts[0][3].startswith("StreamInterrupted") and attempts[1][3] is None
        assert attempts[1][2] == r.usage and r.usage.reasoning == 128

    async def test_failed_event_retried(self, autojump_clock):
        failed = sse(event("event_response.created.json"), event("event_response.failed.json"))
        p = provider(serve(failed, raw("reference_stream_text.sse")))
        r = await p.complete(Request(system=None, messages=[user("hi")]))
        assert r.blocks == [Text("Hi there! How can I assist you today?")]

    async def test_429_with_retry_after(self, autojump_clock):
        queue = [httpx.Response(429, headers={"retry-after": "3"},
                                content=fixture("openai", "error_429.json")),
                 httpx.Response(200, content=raw("reference_stream_text.sse"))]
        p = provider(httpx.MockTransport(lambda req: queue.pop(0)))
        t0 = trio.current_time()
        await p.complete(Request(system=None, messages=[user("hi")]))
        assert trio.current_time() - t0 == pytest.approx(3.0)

    @pytest.mark.parametrize("name,cls", [("error_400.json", InvalidRequest),
                                          ("error_context.json", ContextTooLong)])
    async def test_400_named_not_retried(self, name, cls):
        attempts: list = []
        p = provider(httpx.MockTransport(
            lambda req: httpx.Response(400, content=fixture("openai", name))))
        with pytest.raises(cls) as info:
            await p.complete(Request(system=None, messages=[user("hi")]),
                             on_attempt=lambda *a: attempts.append(a))
        assert len(attempts) == 1
        assert json.loads(fixture("openai", name))["error"]["message"][:30] in str(info.value)

    async def test_rate_limit_headers(self, autojump_clock):
        """``retry-after-ms`` sets the wait; ``x-should-retry: false`` overrules a 500."""
        queue = [httpx.Response(429, headers={"retry-after-ms": "1500"},
                                content=fixture("openai", "error_429.json")),
                 httpx.Response(500, headers={"x-should-retry": "false"},
                                content=fixture("openai", "error_500.json"))]
        attempts: list = []
        p = provider(httpx.MockTransport(lambda req: queue.pop(0)))
        t0 = trio.current_time()
        with pytest.raises(Exception) as info:
            await p.complete(Request(system=None, messages=[user("hi")]),
                             on_attempt=lambda *a: attempts.append(a))
        assert type(info.value).__name__ == "ServerError" and len(attempts) == 2
        assert trio.current_time() - t0 == pytest.approx(1.5)

    async def test_rate_limit_exhausts(self, autojump_clock):
        p = provider(httpx.MockTransport(lambda req: httpx.Response(
            429, content=fixture("openai", "error_429.json"))), retry=RetryPolicy(max_attempts=2))
        with pytest.raises(RateLimited):
            await p.complete(Request(system=None, messages=[user("hi")]))


def turn_two(first) -> Request:
    return Request(system="S", tools=[WEATHER], meta={"agent": "a1", "lineage": "a1"}, messages=[
        user("weather in Paris?"), assistant(first.blocks),
        tool_results(("call_6rXqJ2aM0bQ9", "18C"))])


class TestStoredChains:
    async def test_stateless_by_default(self):
        log: list[httpx.Request] = []
        p = provider(serve(raw("composed_reasoning_call.sse"), raw("composed_reasoning_text.sse"),
                           log=log))
        first = await p.complete(Request(system="S", tools=[WEATHER], messages=[
            user("weather in Paris?")], meta={"agent": "a1", "lineage": "a1"}))
        await p.complete(turn_two(first))
        bodies = [json.loads(r.content) for r in log]
        assert all(b["store"] is False and "previous_response_id" not in b for b in bodies)
        (item, text), _ = done_items("composed_reasoning_call.sse")
        assert text in log[1].content, "the reasoning item goes back byte for byte"
        assert [i["type"] for i in bodies[1]["input"]] == [
            "message", "reasoning", "function_call", "function_call_output"]
        assert bodies[0]["prompt_cache_key"] == bodies[1]["prompt_cache_key"]

    async def test_store_chains_while_the_context_only_grows(self):
        log: list[httpx.Request] = []
        p = provider(serve(raw("composed_reasoning_call.sse"), raw("composed_reasoning_text.sse"),
                           raw("composed_reasoning_text.sse"), log=log), store=True)
        first = await p.complete(Request(system="S", tools=[WEATHER], messages=[
            user("weather in Paris?")], meta={"agent": "a1", "lineage": "a1"}))
        second = await p.complete(turn_two(first))
        b2 = json.loads(log[1].content)
        assert b2["store"] is True and b2["previous_response_id"] == "resp_0d6a2f3b9c1e4a50"
        assert b2["input"] == [{"type": "function_call_output", "call_id": "call_6rXqJ2aM0bQ9",
                                "output": "18C"}]
        # the table changed (the first prompt left, as after an eviction): the whole input
        edited = turn_two(first)
        edited.messages[0] = user("[turns 1-1 left your context]")
        edited.messages += [assistant(second.blocks), user("and tomorrow?")]
        await p.complete(edited)
        b3 = json.loads(log[2].content)
        assert "previous_response_id" not in b3 and b3["input"][0]["content"][0]["text"] == (
            "[turns 1-1 left your context]")
        assert len(b3["input"]) == 7

    async def test_another_agent_never_continues_a_chain(self):
        log: list[httpx.Request] = []
        p = provider(serve(raw("composed_reasoning_call.sse"), raw("composed_reasoning_text.sse"),
                           log=log), store=True)
        first = await p.complete(Request(system="S", tools=[WEATHER], messages=[
            user("weather in Paris?")], meta={"agent": "a1", "lineage": "a1"}))
        fork = turn_two(first)
        fork.meta = {"agent": "a2", "lineage": "a1", "parent": "a1"}
        await p.complete(fork)
        assert "previous_response_id" not in json.loads(log[1].content)


class TestSelect:
    def test_make_provider(self):
        with pytest.raises(ProviderConfigError, match="OPENAI_API_KEY is not set .*openai-responses"):
            make_provider("openai-responses", env={})
        p = make_provider("openai-responses", env={"OPENAI_API_KEY": "k"}, store=True)
        assert isinstance(p, ResponsesProvider) and p.store and p.model == "gpt-5.1"
        assert p.url == "https://api.openai.com/v1/responses"
        local = make_provider("openai-responses", env={}, base_url="http://127.0.0.1:9/v1")
        assert isinstance(local, ResponsesProvider) and not local.store

    def test_usage_roundtrip_in_the_log(self):
        """Reasoning tokens are written only where reported: every other usage keeps its four
        documented fields byte for byte."""
        u = Usage(input_tokens=1, output_tokens=5, reasoning_tokens=3)
        assert msgspec.json.decode(msgspec.json.encode(u), type=Usage) == u
        assert b"reasoning" not in msgspec.json.encode(Usage(input_tokens=1))
        assert (u + Usage(output_tokens=1)).reasoning == 3
