"""What both batch adapters share: the row and status shapes, the split by a provider's limits,
the errors, and one HTTP call retried by the provider's policy.

::

    ProviderError
    ├── BatchRouteMissing   the server answered 404 to a batch route: it has no batch API
    └── BatchFailed         a whole batch failed (OpenAI ``failed``: its input was refused)
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from typing import Any, Protocol

import httpx
from msgspec import Struct

from ..base import Request, Response
from ..errors import ProviderError, map_httpx_errors
from ..http import json_or_text
from ..retry import call_with_retry

__all__ = ["BatchRow", "BatchStatus", "Limits", "BatchAPI", "BatchRouteMissing", "BatchFailed",
           "split", "send"]


class BatchRouteMissing(ProviderError):
    """The server answered 404 to a batch route: it serves no batch API there. Not retried;
    the job ends naming the route."""

    def __init__(self, method: str, url: str):
        super().__init__(f"{method} {url} answered 404: this server has no batch API "
                         "(run the job with --engine local)")
        self.route = f"{method} {url}"


class BatchFailed(ProviderError):
    """A whole batch failed before any of its requests ran (OpenAI's ``failed``: the input
    file was refused). Its requests are submitted again in the next wave, per the retries."""


class BatchRow(Struct, kw_only=True):
    """One request's outcome in a batch's results."""

    custom_id: str
    kind: str
    """``succeeded``, ``errored``, ``expired`` or ``canceled`` (Anthropic's words for both
    providers)."""
    response: Response | None = None
    error: str | None = None
    retryable: bool = False
    """``errored`` only: the error is one a live call would retry (overloaded, a server error,
    a rate limit); ``expired`` and ``canceled`` rows are always submitted again."""


class BatchStatus(Struct, kw_only=True):
    """A batch as the provider reports it, in the engine's words."""

    id: str
    ended: bool
    """Processing is over: its results can be fetched (every row has an outcome)."""
    counts: dict[str, int]
    failed: str | None = None
    """Set when the whole batch failed (nothing of it ran)."""
    raw: dict[str, Any] = {}


class Limits(Struct, frozen=True, kw_only=True):
    requests: int
    bytes: int


def split(lines: list[bytes], limits: Limits, overhead: int = 0) -> list[list[int]]:
    """Indices of ``lines`` in submission order, cut into chunks none of which exceeds the
    provider's request count or byte size (``overhead`` bytes per line: the separator)."""
    chunks: list[list[int]] = []
    here: list[int] = []
    size = 0
    for i, line in enumerate(lines):
        n = len(line) + overhead
        if here and (len(here) >= limits.requests or size + n > limits.bytes):
            chunks.append(here)
            here, size = [], 0
        here.append(i)
        size += n
    if here:
        chunks.append(here)
    return chunks


class BatchAPI(Protocol):
    """One provider's batch API. ``submit`` returns the new batch's id; ``status`` polls it;
    ``results`` fetches the raw rows of an ended batch and ``rows`` decodes them; ``cancel`` asks it to stop."""

    name: str
    limits: Limits

    def line(self, custom_id: str, request: Request) -> bytes: ...

    async def submit(self, lines: list[bytes]) -> str: ...

    async def status(self, batch_id: str) -> BatchStatus: ...

    async def results(self, status: BatchStatus) -> bytes:
        """The raw results of an ended batch (JSONL), kept in the run root as fetched."""
        ...

    def rows(self, raw: bytes) -> list[BatchRow]: ...

    async def cancel(self, batch_id: str) -> None: ...


async def send(live: Any, method: str, url: str, *, json_body: Any = None,
               content: bytes | None = None, files: Any = None, data: Any = None,
               raw: bool = False) -> Any:
    """One call of a batch route through the live adapter's client and headers, retried by its
    ``RetryPolicy`` (a 429, a 5xx, a broken connection); a 404 is ``BatchRouteMissing``.
    Returns the decoded JSON, or the body's bytes when ``raw``."""
    headers = dict(live._headers())
    if files is not None:
        headers.pop("content-type", None)  # httpx sets the multipart boundary

    async def attempt() -> Any:
        with map_httpx_errors(url):
            kw: dict[str, Any] = {"headers": headers}
            if json_body is not None:
                kw["content"] = json.dumps(json_body, ensure_ascii=False,
                                           separators=(",", ":")).encode()
            elif content is not None:
                kw["content"] = content
            if files is not None:
                kw["files"] = files
                kw["data"] = data
            resp: httpx.Response = await live._client.request(method, url, **kw)
            if resp.status_code == 404:
                raise BatchRouteMissing(method, _route(url))
            if resp.status_code >= 400:
                raise live.error(resp.status_code, json_or_text(resp), resp.headers)
            return resp.content if raw else resp.json()

    return await call_with_retry(attempt, policy=live.retry, rng=random.Random())


def _route(url: str) -> str:
    """The URL without its query (a signed results URL carries none of ours)."""
    return url.split("?", 1)[0]


def jsonl(rows: Iterable[bytes]) -> Iterable[dict[str, Any]]:
    """The objects of a JSONL body, skipping blank lines."""
    for raw in rows:
        raw = raw.strip()
        if raw:
            yield json.loads(raw)
