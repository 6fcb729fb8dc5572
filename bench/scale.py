"""Scale-out benchmark: one job, ``--engine local`` against ``--engine dask`` (a LocalCluster of
worker processes × 1 thread), on a CPU-bound swarm (scripted provider, short latency).

    python bench/scale.py [--tasks 600] [--turns 6] [--latency 0.02] [--workers 2] [--runs 3]
                          [--with-budget] [--json]

Each task is a root agent that calls ``transcript_index`` for ``--turns`` − 1 turns, then
answers. Figures: agent-turns per second of each engine (whole ``mnemon run`` process, median of
``--runs``), and their ratio. ``--with-budget`` adds ``--engine dask`` on the same job with a job
budget it never reaches: what reading the other workers' ledgers before every turn costs
(decision 0251). This is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

POLICY = '''
def policy(request, state):
    said = sum(1 for m in request.messages if m["role"] == "assistant")
    if said + 1 < TURNS:
        return [{"type": "tool_use", "id": f"c{said}", "name": "transcript_index",
                 "input": {"turns": "1"}}], "tool_use"
    return [{"type": "text", "text": "done"}], "end_turn"
'''


def make_job(folder: Path, tasks: int, turns: int, latency: float,
             budget: int | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "swarm.py").write_text(f"TURNS = {turns}\n" + POLICY)
    rows = "".join(f'[[tasks]]\nid = "t{i}"\nprompt = "task {i}"\n\n' for i in range(tasks))
    (folder / "job.toml").write_text(
        f'concurrency = 64\n\n[provider]\nname = "scripted"\npolicy = "swarm:policy"\n'
        f'latency_s = {latency}\n\n[agent]\nmax_turns = {turns + 2}\n\n'
        + (f'[budget]\ntokens = {budget}\n\n' if budget else '') + rows)
    return folder / "job.toml"


def one(job: Path, engine: str, workers: int, root: Path) -> float:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "mnemon", "run", str(job), "--engine", engine,
                           "--workers", str(workers), "--run-root", str(root), "--json"],
                          capture_output=True, text=True)
    took = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-2000:])
    assert json.loads(proc.stdout)["done"] > 0
    shutil.rmtree(root)
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=600)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--latency", type=float, default=0.02)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--with-budget", action="store_true",
                    help="also --engine dask with a job budget never reached")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="mnemon-scale-"))
    job = make_job(tmp / "job", a.tasks, a.turns, a.latency)
    jobs = {"local": job, "dask": job}
    if a.with_budget:
        jobs["dask with a job budget"] = make_job(tmp / "budgeted", a.tasks, a.turns, a.latency,
                                                  budget=10**15)
    times: dict[str, list[float]] = {k: [] for k in jobs}
    for r in range(a.runs):
        for i, (name, path) in enumerate(jobs.items()):
            engine = name.split()[0]
            times[name].append(one(path, engine, a.workers, tmp / f"{i}-{r}.run"))
    turns = a.tasks * a.turns
    med = {e: statistics.median(v) for e, v in times.items()}
    out = {"tasks": a.tasks, "turns_per_task": a.turns, "latency_s": a.latency,
           "workers": a.workers, "runs": a.runs, "cpus": os.cpu_count(),
           "seconds_median": {e: round(v, 2) for e, v in med.items()},
           "agent_turns_per_s": {e: round(turns / v, 1) for e, v in med.items()},
           "dask_over_local": round(med["local"] / med["dask"], 2)}
    shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out) if a.json else json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
