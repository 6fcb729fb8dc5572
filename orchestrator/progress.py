"""A live one-line progress display on a terminal: agents running/done, turns, tokens, cost."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from .supervisor import Supervisor


class Progress:
    def __init__(self, sup: "Supervisor", *, enabled: bool, interval_s: float = 0.25,
                 stream=None):
        self.sup = sup
        self.enabled = enabled
        self.interval_s = interval_s
        self.stream = stream or sys.stderr

    def line(self) -> str:
        agents = list(self.sup.agents.values())
        running = sum(1 for a in agents if a.state == "running")
        turns = sum(a.turns_taken for a in agents)
        u = self.sup.usage
        tokens = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens + u.output_tokens
        return (f"agents {running} running / {len(agents) - running} done · turns {turns} · "
                f"tokens {tokens:,} · ${self.sup.cost_usd:.4f}")

    async def run(self) -> None:
        if not self.enabled:
            return
        try:
            while True:
                self.stream.write("\r\x1b[K" + self.line())
                self.stream.flush()
                await trio.sleep(self.interval_s)
        finally:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
