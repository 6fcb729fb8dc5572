"""
Anthropic Messages API: the wire mapping (pure functions) and a thin ``AnthropicProvider``.

``encode_request`` maps a neutral request to the JSON body of ``POST /v1/messages``, with
``cache_control`` on the breakpoint blocks; ``decode_response`` maps a non-streamed body back;
``MessageAssembler`` folds the streamed events (``message_start``, ``content_block_start`` /
``_delta`` / ``_stop``, ``message_delta``, ``message_stop``, ``ping``, ``error``) into the same
``Response``. Blocks with no shape of ours (redacted thinking, server-tool blocks) become
``Opaque(provider="anthropic")`` and go back verbatim.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any
from urllib.parse import urlsplit

import httpx
import msgspec

from .base import Request, Response, ToolDef
from .cache import flatten, place_breakpoints, previous_request_len, MAX_BREAKPOINTS
from .errors import (
    STATUS_FOR_ERROR_TYPE,
    ProviderHTTPError,
    StreamInterrupted,
    http_error,
)
from .http import HTTPProvider
from .sse import events_of
from .retry import RetryPolicy
from .typed import OUTPUT_TOOL, OUTPUT_TOOL_DESCRIPTION, tool_schema
from ..session.records import Block, Opaque, Text, Thinking, ToolUse, Usage

__all__ = [
    "DEFAULT_BASE_URL",
    "API_VERSION",
    "DEFAULT_MAX_TOKENS",
    "encode_request",
    "decode_response",
    "decode_usage",
    "is_message",
    "base_url_hint",
    "MessageAssembler",
    "parse_stream",
    "error_from_response",
    "AnthropicProvider",
    "RoutedAnthropic",
]

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 8192
_RETRIED_EVENT_ERRORS = {"overloaded_error", "api_error", "rate_limit_error"}
_CONTEXT_RE = re.compile(
    r"prompt is too long|exceed(s|ed)? (the )?context (limit|window)|context window|"
    r"too many (input )?tokens", re.IGNORECASE)


# --------------------------------------------------------------------------- encode


def _tool_json(tool: Any) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}


def _block_json(block: dict[str, Any]) -> tuple[dict[str, Any] | None, bool]:
    """(wire block or None when dropped, whether it may carry cache_control)."""
    kind = block.get("type")
    if kind == "text":
        if not block.get("text"):
            return None, False  # an empty text block is refused by the API
        return {"type": "text", "text": block["text"]}, True
    if kind == "thinking":
        if block.get("signature") is None:
            return None, False  # thinking from elsewhere has no signature to verify
        return {"type": "thinking", "thinking": block.get("text", ""),
                "signature": block["signature"]}, False
    if kind == "tool_use":
        return {"type": "tool_use", "id": block["id"], "name": block["name"],
                "input": block.get("input") if isinstance(block.get("input"), dict) else {}}, True
    if kind == "tool_result":
        out = {"type": "tool_result", "tool_use_id": block["tool_use_id"],
               "content": block.get("content", "")}
        if block.get("is_error"):
            out["is_error"] = True
        return out, True
    if kind == "opaque":
        if block.get("provider") != "anthropic":
            return None, False
        inner = dict(block["block"])
        return inner, inner.get("type") not in ("thinking", "redacted_thinking")
    raise ValueError(f"unknown neutral block type {kind!r}")


def encode_request(request: Request, *, model: str | None = None, stream: bool = False,
                   max_tokens: int | None = None, cache_ttl: str | None = None) -> dict[str, Any]:
    """
    The JSON body for ``POST /v1/messages``.

    Breakpoints come from ``request.breakpoints`` (indices into ``providers.cache.flatten``),
    else ``place_breakpoints``; each gets ``cache_control: {"type": "ephemeral"}`` (plus
    ``"ttl": "1h"`` when ``cache_ttl == "1h"``). A breakpoint on a block that is dropped or
    cannot carry one (thinking) moves to the nearest earlier block that can.

    A typed request (``request.output``) offers one more tool, last: the final-answer tool,
    whose input schema is the output type (decision 0281).
    """
    if request.output is not None:
        request = _with_output_tool(request)
    flat = flatten(request, model=model)
    points = request.breakpoints
    if points is None:
        points = place_breakpoints(flat, previous_request_len(request, flat))
    points = sorted({p for p in points if 0 <= p < len(flat)})[-MAX_BREAKPOINTS:]

    # Every flattened position maps to the wire dict that carries its breakpoint.
    carriers: list[dict[str, Any] | None] = []
    last: dict[str, Any] | None = None
    tools = [_tool_json(t) for t in request.tools]
    for t in tools:
        last = t
        carriers.append(last)
    system = [{"type": "text", "text": request.system}] if request.system else []
    for s in system:
        last = s
        carriers.append(last)
    messages: list[dict[str, Any]] = []
    for msg in request.messages:
        content = msg.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        wire: list[dict[str, Any]] = []
        for block in content or ():
            out, cacheable = _block_json(block)
            if out is not None:
                wire.append(out)
                if cacheable:
                    last = out
            carriers.append(last)
        if wire:
            messages.append({"role": msg["role"], "content": wire})

    control: dict[str, Any] = {"type": "ephemeral"}
    if cache_ttl == "1h":
        control["ttl"] = "1h"
    for p in points:
        carrier = carriers[p]
        if carrier is not None:
            carrier["cache_control"] = dict(control)

    body: dict[str, Any] = {
        "model": request.model or model,
        "max_tokens": max_tokens if max_tokens is not None else request.max_tokens,
        "messages": messages,
    }
    if system:
        body["system"] = system
    if tools:
        body["tools"] = tools
        if request.tool_choice is not None:
            body["tool_choice"] = _tool_choice(request.tool_choice)
    if stream:
        body["stream"] = True
    return body


def _with_output_tool(request: Request) -> Request:
    """The request with the final-answer tool after its own tools (explicit breakpoints past
    the tools move along by one)."""
    n = len(request.tools)
    final = ToolDef(OUTPUT_TOOL, OUTPUT_TOOL_DESCRIPTION, tool_schema(request.output))
    points = request.breakpoints
    return msgspec.structs.replace(
        request, tools=[*request.tools, final],
        breakpoints=None if points is None else [p + 1 if p >= n else p for p in points])


def _tool_choice(choice: str) -> dict[str, Any]:
    """The neutral ``tool_choice`` in the Messages API's words (``required`` is ``any``)."""
    if choice in ("auto", "none"):
        return {"type": choice}
    if choice == "required":
        return {"type": "any"}
    return {"type": "tool", "name": choice}


