"""Bearer-token auth: where the token comes from, how it is compared, where it may not bind,
and the guard in front of the service and ``mnemon mcp --http`` that asks for it.

The token is compared in constant time and is never logged or recorded: hypercorn's access log
is off, and errors name the route, never the header. A refusal says which mistake it is — no
token, or a wrong one — and OAuth discovery (``/.well-known/…``) is answered 404 without a
token, so an MCP host reads "this server takes a bearer token" instead of trying to register
itself as an OAuth client (decision 0323)."""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import secrets
from typing import Any, Callable, Sequence

from ...errors import ConfigError

#: routes that answer without a token: the health check, the page, its static files and its icon
#: (they hold no run data; the page sends the token on every API call — decision 0230)
OPEN_PATHS = ("/v1/health", "/", "/static/", "/favicon.ico")

#: the one-line refusals (401)
NO_TOKEN = "a bearer token is required"
WRONG_TOKEN = "the bearer token is wrong"
NOT_BEARER = "a bearer token is required (the Authorization header is not Bearer)"
#: the answer (404) under ``/.well-known/``: OAuth metadata and the like, which mnemon has none of
NO_DISCOVERY = ("no such route: this server takes a bearer token (Authorization: Bearer "
                "<token>), not OAuth")


class AuthConfigError(ConfigError):
    pass


def resolve_token(flag: str | None, env: dict[str, str] | os._Environ = os.environ) -> tuple[str, bool]:
    """``(token, generated)``: ``--token``, else ``MNEMON_TOKEN``, else a new random one."""
    token = flag or env.get("MNEMON_TOKEN") or None
    if token is not None:
        if len(token) < 16:
            raise AuthConfigError("the token must be at least 16 characters")
        return token, False
    return new_token(), True


def new_token() -> str:
    """A random token (24 bytes, URL-safe) that does not begin with ``-``: one that did would
    be read as an option when passed back as ``--token TOKEN`` (1 in 64 would)."""
    while True:
        token = secrets.token_urlsafe(24)
        if not token.startswith("-"):
            return token


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token_given: bool) -> None:
    """Refuse a non-loopback address unless the user chose the token."""
    if not is_loopback(host) and not token_given:
        raise AuthConfigError(f"refusing to serve on {host} without a token: pass --token or "
                              "set MNEMON_TOKEN (a generated token is for loopback only)")


def is_open(path: str) -> bool:
    return (path == "/" or path == "/v1/health" or path == "/favicon.ico"
            or path.startswith("/static/"))


def authorized(header: str | None, token: str) -> bool:
    return refusal(header, token) is None


def refusal(header: str | None, token: str) -> str | None:
    """None when ``header`` carries ``token``; else why not, in one line."""
    if not header:
        return NO_TOKEN
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer":
        return NOT_BEARER
    value = value.strip()
    if not value:
        return NO_TOKEN
    if not hmac.compare_digest(value.encode("latin-1", "replace"), token.encode()):
        return WRONG_TOKEN
    return None


def guard(app: Any, token: str, *, open_path: Callable[[str], bool] = lambda path: False,
          headers: Sequence[tuple[bytes, bytes]] = ()) -> Any:
    """An ASGI wrapper: ``/.well-known/…`` is 404, a path ``open_path`` does not open needs the
    token (401 naming the mistake otherwise), and every HTTP answer carries ``headers``."""
    extra = list(headers)

    async def guarded(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        if extra:
            send = _adding(send, extra)
        path = scope["path"]
        if path.startswith("/.well-known/"):
            await _answer(send, 404, NO_DISCOVERY, [])
            return
        if not open_path(path):
            header = None
            for k, v in scope.get("headers", ()):
                if k == b"authorization":
                    header = v.decode("latin-1")
                    break
            why = refusal(header, token)
            if why is not None:
                challenge = b'Bearer error="invalid_token"' if why == WRONG_TOKEN else b"Bearer"
                await _answer(send, 401, why, [(b"www-authenticate", challenge)])
                return
        await app(scope, receive, send)

    return guarded


async def _answer(send: Any, status: int, error: str, headers: list) -> None:
    body = json.dumps({"error": error}, separators=(",", ":")).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})


def _adding(send: Any, extra: list[tuple[bytes, bytes]]) -> Any:
    async def sending(message: dict) -> None:
        if message["type"] == "http.response.start":
            have = {k.lower() for k, _ in message.get("headers", ())}
            message = {**message, "headers": [*message.get("headers", ()),
                                              *(h for h in extra if h[0] not in have)]}
        await send(message)
    return sending
