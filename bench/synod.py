"""Synod benchmark: do N children forked from one large context share the parent's cached prefix?

    python bench/synod.py [--tokens 100000] [--n 8] [--runs 5] [--stances] [--json]

A root agent reads pages through a user tool until its context holds ``--tokens`` tokens (at the
scripted provider's 1 token per 4 bytes), then calls ``agents_synod(question, n, "vote")``. The
scripted provider's cache model (5-minute TTL, the run-wide cache) prices every request; the
figures are read from the children's first ``ProviderCall`` records, not assumed:

* **shared**: the input cost of the N first requests together (input, cache read and cache
  write at claude-sonnet-4-5 prices; output left out);
* **alone**: the input cost of one child's first request sent to an empty cache (what it costs
  had it run alone: its prefix written to the cache at 1.25×; also shown as plain uncached
  input at 1×, the stricter reading);
* **cache share**: cache-read tokens ÷ all input tokens of the N first requests.

Goals (issue 15): shared ≤ 1.5 × alone; cache share ≥ 85 %. Medians of ``--runs`` runs (the
costs are deterministic; the wall time is not). A benchmark, not a test: prints and exits 0.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import trio  # noqa: E402

from mnemon.orchestrator import logs  # noqa: E402
from mnemon.orchestrator.settings import Settings  # noqa: E402
from mnemon.orchestrator.supervisor import open_supervisor  # noqa: E402
from mnemon.orchestrator.usertools import UserTool  # noqa: E402
from mnemon.providers.cache import CacheModel  # noqa: E402
from mnemon.providers.prices import cost_usd  # noqa: E402
from mnemon.providers.scripted import ScriptedProvider  # noqa: E402
from mnemon.session.records import Text, ToolUse, Usage  # noqa: E402

MODEL = "claude-sonnet-4-5"
PAGE_BYTES = 16_000


async def read_page(i: int) -> str:
    """Read page i of the dossier."""
    line = f"page {i}: the committee minutes record the motion, the vote and the dissent. "
    return (line * (PAGE_BYTES // len(line) + 1))[:PAGE_BYTES]


class Recording:
    name = "scripted"

    def __init__(self, inner):
        self.inner = inner
        self.requests: dict[str, list] = {}

    async def complete(self, request, *, on_attempt=None):
        self.requests.setdefault(request.meta["agent"], []).append(request)
        return await self.inner.complete(request, on_attempt=on_attempt)

    async def aclose(self):
        pass


def policy_for(pages: int, n: int, stances: bool = False):
    def policy(request, state):
        if request.meta["depth"] >= 1:
            return [Text("The motion carries.")], "end_turn"
        k = state.get("k", 0) + 1
        state["k"] = k
        if k <= pages:
            return [ToolUse(f"r{k}", "read_page", {"i": k})], "tool_use"
        if k == pages + 1:
            inp = {"question": "Does the motion carry?", "n": n, "reduce": "vote"}
            if stances:
                inp["stances"] = [f"Argue as delegate {k + 1}." for k in range(n)]
            return [ToolUse("syn", "agents_synod", inp)], "tool_use"
        return [Text("Decided.")], "end_turn"
    return policy


def input_cost(u: Usage) -> float:
    return cost_usd(Usage(input_tokens=u.input_tokens, cache_read_tokens=u.cache_read_tokens,
                          cache_write_tokens=u.cache_write_tokens), MODEL)


async def one(tokens: int, n: int, folder: Path, stances: bool = False) -> dict:
    pages = max(1, round(tokens * 4 / PAGE_BYTES))
    rec = Recording(ScriptedProvider(policy=policy_for(pages, n, stances),
                                     cache_model=CacheModel()))
    settings = Settings(system="You read dossiers.", model=MODEL, context_window=400_000,
                        max_agents=n + 1, concurrency=n + 1)
    logs.configure(folder)
    async with open_supervisor(folder / "run", rec, settings, user_tools=[UserTool(read_page)],
                               started_by="bench/synod.py") as sup:
        t0 = time.perf_counter()
        root = await sup.ask("Read the dossier, then ask a synod.")
        wall = time.perf_counter() - t0
    kids = sorted(root.children, key=lambda a: (len(a), a))
    firsts = []
    for kid in kids:
        lines = (folder / "run" / "agents" / kid / "record.jsonl").read_text().splitlines()
        call = next(json.loads(x) for x in lines if '"t":"ProviderCall"' in x)
        firsts.append(Usage(**call["usage"]))
    parent_request = rec.requests[root.id][pages]
    parent_tokens = CacheModel().usage_for(parent_request, 0, 0.0, model=MODEL).total_input
    cold = CacheModel().usage_for(rec.requests[kids[0]][0], 0, 0.0, model=MODEL)
    shared = sum(input_cost(u) for u in firsts)
    alone = input_cost(cold)
    uncached = input_cost(Usage(input_tokens=cold.total_input))
    read = sum(u.cache_read_tokens for u in firsts)
    total = sum(u.total_input for u in firsts)
    return {"parent_context_tokens": parent_tokens, "n": n, "shared_usd": shared,
            "alone_usd": alone, "ratio": shared / alone,
            "alone_uncached_usd": uncached, "ratio_uncached": shared / uncached, "cache_share": read / total,
            "child_first_tokens": firsts[0].total_input, "wall_s": wall,
            "answer": root.answer}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=100_000)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--stances", action="store_true", help="a distinct stance per child")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    runs = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as d:
            runs.append(trio.run(one, args.tokens, args.n, Path(d), args.stances))
    med = {k: statistics.median(r[k] for r in runs) for k in
           ("parent_context_tokens", "shared_usd", "alone_usd", "ratio", "cache_share",
            "alone_uncached_usd", "ratio_uncached",
            "child_first_tokens", "wall_s")}
    med["n"] = args.n
    med["runs"] = args.runs
    med["goal_ratio_le_1_5"] = med["ratio"] <= 1.5
    med["goal_cache_share_ge_0_85"] = med["cache_share"] >= 0.85
    if args.json:
        print(json.dumps(med))
        return
    print(f"parent context: {med['parent_context_tokens']:,} tokens; {args.n} children; "
          f"median of {args.runs} runs")
    print(f"child's first request: {med['child_first_tokens']:,} input tokens")
    print(f"input cost of the {args.n} first requests (shared prefix): ${med['shared_usd']:.4f}")
    print(f"input cost of one first request alone (cold cache):  ${med['alone_usd']:.4f}")
    print(f"  (the same request as plain uncached input: ${med['alone_uncached_usd']:.4f}, "
          f"ratio {med['ratio_uncached']:.3f})")
    print(f"ratio: {med['ratio']:.3f} (goal <= 1.5)   cache share: "
          f"{med['cache_share'] * 100:.2f} % (goal >= 85 %)   wall: {med['wall_s']:.3f} s")


if __name__ == "__main__":
    main()
