"""Anthropic Message Batches: ``POST /v1/messages/batches``, ``GET /v1/messages/batches/{id}``,
the results at the batch's ``results_url`` (JSONL, one ``{custom_id, result}`` per request:
``succeeded`` with its ``message``, ``errored`` with its ``error``, ``canceled``, ``expired``),
``POST /v1/messages/batches/{id}/cancel``; ``GET /v1/messages/batches`` (newest first, pages of
at most 1000 by ``after_id``) to find a batch whose create's answer was lost.

A Message Batch carries no metadata of ours, and its requests cannot be read before it ends, so
a create is matched by what the listing does show: created within the create's own window
(from its first send, less the clock skew allowed, to the lost answer), with exactly as many
requests, and not a batch the run already owns. The marker stays in the run root only. When
its results come, a batch adopted that way is checked by its custom ids: rows it lacks read as
expired and go into the next wave (decision 0313).

A request's ``params`` are the body a live ``POST /v1/messages`` would send (cache breakpoints
included: prompt caching applies in batches), without ``stream``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection
from datetime import datetime
from typing import Any

from ..anthropic import decode_response
from ..base import Request
from .base import SKEW_S, BatchRow, BatchStatus, Limits, create, jsonl, send

__all__ = ["AnthropicBatches", "LIMITS", "decode_row", "decode_status"]

LIMITS = Limits(requests=100_000, bytes=256 * 1000 * 1000)
"""A Message Batch holds at most 100 000 requests or 256 MB, whichever comes first."""

_RETRIED = {"overloaded_error", "api_error", "rate_limit_error"}


def decode_status(body: dict[str, Any]) -> BatchStatus:
    """A ``message_batch`` object → ``BatchStatus`` (``processing_status`` ``ended``: done)."""
    return BatchStatus(id=body["id"], ended=body.get("processing_status") == "ended",
                       counts={k: int(v) for k, v in (body.get("request_counts") or {}).items()},
                       raw=body)


def decode_row(row: dict[str, Any]) -> BatchRow:
    """One line of the results file → ``BatchRow``."""
    result = row.get("result") or {}
    kind = result.get("type")
    cid = row["custom_id"]
    if kind == "succeeded":
        return BatchRow(custom_id=cid, kind=kind, response=decode_response(result["message"]))
    if kind == "errored":
        err = result.get("error") or {}
        inner = err.get("error") if isinstance(err.get("error"), dict) else err
        etype = inner.get("type") or "error"
        return BatchRow(custom_id=cid, kind=kind, error=f"{etype}: {inner.get('message', '')}",
                        retryable=etype in _RETRIED)
    if kind in ("canceled", "expired"):
        return BatchRow(custom_id=cid, kind=kind, error=kind)
    raise ValueError(f"unknown result type {kind!r} for {cid!r}")


class AnthropicBatches:
    """The batch API of the server an ``AnthropicProvider`` talks to (its base URL, key and
    retry policy)."""

    name = "anthropic"
    limits = LIMITS

    def __init__(self, live: Any):
        self.live = live
        self.url = f"{live.base_url}/v1/messages/batches"

    def line(self, custom_id: str, request: Request) -> bytes:
        params = self.live.encode(request)
        params.pop("stream", None)
        return json.dumps({"custom_id": custom_id, "params": params}, ensure_ascii=False,
                          separators=(",", ":")).encode()

    async def submit(self, lines: list[bytes], *, marker: str, since: float,
                     exclude: Collection[str] = ()) -> str:
        body = b'{"requests":[' + b",".join(lines) + b"]}"

        async def post() -> str:
            return (await send(self.live, "POST", self.url, content=body, once=True))["id"]

        async def find() -> str | None:
            return await self.find(marker, len(lines), since, time.time(), exclude)

        return await create(self.live, marker, post, find)

    async def find(self, marker: str, n: int, since: float, until: float | None = None,
                   exclude: Collection[str] = ()) -> str | None:
        """The batch of ``n`` requests created from ``since`` (less ``SKEW_S``) to ``until``
        (plus it; now when None) that ``exclude`` does not hold: the earliest such, when
        several (a listing is newest first)."""
        lo, hi = since - SKEW_S, (until if until is not None else time.time()) + SKEW_S
        found: list[tuple[float, str]] = []
        after = None
        while True:
            query = "?limit=1000" + (f"&after_id={after}" if after else "")
            page = await send(self.live, "GET", self.url + query)
            oldest = hi
            for b in page.get("data") or []:
                at = _epoch(b.get("created_at"))
                oldest = min(oldest, at)
                counts = b.get("request_counts") or {}
                if lo <= at <= hi and b["id"] not in exclude and \
                        sum(int(v) for v in counts.values()) == n:
                    found.append((at, b["id"]))
            after = page.get("last_id")
            if not page.get("has_more") or not after or oldest < lo:
                break
        return min(found)[1] if found else None

    async def discard(self, marker: str, since: float) -> None:
        """Nothing to remove: a create that made no batch left nothing behind."""

    async def status(self, batch_id: str) -> BatchStatus:
        return decode_status(await send(self.live, "GET", f"{self.url}/{batch_id}"))

    async def results(self, status: BatchStatus) -> bytes:
        url = status.raw.get("results_url") or f"{self.url}/{status.id}/results"
        return await send(self.live, "GET", url, raw=True)

    def rows(self, raw: bytes) -> list[BatchRow]:
        return [decode_row(r) for r in jsonl(raw.splitlines())]

    async def cancel(self, batch_id: str) -> None:
        await send(self.live, "POST", f"{self.url}/{batch_id}/cancel")


def _epoch(iso: Any) -> float:
    """An RFC 3339 time as seconds since the epoch (−inf when absent or unreadable: never in
    a window)."""
    try:
        return datetime.fromisoformat(str(iso).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return float("-inf")
