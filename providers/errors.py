"""
The provider error tree, and the one place where httpx exceptions become ours.

::

    ProviderError                      base; ``retryable`` says whether retry.py tries again;
    │                                  a ``mnemon.errors.Failure`` (exit 1)
    ├── ProviderConfigError            missing key, unknown provider name          not retried
    │                                  also a ``mnemon.errors.ConfigError`` (exit 2)
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
    ├── NotAnAnswer                    a 200 that is neither the stream asked for nor
    │                                  the API's message (a JSON body that is not one,
    │                                  an HTML page): it cannot succeed             not retried
    └── StreamInterrupted              the stream ended without its terminator, or an
                                       overloaded / api / rate-limit error event came
                                       in the middle of it                             retried

A server may overrule ``retryable`` with ``x-should-retry: true|false``; ``retry.should_retry``
reads it. Messages are one line and never carry a secret: request headers are never kept, and a
URL is named without its user, password or query (``safe_url``). What the server said is shown
bounded and with its control characters escaped (``inert``): it reaches a terminal.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from ..errors import ConfigError, Failure

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
    "NotAnAnswer",
    "StreamInterrupted",
    "http_error",
    "map_httpx_errors",
    "STATUS_FOR_ERROR_TYPE",
    "safe_url",
    "inert",
    "excerpt",
]

EXCERPT_CHARS = 300
"""How much of a body an error shows when the server's message is not in a shape we know."""


class ProviderError(Failure):
    """Base of every error a provider raises: a failure the user did not cause (exit 1), but
    for ``ProviderConfigError``."""

    retryable: bool = False


class ProviderConfigError(ProviderError, ConfigError):
    """The provider cannot be built: a key is missing or the name is unknown. Never retried.
    The user's to fix: exit 2."""

    retryable = False
    exit_code = 2


class ProviderHTTPError(ProviderError):
    """
    The server answered with an error status.

    The message names the URL (``located``: the sending half knows it, the wire mapping does
    not) and what the server said: its message in a shape we know (``error.message``, a
    proxy's ``detail``…), else its body, bounded and escaped, or that the body was empty — so
    ``HTTP 404`` never stands alone. ``hint`` is the adapter's guess at a likely cause (a base
    URL whose ``/v1`` is doubled).

    Attributes:
        status: the HTTP status code.
        body: the parsed JSON body when it parses, else its text.
        headers: response headers, names lowercased (``retry-after`` and friends live here).
        message: what the server said, one line.
        url: where the request went (``safe_url``), or None when not known.
    """

    retryable = False

    def __init__(self, status: int, body: Any, headers: Mapping[str, str] | None = None,
                 message: str | None = None, *, url: str | None = None,
                 hint: str | None = None) -> None:
        self.status = status
        self.body = body
        self.headers = {k.lower(): v for k, v in (headers or {}).items()}
        self.message = _bounded(inert(message or _message_of(body) or excerpt(body)))
        self.url = url
        self.hint = hint
        super().__init__(self._text())

    def located(self, url: str, hint: str | None = None) -> "ProviderHTTPError":
        """This error, naming the URL its request went to (and a likely cause)."""
        self.url = _bounded(safe_url(url), MESSAGE_CHARS)
        self.hint = hint or self.hint
        self.args = (self._text(),)
        return self

    def _text(self) -> str:
        where = f" from {self.url}" if self.url else ""
        hint = f" ({inert(self.hint)})" if self.hint else ""
        return f"HTTP {self.status}{where}: {self.message}{hint}"


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


class NotAnAnswer(ProviderError):
    """
    A success status whose body is neither the stream the request asked for nor the API's
    message: a JSON body that is not the API's message shape, or a page of another type (HTML
    from a wrong base URL). Asking again cannot change it, so it is refused at once, never
    retried, naming the URL, the content type and what came (bounded, escaped). A JSON answer
    that *is* the API's message is read as the answer, streamed or not (decision 0325).
    """

    retryable = False

    def __init__(self, url: str, content_type: str | None, body: Any, why: str) -> None:
        self.url = safe_url(url)
        self.content_type = content_type
        self.body = body
        said = _message_of(body) if isinstance(body, dict) else None
        ctype = _bounded(inert(content_type or "no content type"), EXCERPT_CHARS)
        super().__init__(f"{self.url} answered {why} ({ctype}): "
                         f"{_bounded(inert(said)) if said else excerpt(body)}")


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
        super().__init__(inert(message))


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
def map_httpx_errors(url: str | None = None) -> Iterator[None]:
    """
    Translate httpx exceptions raised inside the block into the provider tree, chained with
    ``from``; with ``url``, each names it (``safe_url``), and so does an HTTP error of ours
    that does not yet. Our own ``ProviderError`` passes through otherwise untouched;
    ``trio.Cancelled`` (a ``BaseException``) is never caught.
    """
    import httpx  # only the HTTP adapters call this, and they have imported it: a scripted
    # run's loop, which needs this module's error types, pays for no HTTP client

    at = f" ({safe_url(url)})" if url else ""
    try:
        yield
    except ProviderHTTPError as exc:
        if url and exc.url is None:
            exc.located(url)
        raise
    except httpx.TimeoutException as exc:
        raise ProviderTimeout(f"{type(exc).__name__}: {_one_line(str(exc)) or 'timed out'}{at}") from exc
    except httpx.RemoteProtocolError as exc:
        # The peer closed mid-body: for a stream, that is an interrupted stream.
        raise StreamInterrupted(f"connection closed mid-response: {exc}{at}") from exc
    except httpx.TransportError as exc:
        raise ProviderConnectionError(f"{type(exc).__name__}: {_one_line(str(exc))}{at}") from exc
    except httpx.HTTPStatusError as exc:
        resp = exc.response
        error = http_error(resp.status_code, _body_of(resp), resp.headers)
        raise error.located(url or str(exc.request.url)) from exc
    except httpx.HTTPError as exc:
        raise ProviderError(f"{type(exc).__name__}: {_one_line(str(exc))}{at}") from exc


