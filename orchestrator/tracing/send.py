"""Send spans to an OTLP/HTTP receiver (``mnemon trace --endpoint``).

The endpoint is a collector's base URL (``http://host:4318``; ``/v1/traces`` is added, as for
``OTEL_EXPORTER_OTLP_ENDPOINT``) or the traces URL itself (ending in ``/v1/traces``). Headers
come from ``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` / ``OTEL_EXPORTER_OTLP_HEADERS`` (``k=v``
pairs, percent-decoded), so the same settings as a live run reach Langfuse or Honeycomb.

The body is protobuf (``application/x-protobuf``, written by ``protobuf``: every receiver takes
it), or OTLP/JSON (``application/json``, which OTLP/HTTP allows; some receivers, Phoenix among
them, refuse it). Spans go in requests of at most ``BATCH`` spans.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote

import httpx

from . import otlp, protobuf
from .spans import Span
from ...errors import Failure

BATCH = 512
TIMEOUT_S = 10.0


class SendError(Failure):
    """The receiver could not be reached, or refused the spans."""


def traces_url(endpoint: str) -> str:
    e = endpoint.rstrip("/")
    return e if e.endswith("/v1/traces") else e + "/v1/traces"


def headers_from_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    env = os.environ if environ is None else environ
    raw = env.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or env.get("OTEL_EXPORTER_OTLP_HEADERS", "")
    out: dict[str, str] = {}
    for pair in raw.split(","):
        k, eq, v = pair.partition("=")
        if eq and k.strip():
            out[unquote(k.strip())] = unquote(v.strip())
    return out


def send(spans: Sequence[Span], resource: Mapping[str, Any], endpoint: str, *,
         encoding: str = "auto", headers: Mapping[str, str] | None = None,
         timeout_s: float = TIMEOUT_S, transport: httpx.BaseTransport | None = None) -> int:
    """POST every span; answer how many requests were sent. Raises ``SendError`` (one line)
    when the receiver cannot be reached or answers other than 2xx."""
    if encoding == "auto":
        encoding = "protobuf"
    url = traces_url(endpoint)
    hdrs = {**headers_from_env(), **(headers or {})}
    hdrs["Content-Type"] = ("application/x-protobuf" if encoding == "protobuf"
                            else "application/json")
    sent = 0
    with httpx.Client(timeout=timeout_s, transport=transport) as client:
        for i in range(0, max(len(spans), 1), BATCH):
            part = spans[i:i + BATCH]
            data = (protobuf.request_bytes(part, resource) if encoding == "protobuf" else
                    json.dumps(otlp.request(part, resource),
                               separators=(",", ":")).encode("utf-8"))
            try:
                r = client.post(url, content=data, headers=hdrs)
            except httpx.HTTPError as e:
                raise SendError(f"could not send spans to {url}: "
                                f"{' '.join(str(e).split()) or type(e).__name__}") from None
            if not 200 <= r.status_code < 300:
                raise SendError(f"{url} refused the spans: HTTP {r.status_code} "
                                f"{' '.join(r.text.split())[:200]}")
            sent += 1
    return sent
