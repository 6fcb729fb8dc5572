"""The progress line and the final table of ``mnemon run``."""

from __future__ import annotations

import io

import trio

from mnemon.orchestrator.jobs.display import JobProgress, final_table, progress_line
from mnemon.orchestrator.jobs.runner import Counts, JobSummary


def test_the_progress_line_says_done_failed_running_cost_and_eta():
    c = Counts(total=10, done=3, failed=1, running=2, finished_this_run=4, started_at=100.0)
    line = progress_line(c, 0.01234, now=108.0)
    assert line == ("[#########---------------] 4/10 · done 3 · failed 1 · running 2 · "
                    "$0.0123 · ETA 0:12"), "6 left at 2 s each"
    assert progress_line(Counts(total=5), 0.0, now=1.0).endswith("ETA --:--")


async def test_the_progress_display_draws_only_when_enabled(autojump_clock):
    out = io.StringIO()
    figures = lambda: (Counts(total=2), 0.01234)  # noqa: E731
    with trio.move_on_after(0.6):
        await JobProgress(figures, enabled=True, stream=out).run()
    assert out.getvalue().count("\r\x1b[K[") == 3 and out.getvalue().endswith("\r\x1b[K")
    quiet = io.StringIO()
    await JobProgress(figures, enabled=False, stream=quiet).run()
    assert quiet.getvalue() == ""


def test_the_final_table():
    s = JobSummary(run_root="r", output="r/results.jsonl", tasks=4, done=2, failed=1, budget=0,
                   cancelled=1, pending=0, skipped=0,
                   usage={"input_tokens": 1, "cache_read_tokens": 20, "cache_write_tokens": 3,
                          "output_tokens": 4}, cost_usd=0.5, elapsed_s=1.0, interrupted=True)
    text = final_table(s)
    rows = [line.split() for line in text.splitlines()[:6]]
    assert rows[2:6] == [["done", "2"], ["failed", "1"], ["cancelled", "1"], ["total", "4"]]
    assert "$0.5000" in text and "results: r/results.jsonl" in text
    assert text.endswith("interrupted: re-run the same command to resume")
