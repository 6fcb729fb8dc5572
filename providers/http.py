"""The sending half every HTTP adapter shares: one POST per attempt, retried by policy.

An adapter supplies only its wire: ``url``, ``_headers``, ``encode`` (neutral request → JSON
body), ``decode`` (a whole JSON body → Response), ``error`` (status, body, headers → the error
tree) and, for streams, an assembler it feeds SSE events to; ``is_message`` (is a whole JSON
body the API's message?) and ``hint`` (a likely cause of an error status) are optional. Errors
from httpx are translated at one boundary (``map_httpx_errors``), and every error names the URL.

A success answer is read by what it is, not only by what was asked: JSON in the API's message
shape is the answer even to a streaming request; a body that is neither that nor a stream is
``NotAnAnswer`` and is not retried (decision 0325).
"""

from __future__ import annotations

import json
import random
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from typing import Any, Callable

import httpx

from .base import Request, Response
from .errors import (EXCERPT_CHARS, MalformedResponse, NotAnAnswer, ProviderHTTPError,
                     map_httpx_errors, safe_url)

# what a response of the wrong shape raises in a decoder (a ProviderError is raised as it is)
_SHAPE_ERRORS = (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError)
from .retry import OnAttempt, RetryPolicy, call_with_retry
from .sse import SSEDecoder


def _is_json(ctype: str | None) -> bool:
    """``application/json`` and its ``+json`` kin, parameters aside."""
    kind = (ctype or "").split(";", 1)[0].strip().lower()
    return kind == "application/json" or kind.endswith("+json")


def _is_sse(ctype: str | None) -> bool:
    return (ctype or "").split(";", 1)[0].strip().lower() == "text/event-stream"


async def _once(raw: bytes) -> AsyncIterator[bytes]:
    yield raw


def json_or_text(resp: httpx.Response) -> Any:
    try:
        return resp.json()
    except ValueError:
        return resp.text


