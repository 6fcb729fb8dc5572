"""
Google's Gemini: the ``generateContent`` wire (pure functions) and two thin providers, one for
the Gemini API (``generativelanguage.googleapis.com``, an API key) and one for Gemini on Vertex
AI (``{location}-aiplatform.googleapis.com``, a bearer token). The body and the answer are the
same on both; only the URL and the credential differ.

``encode_request`` maps a neutral request to ``{contents, systemInstruction, tools, toolConfig,
generationConfig}``: roles ``user`` / ``model``, tool calls as ``functionCall`` parts and their
results as ``functionResponse`` parts (named: Gemini matches a response to its call by name, and
by ``id`` when the call had one), tool schemas as ``parametersJsonSchema`` (JSON Schema as
written, not the OpenAPI subset ``parameters`` takes). ``decode_response`` maps an answer back;
``ChunkAssembler`` folds ``streamGenerateContent?alt=sse`` chunks into the same ``Response``.

**Thought signatures** (decision 0410). A thinking model signs its reasoning: any part of its
answer may carry an opaque ``thoughtSignature`` that must go back, on the same part, in later
turns (function calling fails without it on Gemini 3). The signature is kept as an opaque block
of this provider placed right *before* the block of the part that carried it,
``Opaque("gemini", {"thoughtSignature": …})``; the encoder puts it back on the next part it
writes. A part with no neutral shape (a signed empty text part that ends a stream, code
execution, inline data) is kept whole, ``Opaque("gemini", {"part": …})``, and sent back verbatim
in its place. Thought summaries (``thought: true``) are recorded as unsigned thinking blocks,
which no adapter sends; a summary that carried a signature goes back as the thought part it was.
Signed parts are never merged with others when a stream is folded (the API forbids it); unsigned
text deltas are.

Usage follows the on-disk meaning: ``input_tokens`` = ``promptTokenCount`` +
``toolUsePromptTokenCount`` − ``cachedContentTokenCount`` (implicit caching: reads only, no write
surcharge), ``output_tokens`` = ``candidatesTokenCount`` + ``thoughtsTokenCount`` (thinking is
billed as output), ``reasoning_tokens`` = ``thoughtsTokenCount``.
"""

from __future__ import annotations

import datetime
import importlib
import json
import random
import re
import time
from typing import Any, Callable
from urllib.parse import quote

import httpx
import msgspec

from .base import Request, Response, ToolDef
from .errors import (ProviderConfigError, ProviderHTTPError, StreamInterrupted, http_error)
from .http import HTTPProvider
from .openai import call_ids
from .retry import RetryPolicy
from .sse import events_of
from .typed import OUTPUT_TOOL, OUTPUT_TOOL_DESCRIPTION, tool_schema
from ..session.records import Block, Opaque, Text, Thinking, ToolUse, Usage

__all__ = [
    "PROVIDER",
    "DEFAULT_BASE_URL",
    "VERTEX_SCOPE",
    "STOP_REASONS",
    "thinks",
    "encode_request",
    "decode_response",
    "decode_usage",
    "is_message",
    "ChunkAssembler",
    "parse_stream",
    "error_from_response",
    "vertex_base_url",
    "GeminiProvider",
    "VertexGeminiProvider",
]

PROVIDER = "gemini"
"""What this adapter's opaque blocks carry, on both surfaces (the wire is one)."""
DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"
VERTEX_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
DEFAULT_MAX_TOKENS = 8192
STOP_REASONS = {
    "STOP": "end_turn",
    "MAX_TOKENS": "max_tokens",
    "SAFETY": "refusal",
    "RECITATION": "refusal",
    "BLOCKLIST": "refusal",
    "PROHIBITED_CONTENT": "refusal",
    "SPII": "refusal",
    "IMAGE_SAFETY": "refusal",
    "LANGUAGE": "refusal",
    "MALFORMED_FUNCTION_CALL": "malformed_function_call",
    "UNEXPECTED_TOOL_CALL": "malformed_function_call",
}
_CONTEXT_RE = re.compile(
    r"input token count.{0,40}exceeds|exceeds the maximum number of tokens|context window|"
    r"too many tokens", re.IGNORECASE)