# --------------------------------------------------------------------------- decode


def decode_usage(usage: dict[str, Any] | None) -> Usage:
    u = usage or {}
    return Usage(
        input_tokens=int(u.get("input_tokens") or 0),
        output_tokens=int(u.get("output_tokens") or 0),
        cache_read_tokens=int(u.get("cache_read_input_tokens") or 0),
        cache_write_tokens=int(u.get("cache_creation_input_tokens") or 0),
    )


def _decode_block(block: dict[str, Any]) -> Block:
    kind = block.get("type")
    if kind == "text":
        return Text(block.get("text", ""))
    if kind == "thinking":
        return Thinking(block.get("thinking", ""), block.get("signature"))
    if kind == "tool_use":
        return ToolUse(block["id"], block["name"], block.get("input", {}))
    return Opaque("anthropic", block)


def decode_response(body: dict[str, Any]) -> Response:
    """A non-streamed Messages API body → ``Response``."""
    blocks = [_decode_block(b) for b in body.get("content") or ()]
    return Response(
        blocks=blocks,
        stop_reason=_stop(body.get("stop_reason"), blocks),
        usage=decode_usage(body.get("usage")),
        model=body.get("model"),
    )


def is_message(body: Any) -> bool:
    """Whether a whole JSON body is a Messages API message (not an error, not a proxy's
    ``{"detail": …}``): what a streaming request may be answered with instead of a stream."""
    return (isinstance(body, dict) and body.get("type", "message") == "message"
            and isinstance(body.get("content"), list))


def _stop(stop_reason: str | None, blocks: list[Block]) -> str | None:
    """The stop reason, except that a turn with tool calls said to end its turn (a proxy
    translating another API says so) is ``tool_use``: the log must not pair the two."""
    if stop_reason == "end_turn" and any(type(b) is ToolUse for b in blocks):
        return "tool_use"
    return stop_reason


def base_url_hint(base_url: str, status: int) -> str | None:
    """A 404's likely cause seen in the base URL: the adapter adds ``/v1/messages`` itself, so
    a base URL ending in ``/v1`` (the commonest slip) asks for ``/v1/v1/messages``."""
    if status != 404:
        return None
    path = urlsplit(base_url).path.rstrip("/")
    if path.endswith("/v1/messages"):
        return ("the base URL ends in /v1/messages, and /v1/messages is added to it: "
                "give the base URL without that path")
    if path.endswith("/v1"):
        return ("the base URL ends in /v1, and /v1/messages is added to it (so the path is "
                "/v1/v1/messages): give the base URL without /v1")
    return None


