"""
AWS Signature Version 4 for one request (pure), and the AWS credential chain.

``sign`` computes the ``Authorization`` header (with ``x-amz-date`` and, for temporary
credentials, ``x-amz-security-token``) as the SigV4 specification defines it for every service but
S3: the path as sent, URI-encoded once more; the query's pairs encoded and sorted; header names
lower-cased, values trimmed with inner runs of spaces made one; the body's SHA-256. The time is an
argument, so the published test suite's vectors check it exactly
(tests/providers/test_bedrock_sigv4.py).

Signing is here rather than botocore's ``SigV4Auth`` because botocore reads the clock itself and
the adapter signs every attempt of a retried request anew (a signature is good for five minutes).
Credentials come from the standard chain: ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` /
``AWS_SESSION_TOKEN`` with nothing more installed, else botocore's chain (``AWS_PROFILE`` and the
shared files, SSO, a role to assume, the container and instance roles) from the ``bedrock``
extra (decision 0401).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

from msgspec import Struct

from .errors import ProviderConfigError

__all__ = ["Credentials", "sign", "canonical_request", "credentials_from_env",
           "resolve_credentials", "resolve_region", "botocore_session", "frozen", "UNSIGNED_HEADERS"]

ALGORITHM = "AWS4-HMAC-SHA256"
#: headers a proxy may drop or rewrite, so never signed (botocore leaves out the same)
UNSIGNED_HEADERS = frozenset({"user-agent", "expect", "connection", "x-amzn-trace-id",
                              "authorization", "content-length", "accept-encoding"})


class Credentials(Struct, frozen=True):
    access_key: str
    secret_key: str
    token: str | None = None

    def __repr__(self) -> str:  # the secret never reaches a log or a traceback
        return f"Credentials(access_key={self.access_key[:4]}…)"


def _enc(s: str) -> str:
    return quote(s, safe="-_.~")


def _canonical_query(query: str) -> str:
    pairs = parse_qsl(query, keep_blank_values=True)
    return "&".join(f"{k}={v}" for k, v in sorted((_enc(k), _enc(v)) for k, v in pairs))


def _canonical_headers(headers: Mapping[str, str]) -> tuple[str, str]:
    merged: dict[str, list[str]] = {}
    for name, value in headers.items():
        key = name.lower().strip()
        if key in UNSIGNED_HEADERS:
            continue
        merged.setdefault(key, []).append(" ".join(str(value).split()))
    names = sorted(merged)
    return "".join(f"{n}:{','.join(merged[n])}\n" for n in names), ";".join(names)


def canonical_request(method: str, url: str, headers: Mapping[str, str],
                      body: bytes) -> tuple[str, str]:
    """(the canonical request, the signed header names)."""
    parts = urlsplit(url)
    path = quote(parts.path or "/", safe="/~")
    text, signed = _canonical_headers(headers)
    return ("\n".join([method.upper(), path, _canonical_query(parts.query), text, signed,
                       hashlib.sha256(body).hexdigest()]), signed)


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def sign(method: str, url: str, headers: Mapping[str, str], body: bytes,
         credentials: Credentials, *, region: str, service: str,
         now: datetime | None = None) -> dict[str, str]:
    """
    The headers to send: ``headers`` plus ``host`` (when missing), ``x-amz-date``,
    ``x-amz-security-token`` (temporary credentials) and ``authorization``. Every header given is
    signed except those a proxy may change (``UNSIGNED_HEADERS``).
    """
    when = (now or datetime.now(UTC)).astimezone(UTC)
    stamp = when.strftime("%Y%m%dT%H%M%SZ")
    out = {k: v for k, v in headers.items() if k.lower() not in ("x-amz-date", "authorization")}
    if not any(k.lower() == "host" for k in out):
        out["host"] = urlsplit(url).netloc
    out["x-amz-date"] = stamp
    if credentials.token:
        out["x-amz-security-token"] = credentials.token
    creq, signed = canonical_request(method, url, out, body)
    scope = f"{stamp[:8]}/{region}/{service}/aws4_request"
    to_sign = "\n".join([ALGORITHM, stamp, scope, hashlib.sha256(creq.encode()).hexdigest()])
    key = _hmac(("AWS4" + credentials.secret_key).encode(), stamp[:8])
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    out["authorization"] = (f"{ALGORITHM} Credential={credentials.access_key}/{scope}, "
                            f"SignedHeaders={signed}, Signature={signature}")
    return out


# --------------------------------------------------------------------------- the chain


def credentials_from_env(env: Mapping[str, str]) -> Credentials | None:
    key, secret = env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")
    if key and secret:
        return Credentials(key, secret, env.get("AWS_SESSION_TOKEN") or None)
    return None


def botocore_session(env: Mapping[str, str]) -> Any:
    """A botocore session, or None when the ``bedrock`` extra is not installed. botocore reads
    the process's environment for the rest of its chain; ``env`` names the profile."""
    try:
        import botocore.session
    except ImportError:
        return None
    session = botocore.session.Session(profile=env.get("AWS_PROFILE") or None)
    return session


def _chain_error(e: Exception) -> ProviderConfigError:
    """botocore's word on a chain that cannot answer (an unknown profile, an expired SSO
    login, a role that cannot be assumed) as one line, the user's to fix."""
    said = " ".join(str(e).split())[:300]
    return ProviderConfigError(f"AWS credentials could not be resolved: {type(e).__name__}: "
                               f"{said}")


def _botocore_errors() -> tuple[type[Exception], ...]:
    try:
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError:
        return ()
    return (BotoCoreError, ClientError)


def resolve_credentials(env: Mapping[str, str], session: Any = None) -> Any:
    """
    What signs: ``Credentials`` from the environment, else botocore's credential object (which
    refreshes itself: ``get_frozen_credentials()`` per request), else None. ``session`` is a
    botocore session already made (the region was looked up through it).
    """
    found = credentials_from_env(env)
    if found is not None and not env.get("AWS_PROFILE"):
        return found
    session = session if session is not None else botocore_session(env)
    if session is None:
        return found
    try:
        return session.get_credentials() or found
    except _botocore_errors() as e:
        raise _chain_error(e) from None


def resolve_region(env: Mapping[str, str], session: Any = None) -> str | None:
    """``AWS_REGION``, else ``AWS_DEFAULT_REGION``, else the profile's region (botocore)."""
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        return region
    session = session if session is not None else botocore_session(env)
    if session is None:
        return None
    try:
        return session.get_config_variable("region") or None
    except _botocore_errors() as e:
        raise _chain_error(e) from None


def frozen(credentials: Any) -> Credentials:
    """``Credentials`` as they stand now: ours as they are, botocore's refreshed if due (this
    may reach the network: the caller runs it in a thread)."""
    if isinstance(credentials, Credentials):
        return credentials
    try:
        f = credentials.get_frozen_credentials()
    except _botocore_errors() as e:
        raise _chain_error(e) from None
    return Credentials(f.access_key, f.secret_key, f.token or None)
