"""What ``mnemon run`` shows: a live progress line on a terminal (done/failed/running, cost so
far, ETA) and the final table — the same under ``--engine local`` (the runner's figures) and
``--engine dask`` (the driver's ``Watch`` of the workers). Pure formatting apart from the redraw
loop."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Callable

import trio

from ..report import table

if TYPE_CHECKING:
    from .runner import Counts, JobSummary


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    s = int(seconds + 0.5)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def progress_line(c: "Counts", cost_usd: float, now: float | None = None) -> str:
    now = time.monotonic() if now is None else now
    finished = c.done + c.failed + c.budget + c.cancelled
    width = 24
    filled = int(width * finished / c.total) if c.total else width
    bar = "#" * filled + "-" * (width - filled)
    return (f"[{bar}] {finished}/{c.total} · done {c.done} · failed {c.failed} · running "
            f"{c.running} · ${cost_usd:.4f} · ETA {_clock(c.eta_s(now))}")


class JobProgress:
    """Redraws the progress line every ``interval_s`` on a terminal; nothing otherwise.

    ``figures()`` gives the line's ``(counts, cost_usd)`` at each redraw. ``run`` redraws from
    a Trio task (the local engine); ``draw`` and ``clear`` serve a caller with its own loop (the
    Dask driver)."""

    def __init__(self, figures: Callable[[], tuple["Counts", float]], *, enabled: bool,
                 interval_s: float = 0.25, stream=None):
        self.figures = figures
        self.enabled = enabled
        self.interval_s = interval_s
        self.stream = stream or sys.stderr

    def draw(self) -> None:
        if self.enabled:
            self.stream.write("\r\x1b[K" + progress_line(*self.figures()))
            self.stream.flush()

    def clear(self) -> None:
        if self.enabled:
            self.stream.write("\r\x1b[K")
            self.stream.flush()

    async def run(self) -> None:
        if not self.enabled:
            return
        try:
            while True:
                self.draw()
                await trio.sleep(self.interval_s)
        finally:
            self.clear()


def final_table(summary: "JobSummary") -> str:
    """Tasks by status, then tokens and cost of the whole job."""
    rows = [{"status": k, "tasks": getattr(summary, k)}
            for k in ("done", "failed", "budget", "cancelled", "pending")
            if getattr(summary, k) or k in ("done", "failed")]
    rows.append({"status": "total", "tasks": summary.tasks})
    u = summary.usage
    money = table([{"input": u["input_tokens"], "cache read": u["cache_read_tokens"],
                    "cache write": u["cache_write_tokens"], "output": u["output_tokens"],
                    "cost": f"${summary.cost_usd:.4f}"}],
                  ["input", "cache read", "cache write", "output", "cost"],
                  ["input", "cache read", "cache write", "output", "cost"])
    head = table(rows, ["status", "tasks"], ["status", "tasks"])
    if summary.denied or summary.asked:
        head += (f"\n\ntool calls: {summary.denied} denied by the policy, {summary.asked} asked "
                 f"about ({summary.approved} approved, {summary.rejected} rejected)")
    tail = (f"results: {summary.output}\nlogs: {summary.run_root}"
            + ("\ninterrupted: re-run the same command to resume" if summary.interrupted
               or summary.pending else ""))
    return f"{head}\n\n{money}\n{tail}"
