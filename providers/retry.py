"""
Retries: which errors are tried again, how long to wait, and the loop that does it.

Policy (DESIGN, "Rules pinned for implementers → Providers"): at most 6 attempts; the backoff
starts at 0.5 s and doubles, times a jitter drawn uniformly from [0.5, 1), capped at 30 s; a
server's ``retry-after-ms`` / ``retry-after`` (seconds or an HTTP date) replaces the backoff,
capped at 60 s; ``x-should-retry: true|false`` overrules the error class; the whole call is capped
in total time. Waiting is ``trio.sleep``, so tests run on ``autojump_clock``; the RNG is injected.

One attempt, one ``on_attempt(attempt, latency_s, usage, error)`` call: the caller records one
``ProviderCall`` per attempt. Only a successful attempt's response is returned, so a retried
request never produces a duplicate response.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

import trio
from msgspec import Struct

from .errors import ProviderError, ProviderHTTPError, StreamInterrupted
from ..session.records import Usage

__all__ = [
    "RetryPolicy",
    "OnAttempt",
    "parse_retry_after",
    "should_retry",
    "backoff_s",
    "delay_s",
    "call_with_retry",
]

T = TypeVar("T")

OnAttempt = Callable[[int, float, Usage | None, str | None], Any]
"""``on_attempt(attempt, latency_s, usage, error)``; may be sync or async."""


class RetryPolicy(Struct, frozen=True, kw_only=True):
    max_attempts: int = 6
    initial_backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    jitter: tuple[float, float] = (0.5, 1.0)
    max_retry_after_s: float = 60.0
    max_total_s: float = 15 * 60.0
    """No retry starts whose wait would end past this many seconds after the first attempt."""


def parse_retry_after(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """
    Seconds the server asks us to wait: ``retry-after-ms`` first, then ``retry-after`` as a
    number of seconds or an HTTP date. None when absent, unparseable or negative.
    """
    h = {k.lower(): v for k, v in headers.items()}
    ms = h.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000.0
            if value >= 0:
                return value
        except ValueError:
            pass
    ra = h.get("retry-after")
    if ra is None:
        return None
    try:
        value = float(ra)
        return value if value >= 0 else None
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(ra)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _headers_of(error: BaseException) -> Mapping[str, str]:
    if isinstance(error, (ProviderHTTPError, StreamInterrupted)):
        return error.headers
    return {}


def should_retry(error: BaseException) -> bool:
    """``x-should-retry`` when the server sent it, else the class's ``retryable``; anything
    that is not a ``ProviderError`` (a bug of ours) is never retried."""
    if not isinstance(error, ProviderError):
        return False
    verdict = _headers_of(error).get("x-should-retry")
    if verdict == "true":
        return True
    if verdict == "false":
        return False
    return error.retryable


def backoff_s(attempt: int, policy: RetryPolicy, rng: random.Random) -> float:
    """Backoff after failed attempt ``attempt`` (1-based): 0.5·2^(n−1), capped, times jitter."""
    base = min(policy.initial_backoff_s * 2 ** (attempt - 1), policy.max_backoff_s)
    return base * rng.uniform(*policy.jitter)


def delay_s(error: BaseException, attempt: int, policy: RetryPolicy, rng: random.Random,
            *, now: datetime | None = None) -> float:
    """The wait before the next attempt: the server's ``retry-after`` (capped), else backoff."""
    asked = parse_retry_after(_headers_of(error), now=now)
    if asked is not None:
        return min(asked, policy.max_retry_after_s)
    return backoff_s(attempt, policy, rng)


def _describe(error: BaseException) -> str:
    return " ".join(f"{type(error).__name__}: {error}".split())


async def _report(on_attempt: OnAttempt | None, *args: Any) -> None:
    if on_attempt is None:
        return
    result = on_attempt(*args)
    if result is not None and inspect.isawaitable(result):  # (None, the loop's: no ABC check)
        await result


async def call_with_retry(
    attempt_fn: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy | None = None,
    on_attempt: OnAttempt | None = None,
    rng: random.Random | None = None,
    usage_of: Callable[[T], Usage | None] = lambda r: getattr(r, "usage", None),
) -> T:
    """
    Run ``attempt_fn`` until it succeeds, a non-retryable error, the attempt limit or the
    total-time cap; re-raise the last error as it was.

    Cancellation:
        ``trio.Cancelled`` is never caught: a cancelled attempt or wait propagates at once and
        no ``on_attempt`` is reported for it.
    """
    policy = policy or RetryPolicy()
    rng = rng or random.Random()
    started = trio.current_time()
    attempt = 0
    while True:
        attempt += 1
        t0 = trio.current_time()
        try:
            result = await attempt_fn()
        except Exception as exc:
            await _report(on_attempt, attempt, trio.current_time() - t0, None, _describe(exc))
            if attempt >= policy.max_attempts or not should_retry(exc):
                raise
            wait = delay_s(exc, attempt, policy, rng)
            if trio.current_time() + wait - started > policy.max_total_s:
                raise
            await trio.sleep(wait)
            continue
        await _report(on_attempt, attempt, trio.current_time() - t0, usage_of(result), None)
        return result