_VERSION_RE = re.compile(r"gemini-(\d{1,3})(?:\.(\d{1,3}))?")
_GENERATED_ID = re.compile(r"call_[0-9a-f]{24}")
# stream errors that say "try again": Google's status names and HTTP codes for them
_RETRIED = {"RESOURCE_EXHAUSTED", "UNAVAILABLE", "INTERNAL", "DEADLINE_EXCEEDED", "ABORTED"}
_RETRY_DELAY = re.compile(r"(\d{1,6}(?:\.\d{1,9})?)s")


def thinks(model: str | None) -> bool:
    """Whether ``model`` is a thinking Gemini (2.5 and later): only those take a
    ``thinkingConfig`` (an older model refuses the request that has one)."""
    m = _VERSION_RE.search((model or "").lower())
    if m is None:
        return False
    major, minor = int(m.group(1)), int(m.group(2) or 0)
    return (major, minor) >= (2, 5)


# --------------------------------------------------------------------------- encode


def _tool_names(request: Request) -> dict[str, str]:
    """Each tool call's id → its name: a ``functionResponse`` must name its function, and a
    neutral tool result holds only the call's id."""
    names: dict[str, str] = {}
    for msg in request.messages:
        if msg.get("role") != "assistant" or isinstance(msg.get("content"), str):
            continue
        for b in msg.get("content") or ():
            if b.get("type") == "tool_use":
                names[b["id"]] = b["name"]
    return names


def _given_id(call_id: str | None) -> str | None:
    """The id to send back with a call or its result: the one the model gave, never one this
    adapter made up for a call that came without (``openai.call_ids``)."""
    if not call_id or _GENERATED_ID.fullmatch(call_id):
        return None
    return call_id


