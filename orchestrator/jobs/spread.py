"""``mnemon run JOB.toml --engine dask``: a job's root tasks spread over Dask worker processes.

The driver validates the job and writes its run root's manifest exactly as ``--engine local``
does, then cuts the tasks still to do into chunks and submits one ``run_chunk`` per chunk. A
worker runs its chunk as one Trio loop over many root lineages at once (a ``JobRunner`` limited
to those tasks) against the same run root — storage every worker sees; pointers are run-root
relative — and writes the chunk's results to ``results.d/<chunk>.jsonl`` beside it. When a worker
dies, Dask runs its chunk again elsewhere: its finished tasks are read back from that file, its
interrupted agents resume from their logs (a recorded turn never calls the provider again), and
the per-log writer lock keeps two workers from ever writing one log. The driver merges every
chunk's lines into ``results.jsonl``, one per task, in task order.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable

CHUNKS_PER_WORKER = 2  # more chunks lose less to a dead worker; fewer start faster


def run_chunk(job_path: str, run_root: str, chunk: str, task_ids: list[str]) -> dict[str, Any]:
    """On a worker: run the named tasks of the job to their ends (resuming what a lost worker
    left), in one ``trio.run``; the chunk's results go to ``results.d/<chunk>.jsonl``."""
    import msgspec
    import trio

    from .. import logs
    from .build import prepare

    logs.quiet()
    out = Path(run_root) / "results.d" / f"{chunk}.jsonl"
    runner, provider = prepare(job_path, run_root=run_root, output=out, watch_sigint=False,
                               only=set(task_ids), started_by="mnemon run --engine dask")
    out.parent.mkdir(exist_ok=True)
    b = runner.spec.budget
    runner.count_prior = bool(b.usd or b.tokens)  # the job's budget needs the run's spend

    async def main():
        try:
            return await runner.run()
        finally:
            with trio.CancelScope(shield=True):
                await provider.aclose()

    summary = trio.run(main)
    return {"chunk": chunk, "pid": os.getpid(), **msgspec.to_builtins(summary)}


def chunks_of(ids: list[str], workers: int) -> list[list[str]]:
    """Task ids cut into about ``CHUNKS_PER_WORKER`` chunks per worker, in task order."""
    if not ids:
        return []
    n = max(1, min(len(ids), workers * CHUNKS_PER_WORKER))
    size = -(-len(ids) // n)
    return [ids[i:i + size] for i in range(0, len(ids), size)]


def run_job(job_path: str | Path, *, run_root: str | Path | None, output: str | Path | None,
            scheduler: str | None, workers: int,
            on_chunk: Callable[[dict[str, Any], int, int], None] | None = None) -> dict[str, Any]:
    """The driver: returns the summary of the whole job after every chunk ended."""
    import trio
    from distributed import Client, LocalCluster, as_completed

    from .build import prepare
    from .results import FINAL, read_results, rewrite

    runner, provider = prepare(job_path, run_root=run_root, output=output,
                               started_by="mnemon run --engine dask")
    trio.run(provider.aclose)
    root, out, tasks = runner.root, runner.output, runner.tasks
    prior = read_results(out)
    pending = [t.id for t in tasks if prior.get(t.id, {}).get("status") not in FINAL]
    t0 = time.monotonic()
    cluster = None
    if scheduler:
        client = Client(scheduler)
    else:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=40)
        client = Client(cluster)
    try:
        nworkers = max(1, len(client.scheduler_info()["workers"]) or workers)
        parts = chunks_of(pending, nworkers)
        tag = uuid.uuid4().hex[:8]
        futures = [client.submit(run_chunk, str(runner.job.path), str(root), f"{tag}-{i}", ids,
                                 key=f"mnemon-chunk-{tag}-{i}", retries=3, pure=False)
                   for i, ids in enumerate(parts)]
        done = 0
        for fut in as_completed(futures):
            summary = fut.result()
            done += 1
            if on_chunk is not None:
                on_chunk(summary, done, len(futures))
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    lines = {k: v for k, v in prior.items()}
    for f in sorted((root / "results.d").glob("*.jsonl")) if (root / "results.d").is_dir() else ():
        for task, line in read_results(f).items():
            if lines.get(task, {}).get("status") not in FINAL:
                lines[task] = line
    rewrite(out, [lines[t.id] for t in tasks if t.id in lines])
    statuses = [lines[t.id]["status"] for t in tasks if t.id in lines]
    return {"run_root": str(root), "output": str(out), "tasks": len(tasks),
            "done": statuses.count("done"), "failed": statuses.count("failed"),
            "budget": statuses.count("budget"), "cancelled": statuses.count("cancelled"),
            "pending": len(tasks) - len(statuses), "skipped": len(tasks) - len(pending),
            "cost_usd": round(sum(float(lines[t.id].get("cost_usd") or 0) for t in tasks
                                  if t.id in lines), 6),
            "elapsed_s": round(time.monotonic() - t0, 3), "chunks": len(parts),
            "workers": nworkers, "engine": "dask"}
