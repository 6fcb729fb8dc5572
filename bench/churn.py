"""Eviction against compaction per session, and the churn the plan makes, at 32k, 64k, 128k and
200k (where the server-side compactions trigger at their default, 150 000 tokens).

    python bench/churn.py [--windows 32000,64000,128000,200000] [--jobs 2] [--json OUT.json]
                          [--summary-tokens 2000]

For every dev trajectory and every long session (four or eight trajectories chained into one
agent's work, as ``bench/strategies.py`` makes them): ``evict`` (the default plan, ``keep =
"auto"``), ``compact``, ``rollover`` and the two server-side compactions replayed through the
live loop, and per session evict ÷ compact, evict ÷ the cheapest compaction (which one; "n/a"
where a provider's minimum trigger does not fit the window), the verbatim each keeps, and the
churn: harness evictions that kept less than the default verbatim floor (6 500 tokens), and
evictions that came within ``FEW`` requests of one that left the context above the eviction
line. Prints a markdown table per window and the worst session; ``--json`` keeps every row.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from _data import TRAJECTORIES as DEV, announce  # noqa: E402
from strategies import COMPACTIONS, SERVER, _chain, sessions as long_sessions  # noqa: E402


def _one(job: tuple) -> dict:
    from mnemon.lineage.view import open_agent
    from mnemon.orchestrator import logs
    from mnemon.orchestrator.importers import load
    from mnemon.orchestrator.replay import replay
    from mnemon.session.eviction import due_line
    from mnemon.session.constants import KEEP_FLOOR_TOKENS
    from mnemon.session.records import Evicted

    logs.quiet()
    from mnemon.orchestrator.replay.strategies import Options

    name, paths, strategy, window, summary_tokens = job
    traj = load(paths[0]) if len(paths) == 1 else _chain([Path(p) for p in paths])
    with tempfile.TemporaryDirectory() as tmp:
        res = replay(traj, Path(tmp) / "run", strategy, window=window,
                     opts=Options(summary_tokens=summary_tokens))
        out = res.summary()
        if res.not_applicable:
            out.update(name=name, strategy=strategy, window=window, under_floor=0,
                       short_then_again=0)
            return out
        under_floor = 0
        if strategy == "evict":
            _r, _a, ctx, _ = open_agent(Path(tmp) / "run" / "agents" / "a1")
            for t in ctx.turns:
                for rec in (t.records or ()):
                    if isinstance(rec, Evicted) and rec.plan is not None and \
                            rec.plan.verbatim_tokens < KEEP_FLOOR_TOKENS:
                        under_floor += 1
    rows = [r for r in res.rows if r.kind == "turn"]
    due = due_line(window)
    edits = [i for i, r in enumerate(rows) if r.edited]
    short_then_again = 0
    for a, b in zip(edits, edits[1:]):
        if b - a <= FEW and rows[a].context_tokens >= due:
            short_then_again += 1
    out.update(name=name, strategy=strategy, window=window, under_floor=under_floor,
               short_then_again=short_then_again)
    return out


FEW = 3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--windows", default="32000,64000,128000,200000")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", default=None)
    ap.add_argument("--summary-tokens", type=int, default=2000,
                    help="the summarisers' summary size (the replay's --summary-tokens)")
    a = ap.parse_args()
    announce(DEV)
    trajs = sorted(DEV.glob("*.jsonl"))
    sessions = [(p.stem, [str(p)]) for p in trajs] + \
               [(n, [str(p) for p in c]) for n, c in long_sessions(trajs)]
    windows = [int(w) for w in a.windows.split(",")]
    jobs = [(n, ps, s, w, a.summary_tokens) for w in windows for n, ps in sessions
            for s in ("evict", *COMPACTIONS)]
    with ProcessPoolExecutor(a.jobs) as pool:
        rows = list(pool.map(_one, jobs))
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    by = {(r["name"], r["strategy"], r["window"]): r for r in rows}
    for w in windows:
        print(f"\n#### {w // 1000}k\n")
        print("| session | evict ÷ compact | evict ÷ cheapest compaction | "
              + " | ".join(f"evict ÷ {x}" for x in SERVER) + " | verbatim evict / compact | "
              "evictions | under floor | again within 3 after a short one |")
        print("|---|---:|---:|" + "---:|" * len(SERVER) + "---:|---:|---:|---:|")
        te = tc = tm = tcheap = 0.0
        worst = (0.0, "")
        worst_cheap = (0.0, "", "")
        for n, _ in sessions:
            e, c = by[(n, "evict", w)], by[(n, "compact", w)]
            te += e["cost_usd"]
            tc += c["cost_usd"]
            ratio = e["cost_usd"] / c["cost_usd"]
            if c["edits"]:
                worst = max(worst, (ratio, n))
            ran = [by[(n, x, w)] for x in COMPACTIONS if not by[(n, x, w)]["not_applicable"]]
            cheap = min(ran, key=lambda r: r["cost_usd"])
            tm += e["cost_usd"]
            tcheap += cheap["cost_usd"]
            rc = e["cost_usd"] / cheap["cost_usd"]
            worst_cheap = max(worst_cheap, (rc, n, cheap["strategy"]))
            sv = ["n/a" if by[(n, x, w)]["not_applicable"] else
                  f"{e['cost_usd'] / by[(n, x, w)]['cost_usd']:.3f}" for x in SERVER]
            ve, vc = e.get("verbatim_kept"), c.get("verbatim_kept")
            print(f"| {n} | {ratio:.3f} | {rc:.3f} ({cheap['strategy']}) | {' | '.join(sv)} | "
                  f"{ve if ve is not None else '-'} / "
                  f"{vc if vc is not None else '-'} | {e['edits']} | {e['under_floor']} | "
                  f"{e['short_then_again']} |")
        print(f"\ntotal evict ÷ compact at {w // 1000}k: {te / tc:.3f}; worst session where "
              f"compaction edits: {worst[0]:.3f} ({worst[1]})")
        print(f"total evict ÷ the cheapest compaction of each session at {w // 1000}k: "
              f"{tm / tcheap:.3f}; worst: {worst_cheap[0]:.3f} ({worst_cheap[1]}, vs "
              f"{worst_cheap[2]})")


if __name__ == "__main__":
    main()
