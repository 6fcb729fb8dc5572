"""The sending half every HTTP adapter shares: one POST per attempt, retried by policy.

An adapter supplies only its wire: ``url``, ``_headers``, ``encode`` (neutral request → JSON
body), ``decode`` (a whole JSON body → Response), ``error`` (status, body, headers → the error
tree) and, for streams, an assembler it feeds SSE events to. Errors from httpx are translated at
one boundary (``map_httpx_errors``).
"""

from __future__ import annotations

import json
import random
from abc import ABC, abstractmethod
from typing import Any, Callable

import httpx

from .base import Request, Response
from .errors import MalformedResponse, ProviderHTTPError, map_httpx_errors

# what a response of the wrong shape raises in a decoder (a ProviderError is raised as it is)
_SHAPE_ERRORS = (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError)
from .retry import OnAttempt, RetryPolicy, call_with_retry
from .sse import SSEDecoder


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
        return await self._send(content, on_attempt=on_attempt, on_text=on_text)

    async def _send(self, content: bytes, *, on_attempt: OnAttempt | None = None,
                    on_text: Callable[[str], None] | None = None) -> Response:
        """POST an encoded body, retried per ``RetryPolicy`` (an adapter that shapes its body
        per conversation — the Responses API's stored chains — encodes it itself)."""
        return await call_with_retry(lambda: self._attempt(content, on_text), policy=self.retry,
                                     on_attempt=on_attempt, rng=self._rng)

    async def _attempt(self, content: bytes,
                       on_text: Callable[[str], None] | None = None) -> Response:
        with map_httpx_errors():
            async with self._client.stream("POST", self.url, content=content,
                                           headers=self._headers()) as resp:
                if resp.status_code >= 400:
                    await resp.aread()
                    raise self.error(resp.status_code, json_or_text(resp), resp.headers)
                try:
                    if not self.stream:
                        await resp.aread()
                        return self.decode(resp.json())
                    decoder = SSEDecoder()
                    assembler = self.assembler(dict(resp.headers))
                    assembler.on_text = on_text
                    async for chunk in resp.aiter_bytes():
                        for ev in decoder.feed(chunk):
                            self.feed_event(assembler, ev.event, ev.data)
                    for ev in decoder.flush():
                        self.feed_event(assembler, ev.event, ev.data)
                    return assembler.finish()
                except _SHAPE_ERRORS as e:  # the server sent what its API does not define
                    raise MalformedResponse(f"malformed response from {self.url}: "
                                            f"{type(e).__name__}: {e}",
                                            headers=dict(resp.headers)) from None

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
