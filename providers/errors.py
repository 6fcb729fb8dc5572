"""
The provider error tree, and the one place where httpx exceptions become ours.

::

    ProviderError                      base; ``retryable`` says whether retry.py tries again
    ├── ProviderConfigError            missing key, unknown provider name          not retried
    ├── ProviderHTTPError(status, body, headers)   any other 4xx                    not retried
    │   ├── RateLimited                429, rate_limit_error                           retried
    │   ├── Overloaded                 529, overloaded_error                           retried
    │   ├── ServerError                5xx, api_error                                  retried
    │   ├── AuthError                  401 / 403                                   not retried
    │   └── InvalidRequest             400 / 413 / 422                             not retried
    │       └── ContextTooLong         the prompt does not fit: the loop records
    │                                  ``failed: context``                         not retried
    ├── ProviderTimeout                connect / read / write / pool timeout           retried
    ├── ProviderConnectionError        the connection failed or broke                  retried
    └── StreamInterrupted              the stream ended without its terminator, or an
                                       overloaded / api / rate-limit error event came
                                       in the middle of it                             retried

A server may overrule ``retryable`` with ``x-should-retry: true|false``; ``retry.should_retry``
reads it. Messages are one line and never carry a secret: request headers are never kept.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx


__all__ = [
    "ProviderError",
    "ProviderConfigError",
    "ProviderHTTPError",
    "RateLimited",
    "Overloaded",
    "ServerError",
    "AuthError",
    "InvalidRequest",
    "ContextTooLong",
    "ProviderTimeout",
    "ProviderConnectionError",
    "StreamInterrupted",
    "http_error",
    "map_httpx_errors",
    "STATUS_FOR_ERROR_TYPE",
]


class ProviderError(Exception):
    """Base of every error a provider raises."""

    retryable: bool = False


class ProviderConfigError(ProviderError):
    """The provider cannot be built: a key is missing or the name is unknown. Never retried."""

    retryable = False


class ProviderHTTPError(ProviderError):
    """
    The server answered with an error status.

    Attributes:
        status: the HTTP status code.
        body: the parsed JSON body when it parses, else its text.
        headers: response headers, names lowercased (``retry-after`` and friends live here).
    """

    retryable = False

    def __init__(self, status: int, body: Any, headers: Mapping[str, str] | None = None,
                 message: str | None = None) -> None:
        self.status = status
        self.body = body
        self.headers = {k.lower(): v for k, v in (headers or {}).items()}
        self.message = message or _message_of(body) or f"HTTP {status}"
        super().__init__(f"HTTP {status}: {_one_line(self.message)}")


class RateLimited(ProviderHTTPError):
    """429 or a ``rate_limit_error``: retried, honouring ``retry-after``."""

    retryable = True


class Overloaded(ProviderHTTPError):
    """529 or an ``overloaded_error``: retried."""

    retryable = True


class ServerError(ProviderHTTPError):
    """A 5xx (or 408 / 409, which the official SDKs retry too): retried."""

    retryable = True


class AuthError(ProviderHTTPError):
    """401 / 403: the key is wrong or lacks permission. Not retried."""

    retryable = False


class InvalidRequest(ProviderHTTPError):
    """400 / 413 / 422: the request itself is wrong. Not retried."""

    retryable = False


class ContextTooLong(InvalidRequest):
    """The provider refused the prompt for its length. Not retried; the loop records
    ``failed: context``."""

    retryable = False


class ProviderTimeout(ProviderError):
    """A connect, read, write or pool timeout. Retried."""

    retryable = True


class ProviderConnectionError(ProviderError):
    """The connection could not be made or broke before a response began. Retried."""

    retryable = True


class StreamInterrupted(ProviderError):
    """
    The stream ended without its terminator (Anthropic's ``message_stop``, OpenAI's
    ``[DONE]``), or carried an overloaded / api / rate-limit error event. Retried; the partial
    message is discarded, so the caller never sees half a response.
    """

    retryable = True

    def __init__(self, message: str, *, error_type: str | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        self.error_type = error_type
        self.headers = {k.lower(): v for k, v in (headers or {}).items()}
        super().__init__(_one_line(message))


class MalformedResponse(StreamInterrupted):
    """A response or stream event that is not what the API defines (a missing field, a wrong
    type, bytes that are not JSON, a line without end). Retried like an interrupted stream:
    nothing of it is kept."""


# Anthropic's error ``type`` strings (also used in mid-stream ``error`` events) and their status.
STATUS_FOR_ERROR_TYPE = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


def http_error(status: int, body: Any, headers: Mapping[str, str] | None = None,
               *, context_too_long: bool = False) -> ProviderHTTPError:
    """
    The most specific ``ProviderHTTPError`` for a status. The adapter decides whether the body
    says the context is too long (the wording is provider-specific) and passes ``context_too_long``.
    """
    cls: type[ProviderHTTPError]
    if context_too_long:
        cls = ContextTooLong
    elif status == 429:
        cls = RateLimited
    elif status == 529:
        cls = Overloaded
    elif status >= 500 or status in (408, 409):
        cls = ServerError
    elif status in (401, 403):
        cls = AuthError
    elif status in (400, 413, 422):
        cls = InvalidRequest
    else:
        cls = ProviderHTTPError
    return cls(status, body, headers)


@contextmanager
def map_httpx_errors() -> Iterator[None]:
    """
    Translate httpx exceptions raised inside the block into the provider tree, chained with
    ``from``. Our own ``ProviderError`` passes through untouched; ``trio.Cancelled`` (a
    ``BaseException``) is never caught.
    """
    import httpx  # only the HTTP adapters call this, and they have imported it: a scripted
    # run's loop, which needs this module's error types, pays for no HTTP client

    try:
        yield
    except httpx.TimeoutException as exc:
        raise ProviderTimeout(f"{type(exc).__name__}: {_one_line(str(exc)) or 'timed out'}") from exc
    except httpx.RemoteProtocolError as exc:
        # The peer closed mid-body: for a stream, that is an interrupted stream.
        raise StreamInterrupted(f"connection closed mid-response: {exc}") from exc
    except httpx.TransportError as exc:
        raise ProviderConnectionError(f"{type(exc).__name__}: {_one_line(str(exc))}") from exc
    except httpx.HTTPStatusError as exc:
        resp = exc.response
        raise http_error(resp.status_code, _body_of(resp), resp.headers) from exc
    except httpx.HTTPError as exc:
        raise ProviderError(f"{type(exc).__name__}: {_one_line(str(exc))}") from exc


def _body_of(resp: httpx.Response) -> Any:
    try:
        return resp.json()
    except Exception:  # noqa: BLE001 - a body that is not JSON is kept as text
        try:
            return resp.text
        except Exception:  # noqa: BLE001
            return None


def _message_of(body: Any) -> str | None:
    """The human message inside an Anthropic or OpenAI error body."""
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return err["message"]
        if isinstance(err, str):
            return err
        if isinstance(body.get("message"), str):
            return body["message"]
    if isinstance(body, str) and body.strip():
        return body.strip()[:300]
    return None


def _one_line(text: str) -> str:
    return " ".join(text.split())
