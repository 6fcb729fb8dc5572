"""What both batch adapters share: the row and status shapes, the split by a provider's limits,
the errors, and one HTTP call retried by the provider's policy.

::

    ProviderError
    ├── BatchEnds               ends the job on one line (the run root keeps what it needs)
    │   ├── BatchRouteMissing   the server answered 404 to a batch route: it has no batch API
    │   └── CreateUndecided     a create's answer was lost and its batch could not be looked for
    └── BatchFailed             a whole batch failed (OpenAI ``failed``: its input was refused)

Creating a batch is the one call here that is not idempotent: sent twice, it runs (and bills)
every request twice. ``create`` never sends it again blind: after an attempt whose answer did
not come back (a reset, a timeout, a proxy's 5xx after the provider accepted it), it first looks
for the batch that attempt may have made — by the marker the caller chose and recorded before
the first attempt (docs/providers.md, "Retries"; decision 0313).
"""

from __future__ import annotations

import json
import random
from collections.abc import Awaitable, Callable, Collection, Iterable
from typing import Any, Protocol

import httpx
from msgspec import Struct

from ..base import Request, Response
from ..errors import ProviderError, map_httpx_errors
from ..http import json_or_text
from ..retry import call_with_retry, should_retry

__all__ = ["BatchRow", "BatchStatus", "Limits", "BatchAPI", "BatchEnds", "BatchRouteMissing",
           "CreateUndecided", "BatchFailed", "split", "send", "create", "SKEW_S"]

SKEW_S = 300.0
"""How far the provider's clock may stand from ours when a batch's ``created_at`` is compared
with the time its create was first sent: a listing is read back this far before it."""


class BatchEnds(ProviderError):
    """An error of the batch routes that ends the job with one line (``job.route_missing``):
    nothing more can be sent until the user (or the server) acts. Never retried."""


class BatchRouteMissing(BatchEnds):
    """The server answered 404 to a batch route: it serves no batch API there. Not retried;
    the job ends naming the route."""

    def __init__(self, method: str, url: str):
        super().__init__(f"{method} {url} answered 404: this server has no batch API "
                         "(run the job with --engine local)")
        self.route = f"{method} {url}"


class CreateUndecided(BatchEnds):
    """A batch create whose answer was lost, and the listing that would say whether the
    provider accepted it failed too. Nothing is sent again: the job ends, the run root keeps
    the create's marker, and a re-run looks for the batch again before anything is sent."""

    def __init__(self, marker: str, why: BaseException):
        super().__init__(f"a batch create's answer was lost and the batches could not be listed "
                         f"to find it ({type(why).__name__}: {why}); nothing was sent again — "
                         f"re-run to look for it (marker {marker})")
        self.marker = marker


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

    async def submit(self, lines: list[bytes], *, marker: str, since: float,
                     exclude: Collection[str] = ()) -> str:
        """Create one batch of ``lines``, never twice: a lost answer is reconciled by
        ``find`` before the create is sent again (``create``). ``marker`` names this create
        (recorded by the caller before the call), ``since`` is the wall-clock time it was first
        sent, ``exclude`` the batches the caller already owns."""
        ...

    async def find(self, marker: str, n: int, since: float, until: float | None = None,
                   exclude: Collection[str] = ()) -> str | None:
        """The batch a create of ``n`` requests marked ``marker``, first sent at ``since``,
        made — or None when the provider lists none."""
        ...

    async def discard(self, marker: str, since: float) -> None:
        """Remove what a create that made no batch left behind (OpenAI: its uploaded input
        file). Best effort."""
        ...

    async def status(self, batch_id: str) -> BatchStatus: ...

    async def results(self, status: BatchStatus) -> bytes:
        """The raw results of an ended batch (JSONL), kept in the run root as fetched."""
        ...

    def rows(self, raw: bytes) -> list[BatchRow]: ...

    async def cancel(self, batch_id: str) -> None: ...


async def send(live: Any, method: str, url: str, *, json_body: Any = None,
               content: bytes | None = None, files: Any = None, data: Any = None,
               raw: bool = False, once: bool = False) -> Any:
    """One call of a batch route through the live adapter's client and headers, retried by its
    ``RetryPolicy`` (a 429, a 5xx, a broken connection) unless ``once``; a 404 is
    ``BatchRouteMissing``. Returns the decoded JSON, or the body's bytes when ``raw``. A call
    that is not idempotent is sent ``once`` and retried by ``create``."""
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

    if once:
        return await attempt()
    return await call_with_retry(attempt, policy=live.retry, rng=random.Random())


async def create(live: Any, marker: str, post: Callable[[], Awaitable[Any]],
                 find: Callable[[], Awaitable[Any]]) -> Any:
    """A non-idempotent call (a batch create, an input file's upload), retried by the live
    adapter's policy — but never blind. ``post`` sends it once; ``find`` looks for what an
    earlier attempt may have made (None: nothing), reading only. After any attempt that failed
    the next one starts with ``find``, and so does giving up on a retryable error: what a lost
    answer made is adopted, never made again. A ``find`` that fails (itself retried as a read)
    ends it with ``CreateUndecided``. A refusal that is not retried (a 400, a 401, a 404 route)
    is raised as it is: the server said it made nothing."""
    tried = False

    async def look() -> Any:
        try:
            return await find()
        except ProviderError as e:
            raise CreateUndecided(marker, e) from e

    async def attempt() -> Any:
        nonlocal tried
        if tried:
            found = await look()
            if found is not None:
                return found
        tried = True
        return await post()

    try:
        return await call_with_retry(attempt, policy=live.retry, rng=random.Random())
    except BatchEnds:
        raise
    except ProviderError as e:
        if not should_retry(e):
            raise
        found = await look()  # out of attempts: the last one's answer may be the lost one
        if found is None:
            raise
        return found


def _route(url: str) -> str:
    """The URL without its query (a signed results URL carries none of ours)."""
    return url.split("?", 1)[0]


def jsonl(rows: Iterable[bytes]) -> Iterable[dict[str, Any]]:
    """The objects of a JSONL body, skipping blank lines."""
    for raw in rows:
        raw = raw.strip()
        if raw:
            yield json.loads(raw)
