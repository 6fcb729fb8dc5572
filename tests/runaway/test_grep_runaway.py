"""The door's grep over a transcript, asked through the service: a pattern that runs away is
bounded (``timeout_s``) and refused by name, and the service's Trio thread — every other agent,
``/v1/health`` — goes on meanwhile (decision 0309)."""

from __future__ import annotations

import time

import trio

from ..service.util import live_service
from .ticker import Ticker


async def test_a_runaway_grep_over_the_service_stalls_no_one(tmp_path):
    async with live_service(tmp_path / "run") as svc:
        r = await svc.client.post("/v1/agents", json={"prompt": "ab" * 40 + "!"})
        aid = r.json()["id"]
        for _ in range(500):
            if (await svc.client.get(f"/v1/agents/{aid}")).json()["state"] != "running":
                break
            await trio.sleep(0.02)
        ticker = Ticker()
        async with trio.open_nursery() as nursery:
            await nursery.start(ticker.run)
            t = time.perf_counter()
            r = await svc.client.get(f"/v1/agents/{aid}/grep",
                                     params={"pattern": "^(ab|abab)+$", "timeout_s": "0.5"})
            took = time.perf_counter() - t
            health = await svc.client.get("/v1/health")
            ticker.stop = True
    assert r.status_code in (400, 409) and "ran longer than 0.5 s" in r.json()["error"], r.text
    assert health.status_code == 200
    assert 0.4 < took < 5
    assert ticker.worst < 0.1, f"the Trio thread stalled {ticker.worst * 1000:.0f} ms"
