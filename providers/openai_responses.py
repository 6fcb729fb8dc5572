"""
OpenAI's Responses API: the wire mapping (pure functions) and a thin ``ResponsesProvider``.

``encode_request`` maps a neutral request to the body of ``POST {base_url}/responses``:
``instructions`` for the system prompt, ``input`` items for the messages (``message`` with
``input_text`` / ``output_text``, ``function_call``, ``function_call_output``, and this
provider's opaque items — reasoning above all — verbatim, in their place), function tools,
``max_output_tokens`` and ``tool_choice``. ``decode_response`` maps a response object back;
``EventAssembler`` folds the streamed events into the same ``Response``.

**Stateless by default** (decision 0285): ``store: false`` and ``include:
["reasoning.encrypted_content"]``, so every request carries the whole context the harness
rendered and a reasoning model's reasoning comes back as an item we keep — an opaque block of
this provider in the log, which stays the source of truth — and send back verbatim on later
turns. ``store: true`` is opt-in; only then is ``previous_response_id`` sent, and only when the
new input extends, item for item, the input and output of the agent's previous response (after
an eviction, a sweep, a rewind, a ``/clear`` or in a fork it does not, and the whole input goes).

Reasoning items are never sent to another provider: the other adapters drop opaque blocks that
are not theirs, and a reasoning summary is recorded as a thinking block without a signature,
which no adapter sends.
"""

from __future__ import annotations

import json
import random
from typing import Any

import blake3
import httpx
import msgspec

from .base import Request, Response
from .errors import ContextTooLong, ProviderHTTPError, StreamInterrupted, http_error
from .http import HTTPProvider, bearer_json_headers
from .openai import DEFAULT_BASE_URL, base_url_hint, call_ids, error_from_response
from .retry import OnAttempt, RetryPolicy
from .sse import events_of
from ..session.records import Block, Opaque, Text, Thinking, ToolUse, Usage, compact

__all__ = [
    "PROVIDER",
    "DEFAULT_BASE_URL",
    "INCLUDE",
    "encode_input",
    "encode_request",
    "decode_response",
    "decode_usage",
    "EventAssembler",
    "parse_stream",
    "prompt_cache_key",
    "ResponsesProvider",
]

PROVIDER = "openai-responses"
"""The provider name: what ``--provider`` takes and what this adapter's opaque blocks carry."""
INCLUDE = ["reasoning.encrypted_content"]
DEFAULT_MAX_TOKENS = 8192
# response.failed / error codes that say "try again" (the rest are the request's fault)
_RETRIED_CODES = {"server_error", "rate_limit_exceeded", "overloaded", "api_error",
                  "internal_error", "vector_store_timeout", "timeout"}
_TERMINAL = ("response.completed", "response.incomplete")
# What the Codex importer keeps as ``Opaque(provider="openai")`` and this API takes back: a
# reasoning item (a Codex rollout records the Responses API's items). A Chat Completions
# opaque block (``{"audio": …}``, a refusal part) has no ``type`` among these and is not sent.
_FOREIGN_ITEMS = {"reasoning"}


# --------------------------------------------------------------------------- encode


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else compact(value).decode()


def _ours(block: dict[str, Any]) -> dict[str, Any] | None:
    """The input item an opaque block gives back, or None when it belongs to another API."""
    inner = block.get("block")
    if not isinstance(inner, dict):
        return None
    if block.get("provider") == PROVIDER:
        return inner
    if block.get("provider") == "openai" and inner.get("type") in _FOREIGN_ITEMS:
        return inner
    return None