class MessageAssembler:
    """
    Folds the streamed events of one message. ``feed(event_type, data)`` per event;
    ``finish()`` returns the Response, or raises ``StreamInterrupted`` when ``message_stop``
    never came. An ``error`` event raises at once.
    """

    def __init__(self, headers: dict[str, str] | None = None) -> None:
        self.headers = headers or {}
        self.model: str | None = None
        self.stop_reason: str | None = None
        self.usage: dict[str, Any] = {}
        self.blocks: dict[int, dict[str, Any]] = {}
        self.partial_json: dict[int, str] = {}
        self.done = False
        self.on_text = None  # told each text delta as it arrives (the live preview)

    def feed(self, kind: str | None, data: dict[str, Any]) -> None:
        kind = data.get("type", kind)
        if kind == "message_start":
            msg = data.get("message") or {}
            self.model = msg.get("model")
            self.usage.update({k: v for k, v in (msg.get("usage") or {}).items() if v is not None})
        elif kind == "content_block_start":
            self.blocks[data["index"]] = dict(data["content_block"])
        elif kind == "content_block_delta":
            self._delta(data["index"], data.get("delta") or {})
        elif kind == "content_block_stop":
            self._close(data["index"])
        elif kind == "message_delta":
            self.stop_reason = (data.get("delta") or {}).get("stop_reason", self.stop_reason)
            # message_delta usage is cumulative; newer servers repeat the input fields here.
            self.usage.update({k: v for k, v in (data.get("usage") or {}).items() if v is not None})
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            err = data.get("error") or {}
            etype = err.get("type") or "error"
            message = f"{etype}: {err.get('message', '')}"
            if etype in _RETRIED_EVENT_ERRORS:
                raise StreamInterrupted(f"error event mid-stream: {message}", error_type=etype,
                                        headers=self.headers)
            status = STATUS_FOR_ERROR_TYPE.get(etype, 400)
            raise http_error(status, data, self.headers,
                             context_too_long=bool(_CONTEXT_RE.search(message)))
        # ping and unknown events are ignored (the API may add event types)

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        block = self.blocks.setdefault(index, {"type": "text", "text": ""})
        dtype = delta.get("type")
        if dtype == "text_delta":
            block["text"] = block.get("text", "") + delta.get("text", "")
            if self.on_text is not None and delta.get("text"):
                self.on_text(delta["text"])
        elif dtype == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
        elif dtype == "signature_delta":
            block["signature"] = block.get("signature") or ""
            block["signature"] += delta.get("signature", "")
        elif dtype == "input_json_delta":
            self.partial_json[index] = self.partial_json.get(index, "") + delta.get("partial_json", "")
        elif dtype == "citations_delta":
            block.setdefault("citations", []).append(delta.get("citation"))

    def _close(self, index: int) -> None:
        if index not in self.partial_json:
            return
        raw = self.partial_json.pop(index)
        block = self.blocks[index]
        if raw == "":
            block.setdefault("input", {})
            return
        try:
            block["input"] = json.loads(raw)
        except json.JSONDecodeError:
            block["input"] = raw  # cut mid-JSON (max_tokens): kept as the raw string

    def finish(self) -> Response:
        if not self.done:
            raise StreamInterrupted("stream ended without message_stop", headers=self.headers)
        for index in list(self.partial_json):
            self._close(index)
        blocks = [_decode_block(self.blocks[i]) for i in sorted(self.blocks)]
        return Response(
            blocks=blocks,
            stop_reason=_stop(self.stop_reason, blocks),
            usage=decode_usage(self.usage),
            model=self.model,
        )


def parse_stream(raw: bytes, headers: dict[str, str] | None = None) -> Response:
    """A whole recorded SSE body → ``Response`` (what the provider does chunk by chunk)."""
    assembler = MessageAssembler(headers)
    for ev in events_of(raw):
        _feed_event(assembler, ev.event, ev.data)
    return assembler.finish()


def _feed_event(assembler: MessageAssembler, event: str | None, data: str) -> None:
    if not data:
        return
    try:
        payload = json.loads(data)
    except json.JSONDecodeError as exc:
        raise StreamInterrupted(f"undecodable stream event {event!r}") from exc
    assembler.feed(event, payload)


