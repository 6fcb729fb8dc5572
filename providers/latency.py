"""Simulated latency at the cost of a socket wait: one timer per Trio run wakes every request
whose time has come.

``trio.sleep`` is a cancel scope with a deadline: entering and leaving it and raising and
catching the ``Cancelled`` that ends it cost ~35 µs of CPU per sleep on this project's 2-core
machine, against ~10 µs here (``python bench/agents.py`` runs thousands of simulated requests a
second, and a real provider waits on its socket, not on a cancelled scope). Every waiting task
parks in ``wait_task_rescheduled``; one system task sleeps until the earliest deadline and
reschedules everyone due then. Cancelling a wait removes it at once, as ``trio.sleep`` would;
the clock is Trio's, so ``MockClock(autojump_threshold=0)`` jumps to the timer's deadline as it
does to a sleep's (decision 0262).
"""

from __future__ import annotations

import heapq
import itertools
import math

import trio
from trio.lowlevel import Abort, RunVar, current_task, reschedule, wait_task_rescheduled

__all__ = ["wait"]


BATCH = 16  # requests woken per step of the timer (see ``_Timer.run``)


class _Timer:
    def __init__(self) -> None:
        self.heap: list[tuple[float, int, list]] = []  # (deadline, order, [task or None])
        self.order = itertools.count()
        self.scope: trio.CancelScope | None = None

    async def run(self) -> None:
        while True:
            with trio.CancelScope() as scope:
                self.scope = scope
                scope.deadline = self.heap[0][0] if self.heap else math.inf
                await trio.sleep_forever()
            self.scope = None
            heap = self.heap
            while heap and heap[0][0] <= trio.current_time():
                woken = 0
                while woken < BATCH and heap and heap[0][0] <= trio.current_time():
                    entry = heapq.heappop(heap)[2]
                    if entry[0] is not None:
                        reschedule(entry[0])
                        entry[0] = None
                        woken += 1
                if woken == BATCH:  # let these run before waking more: deadline order
                    await trio.lowlevel.cancel_shielded_checkpoint()

    def arm(self, deadline: float) -> list:
        entry = [current_task()]
        heapq.heappush(self.heap, (deadline, next(self.order), entry))
        if self.scope is not None and deadline < self.scope.deadline:
            self.scope.deadline = deadline
        return entry


_TIMER: RunVar[_Timer] = RunVar("mnemon_latency_timer")


async def wait(seconds: float) -> None:
    """Wait ``seconds`` on Trio's clock (a checkpoint even at 0, like ``trio.sleep``)."""
    if seconds <= 0:
        await trio.lowlevel.checkpoint()
        return
    try:
        timer = _TIMER.get()
    except LookupError:
        timer = _Timer()
        _TIMER.set(timer)
        trio.lowlevel.spawn_system_task(timer.run, name="mnemon latency timer")
    entry = timer.arm(trio.current_time() + seconds)

    def abort(_raise_cancel) -> Abort:
        entry[0] = None  # the timer skips it
        return Abort.SUCCEEDED

    await wait_task_rescheduled(abort)