def encode_input(request: Request) -> list[dict[str, Any]]:
    """Neutral messages → ``input`` items, in block order.

    An assistant's adjacent text blocks make one ``message`` of ``output_text`` parts; its
    ``tool_use`` blocks ``function_call`` items (arguments a JSON string); this provider's opaque
    blocks (reasoning items, with their ``encrypted_content``) go verbatim where they stood.
    A user's adjacent texts make one ``message`` of ``input_text`` parts; a tool result is a
    ``function_call_output``. Thinking blocks (a reasoning summary, another provider's
    thinking) are not sent: the reasoning item carries what the model needs.
    """
    out: list[dict[str, Any]] = []
    for msg in request.messages:
        content = msg.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        assistant = msg["role"] == "assistant"
        part = "output_text" if assistant else "input_text"
        texts: list[dict[str, Any]] = []

        def flush() -> None:
            if texts:
                out.append({"type": "message", "role": msg["role"], "content": list(texts)})
                texts.clear()

        for b in content or ():
            kind = b.get("type")
            if kind == "text":
                if b.get("text"):
                    texts.append({"type": part, "text": b["text"]})
                continue
            if kind == "thinking":
                continue
            flush()
            if kind == "tool_use" and assistant:
                out.append({"type": "function_call", "call_id": b["id"], "name": b["name"],
                            "arguments": _arguments(b.get("input", {}))})
            elif kind == "tool_result":
                out.append({"type": "function_call_output", "call_id": b["tool_use_id"],
                            "output": b.get("content", "")})
            elif kind == "opaque":
                item = _ours(b)
                if item is not None:
                    out.append(item)
        flush()
    return out


def _tool_choice(choice: str) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "name": choice}


def _tools(request: Request) -> list[dict[str, Any]]:
    return [{"type": "function", "name": t.name, "description": t.description,
             "parameters": t.input_schema, "strict": False} for t in request.tools]


def prompt_cache_key(request: Request, model: str | None) -> str:
    """One key per lineage: a fork keeps its parent's system prompt, tools and model, and its
    ``meta["lineage"]`` names the lineage's root, so a parent, its mnemon children and a synod's
    members share the key — and with it the machine that holds their common prefix. A fresh
    child is a lineage of its own. Deterministic: no clock, no path, no secret."""
    h = blake3.blake3()
    for part in (str(request.model or model or ""), request.system or "",
                 compact([[t.name, t.description, t.input_schema] for t in request.tools]).decode(),
                 str(request.meta.get("lineage") or request.meta.get("agent") or "")):
        h.update(part.encode())
        h.update(b"\0")
    return "mnemon-" + h.hexdigest()[:24]


def encode_request(request: Request, *, model: str | None = None, stream: bool = False,
                   max_tokens: int | None = None, store: bool = False,
                   input_items: list[dict[str, Any]] | None = None,
                   previous_response_id: str | None = None) -> dict[str, Any]:
    """The JSON body for ``POST {base_url}/responses``.

    ``input_items`` replaces the encoded input (a stored conversation sends only what follows
    ``previous_response_id``)."""
    body: dict[str, Any] = {"model": request.model or model}
    if request.system:
        body["instructions"] = request.system
    body["input"] = encode_input(request) if input_items is None else input_items
    if request.tools:
        body["tools"] = _tools(request)
        if request.tool_choice is not None:
            body["tool_choice"] = _tool_choice(request.tool_choice)
    body["max_output_tokens"] = max_tokens if max_tokens is not None else request.max_tokens
    if request.output is not None:  # a typed answer: strict structured output (decision 0281)
        body["text"] = {"format": {"type": "json_schema", "name": request.output.name,
                                   "schema": request.output.strict(), "strict": True}}
    body["store"] = store
    body["include"] = list(INCLUDE)
    body["prompt_cache_key"] = prompt_cache_key(request, model)
    if previous_response_id is not None:
        body["previous_response_id"] = previous_response_id
    if stream:
        body["stream"] = True
    return body


# --------------------------------------------------------------------------- decode


def decode_usage(usage: dict[str, Any] | None) -> Usage:
    """``input_tokens − cached_tokens`` uncached, ``cached_tokens`` as cache reads, no writes;
    ``reasoning_tokens`` (already inside ``output_tokens``) kept apart."""
    u = usage or {}
    total = int(u.get("input_tokens") or 0)
    cached = int((u.get("input_tokens_details") or {}).get("cached_tokens") or 0)
    reasoning = (u.get("output_tokens_details") or {}).get("reasoning_tokens")
    out = Usage(input_tokens=max(total - cached, 0), output_tokens=int(u.get("output_tokens") or 0),
                cache_read_tokens=cached, cache_write_tokens=0)
    if reasoning is not None:
        out = Usage(input_tokens=out.input_tokens, output_tokens=out.output_tokens,
                    cache_read_tokens=cached, cache_write_tokens=0,
                    reasoning_tokens=int(reasoning))
    return out


