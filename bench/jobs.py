"""Jobs benchmark: the harness overhead of ``mnemon run`` over the ideal wall time.

    python bench/jobs.py [--tasks 1000] [--concurrency 64] [--latency 0.1] [--runs 3]
                         [--turns 1] [--cli] [--json]

A job of ``--tasks`` tasks (an input JSONL through a prompt template) on the scripted provider
with ``--latency`` seconds of simulated latency per request, ``--concurrency`` tasks in flight,
each task ``--turns`` turns (a user-tool call per turn before the last, then the answer). Each
task is a real root agent with its own ``record.jsonl``, results go to ``results.jsonl``,
structlog writes ``mnemon.log`` — the whole runner (``orchestrator.jobs.runner.JobRunner``).

* **ideal** = ceil(tasks / concurrency) × turns × latency: the provider's time alone, with the
  tasks in perfect waves;
* **wall** = the runner's ``run()`` from start to the rewritten results file (in process), and
  with ``--cli`` also ``python -m mnemon run JOB.toml`` end to end (interpreter start included);
* **CPU per task** = the process's CPU time during ``run()`` ÷ tasks: what the harness (and the
  scripted provider's cache model) costs per task, whatever else runs on the machine; **loop
  CPU per task**, the Trio thread's share of it (the rest is the thread making logs ahead);
* **overhead** = wall ÷ ideal − 1. Goal (issue 15): ≤ 10 % at 1 000 tasks, concurrency 64,
  0.1 s latency.

Medians of ``--runs`` runs, each on a fresh run root, all removed at the end: a run root
removed just before a run makes its creates dearer on some file systems (ext4 without a journal
skips inodes freed in the last minute, one lookup each; docs/performance.md). The process sets
the collector as the ``mnemon`` command does (decision 0261; ``--host-gc`` keeps CPython's).
A benchmark, not a test: prints, exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import trio  # noqa: E402

from mnemon.orchestrator import logs  # noqa: E402
from mnemon.orchestrator.jobs import (load_job, load_tasks, provider_for,  # noqa: E402
                                      settings_for, user_tools_for)
from mnemon.orchestrator.jobs.runner import JobRunner  # noqa: E402
from mnemon.orchestrator.jobs.state import check_manifest  # noqa: E402
from mnemon.lineage.runroot import create_run_root  # noqa: E402

CPU: list[float] = []  # process CPU seconds of each run (all threads)
LOOP: list[float] = []  # the Trio thread's CPU seconds of each run

KIT = '''
def probe(i: int) -> str:
    """Probe the instrument."""
    return f"reading {i}: nominal"


def policy(request, state):
    turns = sum(1 for m in request.messages if m["role"] == "assistant")
    if turns + 1 < TURNS:
        return [{"type": "tool_use", "id": f"p{turns}", "name": "probe",
                 "input": {"i": turns}}], "tool_use"
    return [{"type": "text", "text": "done: " + str(len(request.messages))}], "end_turn"
'''


def write(folder: Path, tasks: int, concurrency: int, latency: float, turns: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "benchkit.py").write_text(f"TURNS = {turns}\n" + KIT)
    with open(folder / "rows.jsonl", "w") as f:
        for i in range(tasks):
            f.write(json.dumps({"n": i, "topic": f"instrument {i}"}) + "\n")
    job = folder / "job.toml"
    job.write_text(f"""concurrency = {concurrency}
