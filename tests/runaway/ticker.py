"""A Trio task that sleeps 10 ms at a time and records the longest gap between its wake-ups:
what any other agent on the Trio thread would have felt."""

from __future__ import annotations

import time

import trio


class Ticker:
    PERIOD = 0.01

    def __init__(self) -> None:
        self.stop = False
        self.worst = 0.0
        self.ran = 0.0

    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """``await nursery.start(ticker.run)``: returns once it has ticked."""
        start = last = time.perf_counter()
        while not self.stop:
            await trio.sleep(self.PERIOD)
            now = time.perf_counter()
            self.worst = max(self.worst, now - last - self.PERIOD)
            last = now
            task_status.started()
            task_status = trio.TASK_STATUS_IGNORED
        self.ran = last - start