def _tool_input(arguments: str) -> Any:
    if arguments == "":
        return {}
    try:
        return json.loads(arguments)
    except json.JSONDecodeError:
        return arguments  # cut by the output limit: kept as the raw string


def decode_output(items: list[dict[str, Any]]) -> tuple[list[Block], bool, bool]:
    """Output items → blocks, whether a function was called, whether the model refused.

    A reasoning item becomes its summary (and reasoning text) as thinking blocks without a
    signature — for reading — followed by the item itself as ``Opaque(PROVIDER)``, which is
    what goes back. Items with no shape of ours (a built-in tool's call) are kept opaque too."""
    blocks: list[Block] = []
    called = refused = False
    for item in items:
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or ():
                if part.get("type") == "output_text" and isinstance(part.get("text"), str):
                    blocks.append(Text(part["text"]))
                elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
                    blocks.append(Text(part["refusal"]))
                    refused = True
        elif kind == "function_call":
            called = True
            blocks.append(ToolUse(str(item.get("call_id") or item.get("id") or ""),
                                  str(item.get("name") or ""),
                                  _tool_input(item.get("arguments") or "")))
        elif kind == "reasoning":
            for key in ("summary", "content"):
                for part in item.get(key) or ():
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        blocks.append(Thinking(part["text"], None))
            blocks.append(Opaque(PROVIDER, item))
        else:
            blocks.append(Opaque(PROVIDER, item))
    return blocks, called, refused


def _stop_reason(status: str | None, details: Any, called: bool, refused: bool) -> str:
    if status == "incomplete":
        reason = (details or {}).get("reason") if isinstance(details, dict) else None
        if reason in ("max_output_tokens", "max_tokens"):
            return "max_tokens"
        if reason == "content_filter":
            return "refusal"
        return str(reason or "max_tokens")
    if called:
        return "tool_use"
    return "refusal" if refused else "end_turn"


def failure(error: Any, headers: dict[str, str] | None = None,
            what: str = "response.failed") -> Exception:
    """The error a failed response or an ``error`` event stands for: retried when the server
    says it was its own trouble, else the request's (named, never retried)."""
    err = error if isinstance(error, dict) else {"message": str(error or "")}
    if isinstance(err.get("error"), dict):  # {"type": "error", "error": {…}}
        err = err["error"]
    code = str(err.get("code") or err.get("type") or "error")
    message = f"{what}: {code}: {err.get('message', '')}"
    if code in _RETRIED_CODES:
        return StreamInterrupted(message, error_type=code, headers=headers)
    if code == "context_length_exceeded":
        return ContextTooLong(400, {"error": err}, headers, message=message)
    return http_error(400, {"error": {**err, "message": message}}, headers)