def _model_parts(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An assistant message's blocks → ``model`` parts, each signature back on its part."""
    parts: list[dict[str, Any]] = []
    signature: str | None = None
    for b in blocks:
        kind = b.get("type")
        part: dict[str, Any] | None = None
        if kind == "opaque":
            if b.get("provider") != PROVIDER or not isinstance(b.get("block"), dict):
                continue  # another provider's: not ours to send
            inner = b["block"]
            if isinstance(inner.get("thoughtSignature"), str):
                signature = inner["thoughtSignature"]
            elif isinstance(inner.get("part"), dict):
                parts.append(inner["part"])
                signature = None
            continue
        if kind == "text" and b.get("text"):
            part = {"text": b["text"]}
        elif kind == "tool_use":
            call: dict[str, Any] = {"name": b["name"], "args": _args(b.get("input"))}
            if _given_id(b.get("id")):
                call["id"] = b["id"]
            part = {"functionCall": call}
        elif kind == "thinking" and signature is not None:
            part = {"text": b.get("text", ""), "thought": True}
        if part is None:
            continue
        if signature is not None:
            part["thoughtSignature"] = signature
            signature = None
        parts.append(part)
    return parts


def _args(value: Any) -> dict[str, Any]:
    """A call's arguments as Gemini takes them: an object (a call cut mid-JSON was recorded as
    its raw string, which goes back under one key rather than being lost)."""
    if isinstance(value, dict):
        return value
    if value is None:
        return {}
    return {"arguments": value}


def encode_contents(request: Request) -> list[dict[str, Any]]:
    """Neutral messages → ``contents`` (a message with no part Gemini takes is left out: the
    API refuses an empty ``parts``)."""
    names = _tool_names(request)
    out: list[dict[str, Any]] = []
    for msg in request.messages:
        content = msg.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        blocks = list(content or ())
        if msg["role"] == "assistant":
            parts = _model_parts(blocks)
            if parts:
                out.append({"role": "model", "parts": parts})
            continue
        parts = []
        for b in blocks:
            if b.get("type") == "tool_result":
                key = "error" if b.get("is_error") else "output"
                answer: dict[str, Any] = {
                    "name": names.get(b["tool_use_id"], "unknown"),
                    "response": {key: b.get("content", "")}}
                if _given_id(b["tool_use_id"]):
                    answer["id"] = b["tool_use_id"]
                parts.append({"functionResponse": answer})
            elif b.get("type") == "text" and b.get("text"):
                parts.append({"text": b["text"]})
        if parts:
            out.append({"role": "user", "parts": parts})
    return out


def encode_request(request: Request, *, model: str | None = None,
                   max_tokens: int | None = None) -> dict[str, Any]:
    """The JSON body of ``models/{model}:generateContent`` (and of its streaming twin: the
    body is the same, the method and ``alt=sse`` differ). A typed request (``request.output``)
    offers one more tool, last: the final-answer tool, whose parameters are the output type
    (decision 0281, as Anthropic's)."""
    body: dict[str, Any] = {"contents": encode_contents(request)}
    if request.system:
        body["systemInstruction"] = {"parts": [{"text": request.system}]}
    tools = list(request.tools)
    if request.output is not None:
        tools.append(ToolDef(OUTPUT_TOOL, OUTPUT_TOOL_DESCRIPTION, tool_schema(request.output)))
    if tools:
        body["tools"] = [{"functionDeclarations": [
            {"name": t.name, "description": t.description, "parametersJsonSchema": t.input_schema}
            for t in tools]}]
        if request.tool_choice is not None:
            mode = {"auto": "AUTO", "none": "NONE", "required": "ANY"}.get(request.tool_choice)
            config: dict[str, Any] = {"mode": mode or "ANY"}
            if mode is None:
                config["allowedFunctionNames"] = [request.tool_choice]
            body["toolConfig"] = {"functionCallingConfig": config}
    generation: dict[str, Any] = {
        "maxOutputTokens": max_tokens if max_tokens is not None else request.max_tokens}
    if thinks(request.model or model):
        generation["thinkingConfig"] = {"includeThoughts": True}
    body["generationConfig"] = generation
    return body


# --------------------------------------------------------------------------- decode


def decode_usage(usage: dict[str, Any] | None) -> Usage:
    """``usageMetadata`` → ``Usage`` (see the module's docstring)."""
    u = usage or {}
    prompt = int(u.get("promptTokenCount") or 0) + int(u.get("toolUsePromptTokenCount") or 0)
    cached = int(u.get("cachedContentTokenCount") or 0)
    thoughts = u.get("thoughtsTokenCount")
    out = int(u.get("candidatesTokenCount") or 0) + int(thoughts or 0)
    usage_ = Usage(input_tokens=max(prompt - cached, 0), output_tokens=out,
                   cache_read_tokens=cached, cache_write_tokens=0)
    if thoughts is not None:
        usage_ = msgspec.structs.replace(usage_, reasoning_tokens=int(thoughts))
    return usage_


def _blocks_of(part: dict[str, Any]) -> list[Block]:
    """One answer part → its blocks: the signature's opaque block first when it has one."""
    signature = part.get("thoughtSignature")
    lead: list[Block] = [Opaque(PROVIDER, {"thoughtSignature": signature})] \
        if isinstance(signature, str) else []
    if "functionCall" in part and isinstance(part["functionCall"], dict):
        call = part["functionCall"]
        args = call.get("args")
        return lead + [ToolUse(str(call.get("id") or ""), str(call.get("name", "")),
                               args if args is not None else {})]
    text = part.get("text")
    if isinstance(text, str) and text and set(part) <= {"text", "thought", "thoughtSignature"}:
        return lead + [Thinking(text, None) if part.get("thought") else Text(text)]
    return [Opaque(PROVIDER, {"part": part})]  # kept whole, sent back whole


def _stop(reason: str | None, blocks: list[Block], blocked: bool = False) -> str | None:
    if blocked:
        return "refusal"
    if reason is None:
        return None
    stop = STOP_REASONS.get(reason, reason.lower())
    if stop == "end_turn" and any(type(b) is ToolUse for b in blocks):
        return "tool_use"  # Gemini says STOP after a call; the log pairs calls with tool_use
    return stop


def is_message(body: Any) -> bool:
    """Whether a whole JSON body is a ``GenerateContentResponse`` (a blocked prompt's, with
    ``promptFeedback`` and no candidates, too), or the JSON array of them that
    ``streamGenerateContent`` answers without ``alt=sse`` (a proxy may drop the parameter)."""
    if isinstance(body, list):
        return bool(body) and all(is_message(b) and isinstance(b, dict) for b in body)
    return isinstance(body, dict) and (isinstance(body.get("candidates"), list)
                                       or isinstance(body.get("promptFeedback"), dict))


def _seed(body: dict[str, Any]) -> str:
    return f"{body.get('responseId')}\0{body.get('createTime') or body.get('modelVersion')}"


def decode_response(body: dict[str, Any]) -> Response:
    """A non-streamed ``GenerateContentResponse`` → ``Response``."""
    candidate = (body.get("candidates") or [{}])[0]
    blocks: list[Block] = []
    for part in (candidate.get("content") or {}).get("parts") or ():
        if isinstance(part, dict):
            blocks.extend(_blocks_of(part))
    blocks = call_ids(blocks, _seed(body))
    blocked = not body.get("candidates") and bool(
        (body.get("promptFeedback") or {}).get("blockReason"))
    return Response(blocks=blocks, stop_reason=_stop(candidate.get("finishReason"), blocks,
                                                     blocked),
                    usage=decode_usage(body.get("usageMetadata")),
                    model=body.get("modelVersion"), id=body.get("responseId"))


class ChunkAssembler:
    """
    Folds ``streamGenerateContent?alt=sse`` chunks (each a ``GenerateContentResponse`` holding
    the parts new since the last). ``feed(data)`` per SSE ``data`` line; ``finish()`` returns the
    Response, or raises ``StreamInterrupted`` when no chunk said why the answer ended (Gemini
    sends no end marker: the ``finishReason`` is the end).
    """

    def __init__(self, headers: dict[str, str] | None = None) -> None:
        self.headers = headers or {}
        self.parts: list[dict[str, Any]] = []
        self.finish_reason: str | None = None
        self.blocked = False
        self.usage: dict[str, Any] | None = None
        self.model: str | None = None
        self.id: str | None = None
        self.seed = ""
        self.on_text: Callable[[str], None] | None = None

    def _add(self, part: dict[str, Any]) -> None:
        """Append a part, joining an unsigned text delta to the unsigned text before it of the
        same kind (answer or thought); a signed part stands alone, as the API requires."""
        last = self.parts[-1] if self.parts else None
        plain = set(part) <= {"text", "thought"} and isinstance(part.get("text"), str)
        if (plain and last is not None and set(last) <= {"text", "thought"}
                and isinstance(last.get("text"), str)
                and bool(last.get("thought")) == bool(part.get("thought"))):
            last["text"] += part["text"]
        else:
            self.parts.append(dict(part))
        text = part.get("text")
        if isinstance(text, str) and text and not part.get("thought") and self.on_text:
            self.on_text(text)

    def feed(self, data: str) -> None:
        try:
            chunk = json.loads(data)
        except json.JSONDecodeError as exc:
            raise StreamInterrupted("undecodable stream chunk") from exc
        if isinstance(chunk, list):  # the JSON-array framing, one element per chunk
            for each in chunk:
                self.feed(json.dumps(each))
            return
        if not isinstance(chunk, dict):
            raise StreamInterrupted("stream chunk that is not an object")
        if "error" in chunk:
            err = chunk["error"] if isinstance(chunk["error"], dict) else \
                {"message": chunk["error"]}
            status = str(err.get("status") or "")
            code = err.get("code") if isinstance(err.get("code"), int) else 0
            if status in _RETRIED or code in (429, 500, 503, 504):
                raise StreamInterrupted(f"error event mid-stream: {status or code}: "
                                        f"{err.get('message', '')}", error_type=status or None,
                                        headers=self.headers)
            raise error_from_response(code or 400, chunk, self.headers)
        self.model = chunk.get("modelVersion") or self.model
        self.id = chunk.get("responseId") or self.id
        self.seed = self.seed or _seed(chunk)
        if chunk.get("usageMetadata"):
            self.usage = chunk["usageMetadata"]
        if (chunk.get("promptFeedback") or {}).get("blockReason"):
            self.blocked = True
        candidates = chunk.get("candidates") or ()
        if candidates:
            candidate = candidates[0]
            for part in (candidate.get("content") or {}).get("parts") or ():
                if isinstance(part, dict):
                    self._add(part)
            if candidate.get("finishReason"):
                self.finish_reason = candidate["finishReason"]

    def finish(self) -> Response:
        if self.finish_reason is None and not self.blocked:
            raise StreamInterrupted("stream ended without a finishReason", headers=self.headers)
        blocks: list[Block] = []
        for part in self.parts:
            blocks.extend(_blocks_of(part))
        blocks = call_ids(blocks, self.seed)
        return Response(blocks=blocks, stop_reason=_stop(self.finish_reason, blocks,
                                                         self.blocked),
                        usage=decode_usage(self.usage), model=self.model, id=self.id)


def parse_stream(raw: bytes, headers: dict[str, str] | None = None) -> Response:
    """A whole recorded SSE body → ``Response``."""
    assembler = ChunkAssembler(headers)
    for ev in events_of(raw):
        if ev.data:
            assembler.feed(ev.data)
    return assembler.finish()


def _retry_delay(body: Any) -> str | None:
    """A ``google.rpc.RetryInfo`` detail's ``retryDelay`` (``"30s"``) in seconds, as the
    ``retry-after`` the retry loop honours (Google sends the wait in the body, not a header)."""
    details = body.get("error", {}).get("details") if isinstance(body, dict) and \
        isinstance(body.get("error"), dict) else None
    for d in details if isinstance(details, list) else ():
        if isinstance(d, dict) and str(d.get("@type", "")).endswith("google.rpc.RetryInfo"):
            m = _RETRY_DELAY.fullmatch(str(d.get("retryDelay", "")))
            if m:
                return m.group(1)
    return None


def error_from_response(status: int, body: Any, headers: Any) -> ProviderHTTPError:
    """The provider error for an HTTP error answer: Google's ``{"error": {code, message,
    status, details}}`` (a streaming request's may come as a one-element list), a too-long
    prompt spotted by its wording, and a ``RetryInfo`` delay made the ``retry-after``."""
    if isinstance(body, list) and len(body) == 1 and isinstance(body[0], dict):
        body = body[0]
    message = ""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        message = str(body["error"].get("message", ""))
    elif isinstance(body, str):
        message = body
    hdrs = {str(k).lower(): str(v) for k, v in dict(headers).items()}
    delay = _retry_delay(body)
    if delay is not None and "retry-after" not in hdrs:
        hdrs["retry-after"] = delay
    too_long = status in (400, 413) and bool(_CONTEXT_RE.search(message[:2000]))
    return http_error(status, body, hdrs, context_too_long=too_long)


# --------------------------------------------------------------------------- sending


class GeminiProvider(HTTPProvider):
    """
    The Gemini API: ``POST {base_url}/models/{model}:streamGenerateContent?alt=sse`` (or
    ``:generateContent``) through an injected ``httpx.AsyncClient``.

    Args:
        client: the HTTP client; None makes (and owns) one.
        api_key: sent as ``x-goog-api-key`` (never in the URL, where logs keep it); never
            logged, recorded or shown in ``repr``.
        model: used when the request names none (``gemini-2.5-pro``).
        base_url: up to the API version (``…/v1beta``); the adapter adds ``/models/…``.
        stream: stream (SSE) or wait for the whole body.
        max_tokens: ``maxOutputTokens`` when the request keeps the default.

    Resource handling:
        ``aclose()`` (or ``async with``) closes the client only if the provider made it.
    """

    name = PROVIDER
    output_mode = "tool"  # a typed answer is a final-answer tool: every model takes tools
    # alongside, not every one a response schema (decision 0410)

    def __init__(self, client: httpx.AsyncClient | None, api_key: str, model: str, *,
                 base_url: str = DEFAULT_BASE_URL, stream: bool = True,
                 max_tokens: int = DEFAULT_MAX_TOKENS, retry: RetryPolicy | None = None,
                 rng: random.Random | None = None, timeout: float = 600.0) -> None:
        super().__init__(client, api_key, model, base_url=base_url, stream=stream,
                         max_tokens=max_tokens, retry=retry, rng=rng, timeout=timeout)

    def _models(self) -> str:
        """Where ``/{model}:method`` goes under the base URL."""
        return f"{self.base_url}/models"

    def _model_url(self, model: str) -> str:
        method = "streamGenerateContent?alt=sse" if self.stream else "generateContent"
        return f"{self._models()}/{quote(model, safe='.-_@')}:{method}"

    @property
    def url(self) -> str:
        return self._model_url(self.model)

    def url_for(self, request: Request) -> str:
        return self._model_url(request.model or self.model)

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "application/json"}
        if self._api_key:
            headers["x-goog-api-key"] = self._api_key
        return headers

    def encode(self, request: Request) -> dict[str, Any]:
        max_tokens = request.max_tokens if request.max_tokens != DEFAULT_MAX_TOKENS \
            else self.max_tokens
        return encode_request(request, model=self.model, max_tokens=max_tokens)

    def decode(self, body: Any) -> Response:
        if isinstance(body, list):  # the JSON-array stream: folded as the SSE one is
            assembler = ChunkAssembler()
            for chunk in body:
                assembler.feed(json.dumps(chunk))
            return assembler.finish()
        return decode_response(body)

    def is_message(self, body: Any) -> bool:
        return is_message(body)

    def error(self, status: int, body: Any, headers: Any) -> ProviderHTTPError:
        return error_from_response(status, body, headers)

    def assembler(self, headers: dict[str, str]) -> ChunkAssembler:
        return ChunkAssembler(headers)

    def feed_event(self, assembler: ChunkAssembler, event: str | None, data: str) -> None:
        if data:
            assembler.feed(data)


