"""
Claude on Google Cloud Vertex AI: ``rawPredict`` / ``streamRawPredict`` around the Anthropic
adapter (``RoutedAnthropic``).

The URL names the project, the location and the model
(``{base}/projects/{p}/locations/{l}/publishers/anthropic/models/{m}:streamRawPredict``); the body
is the Messages API's less ``model``, plus ``anthropic_version: "vertex-2023-10-16"`` (what Vertex
documents and the official SDK sends), ``stream`` kept. The answer is the Anthropic API's own:
SSE events or one message, so nothing but the URL and the token differ from ``--provider
anthropic``. Errors are Google's (``{"error": {"code", "message", "status"}}``, sometimes in a
list) or the Anthropic API's; ``429 RESOURCE_EXHAUSTED`` (the quota) is retried.

The token is ``GOOGLE_OAUTH_ACCESS_TOKEN`` as given, else Application Default Credentials through
google-auth (the ``vertex`` extra), refreshed off the event loop when due; google-auth's HTTP is
done with httpx (``_HttpxRequest``), so the extra needs no second HTTP library (decision 0402).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx
import trio

from .anthropic import DEFAULT_MAX_TOKENS, RoutedAnthropic, error_from_response
from .errors import ProviderConfigError, ProviderConnectionError, ProviderHTTPError
from .retry import RetryPolicy

__all__ = ["API_VERSION", "DEFAULT_MODEL", "DEFAULT_LOCATION", "SCOPE", "endpoint",
           "error_from_vertex", "load_adc", "VertexProvider"]

API_VERSION = "vertex-2023-10-16"
DEFAULT_MODEL = "claude-sonnet-4-5@20250929"
DEFAULT_LOCATION = "global"
SCOPE = "https://www.googleapis.com/auth/cloud-platform"


def endpoint(location: str) -> str:
    """The API root of a location: ``global`` has no regional host, ``us``/``eu`` are the
    multi-region endpoints, any other location its own ``{location}-aiplatform`` host."""
    if location == "global":
        return "https://aiplatform.googleapis.com/v1"
    if location in ("us", "eu"):
        return f"https://aiplatform.{location}.rep.googleapis.com/v1"
    return f"https://{location}-aiplatform.googleapis.com/v1"


def error_from_vertex(status: int, body: Any, headers: Any) -> ProviderHTTPError:
    """Google's error (the first, when a list of them) with its status word before its
    message (``RESOURCE_EXHAUSTED: Quota exceeded…``); an Anthropic-shaped body as the
    Anthropic adapter reads it."""
    if isinstance(body, list) and body and isinstance(body[0], dict):
        body = body[0]
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict) and "status" in err and "type" not in err:
        word = str(err.get("status") or "")[:60]
        message = str(err.get("message") or "")
        out = error_from_response(status, body, headers)
        return type(out)(status, body, dict(headers),
                         f"{word}: {message}" if word and message else (message or word))
    return error_from_response(status, body, headers)


class _HttpxRequest:
    """google-auth's transport (``google.auth.transport.Request``) over a short-lived httpx
    client: a token refresh is one small blocking call, made in a worker thread."""

    def __call__(self, url: str, method: str = "GET", body: Any = None,
                 headers: Mapping[str, str] | None = None, timeout: float | None = None,
                 **kwargs: Any) -> Any:
        from google.auth import exceptions

        try:
            with httpx.Client(timeout=timeout or 60.0) as client:
                resp = client.request(method, url, content=body, headers=dict(headers or {}))
        except httpx.HTTPError as e:
            raise exceptions.TransportError(str(e)) from e
        return _HttpxResponse(resp)


class _HttpxResponse:
    def __init__(self, resp: httpx.Response) -> None:
        self.status = resp.status_code
        self.headers = resp.headers
        self.data = resp.content


def load_adc() -> tuple[Any, str | None]:
    """Application Default Credentials (``gcloud auth application-default login``, a service
    account's key in ``GOOGLE_APPLICATION_CREDENTIALS``, the metadata server) and their project.

    Raises:
        ProviderConfigError: google-auth is not installed, or no credentials were found.
    """
    try:
        import google.auth
        from google.auth.exceptions import DefaultCredentialsError
    except ImportError:
        raise ProviderConfigError(
            "--provider vertex needs GOOGLE_OAUTH_ACCESS_TOKEN or Application Default "
            "Credentials through google-auth: pip install 'mnemon[vertex]'") from None
    try:
        creds, project = google.auth.default(scopes=[SCOPE])
    except DefaultCredentialsError:
        raise ProviderConfigError(
            "no Google credentials found (needed by --provider vertex): run `gcloud auth "
            "application-default login`, set GOOGLE_APPLICATION_CREDENTIALS, or set "
            "GOOGLE_OAUTH_ACCESS_TOKEN") from None
    return creds, project


def _fresh_token(credentials: Any) -> str:
    """The credentials' token, refreshed first when missing or expired (blocking). A refresh
    refused (a revoked login) is the user's to fix; one that could not reach Google is tried
    again as any broken connection is."""
    if not credentials.valid:
        from google.auth import exceptions

        try:
            credentials.refresh(_HttpxRequest())
        except exceptions.TransportError as e:
            raise ProviderConnectionError(
                f"could not refresh the Google access token: {str(e)[:300]}") from None
        except exceptions.GoogleAuthError as e:
            raise ProviderConfigError(
                f"the Google credentials were refused: {type(e).__name__}: {str(e)[:300]}"
            ) from None
    return str(credentials.token)


class VertexProvider(RoutedAnthropic):
    """
    Claude through Vertex AI's Anthropic publisher endpoint.

    Args:
        client: the HTTP client; None makes (and owns) one.
        model: a Vertex model name (``claude-sonnet-4-5@20250929``).
        project, location: the Google Cloud project and location (``global``, ``us-east5``…).
        token: a ready access token (``GOOGLE_OAUTH_ACCESS_TOKEN``), used as it is.
        credentials: google-auth credentials (ADC), refreshed when due; used when no token.
        base_url: replaces the location's ``https://…googleapis.com/v1``.
    """

    name = "vertex"
    anthropic_version = API_VERSION
    stream_in_body = True

    def __init__(self, client: httpx.AsyncClient | None, model: str, *, project: str,
                 location: str = DEFAULT_LOCATION, token: str | None = None,
                 credentials: Any = None, base_url: str | None = None, stream: bool = True,
                 max_tokens: int = DEFAULT_MAX_TOKENS, cache_ttl: str = "5m",
                 retry: RetryPolicy | None = None, rng: random.Random | None = None,
                 timeout: float = 600.0) -> None:
        if not token and credentials is None:
            raise ValueError("Vertex needs an access token or credentials")
        super().__init__(client, token or "", model, base_url=base_url or endpoint(location),
                         stream=stream, max_tokens=max_tokens, cache_ttl=cache_ttl, retry=retry,
                         rng=rng, timeout=timeout)
        self.project = project
        self.location = location
        self._credentials = credentials

    def model_url(self, model: str) -> str:
        verb = "streamRawPredict" if self.stream else "rawPredict"
        return (f"{self.base_url}/projects/{quote(self.project, safe='')}/locations/"
                f"{quote(self.location, safe='')}/publishers/anthropic/models/"
                f"{quote(model, safe='@')}:{verb}")

    def _headers(self) -> dict[str, str]:
        return {"content-type": "application/json", "accept": "application/json"}

    async def _request_headers(self, url: str, content: bytes) -> dict[str, str]:
        token = self._api_key
        if not token:
            token = await trio.to_thread.run_sync(_fresh_token, self._credentials)
        return {**self._headers(), "authorization": f"Bearer {token}"}

    def error(self, status: int, body: Any, headers: Any) -> ProviderHTTPError:
        return error_from_vertex(status, body, headers)
