"""``mnemon mcp RUN_ROOT --agents`` from outside, through the official MCP client over stdio:
the handshake and ``tools/list``, then per agent ``agents_start``, ``agents_wait`` (a scripted
agent's whole run) and ``agents_status``, each call timed by the client (median and
second-slowest of ``--agents`` agents, one after another).

    python bench/mcp_agents.py /tmp/mcp-agents-bench --agents 20

The run root is made by the server (it must be new or empty).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import trio
from mcp import Client, StdioServerParameters


def _fig(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1000:.1f} / {sorted(xs)[-2] * 1000:.1f} ms"


async def main(root: str, n: int) -> None:
    t0 = time.perf_counter()
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "mnemon", "mcp", root, "--agents", "--provider", "scripted"])
    async with Client(params) as c:
        await c.list_tools()
        t1 = time.perf_counter()
        starts, waits, status = [], [], []
        for i in range(n):
            a = time.perf_counter()
            r = await c.call_tool("agents_start", {"task": f"task {i}", "budget_usd": 0.5})
            b = time.perf_counter()
            aid = json.loads(r.content[0].text)["agent"]
            await c.call_tool("agents_wait", {"agents": [aid], "timeout_s": 30})
            d = time.perf_counter()
            await c.call_tool("agents_status", {"agents": [aid]})
            e = time.perf_counter()
            starts.append(b - a)
            waits.append(d - b)
            status.append(e - d)
    print(f"handshake + tools/list {t1 - t0:.2f} s; agents_start {_fig(starts)}; "
          f"agents_wait (a scripted agent to its end) {_fig(waits)}; "
          f"agents_status {_fig(status)}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root")
    ap.add_argument("--agents", type=int, default=20)
    args = ap.parse_args()
    if args.agents < 2:
        ap.error("--agents must be at least 2")
    trio.run(main, args.root, args.agents)
