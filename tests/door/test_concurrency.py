"""Lock discipline: the door resolves under the seam, reads after it in a worker thread."""

from __future__ import annotations

import threading
import time

import pytest
import trio

from mnemon.session.paths import Sources
from mnemon.session.door import Door, api
from mnemon.session.errors import Refusal
from tests.helpers import answer, new_agent, prompt, tool_turn


def _agent(run_root, n=20):
    log = new_agent(run_root, "a1")
    for i in range(n):
        prompt(log, f"question {i} needle")
        tool_turn(log, f"answer {i}", "grep -r needle", "needle\n" * 3)
    return log


async def test_append_completes_while_a_grep_is_reading(run_root, monkeypatch):
    monkeypatch.setattr(api, "INLINE_BYTES", 0)  # a grep too big to run on the Trio thread
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


async def test_small_answers_are_read_on_the_trio_thread_and_large_ones_in_a_worker(
        run_root, monkeypatch):
    """Up to ``INLINE_BYTES`` of records a read or grep answers without a thread hand-off;
    beyond it, in a worker thread. Both give the same answer."""
    log = _agent(run_root)
    where: list[bool] = []
    real = Sources(run_root)

    def opener(source):
        where.append(threading.current_thread() is threading.main_thread())
        return real(source)

    door = Door.of_agent(run_root, log, sources=opener)
    small = await door.agrep("needle")
    read_small = await door.aread("1-3")
    assert where and all(where)
    where.clear()
    monkeypatch.setattr(api, "INLINE_BYTES", 100)
    assert await door.agrep("needle") == small
    assert await door.aread("1-3") == read_small
    assert where and not any(where)


async def test_a_runaway_regex_on_a_small_transcript_leaves_the_trio_thread(run_root):
    """A small grep runs on the Trio thread with ``INLINE_REGEX_S`` of regex time; a pattern
    that backtracks past it starts again in a worker thread and is refused at its own timeout,
    while other tasks go on."""
    log = new_agent(run_root, "a1")
    prompt(log, "a" * 20000 + "!")  # 20 KB: under INLINE_BYTES
    answer(log, "ok")
    door = Door.of_agent(run_root, log)
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await trio.sleep(0.01)
            ticks += 1

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        t0 = time.perf_counter()
        with pytest.raises(Refusal, match="ran longer than 0.5 s"):
            await door.agrep(r"(a+)+$", timeout_s=0.5)
        elapsed = time.perf_counter() - t0
        nursery.cancel_scope.cancel()
    assert 0.45 <= elapsed < 5
    assert ticks >= 0.25 * elapsed / 0.01
    assert (await door.agrep("a!"))["total"] == 1  # and a quick one still answers here
