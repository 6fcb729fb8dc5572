"""Bearer-token auth: where the token comes from, how it is compared, where it may not bind.

The token is compared in constant time and is never logged or recorded: hypercorn's access log
is off, and errors name the route, never the header."""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets

#: routes that answer without a token: the health check, and the page's static files (they hold
#: no run data; the page sends the token on every API call — decision 0230)
OPEN_PATHS = ("/v1/health", "/", "/static/")


class AuthConfigError(Exception):
    pass


def resolve_token(flag: str | None, env: dict[str, str] | os._Environ = os.environ) -> tuple[str, bool]:
    """``(token, generated)``: ``--token``, else ``MNEMON_TOKEN``, else a new random one."""
    token = flag or env.get("MNEMON_TOKEN") or None
    if token is not None:
        if len(token) < 16:
            raise AuthConfigError("the token must be at least 16 characters")
        return token, False
    return secrets.token_urlsafe(24), True


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
    return path == "/" or path == "/v1/health" or path.startswith("/static/")


def authorized(header: str | None, token: str) -> bool:
    if not header:
        return False
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(value.strip().encode(), token.encode())
