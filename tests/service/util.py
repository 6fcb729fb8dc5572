"""A real service on loopback for the tests: hypercorn's Trio worker on a free port, talked to
with httpx over TCP, as any client would."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import trio

from mnemon.lineage.runroot import create_run_root
from mnemon.orchestrator.service.runs import Run
from mnemon.orchestrator.service.server import serve
from mnemon.orchestrator.settings import Settings
from mnemon.providers.scripted import ScriptedProvider

TOKEN = "test-token-0123456789abcdef"


class Live:
    def __init__(self, base: str, run: Run, stop: trio.Event):
        self.base = base
        self.run = run
        self.stop = stop
        self.client = httpx.AsyncClient(base_url=base, timeout=20,
                                        headers={"Authorization": f"Bearer {TOKEN}"})

    @property
    def root(self) -> Path:
        return self.run.root


@asynccontextmanager
async def live_service(root: Path, *, provider=None, read_only: bool = False,
                       settings: Settings | None = None, provider_name: str = "scripted"):
    """Serve ``root`` (created when writable) until the block ends, then shut down cleanly."""
    if not read_only:
        create_run_root(root, "tests")
    run = Run(root, read_only=read_only, settings=settings or Settings(model="scripted"),
              provider_name=None if read_only else provider_name)
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(lambda task_status: serve(
            run, token=TOKEN, host="127.0.0.1", port=0,
            provider=None if read_only else (provider or ScriptedProvider()),
            provider_name=None if read_only else provider_name, version="test", stop=stop,
            task_status=task_status))
        live = Live(binds[0], run, stop)
        try:
            yield live
        finally:
            await live.client.aclose()
            stop.set()


async def sse_events(client: httpx.AsyncClient, path: str, *, last_id: str | None = None,
                     until=None, limit: int = 10_000) -> list[tuple[str | None, dict]]:
    """Read a server-sent event stream as a client does: ``(id, data)`` until ``until(data)``."""
    headers = {"Last-Event-ID": last_id} if last_id else {}
    out: list[tuple[str | None, dict]] = []
    async with client.stream("GET", path, headers=headers) as r:
        assert r.status_code == 200, await r.aread()
        assert r.headers["content-type"].startswith("text/event-stream")
        eid, data = None, None
        async for line in r.aiter_lines():
            if line.startswith("id: "):
                eid = line[4:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
            elif line == "" and data is not None:
                out.append((eid, data))
                if (until is not None and until(data)) or len(out) >= limit:
                    break
                eid, data = None, None
    return out


def slow_policy(delay: float):
    """A scripted model that thinks for ``delay`` seconds before each answer."""
    async def policy(request, state):
        await trio.sleep(delay)
        return [{"type": "text", "text": "done thinking"}], "end_turn"
    return policy
