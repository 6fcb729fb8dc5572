"""
Claude on Amazon Bedrock: ``InvokeModel`` / ``InvokeModelWithResponseStream`` around the Anthropic
adapter (``RoutedAnthropic``).

The body is the Messages API's, less ``model`` and ``stream`` (the URL carries both:
``/model/{id}/invoke`` or ``/invoke-with-response-stream``), plus ``anthropic_version:
"bedrock-2023-05-31"`` — what Bedrock documents and the official SDK sends. The model id is a
Bedrock id (``anthropic.claude-…-v1:0``), a cross-region inference profile (``us.``/``eu.``/
``global.`` before it) or an inference profile's ARN, quoted into the path as the SDK quotes it
(``:`` kept, ``/`` escaped). Prompt caching is the Messages API's ``cache_control``, which Bedrock
takes in the body as it is (the ``1h`` TTL included on the models that offer it).

A streamed answer is the AWS event-stream framing (``providers/eventstream.py``): each ``chunk``
event's payload is ``{"bytes": base64}``, and the bytes are one Anthropic stream event's JSON,
fed to the same assembler as the SSE stream. An ``exception`` frame mid-stream is the error it
names (``throttlingException`` a 429, retried). Each attempt is signed with SigV4 anew, or sent
with a Bedrock API key (``AWS_BEARER_TOKEN_BEDROCK``) as a bearer token (decision 0400).
"""

from __future__ import annotations

import base64
import json
import random
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any
from urllib.parse import quote

import httpx
import trio

from .anthropic import DEFAULT_MAX_TOKENS, RoutedAnthropic, error_from_response
from .errors import MalformedResponse, ProviderHTTPError, StreamInterrupted, http_error
from .eventstream import EventStreamDecoder, Frame
from .retry import RetryPolicy
from .sigv4 import Credentials, frozen, sign
from .sse import ServerSentEvent

__all__ = ["API_VERSION", "DEFAULT_MODEL", "SERVICE", "endpoint", "BedrockFrames",
           "event_of", "error_from_bedrock", "BedrockProvider"]

API_VERSION = "bedrock-2023-05-31"
DEFAULT_MODEL = "global.anthropic.claude-sonnet-4-5-20250929-v1:0"
SERVICE = "bedrock"  # the SigV4 signing name of bedrock-runtime

#: Bedrock's exception names (the ``x-amzn-ErrorType`` header, an ``exception`` frame's
#: ``:exception-type``) and the status each is answered with (the InvokeModel API reference)
STATUS_FOR_EXCEPTION = {
    "validationexception": 400,
    "accessdeniedexception": 403,
    "resourcenotfoundexception": 404,
    "modeltimeoutexception": 408,
    "modelerrorexception": 424,
    "throttlingexception": 429,
    "modelnotreadyexception": 429,
    "servicequotaexceededexception": 400,
    "internalserverexception": 500,
    "servicesunavailableexception": 503,
    "serviceunavailableexception": 503,
}
_TOO_LONG = re.compile(r"input is too long|prompt is too long|too many (input )?tokens|"
                       r"context (window|length)", re.IGNORECASE)


def endpoint(region: str) -> str:
    return f"https://bedrock-runtime.{region}.amazonaws.com"


def _exception_name(raw: str | None) -> str:
    """``ThrottlingException:http://internal.amazon.com/…`` → ``ThrottlingException``."""
    return (raw or "").split(":", 1)[0].strip()[:80]


def error_from_bedrock(status: int, body: Any, headers: Any) -> ProviderHTTPError:
    """An HTTP error from Bedrock: its ``{"message"}`` body named by the exception in
    ``x-amzn-ErrorType``; an Anthropic-shaped body (the model's own refusal) as the Anthropic
    adapter reads it."""
    hdrs = {k.lower(): v for k, v in dict(headers).items()}
    name = _exception_name(hdrs.get("x-amzn-errortype"))
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return error_from_response(status, body, hdrs)
    message = (body.get("message") or body.get("Message")) if isinstance(body, dict) else None
    text = f"{name}: {message}" if name and message else (message or name or None)
    too_long = status in (400, 413) and bool(_TOO_LONG.search(str(message or "")))
    err = http_error(status, body, hdrs, context_too_long=too_long)
    if text:
        err = type(err)(status, body, hdrs, str(text))
    return err