def error_from_response(status: int, body: Any, headers: Any) -> ProviderHTTPError:
    """The provider error for an HTTP error answer, spotting a context-length refusal."""
    message = ""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        message = str(body["error"].get("message", ""))
    elif isinstance(body, str):
        message = body
    too_long = status == 413 or (status == 400 and bool(_CONTEXT_RE.search(message)))
    return http_error(status, body, dict(headers), context_too_long=too_long)


# --------------------------------------------------------------------------- sending


class AnthropicProvider(HTTPProvider):
    """
    Sends requests to the Messages API through an injected ``httpx.AsyncClient``.

    Args:
        client: the HTTP client; None makes (and owns) one.
        api_key: sent as ``x-api-key``; never logged, recorded or shown in ``repr``.
        model: used when the request names none.
        base_url: the host; the adapter adds ``/v1/messages``.
        stream: stream (SSE) or wait for the whole body.
        max_tokens: used when the request keeps the default ``max_tokens``.
        cache_ttl: ``"5m"`` (default) or ``"1h"``.

    Resource handling:
        ``aclose()`` (or ``async with``) closes the client only if the provider made it.
    """

    name = "anthropic"
    output_mode = "tool"  # how a typed answer comes back (decision 0281)

    def __init__(self, client: httpx.AsyncClient | None, api_key: str, model: str, *,
                 base_url: str = DEFAULT_BASE_URL, stream: bool = True,
                 max_tokens: int = DEFAULT_MAX_TOKENS, cache_ttl: str = "5m",
                 retry: RetryPolicy | None = None, rng: random.Random | None = None,
                 timeout: float = 600.0) -> None:
        super().__init__(client, api_key, model, base_url=base_url, stream=stream,
                         max_tokens=max_tokens, retry=retry, rng=rng, timeout=timeout)
        self.cache_ttl = cache_ttl

    @property
    def url(self) -> str:
        return f"{self.base_url}/v1/messages"

    def _headers(self) -> dict[str, str]:
        return {"x-api-key": self._api_key, "anthropic-version": API_VERSION,
                "content-type": "application/json", "accept": "application/json"}

    def encode(self, request: Request) -> dict[str, Any]:
        max_tokens = request.max_tokens if request.max_tokens != DEFAULT_MAX_TOKENS else self.max_tokens
        return encode_request(request, model=self.model, stream=self.stream,
                              max_tokens=max_tokens, cache_ttl=self.cache_ttl)

    def decode(self, body: Any) -> Response:
        return decode_response(body)

    def is_message(self, body: Any) -> bool:
        return is_message(body)

    def error(self, status: int, body: Any, headers: Any) -> ProviderHTTPError:
        return error_from_response(status, body, headers)

    def hint(self, status: int) -> str | None:
        return base_url_hint(self.base_url, status)

    def assembler(self, headers: dict[str, str]) -> "MessageAssembler":
        return MessageAssembler(headers)

    def feed_event(self, assembler: "MessageAssembler", event: str | None, data: str) -> None:
        _feed_event(assembler, event, data)


class RoutedAnthropic(AnthropicProvider):
    """
    The Messages API as a cloud serves it (Bedrock, Vertex AI): the same body, events and errors,
    but the model is named in the URL rather than the body, the body carries the cloud's
    ``anthropic_version``, and each attempt is authorised by the cloud's own scheme. A subclass
    gives ``anthropic_version``, ``model_url`` and ``_request_headers``; everything else is this
    adapter's, so the two clouds add a transport and auth around it, not a second copy.
    """

    anthropic_version = ""
    stream_in_body = False  # Vertex keeps ``"stream": true``; Bedrock's URL says it instead

    def model_url(self, model: str) -> str:
        raise NotImplementedError

    @property
    def url(self) -> str:
        return self.model_url(self.model)

    def hint(self, status: int) -> str | None:
        return None  # the path is the cloud's, not a base URL the user may have doubled

    def encode(self, request: Request) -> dict[str, Any]:
        body = super().encode(request)
        body.pop("model", None)
        if not self.stream_in_body:
            body.pop("stream", None)
        return {"anthropic_version": self.anthropic_version, **body}

    async def complete(self, request: Request, *, on_attempt: Any = None,
                       on_text: Any = None) -> Response:
        content = json.dumps(self.encode(request), ensure_ascii=False,
                             separators=(",", ":")).encode()
        return await self._send(content, on_attempt=on_attempt, on_text=on_text,
                                url=self.model_url(request.model or self.model))
