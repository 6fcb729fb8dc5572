"""Retries on Trio's autojump clock: no real sleeps."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest
import trio

from mnemon.providers.errors import (
    InvalidRequest,
    ProviderTimeout,
    RateLimited,
    ServerError,
    StreamInterrupted,
)
from mnemon.providers.retry import (
    RetryPolicy,
    backoff_s,
    call_with_retry,
    parse_retry_after,
    should_retry,
)
from mnemon.session.records import Usage


class Fake:
    """Fails with the given errors in turn, then answers."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0
        self.times: list[float] = []

    async def __call__(self):
        self.calls += 1
        self.times.append(trio.current_time())
        if self.errors:
            raise self.errors.pop(0)
        return Answer()


class Answer:
    usage = Usage(input_tokens=3, output_tokens=2)


def limited(**headers: str) -> RateLimited:
    return RateLimited(429, {"error": {"message": "slow down"}}, headers)


class TestParsing:
    def test_retry_after_forms(self):
        now = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
        assert parse_retry_after({"retry-after": "3"}) == 3.0
        assert parse_retry_after({"Retry-After": "2.5"}) == 2.5
        assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
        assert parse_retry_after({"retry-after": "Mon, 30 Nov 2026 12:00:10 GMT"}, now=now) == 10
        assert parse_retry_after({"retry-after": "Mon, 30 Nov 2026 11:00:00 GMT"}, now=now) == 0
        assert parse_retry_after({"retry-after": "soon"}) is None
        assert parse_retry_after({"retry-after": "-1"}) is None
        assert parse_retry_after({}) is None

    def test_backoff_doubles_with_jitter_and_cap(self):
        policy = RetryPolicy()

        class Top:
            def uniform(self, a, b):
                return b

        class Bottom:
            def uniform(self, a, b):
                return a

        assert [backoff_s(n, policy, Top()) for n in range(1, 9)] == [
            0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
        assert backoff_s(1, policy, Bottom()) == 0.25
        rng = random.Random(7)
        assert all(0.25 <= backoff_s(1, policy, rng) <= 0.5 for _ in range(100))

    def test_should_retry(self):
        assert should_retry(limited())
        assert not should_retry(limited(**{"x-should-retry": "false"}))
        assert should_retry(InvalidRequest(400, {}, {"x-should-retry": "true"}))
        assert not should_retry(InvalidRequest(400, {}, {}))
        assert should_retry(StreamInterrupted("cut"))
        assert not should_retry(ValueError("a bug of ours"))


class TestLoop:
    async def test_retry_after_honoured(self, autojump_clock):
        fake = Fake(limited(**{"retry-after": "5"}))
        t0 = trio.current_time()
        await call_with_retry(fake, rng=random.Random(0))
        assert fake.calls == 2
        assert fake.times[1] - t0 == pytest.approx(5.0)

    async def test_retry_after_capped_at_60(self, autojump_clock):
        fake = Fake(limited(**{"retry-after": "3600"}))
        await call_with_retry(fake, rng=random.Random(0))
        assert fake.times[1] - fake.times[0] == pytest.approx(60.0)

    async def test_should_retry_false_stops(self, autojump_clock):
        fake = Fake(ServerError(500, "boom", {"x-should-retry": "false"}))
        with pytest.raises(ServerError):
            await call_with_retry(fake)
        assert fake.calls == 1

    async def test_at_most_six_attempts_one_report_each(self, autojump_clock):
        fake = Fake(*[ProviderTimeout("read timed out") for _ in range(10)])
        reports = []
        with pytest.raises(ProviderTimeout):
            await call_with_retry(fake, on_attempt=lambda *a: reports.append(a),
                                  rng=random.Random(1))
        assert fake.calls == 6
        assert [r[0] for r in reports] == [1, 2, 3, 4, 5, 6]
        assert all(r[2] is None and r[3].startswith("ProviderTimeout") for r in reports)
        # Five waits of 0.5·2^k·jitter: between half and all of 0.5+1+2+4+8.
        assert 7.75 <= fake.times[-1] - fake.times[0] <= 15.5

    async def test_success_reported_with_usage(self, autojump_clock):
        fake = Fake(StreamInterrupted("stream ended without message_stop"))
        reports = []

        async def record(*args):  # an async callback is awaited
            await trio.sleep(0)
            reports.append(args)

        result = await call_with_retry(fake, on_attempt=record, rng=random.Random(0))
        assert isinstance(result, Answer)
        assert [(r[0], r[2], r[3] is None) for r in reports] == [
            (1, None, False), (2, Answer.usage, True)]

    async def test_total_time_cap(self, autojump_clock):
        fake = Fake(*[limited(**{"retry-after": "40"}) for _ in range(5)])
        with pytest.raises(RateLimited):
            await call_with_retry(fake, policy=RetryPolicy(max_total_s=100.0))
        assert fake.calls == 3  # waits at 40 and 80 fit, the third would end at 120

    async def test_non_retryable_and_bugs_propagate_at_once(self):
        for error in (InvalidRequest(400, {}, {}), KeyError("bug")):
            fake = Fake(error)
            with pytest.raises(type(error)):
                await call_with_retry(fake)
            assert fake.calls == 1

    async def test_cancellation_is_not_caught(self, autojump_clock):
        fake = Fake(*[limited(**{"retry-after": "30"}) for _ in range(5)])
        reports = []
        with trio.move_on_after(45) as scope:
            await call_with_retry(fake, on_attempt=lambda *a: reports.append(a))
        assert scope.cancelled_caught
        assert fake.calls == 2 and len(reports) == 2
        assert trio.current_time() == pytest.approx(45.0)