def vertex_base_url(project: str, location: str, root: str | None = None) -> str:
    """A project's location on Vertex AI, under which ``/publishers/google/models/…`` goes:
    ``root`` (``--base-url``: a proxy, a test) stands for ``https://{host}/v1``, the regional
    host (``global`` has none of its own)."""
    if root is None:
        host = "aiplatform.googleapis.com" if location == "global" \
            else f"{location}-aiplatform.googleapis.com"
        root = f"https://{host}/v1"
    return (f"{root.rstrip('/')}/projects/{quote(project, safe='-')}"
            f"/locations/{quote(location, safe='-')}")


class VertexGeminiProvider(GeminiProvider):
    """
    Gemini on Vertex AI: ``POST {base_url}/publishers/google/models/{model}:…`` with a bearer
    token — the body and the answer are the Gemini API's.

    Args:
        token: a ready OAuth access token (``GOOGLE_OAUTH_ACCESS_TOKEN``), or a callable that
            returns one (Application Default Credentials, refreshed when near expiry). Never
            logged, recorded or shown in ``repr``.
        base_url: ``vertex_base_url(project, location)``, or a proxy's equivalent.
    """

    name = "vertex"

    def __init__(self, client: httpx.AsyncClient | None, token: str | Callable[[], str],
                 model: str, *, base_url: str, **kw: Any) -> None:
        super().__init__(client, token if isinstance(token, str) else "", model,
                         base_url=base_url, **kw)
        self._token = token

    def _models(self) -> str:
        return f"{self.base_url}/publishers/google/models"

    def _headers(self) -> dict[str, str]:
        token = self._token if isinstance(self._token, str) else self._token()
        return {"content-type": "application/json", "accept": "application/json",
                "authorization": f"Bearer {token}"}


