"""OpenAI's Batch API: the requests uploaded as a JSONL file (``POST /v1/files``,
``purpose=batch``, one ``{custom_id, method, url, body}`` per line), the batch created on it
(``POST /v1/batches``, endpoint ``/v1/chat/completions`` — or ``/v1/responses`` for the
``openai-responses`` provider —, window ``24h``), polled
(``GET /v1/batches/{id}``), its output and error files read (``GET /v1/files/{id}/content``),
cancelled (``POST /v1/batches/{id}/cancel``).

Routes hang off the live adapter's base URL, which includes ``/v1`` as for chat completions
(``https://api.openai.com/v1``, or any compatible server's). A line's ``body`` is what a live
``POST /chat/completions`` (or ``/responses``, stateless: ``store: false``) would send, without
``stream``; a row's body decodes through the live adapter's ``decode``.

Both the upload and the create make something each time they are sent, so neither is sent again
blind (``base.create``). The create's marker names the input file (``mnemon-<marker>.jsonl``,
found again by ``GET /v1/files?purpose=batch``: its name and size) and rides in the batch's
``metadata`` (``{"mnemon_marker": …}``, found again by ``GET /v1/batches``). An input file whose
batch was never made is deleted (``DELETE /v1/files/{id}``; decision 0313).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from ..base import Request
from ..errors import ProviderError
from ..openai import decode_response
from .base import SKEW_S, BatchFailed, BatchRow, BatchStatus, Limits, create, jsonl, send

__all__ = ["OpenAIBatches", "LIMITS", "ENDPOINT", "RESPONSES", "decode_row", "decode_status"]

LIMITS = Limits(requests=50_000, bytes=200 * 1000 * 1000)
"""An input file holds at most 50 000 requests and 200 MB."""
ENDPOINT = "/v1/chat/completions"
RESPONSES = "/v1/responses"
_ENDED = {"completed", "expired", "cancelled", "failed"}
_RETRIED_STATUS = {429, 500, 502, 503, 504, 529}
MARKER = "mnemon_marker"
"""The batch's ``metadata`` key holding its create's marker."""


def file_name(marker: str) -> str:
    """The input file's name: the create's marker, so a lost upload can be found again."""
    return f"mnemon-{marker}.jsonl"


def decode_status(body: dict[str, Any]) -> BatchStatus:
    """A ``batch`` object → ``BatchStatus``: ``completed``, ``expired``, ``cancelled`` and
    ``failed`` have ended; ``failed`` (the input refused) fails the whole batch."""
    status = body.get("status")
    failed = None
    if status == "failed":
        errs = ((body.get("errors") or {}).get("data") or [])
        failed = "; ".join(f"{e.get('code')}: {e.get('message')}" for e in errs) or "failed"
    counts = {k: int(v) for k, v in (body.get("request_counts") or {}).items()}
    return BatchStatus(id=body["id"], ended=status in _ENDED, counts=counts, failed=failed,
                       raw=body)


def decode_row(row: dict[str, Any], decode: Any = decode_response) -> BatchRow:
    """One line of an output or error file → ``BatchRow``. An answer with status 200 succeeded;
    an ``error`` of code ``batch_expired`` / ``batch_cancelled`` is a row that never ran; any
    other error, or an answer of another status, errored."""
    cid = row["custom_id"]
    err = row.get("error")
    resp = row.get("response")
    if err:
        code = err.get("code") or "error"
        if code == "batch_expired":
            return BatchRow(custom_id=cid, kind="expired", error=code)
        if code == "batch_cancelled":
            return BatchRow(custom_id=cid, kind="canceled", error=code)
        return BatchRow(custom_id=cid, kind="errored", error=f"{code}: {err.get('message', '')}")
    if resp and resp.get("status_code") == 200:
        try:
            return BatchRow(custom_id=cid, kind="succeeded", response=decode(resp["body"]))
        except ProviderError as e:  # (a Responses API body whose status is ``failed``)
            return BatchRow(custom_id=cid, kind="errored", error=str(e), retryable=e.retryable)
    status = int((resp or {}).get("status_code") or 0)
    body = (resp or {}).get("body") or {}
    e = body.get("error") if isinstance(body, dict) else None
    message = (e or {}).get("message", "") if isinstance(e, dict) else str(body)
    return BatchRow(custom_id=cid, kind="errored", error=f"{status}: {message}",
                    retryable=status in _RETRIED_STATUS)


class OpenAIBatches:
    """The batch API of the server an ``OpenAIProvider`` talks to."""

    name = "openai"
    limits = LIMITS

    def __init__(self, live: Any, endpoint: str = ENDPOINT):
        self.live = live
        self.base = live.base_url
        self.endpoint = endpoint

    def line(self, custom_id: str, request: Request) -> bytes:
        body = self.live.encode(request)
        body.pop("stream", None)
        body.pop("stream_options", None)
        return json.dumps({"custom_id": custom_id, "method": "POST", "url": self.endpoint,
                           "body": body}, ensure_ascii=False, separators=(",", ":")).encode()

    async def submit(self, lines: list[bytes], *, marker: str, since: float,
                     exclude: Collection[str] = ()) -> str:
        content = b"\n".join(lines) + b"\n"
        name = file_name(marker)

        async def upload() -> str:
            return (await send(self.live, "POST", f"{self.base}/files", once=True,
                               data={"purpose": "batch"},
                               files={"file": (name, content, "application/jsonl")}))["id"]

        async def uploaded() -> str | None:
            mine = [f for f in await self._files(since) if f.get("filename") == name
                    and f.get("bytes") in (None, len(content))]
            return mine[-1]["id"] if mine else None  # (the earliest: the list is newest first)

        file_id = await create(self.live, marker, upload, uploaded)

        async def post() -> str:
            return (await send(self.live, "POST", f"{self.base}/batches", once=True, json_body={
                "input_file_id": file_id, "endpoint": self.endpoint,
                "completion_window": "24h", "metadata": {MARKER: marker}}))["id"]

        async def find() -> str | None:
            return await self.find(marker, len(lines), since, None, exclude)

        return await create(self.live, marker, post, find)

    async def find(self, marker: str, n: int, since: float, until: float | None = None,
                   exclude: Collection[str] = ()) -> str | None:
        """The batch whose ``metadata`` carries ``marker`` (created since ``since``, less the
        clock skew allowed)."""
        lo = since - SKEW_S
        after = None
        while True:
            query = "?limit=100" + (f"&after={after}" if after else "")
            page = await send(self.live, "GET", f"{self.base}/batches{query}")
            data = page.get("data") or []
            for b in data:
                if (b.get("metadata") or {}).get(MARKER) == marker and b["id"] not in exclude:
                    return b["id"]
            after = page.get("last_id") or (data[-1]["id"] if data else None)
            if not page.get("has_more") or not after or \
                    min((b.get("created_at") or 0 for b in data), default=0) < lo:
                return None

    async def discard(self, marker: str, since: float) -> None:
        """Delete the input files a create marked ``marker`` uploaded (its batch was never
        made): they would only take storage. Best effort."""
        name = file_name(marker)
        try:
            for f in await self._files(since):
                if f.get("filename") == name:
                    await send(self.live, "DELETE", f"{self.base}/files/{f['id']}")
        except ProviderError:
            pass

    async def _files(self, since: float) -> list[dict[str, Any]]:
        """The ``batch`` input files uploaded since ``since`` (less the skew), newest first."""
        lo = since - SKEW_S
        out: list[dict[str, Any]] = []
        after = None
        while True:
            query = "?purpose=batch&order=desc&limit=1000" + (f"&after={after}" if after else "")
            page = await send(self.live, "GET", f"{self.base}/files{query}")
            data = page.get("data") or []
            out += [f for f in data if (f.get("created_at") or 0) >= lo]
            after = page.get("last_id") or (data[-1]["id"] if data else None)
            if not page.get("has_more") or not after or \
                    min((f.get("created_at") or 0 for f in data), default=0) < lo:
                return out

    async def status(self, batch_id: str) -> BatchStatus:
        return decode_status(await send(self.live, "GET", f"{self.base}/batches/{batch_id}"))

    async def results(self, status: BatchStatus) -> bytes:
        if status.failed is not None:
            raise BatchFailed(f"batch {status.id} failed: {status.failed}")
        parts: list[bytes] = []
        for key in ("output_file_id", "error_file_id"):
            fid = status.raw.get(key)
            if fid:
                body = await send(self.live, "GET", f"{self.base}/files/{fid}/content", raw=True)
                parts.append(body.rstrip(b"\n"))
        return b"\n".join(p for p in parts if p) + b"\n"

    def rows(self, raw: bytes) -> list[BatchRow]:
        return [decode_row(r, self.live.decode) for r in jsonl(raw.splitlines())]

    async def cancel(self, batch_id: str) -> None:
        await send(self.live, "POST", f"{self.base}/batches/{batch_id}/cancel")
