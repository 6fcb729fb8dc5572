"""
OpenAI Chat Completions and compatible servers (vLLM, llama.cpp, Ollama…): the wire mapping
(pure functions) and a thin ``OpenAIProvider``.

``encode_request`` maps a neutral request to the body of ``POST {base_url}/chat/completions``;
``decode_response`` maps a non-streamed body; ``ChunkAssembler`` folds streamed chunks (text
deltas, tool calls assembled by ``index``, the final usage chunk, ``[DONE]``). Stop reasons are
recorded in Anthropic's words; usage follows the on-disk meaning (``input_tokens`` is uncached).
OpenAI caches prefixes by itself: breakpoints are not sent.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any
from urllib.parse import urlsplit

import blake3
import httpx
import msgspec

from .base import Request, Response
from .errors import ProviderHTTPError, StreamInterrupted, http_error, safe_url
from .http import HTTPProvider, bearer_json_headers
from .sse import events_of
from .retry import RetryPolicy
from ..session.records import Block, Opaque, Text, Thinking, ToolUse, Usage, compact

__all__ = [
    "DEFAULT_BASE_URL",
    "STOP_REASONS",
    "encode_request",
    "decode_response",
    "decode_usage",
    "call_ids",
    "is_message",
    "base_url_hint",
    "ChunkAssembler",
    "parse_stream",
    "error_from_response",
    "OpenAIProvider",
]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MAX_TOKENS = 8192
STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}
_CONTEXT_RE = re.compile(
    r"context[_ ]length|maximum context|context window|too many tokens|prompt is too long",
    re.IGNORECASE)
_RETRIED_STREAM_ERRORS = {"server_error", "rate_limit_exceeded", "overloaded", "api_error",
                          "internal_error"}


# --------------------------------------------------------------------------- encode


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else compact(value).decode()


def _assistant_fields(block: dict[str, Any]) -> dict[str, Any]:
    """What an opaque OpenAI block may give back to a Chat Completions assistant message: only
    the fields that message defines. ``{"audio": …}`` (kept from a response) goes back as its
    ``{"id"}``; a refusal part as ``refusal``. Anything else — a Codex ``reasoning`` item with
    its encrypted content, a web search call, a Responses API output part — belongs to another
    API and is not sent."""
    out: dict[str, Any] = {}
    audio = block.get("audio")
    if isinstance(audio, dict) and isinstance(audio.get("id"), str):
        out["audio"] = {"id": audio["id"]}
    refusal = block.get("refusal")
    if isinstance(refusal, str) and block.get("type") in (None, "refusal"):
        out["refusal"] = refusal
    return out


def encode_messages(request: Request) -> list[dict[str, Any]]:
    """Neutral messages → Chat Completions messages (system first, tool results as
    ``role: tool`` messages right after the assistant message that called them)."""
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    for msg in request.messages:
        content = msg.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        blocks = list(content or ())
        if msg["role"] == "assistant":
            texts = [b["text"] for b in blocks if b.get("type") == "text" and b.get("text")]
            calls = [
                {"id": b["id"], "type": "function",
                 "function": {"name": b["name"], "arguments": _arguments(b.get("input", {}))}}
                for b in blocks if b.get("type") == "tool_use"
            ]
            wire: dict[str, Any] = {"role": "assistant",
                                    "content": "\n\n".join(texts) if texts else None}
            if calls:
                wire["tool_calls"] = calls
            for b in blocks:
                if b.get("type") == "opaque" and b.get("provider") == "openai":
                    wire.update(_assistant_fields(b["block"]))
            if wire["content"] is None and not calls and len(wire) == 2:
                continue
            out.append(wire)
        else:
            texts = []
            for b in blocks:
                if b.get("type") == "tool_result":
                    out.append({"role": "tool", "tool_call_id": b["tool_use_id"],
                                "content": b.get("content", "")})
                elif b.get("type") == "text" and b.get("text"):
                    texts.append(b["text"])
            if len(texts) == 1:
                out.append({"role": "user", "content": texts[0]})
            elif texts:
                out.append({"role": "user",
                            "content": [{"type": "text", "text": t} for t in texts]})
    return out


def encode_request(request: Request, *, model: str | None = None, stream: bool = False,
                   max_tokens: int | None = None,
                   max_tokens_field: str = "max_completion_tokens") -> dict[str, Any]:
    """The JSON body for ``POST {base_url}/chat/completions``."""
    body: dict[str, Any] = {
        "model": request.model or model,
        "messages": encode_messages(request),
        max_tokens_field: max_tokens if max_tokens is not None else request.max_tokens,
    }
    if request.tools:
        body["tools"] = [
            {"type": "function", "function": {"name": t.name, "description": t.description,
                                              "parameters": t.input_schema}}
            for t in request.tools
        ]
        if request.tool_choice is not None:
            body["tool_choice"] = (
                request.tool_choice if request.tool_choice in ("auto", "none", "required")
                else {"type": "function", "function": {"name": request.tool_choice}})
    if request.output is not None:  # a typed answer: strict structured output (decision 0281)
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "name": request.output.name, "schema": request.output.strict(), "strict": True}}
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


# --------------------------------------------------------------------------- decode


def decode_usage(usage: dict[str, Any] | None) -> Usage:
    """``input_tokens = prompt_tokens − cached_tokens``; OpenAI reports no cache writes."""
    u = usage or {}
    prompt = int(u.get("prompt_tokens") or 0)
    cached = int((u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    return Usage(input_tokens=prompt - cached, output_tokens=int(u.get("completion_tokens") or 0),
                 cache_read_tokens=cached, cache_write_tokens=0)


def _tool_input(arguments: str) -> Any:
    if arguments == "":
        return {}
    try:
        return json.loads(arguments)
    except json.JSONDecodeError:
        return arguments  # cut by length: kept as the raw string


def _stop(finish_reason: str | None, blocks: list[Block] = ()) -> str | None:
    """The finish reason in Anthropic's words; a turn with tool calls whose reason is ``stop``
    (compatible servers say so) is ``tool_use``: the log must not pair ``end_turn`` with
    calls."""
    if finish_reason is None:
        return None
    stop = STOP_REASONS.get(finish_reason, finish_reason)
    if stop == "end_turn" and any(type(b) is ToolUse for b in blocks):
        return "tool_use"
    return stop


def call_ids(blocks: list[Block], seed: str) -> list[Block]:
    """The blocks with an id for every tool call that came without one, or with one an
    earlier call of the same message holds: ``call_`` and 24 hex digits of blake3 over
    ``seed`` (the response's own id and time), the call's place, name and arguments —
    deterministic (the same bytes decode to the same ids), unique in the message (what the log
    requires), and a string every API takes back (letters, digits, ``_``; 29 characters,
    under OpenAI's 40 and within Anthropic's ``^[a-zA-Z0-9_-]+$``). The id goes back to the
    server as ``tool_calls[].id`` and ``tool_call_id``, so it need only be consistent."""
    seen: set[str] = set()
    out: list[Block] = []
    for n, b in enumerate(blocks):
        if type(b) is ToolUse:
            if not b.id or b.id in seen:
                salt = 0
                while True:
                    h = blake3.blake3(b"\0".join((seed.encode(), str(n).encode(),
                                                   str(salt).encode(), b.name.encode(),
                                                   compact(b.input))))
                    new = "call_" + h.hexdigest()[:24]
                    if new not in seen:
                        break
                    salt += 1
                b = msgspec.structs.replace(b, id=new)
            seen.add(b.id)
        out.append(b)
    return out


def is_message(body: Any) -> bool:
    """Whether a whole JSON body is a chat completion (not an error, not a proxy's
    ``{"detail": …}``): what a streaming request may be answered with instead of a stream."""
    if not isinstance(body, dict):
        return False
    choices = body.get("choices")
    return (isinstance(choices, list) and bool(choices) and isinstance(choices[0], dict)
            and isinstance(choices[0].get("message"), dict))


def base_url_hint(base_url: str, status: int, route: str) -> str | None:
    """A 404's likely cause seen in the base URL: the adapter adds only ``route``, so a bare
    host asks a server that serves under ``/v1`` (most do) for a path it has not; a base URL
    that ends in the route already asks for it twice."""
    if status != 404:
        return None
    path = urlsplit(base_url).path.rstrip("/")
    if path.endswith(route):
        return f"the base URL ends in {route}, and {route} is added to it: give it without"
    if not path:
        return (f"the base URL is a bare host: most servers answer {route} under /v1, "
                f"so try {safe_url(base_url).rstrip('/')}/v1")
    return None


def decode_response(body: dict[str, Any]) -> Response:
    """A non-streamed Chat Completions body → ``Response``."""
    choice = (body.get("choices") or [{}])[0]
    msg = choice.get("message") or {}
    blocks: list[Block] = []
    reasoning = msg.get("reasoning_content") or msg.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        blocks.append(Thinking(reasoning, None))
    if msg.get("content"):
        blocks.append(Text(msg["content"]))
    if msg.get("refusal"):
        blocks.append(Text(msg["refusal"]))
    for call in msg.get("tool_calls") or ():
        fn = call.get("function") or {}
        blocks.append(ToolUse(str(call.get("id") or ""), fn.get("name", ""),
                              _tool_input(fn.get("arguments") or "")))
    if msg.get("audio"):
        blocks.append(Opaque("openai", {"audio": msg["audio"]}))
    blocks = call_ids(blocks, f"{body.get('id')}\0{body.get('created')}")
    stop = _stop(choice.get("finish_reason"), blocks)
    if msg.get("refusal") and stop == "end_turn":
        stop = "refusal"
    return Response(blocks=blocks, stop_reason=stop, usage=decode_usage(body.get("usage")),
                    model=body.get("model"))


class ChunkAssembler:
    """
    Folds streamed ``chat.completion.chunk`` objects. ``feed(data)`` per SSE ``data`` line
    (``[DONE]`` included); ``finish()`` returns the Response, or raises ``StreamInterrupted``
    when ``[DONE]`` never came.
    """

    def __init__(self, headers: dict[str, str] | None = None) -> None:
        self.headers = headers or {}
        self.model: str | None = None
        self.id = ""  # the completion's id and time: what generated call ids are drawn from
        self.reasoning = ""
        self.text = ""
        self.refusal = ""
        self.calls: dict[int, dict[str, str]] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.done = False
        self.on_text = None  # told each content delta as it arrives (the live preview)

    def feed(self, data: str) -> None:
        if data.strip() == "[DONE]":
            self.done = True
            return
        try:
            chunk = json.loads(data)
        except json.JSONDecodeError as exc:
            raise StreamInterrupted("undecodable stream chunk") from exc
        if "error" in chunk:
            err = chunk["error"] if isinstance(chunk["error"], dict) else {"message": chunk["error"]}
            kind = str(err.get("code") or err.get("type") or "error")
            message = f"{kind}: {err.get('message', '')}"
            if kind in _RETRIED_STREAM_ERRORS:
                raise StreamInterrupted(f"error event mid-stream: {message}", error_type=kind,
                                        headers=self.headers)
            raise error_from_response(400, chunk, self.headers)
        self.model = chunk.get("model") or self.model
        self.id = self.id or f"{chunk.get('id')}\0{chunk.get('created')}"
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            for key in ("reasoning_content", "reasoning"):
                if isinstance(delta.get(key), str):
                    self.reasoning += delta[key]
            if delta.get("content"):
                self.text += delta["content"]
                if self.on_text is not None:
                    self.on_text(delta["content"])
            if delta.get("refusal"):
                self.refusal += delta["refusal"]
            for call in delta.get("tool_calls") or ():
                slot = self.calls.setdefault(call.get("index", 0),
                                             {"id": "", "name": "", "arguments": ""})
                if call.get("id"):
                    slot["id"] = call["id"]
                fn = call.get("function") or {}
                if fn.get("name") and not slot["name"]:
                    slot["name"] = fn["name"]  # some servers repeat it in every chunk
                if fn.get("arguments"):
                    slot["arguments"] += fn["arguments"]
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def finish(self) -> Response:
        if not self.done:
            raise StreamInterrupted("stream ended without [DONE]", headers=self.headers)
        blocks: list[Block] = []
        if self.reasoning:
            blocks.append(Thinking(self.reasoning, None))
        if self.text:
            blocks.append(Text(self.text))
        if self.refusal:
            blocks.append(Text(self.refusal))
        for index in sorted(self.calls):
            c = self.calls[index]
            blocks.append(ToolUse(c["id"], c["name"], _tool_input(c["arguments"])))
        blocks = call_ids(blocks, self.id)
        stop = _stop(self.finish_reason, blocks)
        if self.refusal and stop == "end_turn":
            stop = "refusal"
        return Response(blocks=blocks, stop_reason=stop, usage=decode_usage(self.usage),
                        model=self.model)


def parse_stream(raw: bytes, headers: dict[str, str] | None = None) -> Response:
    """A whole recorded SSE body → ``Response``."""
    assembler = ChunkAssembler(headers)
    for ev in events_of(raw):
        if ev.data:
            assembler.feed(ev.data)
    return assembler.finish()


def error_from_response(status: int, body: Any, headers: Any) -> ProviderHTTPError:
    """The provider error for an HTTP error answer, spotting ``context_length_exceeded``."""
    code, message = None, ""
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            code, message = err.get("code"), str(err.get("message", ""))
        elif isinstance(err, str):
            message = err
        elif isinstance(body.get("message"), str):
            message = body["message"]
    elif isinstance(body, str):
        message = body
    too_long = code == "context_length_exceeded" or (
        status in (400, 413, 422) and bool(_CONTEXT_RE.search(message)))
    return http_error(status, body, dict(headers), context_too_long=too_long)


# --------------------------------------------------------------------------- sending


class OpenAIProvider(HTTPProvider):
    """
    Sends requests to ``{base_url}/chat/completions`` through an injected ``httpx.AsyncClient``.

    Args:
        client: the HTTP client; None makes (and owns) one.
        api_key: sent as ``Authorization: Bearer``; may be empty for a local server. Never
            logged, recorded or shown in ``repr``.
        model: used when the request names none.
        base_url: includes ``/v1``, as in the official SDK.
        stream: stream (SSE) or wait for the whole body.
        max_tokens: used when the request keeps the default ``max_tokens``.
        max_tokens_field: ``max_completion_tokens`` for OpenAI itself, ``max_tokens`` (the
            older name every compatible server knows) elsewhere.

    Resource handling:
        ``aclose()`` (or ``async with``) closes the client only if the provider made it.
    """

    name = "openai"
    output_mode = "native"  # how a typed answer comes back (decision 0281)

    def __init__(self, client: httpx.AsyncClient | None, api_key: str, model: str, *,
                 base_url: str = DEFAULT_BASE_URL, stream: bool = True,
                 max_tokens: int = DEFAULT_MAX_TOKENS, max_tokens_field: str | None = None,
                 retry: RetryPolicy | None = None, rng: random.Random | None = None,
                 timeout: float = 600.0) -> None:
        super().__init__(client, api_key, model, base_url=base_url, stream=stream,
                         max_tokens=max_tokens, retry=retry, rng=rng, timeout=timeout)
        self.max_tokens_field = max_tokens_field or (
            "max_completion_tokens" if "api.openai.com" in self.base_url else "max_tokens")

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def _headers(self) -> dict[str, str]:
        return bearer_json_headers(self._api_key)

    def encode(self, request: Request) -> dict[str, Any]:
        max_tokens = request.max_tokens if request.max_tokens != DEFAULT_MAX_TOKENS else self.max_tokens
        return encode_request(request, model=self.model, stream=self.stream,
                              max_tokens=max_tokens, max_tokens_field=self.max_tokens_field)

    def decode(self, body: Any) -> Response:
        return decode_response(body)

    def is_message(self, body: Any) -> bool:
        return is_message(body)

    def error(self, status: int, body: Any, headers: Any) -> ProviderHTTPError:
        return error_from_response(status, body, headers)

    def hint(self, status: int) -> str | None:
        return base_url_hint(self.base_url, status, "/chat/completions")

    def assembler(self, headers: dict[str, str]) -> "ChunkAssembler":
        return ChunkAssembler(headers)

    def feed_event(self, assembler: "ChunkAssembler", event: str | None, data: str) -> None:
        if data:
            assembler.feed(data)
