"""The reliability soak: the fast suite's promises at a scale no CI run affords.

    python bench/soak.py [--crashes 2000] [--turns 10000] [--fault-rate 0.15] [--cancels 2000]
                         [--json]

- **crashes**: SIGKILLs at random moments of a multi-agent run (forks, evictions), each followed
  by the full check (``tests/reliability/crashkit.py``): acknowledged records lost must be 0.
- **provider faults**: agents of 20 turns through the real Anthropic adapter against a
  fault-injecting server on loopback (``tests/reliability/faultserver.py``) at ``--fault-rate``:
  sessions that end without a named reason, duplicated turns and miscounted costs must be 0.
- **cancels**: random subtrees of a 3-level lineage cancelled mid-turn
  (``tests/reliability/test_cancellation.py``): orphans and provider calls after a cancel must
  be 0.

This is a benchmark, not a test: it prints the figures (``--json``: one object) for
``docs/reliability.md`` and exits 0 unless a promise broke.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import trio  # noqa: E402
import trio.testing  # noqa: E402


def crashes(n: int, tmp: Path) -> dict:
    from tests.reliability.crashkit import Zygote, one_case

    z = Zygote()
    seen, broken = [], []
    t0 = time.monotonic()
    try:
        for seed in range(n):
            try:
                seen.append(one_case(z, tmp, 100_000 + seed))
            except AssertionError as e:  # a broken promise: counted and named, not hidden
                broken.append(f"seed {100_000 + seed}: {e}")
            shutil.rmtree(tmp / f"case-{100_000 + seed}", ignore_errors=True)
    finally:
        z.close()
    return {"cases": n, "killed": sum(s["killed"] for s in seen),
            "acknowledged_records_checked": sum(s["acks"] for s in seen),
            "acknowledged_records_lost": sum("acknowledged record lost" in b for b in broken),
            "cases_broken": len(broken), "first_broken": broken[:3],
            "torn_tails": sum(s["torn"] for s in seen),
            "resumed_runs": sum(1 for s in seen if s["resumed"]),
            "seconds": round(time.monotonic() - t0, 1)}


def provider_faults(turns: int, rate: float, tmp: Path) -> dict:
    from mnemon.lineage.runroot import agent_source
    from mnemon.orchestrator import logs
    from tests.reliability.faultserver import FaultServer, run_agents

    logs.quiet()
    per = 20
    agents = max(1, turns // per)
    server = FaultServer(rate=rate, seed=11, turns=per, stall_s=3.0)
    root = tmp / "faults"

    t0 = time.monotonic()
    nodes = trio.run(lambda: run_agents(root, server, agents, concurrency=32))
    unnamed = dup = 0
    for node in nodes:
        if not node.reason:
            unnamed += 1
        recs = [json.loads(x) for x in (root / agent_source(node.id)).read_text().splitlines()]
        turns_ = [r["turn"] for r in recs if r["t"] in ("UserPrompt", "AssistantMessage")]
        dup += len(turns_) - len(set(turns_))
    faults = {k: v for k, v in server.stats.items() if k not in ("ok", "requests")}
    return {"sessions": len(nodes), "turns_target": agents * per,
            "requests": server.stats["requests"], "faults_injected": sum(faults.values()),
            "by_fault": dict(sorted(faults.items())),
            "completed": sum(n.reason == "done" for n in nodes),
            "ended_with_named_reason": sum(bool(n.reason) for n in nodes),
            "sessions_lost": unnamed, "duplicated_turns": dup,
            "seconds": round(time.monotonic() - t0, 1)}


def cancels(n: int, tmp: Path) -> dict:
    from mnemon.orchestrator import logs
    from tests.reliability.test_cancellation import _one_round

    logs.quiet()

    broken: list[str] = []

    async def main():
        seen = []
        for seed in range(n):
            try:
                seen.append(await _one_round(tmp / "cancels", seed))
            except AssertionError as e:  # a broken promise: counted and named
                broken.append(f"seed {seed}: {e}")
        return seen

    t0 = time.monotonic()
    (tmp / "cancels").mkdir()
    seen = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return {"rounds": n, "cancelled": sum(s["cancelled"] for s in seen),
            "orphans": sum("running" in b or "done" in b for b in broken),
            "calls_after_cancel": sum("after the cancel" in b for b in broken),
            "rounds_broken": len(broken), "first_broken": broken[:3],
            "seconds": round(time.monotonic() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--crashes", type=int, default=2000)
    ap.add_argument("--turns", type=int, default=10_000)
    ap.add_argument("--fault-rate", type=float, default=0.15)
    ap.add_argument("--cancels", type=int, default=2000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="mnemon-soak-"))
    out = {}
    try:
        if args.crashes:
            out["crashes"] = crashes(args.crashes, tmp)
        if args.turns:
            out["provider_faults"] = provider_faults(args.turns, args.fault_rate, tmp)
        if args.cancels:
            out["cancels"] = cancels(args.cancels, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out) if args.json else json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
