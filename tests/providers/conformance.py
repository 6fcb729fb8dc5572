"""
``check_provider(make_provider)``: the same assertions for every adapter, in the spirit of trio's
``check_two_way_stream``. Anthropic and OpenAI run over ``httpx.MockTransport`` serving the
recorded fixtures (``anthropic_transport`` / ``openai_transport`` below); the scripted provider
runs a policy that answers the same conversation (``conformance_policy``).

The conversation: a text answer; a tool call (``get_weather`` for Paris); the tool result sent
back and a final answer. Each response must have its usage consistent and its stop reason in
Anthropic's words, and ``on_attempt`` must be called once per request.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec

from mnemon.providers.base import Provider, Request, ToolDef
from mnemon.session.records import Text, Thinking, ToolUse, Usage

FIXTURES = Path(__file__).parent / "fixtures"
ANTHROPIC_STOP_REASONS = {"end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal",
                          "pause_turn"}
SYSTEM = "You are a terse assistant."
WEATHER = ToolDef(
    name="get_weather",
    description="The current weather in a city.",
    input_schema={"type": "object",
                  "properties": {"city": {"type": "string"},
                                 "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                  "required": ["city"]},
)
HELLO = "Hello! How can I help?"
FINAL = "It is 18°C and sunny in Paris."


def fixture(*parts: str) -> bytes:
    return FIXTURES.joinpath(*parts).read_bytes()


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def assistant(blocks: list[Any]) -> dict[str, Any]:
    """A response's blocks as a neutral assistant message (what the renderer would send)."""
    return {"role": "assistant", "content": [msgspec.to_builtins(b) for b in blocks]}


def tool_results(*pairs: tuple[str, str]) -> dict[str, Any]:
    return {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": tid, "content": content, "is_error": False}
        for tid, content in pairs]}


def _last_has_tool_result(messages: list[dict[str, Any]]) -> bool:
    return any(b.get("type") == "tool_result" or b.get("role") == "tool"
               for b in messages[-1].get("content") or () if isinstance(b, dict)) \
        or messages[-1].get("role") == "tool"


def anthropic_transport(log: list[httpx.Request] | None = None,
                        override: Callable[[httpx.Request], httpx.Response | None] | None = None
                        ) -> httpx.MockTransport:
    """Serves text.sse, tool_use.sse or final.sse by what the request asks."""

    def handler(request: httpx.Request) -> httpx.Response:
        if log is not None:
            log.append(request)
        if override is not None and (resp := override(request)) is not None:
            return resp
        assert request.url.path == "/v1/messages"
        assert request.headers["anthropic-version"] == "2023-06-01"
        assert request.headers["x-api-key"]
        body = json.loads(request.content)
        if _last_has_tool_result(body["messages"]):
            name = "final.sse"
        elif body.get("tools"):
            name = "tool_use.sse"
        else:
            name = "text.sse"
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=fixture("anthropic", name))

    return httpx.MockTransport(handler)


def openai_transport(log: list[httpx.Request] | None = None,
                     override: Callable[[httpx.Request], httpx.Response | None] | None = None
                     ) -> httpx.MockTransport:
    """Serves text.sse, tool_call.sse or final.sse by what the request asks."""

    def handler(request: httpx.Request) -> httpx.Response:
        if log is not None:
            log.append(request)
        if override is not None and (resp := override(request)) is not None:
            return resp
        assert request.url.path.endswith("/v1/chat/completions")
        assert request.headers["authorization"].startswith("Bearer ")
        body = json.loads(request.content)
        if body["messages"][-1]["role"] == "tool":
            name = "final.sse"
        elif body.get("tools"):
            name = "tool_call.sse"
        else:
            name = "text.sse"
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=fixture("openai", name))

    return httpx.MockTransport(handler)


def conformance_policy(request: Request, state: dict[str, Any]) -> tuple[list[Any], str]:
    """The scripted provider's side of the conformance conversation."""
    state["calls"] = state.get("calls", 0) + 1
    last = request.messages[-1]["content"]
    if any(b["type"] == "tool_result" for b in last):
        return [Text(FINAL)], "end_turn"
    if request.tools:
        return [Text("Let me check the weather."),
                ToolUse(f"tu_{state['calls']}", "get_weather", {"city": "Paris", "unit": "celsius"})
                ], "tool_use"
    return [Text(HELLO)], "end_turn"


def check_usage(usage: Usage) -> None:
    fields = (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens,
              usage.cache_write_tokens)
    assert all(isinstance(v, int) and v >= 0 for v in fields), usage
    assert usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens \
        == usage.total_input
    assert usage.total_input > 0, usage
    assert usage.output_tokens > 0, usage


def _text(blocks: list[Any]) -> str:
    return "".join(b.text for b in blocks if isinstance(b, Text))


async def check_provider(make_provider: Callable[[], Provider]) -> None:
    """Run the conformance conversation on a fresh provider from ``make_provider()``."""
    provider = make_provider()
    attempts: list[tuple[Any, ...]] = []

    def on_attempt(*args: Any) -> None:
        attempts.append(args)

    try:
        assert isinstance(provider, Provider)
        assert isinstance(provider.name, str) and provider.name

        # 1. A text answer.
        text_req = Request(system=SYSTEM, messages=[user("Say hello.")], meta={"agent": "a1"})
        r1 = await provider.complete(text_req, on_attempt=on_attempt)
        assert _text(r1.blocks) == HELLO
        assert not any(isinstance(b, ToolUse) for b in r1.blocks)
        assert r1.stop_reason == "end_turn"
        check_usage(r1.usage)
        assert len(attempts) == 1
        number, latency, usage, error = attempts[0]
        assert (number, usage, error) == (1, r1.usage, None)
        assert latency >= 0

        # 2. A tool call.
        ask = [user("What's the weather in Paris?")]
        tool_req = Request(system=SYSTEM, messages=ask, tools=[WEATHER], meta={"agent": "a1"})
        r2 = await provider.complete(tool_req, on_attempt=on_attempt)
        calls = [b for b in r2.blocks if isinstance(b, ToolUse)]
        assert len(calls) == 1
        assert calls[0].name == "get_weather"
        assert calls[0].input["city"] == "Paris"
        assert calls[0].id
        assert r2.stop_reason == "tool_use"
        assert r2.stop_reason in ANTHROPIC_STOP_REASONS
        check_usage(r2.usage)
        assert all(isinstance(b, (Text, Thinking, ToolUse)) for b in r2.blocks)

        # 3. The result goes back; the final answer uses it.
        messages = ask + [assistant(r2.blocks), tool_results((calls[0].id, "18°C, sunny"))]
        final_req = Request(system=SYSTEM, messages=messages, tools=[WEATHER],
                            meta={"agent": "a1"})
        r3 = await provider.complete(final_req, on_attempt=on_attempt)
        assert _text(r3.blocks) == FINAL
        assert r3.stop_reason == "end_turn"
        check_usage(r3.usage)
        assert [a[0] for a in attempts] == [1, 1, 1]
    finally:
        await provider.aclose()
