"""The engine in process: the estimate reserved on the job's spend while a wave is in flight,
and the progress figures."""

from __future__ import annotations

import shutil
from pathlib import Path

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
                        seen.append((runner.sup.cost_usd, progress_extra(provider),
                                     runner.sup.usage.input_tokens))
                        await trio.sleep(0.05)
                n.start_soon(sample)
                summary = await run_job(runner, provider)
                n.cancel_scope.cancel()
            await provider.aclose()
            return summary

        summary = trio.run(main)
    in_flight = [(c, line) for c, line, _t in seen if "1 batch(es) in flight" in line]
    assert in_flight, seen
    # while wave 1's batch is out (not while it is being created: "0 batch(es) in flight")
    first = [(c, t) for c, line, t in seen if " wave 1 " in line and "1 batch(es) in flight"
             in line]
    assert first and all(c > 0 and t > 0 for c, t in first)  # reserved before any row came
    assert "requests 6 pending / 0 done" in in_flight[0][1]
    assert "oldest 0:00" in in_flight[0][1]
    # every estimate released: what the run spent is what its logs say
    assert summary.cost_usd == pytest.approx(sum(c.cost_usd for c in run_cost(runner.root)),
                                             abs=1e-6)
    assert summary.done == 6
    assert summary.usage["input_tokens"] == sum(c.input_tokens for c in run_cost(runner.root))


def _run(job, **waves_kw):
    runner, provider = prepare(job, watch_sigint=False, engine="batch")
    for k, v in waves_kw.items():
        setattr(provider.waves, k, v)

    async def main():
        try:
            return await run_job(runner, provider)
        finally:
            await provider.aclose()

    return trio.run(main), provider.waves.stats(), runner.root


def test_a_wave_larger_than_the_provider_allows_is_split(tmp_path, monkeypatch):
    from mnemon.providers.batches import Limits
    from mnemon.providers.batches.anthropic import AnthropicBatches

    for k, v in KEYS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(AnthropicBatches, "limits", Limits(requests=4, bytes=10**9))
    with Server() as s:
        job = write_job(tmp_path, provider="anthropic", url=s.url, tasks=10, synod=0)
        summary, stats, root = _run(job)
        sizes = sorted(len(b.requests) for b in s.state.batches.values()
                       if b.requests[0]["custom_id"].endswith("-2-1"))
    assert summary.done == 10 and sizes == [2, 4, 4]
    assert stats.wave == 4 and stats.batches > stats.wave  # (waves of 10, 7, 5, 2 requests)


def _slow(job):
    shutil.copy(Path(__file__).parent / "slow_tools.py", job.parent / "slow_tools.py")
    job.write_text(job.read_text().replace("batch_policy:note", "slow_tools:note"))
    return job


def test_a_slow_tool_holds_a_wave_back_only_up_to_hold_s(tmp_path, monkeypatch):
    """An agent in a slow tool is waited for (the wave holds every agent's next turn); past
    ``hold_s`` the wave goes without it, and its turn goes in a later one."""
    for k, v in KEYS.items():
        monkeypatch.setenv(k, v)
    with Server() as s:
        job = _slow(write_job(tmp_path / "a", provider="anthropic", url=s.url, tasks=2,
                              synod=0))
        summary, stats, _ = _run(job)
        assert summary.done == 2 and stats.wave == 3  # k1: 2 turns, k2: 3 turns
        job = _slow(write_job(tmp_path / "b", provider="anthropic", url=s.url, tasks=2,
                              synod=0))
        summary, stats, _ = _run(job, hold_s=0.1)
        assert summary.done == 2 and stats.wave == 4  # k2's second turn went without k1's
