"""The engine in process: the estimate reserved on the job's spend while a wave is in flight,
and the progress figures."""

from __future__ import annotations

import pytest
import trio

from mnemon.orchestrator.batch.job import progress_extra, run_job
from mnemon.orchestrator.costs import run_cost
from mnemon.orchestrator.jobs.build import prepare

from .kit import KEYS, write_job
from .server import Server


def test_a_wave_in_flight_reserves_its_estimate_and_shows_in_the_progress_line(
        tmp_path, monkeypatch):
    for k, v in KEYS.items():
        monkeypatch.setenv(k, v)
    with Server() as s:
        s.state.control.delay_s = 0.4
        job = write_job(tmp_path, provider="anthropic", url=s.url, tasks=6, synod=0)
        runner, provider = prepare(job, watch_sigint=False, engine="batch")
        seen: list[tuple[float, str]] = []

        async def main():
            async with trio.open_nursery() as n:
                async def sample():
                    while True:
                        seen.append((runner.sup.cost_usd, progress_extra(provider)))
                        await trio.sleep(0.05)
                n.start_soon(sample)
                summary = await run_job(runner, provider)
                n.cancel_scope.cancel()
            await provider.aclose()
            return summary

        summary = trio.run(main)
    in_flight = [(c, line) for c, line in seen if "1 batch(es) in flight" in line]
    assert in_flight, seen
    first = [c for c, line in in_flight if " wave 1 " in line]
    assert first and all(c > 0 for c in first)  # reserved before any row came back
    assert "requests 6 pending / 0 done" in in_flight[0][1]
    assert "oldest 0:00" in in_flight[0][1]
    # every estimate released: what the run spent is what its logs say
    assert summary.cost_usd == pytest.approx(sum(c.cost_usd for c in run_cost(runner.root)),
                                             abs=1e-6)
    assert summary.done == 6