def decode_response(body: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    """A response object (non-streamed, or the one a terminal event carries) → ``Response``.

    Raises the response's error when its status is ``failed``."""
    if body.get("status") == "failed":
        raise failure(body.get("error"), headers)
    blocks, called, refused = decode_output(list(body.get("output") or ()))
    blocks = call_ids(blocks, str(body.get("id") or ""))
    return Response(blocks=blocks,
                    stop_reason=_stop_reason(body.get("status"), body.get("incomplete_details"),
                                             called, refused),
                    usage=decode_usage(body.get("usage")), model=body.get("model"),
                    id=body.get("id"))


class EventAssembler:
    """
    Folds the streamed events of one response. ``feed(data)`` per SSE ``data`` (the event's
    ``type`` is inside it); ``finish()`` returns the Response, or raises ``StreamInterrupted``
    when neither ``response.completed`` nor ``response.incomplete`` came — a cut stream is
    retried whole, never kept as half a turn. ``response.failed`` and ``error`` raise at once.

    The output is what the ``response.output_item.done`` events carried (the API's advice: a
    reasoning item's ``encrypted_content`` may be incomplete in ``output_item.added``); an item
    whose ``done`` never came is assembled from its ``added`` and its deltas; a terminal
    response whose ``output`` is filled is used when no item event came.
    """

    def __init__(self, headers: dict[str, str] | None = None) -> None:
        self.headers = headers or {}
        self.added: dict[int, dict[str, Any]] = {}
        self.done: dict[int, dict[str, Any]] = {}
        self.text: dict[int, str] = {}
        self.arguments: dict[int, str] = {}
        self.final: dict[str, Any] | None = None
        self.response_id: str | None = None
        self.model: str | None = None
        self.on_text = None  # told each text delta as it arrives (the live preview)

    def feed(self, data: str) -> None:
        if not data.strip() or data.strip() == "[DONE]":
            return
        try:
            ev = json.loads(data)
        except json.JSONDecodeError as exc:
            raise StreamInterrupted("undecodable stream event", headers=self.headers) from exc
        kind = ev.get("type")
        if kind in ("response.created", "response.in_progress", "response.queued"):
            resp = ev.get("response") or {}
            self.response_id = resp.get("id") or self.response_id
            self.model = resp.get("model") or self.model
        elif kind == "response.output_item.added":
            self.added[int(ev.get("output_index") or 0)] = dict(ev["item"])
        elif kind == "response.output_item.done":
            self.done[int(ev.get("output_index") or 0)] = ev["item"]
        elif kind == "response.output_text.delta":
            i = int(ev.get("output_index") or 0)
            self.text[i] = self.text.get(i, "") + ev.get("delta", "")
            if self.on_text is not None and ev.get("delta"):
                self.on_text(ev["delta"])
        elif kind == "response.function_call_arguments.delta":
            i = int(ev.get("output_index") or 0)
            self.arguments[i] = self.arguments.get(i, "") + ev.get("delta", "")
        elif kind == "response.function_call_arguments.done":
            self.arguments[int(ev.get("output_index") or 0)] = ev.get("arguments", "")
        elif kind in _TERMINAL:
            self.final = ev["response"]
        elif kind == "response.failed":
            raise failure((ev.get("response") or {}).get("error"), self.headers)
        elif kind == "error":
            raise failure(ev, self.headers, what="error event")
        # every other event (content parts, reasoning summary deltas, annotations…) adds
        # nothing that output_item.done does not carry whole

    def _items(self) -> list[dict[str, Any]]:
        out = []
        for i in sorted(set(self.added) | set(self.done)):
            item = self.done.get(i)
            if item is None:
                item = dict(self.added[i])
                if item.get("type") == "function_call" and i in self.arguments:
                    item["arguments"] = self.arguments[i]
                elif item.get("type") == "message" and i in self.text:
                    item["content"] = [{"type": "output_text", "text": self.text[i]}]
            out.append(item)
        return out

    def finish(self) -> Response:
        if self.final is None:
            raise StreamInterrupted("stream ended without response.completed",
                                    headers=self.headers)
        final = dict(self.final)
        items = self._items()
        if items or not final.get("output"):
            final["output"] = items
        final.setdefault("model", self.model)
        final["id"] = final.get("id") or self.response_id
        return decode_response(final, self.headers)


def parse_stream(raw: bytes, headers: dict[str, str] | None = None) -> Response:
    """A whole recorded SSE body → ``Response``."""
    assembler = EventAssembler(headers)
    for ev in events_of(raw):
        if ev.data:
            assembler.feed(ev.data)
    return assembler.finish()


# --------------------------------------------------------------------------- stored chains


class _Chain:
    """What a stored conversation continues from: one agent's last response, and the digest
    of the input items its next request must begin with for ``previous_response_id`` to stand
    for them (a digest, not the items: a job's thousands of agents keep 50 bytes each)."""

    __slots__ = ("response_id", "length", "digest", "config")

    def __init__(self, response_id: str, prefix: list[dict[str, Any]], config: bytes):
        self.response_id = response_id
        self.length = len(prefix)
        self.digest = _digest(prefix)
        self.config = config


def _digest(items: list[dict[str, Any]]) -> bytes:
    return blake3.blake3(compact(items)).digest()


def _config(body: dict[str, Any]) -> bytes:
    return _digest([body.get("model"), body.get("instructions"), body.get("tools")])


def continuation(chain: _Chain | None, body: dict[str, Any]) -> tuple[str, int] | None:
    """``(previous_response_id, items it stands for)`` when ``body``'s input extends the
    chain's prefix item for item under the same model, instructions and tools; else None —
    the table changed (an eviction, a sweep, a rewind, a clear) and the whole input goes."""
    if chain is None or _config(body) != chain.config:
        return None
    items = body["input"]
    n = chain.length
    if len(items) <= n or _digest(items[:n]) != chain.digest:
        return None
    return chain.response_id, n


# --------------------------------------------------------------------------- sending


class ResponsesProvider(HTTPProvider):
    """
    Sends requests to ``{base_url}/responses`` through an injected ``httpx.AsyncClient``.

    Args:
        client: the HTTP client; None makes (and owns) one.
        api_key: sent as ``Authorization: Bearer``; may be empty for a local server. Never
            logged, recorded or shown in ``repr``.
        model: used when the request names none.
        base_url: includes ``/v1``, as in the official SDK.
        stream: stream (SSE) or wait for the whole body.
        max_tokens: used as ``max_output_tokens`` when the request keeps the default.
        store: ``False`` (the default) sends ``store: false`` and the whole context every
            time; ``True`` stores responses server-side and continues an agent's conversation
            with ``previous_response_id`` while its context only grows.

    Resource handling:
        ``aclose()`` (or ``async with``) closes the client only if the provider made it.
    """

    name = PROVIDER

    def __init__(self, client: httpx.AsyncClient | None, api_key: str, model: str, *,
                 base_url: str = DEFAULT_BASE_URL, stream: bool = True,
                 max_tokens: int = DEFAULT_MAX_TOKENS, store: bool = False,
                 retry: RetryPolicy | None = None, rng: random.Random | None = None,
                 timeout: float = 600.0) -> None:
        super().__init__(client, api_key, model, base_url=base_url, stream=stream,
                         max_tokens=max_tokens, retry=retry, rng=rng, timeout=timeout)
        self.store = store
        self._chains: dict[str, _Chain] = {}

    @property
    def url(self) -> str:
        return f"{self.base_url}/responses"

    def _headers(self) -> dict[str, str]:
        return bearer_json_headers(self._api_key)

    def _max_tokens(self, request: Request) -> int:
        return request.max_tokens if request.max_tokens != DEFAULT_MAX_TOKENS else self.max_tokens

    def encode(self, request: Request) -> dict[str, Any]:
        """The whole body, stateless: what ``store: false`` sends every time."""
        return encode_request(request, model=self.model, stream=self.stream,
                              max_tokens=self._max_tokens(request), store=self.store)

    async def complete(self, request: Request, *, on_attempt: OnAttempt | None = None,
                       on_text=None) -> Response:
        """One request, retried per ``RetryPolicy`` (``HTTPProvider.complete``). With
        ``store`` on, the body continues the agent's stored conversation where its input
        allows it (``continuation``), and the response becomes the next one's chain."""
        agent = request.meta.get("agent")
        body = self.encode(request)
        full = body["input"]
        if self.store and agent is not None:
            cont = continuation(self._chains.get(agent), body)
            if cont is not None:
                body["previous_response_id"] = cont[0]
                body["input"] = full[cont[1]:]
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        response = await self._send(content, on_attempt=on_attempt, on_text=on_text)
        if self.store and agent is not None:
            if response.id:
                prefix = full + encode_input(Request(system=None, messages=[
                    {"role": "assistant", "content": [_neutral(b) for b in response.blocks]}]))
                self._chains[agent] = _Chain(response.id, prefix, _config(body))
            else:
                self._chains.pop(agent, None)
        return response

    def decode(self, body: Any) -> Response:
        return decode_response(body)

    def is_message(self, body: Any) -> bool:
        """A response object (a failed one too: ``decode`` raises its error)."""
        return isinstance(body, dict) and (body.get("object") == "response"
                                           or isinstance(body.get("output"), list))

    def error(self, status: int, body: Any, headers: Any) -> ProviderHTTPError:
        return error_from_response(status, body, headers)

    def hint(self, status: int) -> str | None:
        return base_url_hint(self.base_url, status, "/responses")

    def assembler(self, headers: dict[str, str]) -> EventAssembler:
        return EventAssembler(headers)

    def feed_event(self, assembler: EventAssembler, event: str | None, data: str) -> None:
        if data:
            assembler.feed(data)


def _neutral(block: Block) -> dict[str, Any]:
    """A decoded block as the renderer will send it back (its neutral dict)."""
    return msgspec.to_builtins(block)