def bearer_json_headers(api_key: str | None) -> dict[str, str]:
    """JSON in and out, and the key as a bearer token when there is one (OpenAI's APIs)."""
    headers = {"content-type": "application/json", "accept": "application/json"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    return headers


class HTTPProvider(ABC):
    """
    Resource handling:
        ``aclose()`` (or ``async with``) closes the client only if the provider made it.
    """

    name = "http"

    def __init__(self, client: httpx.AsyncClient | None, api_key: str, model: str, *,
                 base_url: str, stream: bool, max_tokens: int, retry: RetryPolicy | None,
                 rng: random.Random | None, timeout: float) -> None:
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=10.0))
        self._api_key = api_key
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.stream = stream
        self.max_tokens = max_tokens
        self.retry = retry or RetryPolicy()
        self._rng = rng or random.Random()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    # ------------------------------------------------------------------ the adapter's wire

    @property
    @abstractmethod
    def url(self) -> str: ...

    @abstractmethod
    def _headers(self) -> dict[str, str]: ...

    @abstractmethod
    def encode(self, request: Request) -> dict[str, Any]: ...

    @abstractmethod
    def decode(self, body: Any) -> Response: ...

    @abstractmethod
    def error(self, status: int, body: Any, headers: Any) -> ProviderHTTPError: ...

    @abstractmethod
    def assembler(self, headers: dict[str, str]) -> Any:
        """The stream's assembler: fed by ``feed_event``, closed by ``finish() -> Response``."""

    @abstractmethod
    def feed_event(self, assembler: Any, event: str | None, data: str) -> None: ...

    # ------------------------------------------------------------------ sending

    streams_text = True  # ``complete`` takes ``on_text``

    async def complete(self, request: Request, *, on_attempt: OnAttempt | None = None,
                       on_text: Callable[[str], None] | None = None) -> Response:
        """
        One request, retried per ``RetryPolicy``; ``on_attempt`` is told about every attempt,
        ``on_text`` about each piece of answer text as it streams (a preview: a retried attempt
        streams again; the recorded turn is the finished response).

        Cancellation:
            Safe: a cancelled attempt leaves nothing behind and is not retried.
        """
        content = json.dumps(self.encode(request), ensure_ascii=False,
                             separators=(",", ":")).encode()
        return await self._send(content, on_attempt=on_attempt, on_text=on_text,
                                url=self.url_for(request))

    def url_for(self, request: Request) -> str:
        """Where ``request`` goes: ``url``, unless the adapter's URL names the model (Gemini's
        ``models/{m}:generateContent``, an Azure deployment), which a request may choose."""
        return self.url

    async def _send(self, content: bytes, *, on_attempt: OnAttempt | None = None,
                    on_text: Callable[[str], None] | None = None,
                    url: str | None = None) -> Response:
        """POST an encoded body, retried per ``RetryPolicy`` (an adapter that shapes its body
        per conversation — the Responses API's stored chains — encodes it itself; one whose URL
        names the model — Bedrock, Vertex — passes ``url``)."""
        return await call_with_retry(lambda: self._attempt(content, on_text, url),
                                     policy=self.retry, on_attempt=on_attempt, rng=self._rng)

    async def _attempt(self, content: bytes, on_text: Callable[[str], None] | None = None,
                       url: str | None = None) -> Response:
        url = url or self.url
        with map_httpx_errors(url):
            headers = await self._request_headers(url, content)
            async with self._client.stream("POST", url, content=content,
                                           headers=headers) as resp:
                if resp.status_code >= 400:
                    await resp.aread()
                    raise self.error(resp.status_code, json_or_text(resp),
                                     resp.headers).located(url, self.hint(resp.status_code))
                ctype = resp.headers.get("content-type")
                try:
                    if not self.stream or _is_json(ctype):
                        await resp.aread()
                        answer = self._whole(resp.content, ctype)
                        if answer is not None:
                            return answer
                        # a stream labelled JSON: read as the stream it is
                        return await self._fold(resp.headers, _once(resp.content), on_text,
                                                ctype)
                    return await self._fold(resp.headers, resp.aiter_bytes(), on_text, ctype)
                except _SHAPE_ERRORS as e:  # the server sent what its API does not define
                    raise MalformedResponse(f"malformed response from {safe_url(url)}: "
                                            f"{type(e).__name__}: {e}",
                                            headers=dict(resp.headers)) from None

    def _whole(self, raw: bytes, ctype: str | None) -> Response | None:
        """A whole body → the answer. JSON in the API's message shape is the answer, whether or
        not the request asked for a stream (a mock deployment or a proxy answers a streaming
        request with JSON: decision 0325); JSON of any other shape is ``NotAnAnswer``, never
        retried. A streaming request's JSON-labelled body that does not parse is None (the
        caller reads it as SSE); a whole request's body that is not JSON is ``NotAnAnswer``
        when its content type says so (an HTML page), else malformed (retried)."""
        try:
            body = json.loads(raw)
        except ValueError:
            if self.stream:
                return None
            if ctype and not _is_json(ctype):
                raise NotAnAnswer(self.url, ctype, raw, "with a body that is not JSON") from None
            raise
        if not self.is_message(body):
            asked = "a streaming request" if self.stream else "a request"
            raise NotAnAnswer(self.url, ctype, body, f"{asked} with JSON that is not a message")
        return self.decode(body)

    async def _fold(self, headers: Any, chunks: AsyncIterator[bytes],
                    on_text: Callable[[str], None] | None, ctype: str | None) -> Response:
        """SSE bytes → the answer, through the adapter's assembler. A body with not one event
        that is not labelled a stream (an HTML page, JSON that does not parse) will be the same
        next time: ``NotAnAnswer``, not an interrupted stream to retry."""
        decoder = self._decoder()
        assembler = self.assembler(dict(headers))
        assembler.on_text = on_text
        seen = False
        head = bytearray()  # what a body with no event at all is shown by
        async for chunk in chunks:
            if len(head) < EXCERPT_CHARS * 4:
                head += chunk[:EXCERPT_CHARS * 4 - len(head)]
            for ev in decoder.feed(chunk):
                seen = True
                self.feed_event(assembler, ev.event, ev.data)
        for ev in decoder.flush():
            seen = True
            self.feed_event(assembler, ev.event, ev.data)
        if not seen and ctype and not _is_sse(ctype):
            raise NotAnAnswer(self.url, ctype, bytes(head), "a streaming request with no stream")
        return assembler.finish()

    async def _request_headers(self, url: str, content: bytes) -> dict[str, str]:
        """The headers of one attempt. A cloud adapter signs each attempt's body anew (SigV4
        is good for five minutes, an access token for an hour) where others send fixed ones."""
        return self._headers()

    def _decoder(self) -> Any:
        """The stream's framing: ``feed(bytes)`` and ``flush()`` give events with ``event`` and
        ``data`` (SSE here; Bedrock's binary event-stream frames in its adapter)."""
        return SSEDecoder()

    def is_message(self, body: Any) -> bool:
        """Whether a whole JSON body is the API's (non-streamed) message: the adapter knows."""
        return isinstance(body, dict)

    def hint(self, status: int) -> str | None:
        """A likely cause of an error status the adapter can see from its own settings (a
        base URL that doubles or lacks ``/v1``), or None."""
        return None

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