def event_of(frame: Frame) -> ServerSentEvent | None:
    """
    One frame → the Anthropic stream event it carries, or None (an event of no interest).
    An ``exception`` or ``error`` frame raises the error it names.
    """
    h = frame.headers
    kind = h.get(":message-type")
    if kind == "event":
        if h.get(":event-type") != "chunk":
            return None
        try:
            payload = json.loads(frame.payload)
            data = base64.b64decode(payload["bytes"], validate=True).decode("utf-8")
            etype = json.loads(data).get("type")
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise MalformedResponse(f"a Bedrock chunk that is not an Anthropic event: "
                                    f"{type(e).__name__}") from None
        return ServerSentEvent(etype if isinstance(etype, str) else None, data)
    if kind == "exception":
        name = str(h.get(":exception-type") or "exception")[:80]
        try:
            body = json.loads(frame.payload)
        except ValueError:
            body = frame.payload.decode("utf-8", "replace")
        lname = name.lower()
        if lname == "modelstreamerrorexception":  # the model's stream broke: try again
            said = body.get("message", "") if isinstance(body, dict) else str(body)
            raise StreamInterrupted(f"{name} mid-stream: {str(said)[:300]}", error_type=name)
        status = STATUS_FOR_EXCEPTION.get(lname, 500)
        raise error_from_bedrock(status, body, {"x-amzn-errortype": name})
    if kind == "error":
        code = str(h.get(":error-code") or "error")[:80]
        said = str(h.get(":error-message", ""))[:300]
        raise StreamInterrupted(f"event-stream error {code}: {said}", error_type=code)
    return None


class BedrockFrames:
    """The stream's framing for ``HTTPProvider._fold``: bytes in, Anthropic events out."""

    def __init__(self) -> None:
        self._frames = EventStreamDecoder()

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        return [e for f in self._frames.feed(chunk) if (e := event_of(f)) is not None]

    def flush(self) -> list[ServerSentEvent]:
        self._frames.flush()
        return []


class BedrockProvider(RoutedAnthropic):
    """
    Claude through a Bedrock runtime endpoint.

    Args:
        client: the HTTP client; None makes (and owns) one.
        model: a Bedrock model id, inference profile id or ARN.
        region: the AWS region (it names the endpoint and the signature's scope).
        credentials: ``sigv4.Credentials``, or botocore's (refreshing) credentials object.
        bearer_token: a Bedrock API key, sent instead of a signature.
        base_url: replaces ``https://bedrock-runtime.{region}.amazonaws.com`` (a proxy, a VPC
            endpoint, the tests' loopback server).
        now: the clock the signatures read (the tests pin it).
    """

    name = "bedrock"
    anthropic_version = API_VERSION

    def __init__(self, client: httpx.AsyncClient | None, model: str, *, region: str,
                 credentials: Any = None, bearer_token: str | None = None,
                 base_url: str | None = None, stream: bool = True,
                 max_tokens: int = DEFAULT_MAX_TOKENS, cache_ttl: str = "5m",
                 retry: RetryPolicy | None = None, rng: random.Random | None = None,
                 timeout: float = 600.0, now: Callable[[], datetime] | None = None) -> None:
        if credentials is None and not bearer_token:
            raise ValueError("Bedrock needs credentials or an API key")
        super().__init__(client, "", model, base_url=base_url or endpoint(region), stream=stream,
                         max_tokens=max_tokens, cache_ttl=cache_ttl, retry=retry, rng=rng,
                         timeout=timeout)
        self.region = region
        self._credentials = credentials
        self._bearer = bearer_token
        self._now = now

    def model_url(self, model: str) -> str:
        verb = "invoke-with-response-stream" if self.stream else "invoke"
        return f"{self.base_url}/model/{quote(model, safe=':')}/{verb}"

    def _headers(self) -> dict[str, str]:
        return {"content-type": "application/json", "accept": "application/json"}

    async def _request_headers(self, url: str, content: bytes) -> dict[str, str]:
        headers = self._headers()
        if self._bearer:
            headers["authorization"] = f"Bearer {self._bearer}"
            return headers
        creds = self._credentials
        if not isinstance(creds, Credentials):  # botocore's may refresh (a role): off the loop
            creds = await trio.to_thread.run_sync(frozen, creds)
        return sign("POST", url, headers, content, creds, region=self.region, service=SERVICE,
                    now=self._now() if self._now else None)

    def _decoder(self) -> BedrockFrames:
        return BedrockFrames()

    def error(self, status: int, body: Any, headers: Any) -> ProviderHTTPError:
        return error_from_bedrock(status, body, headers)
