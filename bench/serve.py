"""Service load benchmark: many event-stream clients watching many agents over real HTTP.

    python bench/serve.py [--agents 50] [--clients 200] [--seconds 60] [--latency 1.0] [--json]

A server process (this file with ``--serve``) runs ``mnemon``'s service on loopback over a new run
root, with the scripted provider answering each request after ``--latency`` seconds: each agent
calls ``transcript_index`` turn after turn for ``--seconds``, then answers. A second process (the
default mode) starts ``--agents`` agents through ``POST /v1/agents`` and opens ``--clients``
streams of the whole run's events (``GET /v1/events``) at once, reads them for ``--seconds``, and
reports: events received, errors, and the latency of each event that carries its record's time
(``at``: turn started, provider call, agent started/ended) — the time from the record being
written to the client having parsed it, p50/p99/max — plus the server's CPU time.

    python bench/serve.py --listing 1000,10000 [--json]

``--listing`` measures the listing routes instead, side by side: for each size it runs a job of
that many one-agent tasks (``mnemon run``, scripted provider) into a new run root, serves it
read-only in a server process, and times ``GET /v1/tree``, ``GET /v1/agents`` (the first call,
which scans every log, then the median of 5) and one page ``GET /v1/agents?limit=100``.

This is a benchmark, not a test: it prints figures (``--json``: one object) and exits 0.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import trio

TOKEN = "bench-token-0123456789abcdef"


def serve_main(root: str, latency: float, seconds: float) -> None:
    from mnemon.lineage.runroot import create_run_root
    from mnemon.orchestrator.service.runs import Run
    from mnemon.orchestrator.service.server import serve
    from mnemon.orchestrator.settings import Settings
    from mnemon.providers.scripted import ScriptedProvider

    deadline = time.monotonic() + seconds

    def policy(request, state):
        state["k"] = state.get("k", 0) + 1
        if time.monotonic() < deadline:
            return [{"type": "tool_use", "id": f"c{state['k']}", "name": "transcript_index",
                     "input": {"turns": "1"}}], "tool_use"
        return [{"type": "text", "text": "done"}], "end_turn"

    create_run_root(Path(root), "bench/serve.py")
    settings = Settings(model="scripted", max_agents=10_000, concurrency=10_000,
                        max_turns=100_000)
    run = Run(Path(root), read_only=False, settings=settings, provider_name="scripted")

    def ready(binds):
        print(binds[0], flush=True)

    trio.run(lambda: serve(run, token=TOKEN, host="127.0.0.1", port=0,
                           provider=ScriptedProvider(policy=policy, latency_s=latency),
                           provider_name="scripted", version="bench", on_ready=ready))


def serve_read_only(root: str) -> None:
    from mnemon.orchestrator.service.runs import Run
    from mnemon.orchestrator.service.server import serve
    from mnemon.orchestrator.settings import Settings

    run = Run(Path(root), read_only=True, settings=Settings(model="scripted"))
    trio.run(lambda: serve(run, token=TOKEN, host="127.0.0.1", port=0, provider=None,
                           provider_name=None, version="bench",
                           on_ready=lambda binds: print(binds[0], flush=True)))


def _job_run_root(n: int, where: Path) -> Path:
    """A run root of ``n`` agents: a job of ``n`` one-agent tasks on the scripted provider."""
    where.mkdir(parents=True, exist_ok=True)
    with open(where / "rows.jsonl", "w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"r{i}", "q": f"question {i}"}) + "\n")
    (where / "job.toml").write_text('concurrency = 64\n[provider]\nname = "scripted"\n'
                                    '[input]\npath = "rows.jsonl"\nid = "id"\n'
                                    'prompt = "Answer {q}."\n')
    subprocess.run([sys.executable, "-m", "mnemon", "run", str(where / "job.toml"),
                    "--run-root", str(where / "run")], check=True, capture_output=True)
    return where / "run"


def listing(sizes: list[int]) -> dict:
    out = {}
    for n in sizes:
        root = _job_run_root(n, Path(tempfile.mkdtemp(prefix="mnemon-listing-bench-")))
        server = subprocess.Popen([sys.executable, __file__, "--serve-read-only", str(root)],
                                  stdout=subprocess.PIPE, text=True)
        try:
            url = server.stdout.readline().strip()
            with httpx.Client(base_url=url, timeout=600,
                              headers={"Authorization": f"Bearer {TOKEN}"}) as c:
                def timed(path: str, params=None) -> tuple[float, dict]:
                    t = time.perf_counter()
                    r = c.get(path, params=params)
                    r.raise_for_status()
                    return time.perf_counter() - t, r.json()

                first, body = timed("/v1/agents")
                assert len(body["agents"]) == n, len(body["agents"])
                warm = statistics.median(timed("/v1/agents")[0] for _ in range(5))
                tree = statistics.median(timed("/v1/tree")[0] for _ in range(5))
                page = statistics.median(timed("/v1/agents", {"limit": 100})[0] for _ in range(5))
        finally:
            server.send_signal(2)
            server.wait(timeout=60)
        out[str(n)] = {"tree_s": round(tree, 3), "agents_first_s": round(first, 3),
                       "agents_s": round(warm, 3), "agents_page_100_s": round(page, 3)}
    return {"listing": out, "machine": f"{platform.machine()}, {os.cpu_count()} cores"}


def _at(s: str) -> float:
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


AT = re.compile(rb'"at":"([^"]+)"')


async def one_stream(host: str, port: int, stop_at: float, latencies: list, counts: dict) -> None:
    """A lean SSE client on a raw socket (one HTTP/1.1 request, chunked body): it counts events
    and parses only their ``at``, so the client process is not what the figures measure."""
    try:
        with trio.move_on_at(stop_at):
            sock = await trio.open_tcp_stream(host, port)
            req = (f"GET /v1/events HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}"
                   "\r\nAccept: text/event-stream\r\n\r\n").encode()
            await sock.send_all(req)
            buf = b""
            head_done = False
            while True:
                data = await sock.receive_some(1 << 16)
                if not data:
                    break
                now = time.time()
                buf += data
                if not head_done:
                    if b"\r\n\r\n" not in buf:
                        continue
                    head, buf = buf.split(b"\r\n\r\n", 1)
                    if not head.startswith(b"HTTP/1.1 200"):
                        counts["errors"] += 1
                        return
                    counts["streams_ok"] += 1
                    head_done = True
                cut = buf.rfind(b"\n\n")
                if cut < 0:
                    continue
                ready, buf = buf[:cut], buf[cut + 2:]
                counts["events"] += ready.count(b"\ndata: ")
                for m in AT.finditer(ready):
                    latencies.append(now - _at(m.group(1).decode()))
    except OSError:
        counts["errors"] += 1


async def load(url: str, agents: int, clients: int, seconds: float) -> dict:
    latencies: list[float] = []
    counts = {"events": 0, "errors": 0, "streams_ok": 0}
    host, port = url.removeprefix("http://").rsplit(":", 1)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as client:
        stop_at = trio.current_time() + seconds
        async with trio.open_nursery() as n:
            for _ in range(clients):
                n.start_soon(one_stream, host, int(port), stop_at, latencies, counts)
            await trio.sleep(1.0)
            for i in range(agents):
                r = await client.post("/v1/agents", json={"prompt": f"task {i}"})
                if r.status_code != 201:
                    counts["errors"] += 1
    latencies.sort()
    q = lambda p: round(latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000, 1)  # noqa: E731
    return {**counts, "timed_events": len(latencies),
            "latency_ms": {"p50": q(0.5), "p99": q(0.99), "max": q(1.0)} if latencies else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", type=int, default=50)
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--listing", metavar="N,N", help="time the listing routes at these sizes")
    ap.add_argument("--serve", metavar="ROOT", help=argparse.SUPPRESS)
    ap.add_argument("--serve-read-only", metavar="ROOT", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve_main(args.serve, args.latency, args.seconds)
        return
    if args.serve_read_only:
        serve_read_only(args.serve_read_only)
        return
    if args.listing:
        out = listing([int(n) for n in args.listing.split(",")])
        print(json.dumps(out) if args.json else json.dumps(out, indent=2))
        return
    root = Path(tempfile.mkdtemp(prefix="mnemon-serve-bench-")) / "run"
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(root), "--latency",
                               str(args.latency), "--seconds", str(args.seconds)],
                              stdout=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().strip()
        t0 = os.times()
        out = trio.run(load, url, args.agents, args.clients, args.seconds)
        t1 = os.times()
    finally:
        server.send_signal(2)
        server.wait(timeout=60)
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    out.update({"agents": args.agents, "clients": args.clients, "seconds": args.seconds,
                "latency_s": args.latency, "server_exit": server.returncode,
                "server_cpu_s": round(ru.ru_utime + ru.ru_stime, 1),
                "client_cpu_s": round((t1.user - t0.user) + (t1.system - t0.system), 1),
                "agents_on_disk": len(list((root / "agents").iterdir())),
                "machine": f"{platform.machine()}, {os.cpu_count()} cores"})
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:16} {v}")


if __name__ == "__main__":
    main()