[provider]
name = "scripted"
policy = "benchkit:policy"
latency_s = {latency}
price_as = "claude-sonnet-4-5"
[agent]
system = "You check instruments."
tools = ["benchkit:probe"]
[input]
path = "rows.jsonl"
prompt = "Check {{topic}} and report."
""")
    return job


async def run_once(job_path: Path, root: Path) -> tuple[float, dict]:
    job = load_job(job_path)
    tasks = load_tasks(job)
    create_run_root(root, "bench/jobs.py")
    check_manifest(root, job, tasks)
    logs.configure(root)
    provider = provider_for(job)
    runner = JobRunner(job, tasks, root=root, output=root / "results.jsonl", provider=provider,
                       settings=settings_for(job), user_tools=user_tools_for(job),
                       provider_name="scripted")
    t0, c0, l0 = time.perf_counter(), time.process_time(), time.thread_time()
    summary = await runner.run()
    wall = time.perf_counter() - t0
    CPU.append(time.process_time() - c0)
    LOOP.append(time.thread_time() - l0)
    logs.shutdown()
    assert summary.done == len(tasks), summary
    return wall, {"done": summary.done, "cost_usd": summary.cost_usd}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--turns", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cli", action="store_true", help="also time python -m mnemon run")
    ap.add_argument("--host-gc", action="store_true",
                    help="keep CPython's collector settings instead of the mnemon command's (gctune)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--dir", default=str(ROOT / "bench" / "out"),
                    help="where the run roots go (default bench/out). On ext4 without a "
                         "journal a create costs 0.3-0.5 ms of kernel time for a minute after "
                         "many files were removed nearby (decision 0263): /tmp, where the test "
                         "suite removes thousands, often is such a place")
    args = ap.parse_args()
    if not args.host_gc:  # as the mnemon command sets it (decision 0261)
        from mnemon.orchestrator.gctune import for_process

        for_process()
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    ideal = math.ceil(args.tasks / args.concurrency) * args.turns * args.latency
    walls, clis = [], []
    with contextlib.ExitStack() as keep:  # every run root removed after the last run
        for _ in range(args.runs):
            d = keep.enter_context(tempfile.TemporaryDirectory(dir=args.dir))
            job = write(Path(d) / "job", args.tasks, args.concurrency, args.latency, args.turns)
            wall, _ = trio.run(run_once, job, Path(d) / "run")
            walls.append(wall)
            sys.modules.pop("benchkit", None)
            if args.cli:
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-m", "mnemon", "run", str(job), "--run-root",
                                str(Path(d) / "cli-run")], check=True, cwd=job.parent,
                               stdout=subprocess.DEVNULL)
                clis.append(time.perf_counter() - t0)
    out = {"tasks": args.tasks, "concurrency": args.concurrency, "latency_s": args.latency,
           "turns": args.turns, "runs": args.runs, "ideal_s": round(ideal, 4),
           "wall_s": round(statistics.median(walls), 4),
           "overhead": round(statistics.median(walls) / ideal - 1, 4) if ideal else None,
           "walls": [round(w, 4) for w in walls],
           "cpu_ms_per_task": round(statistics.median(CPU) / args.tasks * 1e3, 3),
           "loop_cpu_ms_per_task": round(statistics.median(LOOP) / args.tasks * 1e3, 3),
           "load_avg_1m": round(__import__("os").getloadavg()[0], 2)}
    if clis:
        out["cli_s"] = round(statistics.median(clis), 4)
        out["cli_overhead"] = round(statistics.median(clis) / ideal - 1, 4) if ideal else None
    if args.json:
        print(json.dumps(out))
        return
    print(f"{args.tasks} tasks × {args.turns} turn(s), concurrency {args.concurrency}, latency "
          f"{args.latency} s; median of {args.runs}")
    print(f"ideal {ideal:.3f} s · in-process wall {out['wall_s']:.3f} s · overhead "
          f"{(out['overhead'] or 0) * 100:.1f} % (goal <= 10 %)   runs: {out['walls']}")
    print(f"CPU {out['cpu_ms_per_task']:.3f} ms per task (process time, all threads; "
          f"{out['loop_cpu_ms_per_task']:.3f} on the Trio thread); load "
          f"average {out['load_avg_1m']} on {__import__('os').cpu_count()} CPUs")
    if clis:
        print(f"CLI end to end {out['cli_s']:.3f} s · overhead {out['cli_overhead'] * 100:.1f} %")


if __name__ == "__main__":
    main()
