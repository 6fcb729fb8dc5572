"""Anthropic Message Batches: ``POST /v1/messages/batches``, ``GET /v1/messages/batches/{id}``,
the results at the batch's ``results_url`` (JSONL, one ``{custom_id, result}`` per request:
``succeeded`` with its ``message``, ``errored`` with its ``error``, ``canceled``, ``expired``),
``POST /v1/messages/batches/{id}/cancel``.

A request's ``params`` are the body a live ``POST /v1/messages`` would send (cache breakpoints
included: prompt caching applies in batches), without ``stream``.
"""

from __future__ import annotations

import json
from typing import Any

from ..anthropic import decode_response
from ..base import Request
from .base import BatchRow, BatchStatus, Limits, jsonl, send

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

    async def submit(self, lines: list[bytes]) -> str:
        body = b'{"requests":[' + b",".join(lines) + b"]}"
        return (await send(self.live, "POST", self.url, content=body))["id"]

    async def status(self, batch_id: str) -> BatchStatus:
        return decode_status(await send(self.live, "GET", f"{self.url}/{batch_id}"))

    async def results(self, status: BatchStatus) -> bytes:
        url = status.raw.get("results_url") or f"{self.url}/{status.id}/results"
        return await send(self.live, "GET", url, raw=True)

    def rows(self, raw: bytes) -> list[BatchRow]:
        return [decode_row(r) for r in jsonl(raw.splitlines())]

    async def cancel(self, batch_id: str) -> None:
        await send(self.live, "POST", f"{self.url}/{batch_id}/cancel")
