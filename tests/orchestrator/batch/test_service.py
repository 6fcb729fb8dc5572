"""A job whose file says ``[provider] batch = true``, started through the service: it runs on
the batch engine (its waves driven beside it) and ends."""

from __future__ import annotations

import trio

from tests.service.util import live_service

from .kit import KEYS, results, write_job
from .server import Server


async def test_the_service_runs_a_batch_job(tmp_path, monkeypatch):
    for k, v in KEYS.items():
        monkeypatch.setenv(k, v)
    with Server() as s:
        job = write_job(tmp_path / "job", provider="anthropic", url=s.url, tasks=3)
        job.write_text(job.read_text().replace("batch_poll_s", "batch = true\nbatch_poll_s"))
        async with live_service(tmp_path / "run") as svc:
            r = await svc.client.post("/v1/jobs", json={"path": str(job)})
            assert r.status_code == 202, r.text
            jid = r.json()["id"]
            for _ in range(1500):
                got = (await svc.client.get(f"/v1/jobs/{jid}")).json()
                if got["state"] != "running":
                    break
                await trio.sleep(0.02)
        assert got["state"] == "ended", got
        assert s.state.batches and s.state.live_requests == 0
    rows = results(job.parent / "job.run" / "results.jsonl")
    assert {v["status"] for v in rows.values()} == {"done"}
