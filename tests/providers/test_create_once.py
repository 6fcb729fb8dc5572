"""``batches.base.create``: a call that makes something is never sent again blind — after any
failed attempt, and on giving up, what it may have made is looked for first (decision 0313)."""

from __future__ import annotations

import pytest
import trio

from mnemon.providers.batches.base import CreateUndecided, create
from mnemon.providers.errors import InvalidRequest, ProviderConnectionError, ServerError
from mnemon.providers.retry import RetryPolicy


class _Live:
    retry = RetryPolicy(max_attempts=4)


class _Provider:
    """Accepts every post; loses the answers of the first ``lost`` posts; lists what it made
    only ``lag`` looks after making it."""

    def __init__(self, lost: int, lag: int = 0, list_fails: bool = False):
        self.lost, self.lag, self.list_fails = lost, lag, list_fails
        self.made: list[str] = []
        self.looks = 0
        self.calls: list[str] = []

    async def post(self) -> str:
        self.calls.append("post")
        self.made.append(f"b{len(self.made) + 1}")
        if len(self.made) <= self.lost:
            raise ProviderConnectionError("connection reset")
        return self.made[-1]

    async def find(self) -> str | None:
        self.calls.append("find")
        if self.list_fails:
            raise ServerError(500, "list broke")
        self.looks += 1
        return self.made[0] if self.made and self.looks > self.lag else None


@pytest.mark.parametrize("lost", [1, 3])
async def test_a_lost_answer_is_found_before_anything_is_sent_again(autojump_clock, lost):
    p = _Provider(lost)
    assert await create(_Live(), "m", p.post, p.find) == "b1"
    assert p.made == ["b1"] and p.calls == ["post", "find"]


async def test_not_listed_yet_is_the_named_window(autojump_clock):
    """The listing does not show it yet: sent again — the window docs/jobs.md names."""
    p = _Provider(lost=1, lag=1)
    assert await create(_Live(), "m", p.post, p.find) == "b2"
    assert p.calls == ["post", "find", "post"]


async def test_a_listing_that_fails_sends_nothing_again(autojump_clock):
    p = _Provider(lost=1, list_fails=True)
    with pytest.raises(CreateUndecided, match="marker m"):
        await create(_Live(), "m", p.post, p.find)
    assert p.made == ["b1"]


async def test_a_refusal_is_final_and_looks_for_nothing(autojump_clock):
    calls = []

    async def post():
        calls.append("post")
        raise InvalidRequest(400, "bad")

    async def find():
        calls.append("find")

    with pytest.raises(InvalidRequest):
        await create(_Live(), "m", post, find)
    assert calls == ["post"]


async def test_cancelled_propagates(autojump_clock):
    async def post():
        await trio.sleep_forever()

    with trio.move_on_after(1) as scope:
        await create(_Live(), "m", post, post)
    assert scope.cancelled_caught