def _body_of(resp: httpx.Response) -> Any:
    try:
        return resp.json()
    except Exception:  # noqa: BLE001 - a body that is not JSON is kept as text
        try:
            return resp.text
        except Exception:  # noqa: BLE001
            return None


def _message_of(body: Any) -> str | None:
    """The human message inside an error body of a shape we know: Anthropic's and OpenAI's
    ``error.message``, a bare ``error`` or ``message`` string, a proxy's (FastAPI's, LiteLLM's)
    ``detail`` — a string, an object with a message, or a list of ``{msg, loc}``. None for any
    other shape (``excerpt`` then shows the body)."""
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str) and err["message"].strip():
            return err["message"]
        if isinstance(err, str) and err.strip():
            return err
        if isinstance(body.get("message"), str) and body["message"].strip():
            return body["message"]
        detail = body.get("detail")
        if isinstance(detail, str) and detail.strip():
            return detail
        if isinstance(detail, dict):  # one level: a body is whatever the other end sent
            for key in ("message", "msg", "error"):
                if isinstance(detail.get(key), str) and detail[key].strip():
                    return detail[key]
        if isinstance(detail, list) and detail and all(isinstance(d, dict) for d in detail):
            said = [f"{'.'.join(map(str, d.get('loc') or ()))}: {d.get('msg')}".lstrip(": ")
                    for d in detail[:5] if d.get("msg")]
            return "; ".join(said) or None
    if isinstance(body, str) and body.strip() and not body.lstrip().startswith("<"):
        return body.strip()[:EXCERPT_CHARS]  # a page of HTML is shown as an excerpt instead
    return None


def excerpt(body: Any) -> str:
    """A body in a shape no adapter knows, as an error shows it: ``empty body``, or ``body: ``
    and its first ``EXCERPT_CHARS`` characters (compact JSON when it parsed), escaped."""
    if body is None or body == "" or body == b"":
        return "empty body"
    if isinstance(body, (bytes, bytearray)):
        text = bytes(body[:EXCERPT_CHARS * 4]).decode("utf-8", "replace")
    elif isinstance(body, str):
        text = body
    else:
        try:
            text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError, RecursionError):
            text = repr(body)[:EXCERPT_CHARS * 4]
    text = text.strip()
    if not text:
        return "empty body"
    shown = inert(text[:EXCERPT_CHARS])  # escapes may lengthen it: bounded again after
    cut = len(text) > EXCERPT_CHARS or len(shown) > EXCERPT_CHARS
    return f"body: {shown[:EXCERPT_CHARS]}{'…' if cut else ''}"


MESSAGE_CHARS = 1000
"""The most of a server's own message an error carries (a proxy may echo a whole prompt)."""


def _bounded(text: str, limit: int = MESSAGE_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def inert(text: str) -> str:
    """One line with every control or format character escaped (``\\x1b``, ``\\u202e``): a
    server's words reach a terminal and a log line, and must not steer either."""
    text = _one_line(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else
                   (f"\\x{ord(c):02x}" if ord(c) < 0x100 else
                    f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}")
                   for c in text)


def safe_url(url: str) -> str:
    """A URL as an error may show it: no user or password, no query (a key may ride in one:
    ``?key=``) and no fragment; a query is marked ``?…``. Escaped like ``inert``."""
    try:
        parts = urlsplit(str(url))
    except ValueError:
        return inert(str(url).split("?", 1)[0].split("#", 1)[0])
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = f"{host}:{port}" if port is not None else host
    shown = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    return inert(shown + ("?…" if parts.query else ""))


def _one_line(text: str) -> str:
    return " ".join(text.split())