def adc_token(scopes: tuple[str, ...] = (VERTEX_SCOPE,)) -> Callable[[], str]:
    """A token source over Application Default Credentials (``google-auth``, the ``vertex``
    extra): the token refreshed when it has under five minutes left. The refresh is a blocking
    HTTP call made at most once an hour, in the attempt that needs it."""
    # google-auth ships no type information: imported by name, its objects are Any
    try:
        auth = importlib.import_module("google.auth")
        transport = importlib.import_module("google.auth.transport.requests")
    except ImportError:
        raise ProviderConfigError(
            "GOOGLE_OAUTH_ACCESS_TOKEN is not set, and Application Default Credentials need "
            "the vertex extra: pip install 'mnemon[vertex]'") from None
    try:
        credentials, _ = auth.default(scopes=list(scopes))
    except Exception as e:  # noqa: BLE001 — google.auth's DefaultCredentialsError and kin
        raise ProviderConfigError(
            f"no Application Default Credentials ({type(e).__name__}); set "
            "GOOGLE_OAUTH_ACCESS_TOKEN or run gcloud auth application-default login") from None

    def token() -> str:
        expiry = getattr(credentials, "expiry", None)  # google-auth keeps it naive, in UTC
        if expiry is not None and expiry.tzinfo is None:
            expiry = expiry.replace(tzinfo=datetime.timezone.utc)
        left = None if expiry is None else expiry.timestamp() - time.time()
        if not getattr(credentials, "token", None) or (left is not None and left < 300):
            credentials.refresh(transport.Request())
        return str(credentials.token)

    return token
