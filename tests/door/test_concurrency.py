"""Lock discipline: the door resolves under the seam, reads after it in a worker thread."""

from __future__ import annotations

import threading
import time

import pytest
import trio

from mnemon.session.paths import Sources
from mnemon.session.door import Door
from mnemon.session.errors import Refusal
from tests.helpers import answer, new_agent, prompt, tool_turn


def _agent(run_root, n=20):
    log = new_agent(run_root, "a1")
    for i in range(n):
        prompt(log, f"question {i} needle")
        tool_turn(log, f"answer {i}", "grep -r needle", "needle\n" * 3)
    return log


async def test_append_completes_while_a_grep_is_reading(run_root, monkeypatch):
    log = _agent(run_root)
    started, release = threading.Event(), threading.Event()
    real = Sources(run_root)

    def slow_open(source):
        started.set()
        assert release.wait(10)
        return real(source)

    door = Door.of_agent(run_root, log, sources=slow_open)
    result = {}

    async def run_grep():
        result["ans"] = await door.agrep("needle")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_grep)
        while not started.is_set():
            await trio.sleep(0.005)
        # the grep is in progress in its worker; the seam is free and appends go through
        with trio.fail_after(1):
            async with log.seam:
                tid = prompt(log, "a late needle")
                answer(log, "noted")
        assert "ans" not in result
        release.set()
    # the grep answered what was resolved before the append, and skipped its turn in hand
    turns = {h["turn"] for h in result["ans"]["hits"]}
    assert tid not in turns
    assert result["ans"]["total"] == 20 * 5 - 4  # the turn in hand holds 4 hits


async def test_resolving_waits_for_the_seam(run_root):
    log = _agent(run_root, 3)
    door = Door.of_agent(run_root, log)
    done = trio.Event()

    async def run_read():
        await door.aread("1-3")
        done.set()

    async with trio.open_nursery() as nursery:
        await log.seam.acquire()
        nursery.start_soon(run_read)
        await trio.sleep(0.05)
        assert not done.is_set()
        log.seam.release()
        with trio.fail_after(5):
            await done.wait()


async def test_other_tasks_progress_during_a_long_grep(run_root):
    log = new_agent(run_root, "a1")
    prompt(log, "a" * 20000 + "!")
    answer(log, "ok")
    door = Door.of_agent(run_root, log)
    ticks = 0
    appended = []

    async def ticker():
        nonlocal ticks
        while True:
            await trio.sleep(0.01)
            ticks += 1

    async def appender():
        await trio.sleep(0.2)
        t0 = time.perf_counter()
        async with log.seam:
            prompt(log, "more")
        appended.append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        nursery.start_soon(appender)
        with pytest.raises(Refusal, match="ran longer than 1 s"):
            await door.agrep(r"(a+)+$", timeout_s=1.0)
        nursery.cancel_scope.cancel()
    elapsed = time.perf_counter() - t0
    assert elapsed >= 0.9
    assert ticks >= 0.25 * elapsed / 0.01  # the Trio thread was never stalled
    assert appended and appended[0] < 0.5


async def test_async_calls_answer_like_sync(run_root):
    log = _agent(run_root, 4)
    door = Door.of_agent(run_root, log)
    assert await door.aindex() == door.index()
    assert await door.aread("1-4") == door.read("1-4")
    assert await door.agrep("needle") == door.grep("needle")
    with pytest.raises(Refusal, match="still being written"):
        await door.aread([log.ctx.in_hand])
