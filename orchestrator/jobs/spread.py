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

The chunks balance themselves (decision 0472): a chunk claims each task as it starts it
(``claims``) and, once its own are taken, runs the other chunks' tasks that none has started —
so a worker with slower tasks, or a busier core, does not leave the others waiting at the end.

Across workers (decision 0251), everything goes through the shared run root: each chunk attempt
keeps its spend and its tasks running in its own ledger file (``ledger.py``), which every worker
of a budgeted job reads before each turn — so the job's budget is one total — and the driver
reads, with the new lines of the chunks' results files, for the same live progress display and
the same ``--json`` summary as ``--engine local``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Callable

from .claims import Claims, all_taken, create as create_claims, steal_order, stop as stop_claims
from .forks import end_early, import_distributed, numpy_deferred, serving
from .results import decode_line  # imported by ``runner`` already
from .runner import Counts, JobSummary

CHUNKS_PER_WORKER = 2  # more chunks lose less to a dead worker; fewer start faster
RESULTS = "results.d"
LOGS = "mnemon.log.d"  # each chunk attempt's log lines, beside the driver's mnemon.log
_NONE = object()


def run_chunk(job: Any, tasks: list, run_root: str, chunk: str, run: str,
              base: dict[str, Any], log_level: int = logging.INFO,
              trace: dict[str, Any] | None = None,
              share: dict[str, Any] | None = None) -> dict[str, Any]:
    """On a worker: run these tasks of the job to their ends (resuming what a lost worker
    left), in one ``trio.run``; the chunk's results go to ``results.d/<chunk>.jsonl``, its spend
    and tasks running to its own ledger file, its log lines (at the driver's ``log_level``) to
    its own file in ``mnemon.log.d``. ``base`` is what earlier runs of the job spent.

    ``job`` and ``tasks`` are the driver's, as it checked them against the run root's manifest:
    a chunk does not read the job file again (a 4 000-task file is ~0.06–0.15 s of TOML per
    worker, on the way to its first turn; pickled, the job and a chunk's tasks are ~0.01 s).
    ``trace`` is the job's tracing, carried from the driver (``tracing.switch.carried``).
    ``share`` (``shares``: the run's every chunk) makes the chunk claim each task as it starts
    it, and once its own are taken, run what the other chunks have not (decision 0472)."""
    import functools

    import msgspec
    import trio

    from ...session.records import Usage
    from .. import logs
    from ..gctune import tuned
    from ..tracing.switch import live_tracing
    from .build import prepare
    from .ledger import Ledger, SharedSpendSupervisor, folder_of

    root = Path(run_root)
    out = root / RESULTS / f"{chunk}.jsonl"
    if share is not None and all_taken(root / RESULTS / f"{run}.claims") \
            and not _ran_before(root, chunk):
        # every task was claimed before this chunk started (a worker's second chunk, its
        # first having taken what was left): nothing to run, nothing to build a runner for
        out.touch()  # (its results file, empty: every chunk has one)
        return {"chunk": chunk, "pid": os.getpid(), **msgspec.to_builtins(JobSummary(
            run_root=str(root), output=str(out), tasks=0, done=0, failed=0, budget=0,
            cancelled=0, pending=0, skipped=0, usage={}, cost_usd=0.0, elapsed_s=0.0,
            interrupted=False))}
    attempt = f"{chunk}.{time.time_ns():020d}.{os.getpid()}"  # this try of the chunk
    (root / LOGS).mkdir(exist_ok=True)
    logs.configure(None, path=root / LOGS / f"{attempt}.log", level=log_level)
    logs.bind(chunk=chunk, pid=os.getpid())  # every line of the chunk, its agents' too
    ledger = Ledger(folder_of(root, run), attempt)
    mine = None  # this attempt's claims (``share``)
    shared = functools.partial(SharedSpendSupervisor, ledger=ledger,
                               base=(Usage(**base["usage"]), float(base["cost_usd"])))
    try:
        runner, provider = prepare(job.path, run_root=run_root, output=out, watch_sigint=False,
                                   started_by="mnemon run --engine dask", supervisor=shared,
                                   loaded=(job, tasks), manifest=False, engine="dask")
        sup = runner.sup
        out.parent.mkdir(exist_ok=True)
        runner.count_prior = False  # the driver read the run root's earlier spend: ``base``
        if share is not None:
            mine = runner.claims = Claims(root / RESULTS / f"{run}.claims", chunk)
            runner.others = functools.partial(_others, root, share)

        def on_change(r) -> None:
            ledger.running = r.counts.running
            sup.publish()

        runner.on_change = on_change

        async def main():
            try:
                return await runner.run()
            finally:
                with trio.CancelScope(shield=True):
                    await provider.aclose()

        with tuned(), live_tracing(carry=trace):  # the collector set for many agents (0261)
            summary = trio.run(main)
        ledger.running = 0
        sup.publish(ended=True)
    finally:
        if mine is not None:
            mine.close()
        ledger.close()
        logs.shutdown()  # written out; the worker's next task may not be a chunk
        logs.quiet()
        logs.unbind("chunk", "pid")
    return {"chunk": chunk, "pid": os.getpid(), **msgspec.to_builtins(summary)}


def shares(folder: Path, run: str, tasks: list, parts: list[list[str]]) -> list[dict[str, Any]]:
    """What each chunk needs to run the tasks the others have not (``run_chunk``'s ``share``):
    every chunk's tasks written once beside the results (``<run>.tasks``), each chunk's range in
    it, and the order it steals in. None of it when there is one chunk."""
    import msgspec

    if len(parts) < 2:
        return [None] * len(parts)  # type: ignore[list-item]
    folder.mkdir(exist_ok=True)
    by_id = {t.id: t for t in tasks}
    path = folder / f"{run}.tasks"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(msgspec.msgpack.encode([by_id[x] for ids in parts for x in ids]))
    os.replace(tmp, path)
    create_claims(folder / f"{run}.claims", max(t.index for t in tasks) + 1)
    bounds, at = [], 0
    for ids in parts:
        bounds.append((at, at + len(ids)))
        at += len(ids)
    names = [f"{run}-{i}" for i in range(len(parts))]
    return [{"file": path.name,
             "others": [(names[j], *bounds[j]) for j in steal_order(len(parts), i)]}
            for i in range(len(parts))]


def _ran_before(root: Path, chunk: str) -> bool:
    """Whether an earlier attempt of the chunk started (its log file is the first thing an
    attempt makes): it may hold claims, which this attempt must take again."""
    try:
        return any(e.name.startswith(chunk + ".") for e in os.scandir(root / LOGS))
    except FileNotFoundError:
        return False


def _others(root: Path, share: dict[str, Any]) -> list[tuple[str, list]]:
    """The other chunks' tasks, in the order this one steals (read once its own are taken)."""
    import msgspec

    from .tasks import Task

    try:
        raw = (root / RESULTS / share["file"]).read_bytes()
    except FileNotFoundError:  # the run was stopped (Ctrl-C) or ended: nothing to take
        return []
    every = msgspec.msgpack.Decoder(list[Task]).decode(raw)
    return [(name, every[start:end]) for name, start, end in share["others"]]


def forget_shares(folder: Path) -> None:
    """Remove the tasks files and claims of ended runs (``shares``): after the merge, and at
    the start of a run, those of a run whose driver was killed before it merged."""
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return
    for e in entries:
        stem, dot, kind = e.name.partition(".")
        if dot and kind in ("tasks", "claims", "tasks.tmp"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(e.path)


LOCAL_CLUSTER = {  # Dask settings for the LocalCluster mnemon starts, for its whole life
    # A worker samples every thread's stack every 10 ms for Dask's profile page, and watches the
    # GIL every 1 ms: on a CPU-bound chunk that is CPU and GIL taken from the agents. The
    # LocalCluster mnemon starts has no dashboard to show them (decision 0250).
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.gil.enabled": False,
    # Every server (the scheduler and nannies in the driver, each worker) wakes every 20 ms to
    # time its own event loop, only to warn when it was blocked for seconds: half of an idle
    # cluster's CPU. Once a second still warns (decision 0252).
    "distributed.admin.tick.interval": "1s",
    # Workers forked from one server process that imported Dask and the chunk's modules once,
    # not each started afresh to import them again (decision 0252).
    "distributed.worker.multiprocessing-method": "forkserver",
    # The scheduler's work stealing (a balance pass every 100 ms) has nothing to move: a chunk
    # waits at the scheduler until a worker's one thread is free (Dask's queuing). With the
    # nannies' memory checks at 1 s and the system monitor at 2 s, the driver's Dask thread
    # takes 1.3–1.7 % of a core during a run instead of 3.0 % (decision 0253).
    "distributed.scheduler.work-stealing": False,
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
}


def chunks_of(ids: list[str], workers: int) -> list[list[str]]:
    """Task ids cut into about ``CHUNKS_PER_WORKER`` chunks per worker, in task order."""
    if not ids:
        return []
    n = max(1, min(len(ids), workers * CHUNKS_PER_WORKER))
    size = -(-len(ids) // n)
    return [ids[i:i + size] for i in range(0, len(ids), size)]


class Watch:
    """The driver's live view of a Dask run, read from the shared run root: the new lines of
    this run's chunk results files (a task counts the moment its worker appends its line) and
    the chunks' ledgers (cost so far, tasks running). ``counts`` and ``cost_usd`` feed the same
    progress line as ``--engine local``."""

    def __init__(self, root: Path, run: str, tasks: list, prior: dict[str, dict],
                 base_usd: float):
        from .ledger import Reader, folder_of
        from .results import is_final

        self.root = root
        self.folder = root / RESULTS
        self.run = run
        self.reader = Reader(folder_of(root, run))
        self.base_usd = base_usd
        self.final = {t.id: prior[t.id]["status"] for t in tasks
                      if is_final(prior.get(t.id, {}))}
        self.lines: dict[str, dict] = {}  # this run's, by task
        # each task's status and how many have each, kept as lines arrive: a poll costs what
        # is new, not every task again
        self._status: dict[str, Any] = dict(self.final)
        self._tally: Counter = Counter(self._status.values())
        self._finished = 0  # tasks with a line of this run that were not final before it
        self.ended: set[str] = set()  # chunks whose Dask task has ended
        self._at: dict[str, tuple[int, int]] = {}  # results file -> (inode, bytes read)
        self.counts = Counts(total=len(tasks), skipped=len(self.final),
                             started_at=time.monotonic())
        self.cost_usd = base_usd
        self.poll()

    def _take(self, line: dict) -> None:
        task = line["task"]
        if task not in self.lines and task not in self.final:
            self._finished += 1
        self.lines[task] = line
        old = self._status.get(task, _NONE)
        if old is not _NONE:
            self._tally[old] -= 1
        self._status[task] = line.get("status")
        self._tally[self._status[task]] += 1

    def _tail(self) -> None:
        try:
            files = [e for e in os.scandir(self.folder)
                     if e.name.startswith(self.run + "-") and e.name.endswith(".jsonl")]
        except FileNotFoundError:
            return
        for e in files:
            st = e.stat()
            ino, at = self._at.get(e.name, (st.st_ino, 0))
            if ino != st.st_ino or st.st_size < at:
                at = 0  # rewritten at the chunk's end, or its torn tail cut: read it again
            if st.st_size == at:
                self._at[e.name] = (st.st_ino, at)
                continue
            with open(e.path, "rb") as f:
                f.seek(at)
                data = f.read(st.st_size - at)
            whole = data[:data.rfind(b"\n") + 1]
            for raw in whole.splitlines():
                try:
                    line = decode_line(raw)
                except ValueError:
                    continue
                if isinstance(line, dict) and isinstance(line.get("task"), str):
                    self._take(line)
            self._at[e.name] = (st.st_ino, at + len(whole))

    def poll(self) -> None:
        """Read what changed on the run root; update ``counts`` and ``cost_usd``."""
        self._tail()
        entries = self.reader.entries()
        latest: dict[str, str] = {}  # chunk -> its newest attempt's ledger
        for name in entries:
            chunk = name.split(".", 1)[0]
            if name > latest.get(chunk, ""):
                latest[chunk] = name
        c = self.counts
        for k in ("done", "failed", "budget", "cancelled"):
            setattr(c, k, self._tally[k])
        c.finished_this_run = self._finished
        c.running = sum(entries[n].running for ch, n in latest.items() if ch not in self.ended)
        self.cost_usd = self.base_usd + sum(e.usd for e in entries.values())
        c.cost_usd = self.cost_usd


def _spent(root: Path):
    """What every earlier run of the job spent, from the run root's logs (``mnemon cost``)."""
    from ...lineage.runroot import list_agents
    from ...session.records import Usage
    from ..costs import run_cost

    # a damaged log counts what it still shows; its task fails alone when it runs (0319)
    spent = run_cost(root, damaged=[]) if list_agents(root) else []
    usage = sum((Usage(input_tokens=c.input_tokens, output_tokens=c.output_tokens,
                       cache_read_tokens=c.cache_read_tokens,
                       cache_write_tokens=c.cache_write_tokens) for c in spent), Usage())
    return usage, sum(c.cost_usd for c in spent)


def run_job(job_path: str | Path, *, run_root: str | Path | None, output: str | Path | None,
            scheduler: str | None, workers: int,
            on_chunk: Callable[[dict[str, Any], int, int], None] | None = None,
            on_progress: Callable[[Watch], None] | None = None,
            interval_s: float = 0.25, on_root: Callable[[Path], None] | None = None,
            log_level: int = logging.INFO,
            trace: dict[str, Any] | None = None,
            loaded: tuple[Any, list] | None = None) -> dict[str, Any]:
    """The driver: the summary of the whole job (``JobSummary``'s fields, as ``--engine local``
    gives them, and ``chunks``, ``workers``, ``engine``) after every chunk ended.
    ``on_progress(watch)`` is called every ``interval_s`` while the chunks run; Ctrl-C cancels
    the chunks, merges what they finished and returns ``interrupted``. ``on_root(root)`` is
    called once the job is checked and its run root made (the ``mnemon`` command sends its own
    log lines there); the chunks log at ``log_level`` (decision 0254) and trace as ``trace``
    says (``tracing.switch.carried``). ``loaded`` is ``(job, tasks)`` as ``build.load`` gave
    them for ``job_path`` (the command has read the file already: not parsed twice)."""
    # a LocalCluster's workers are forked from one server, ended with the run (``serving``)
    with serving() if not scheduler else contextlib.nullcontext():
        import_distributed()  # here, while the fork server imports it too

        from .build import prepare

        runner, provider = prepare(job_path, run_root=run_root, output=output,
                                   started_by="mnemon run --engine dask", engine="dask",
                                   loaded=loaded)
        try:  # the run root held until the merged results are written (``state.hold``)
            if on_root is not None:
                on_root(runner.root)
            return _drive(runner, provider, scheduler=scheduler, workers=workers,
                          on_chunk=on_chunk, on_progress=on_progress, interval_s=interval_s,
                          log_level=log_level, trace=trace)
        finally:
            runner.release()


def _drive(runner, provider, *, scheduler, workers, on_chunk, on_progress,
           interval_s, log_level, trace=None) -> dict[str, Any]:
    """``run_job`` once the job is checked and its run root held: the cluster, the chunks, the
    merge."""
    import msgspec
    import structlog
    import trio
    import dask
    from distributed import Client, LocalCluster, wait

    from ...session.records import Usage
    from .ledger import Reader, clear, folder_of
    from .results import is_final, read_results, rewrite
    from .runner import _usage

    log = structlog.get_logger("mnemon.jobs")
    trio.run(provider.aclose)
    root, out, tasks = runner.root, runner.output, runner.tasks
    prior = read_results(out)
    pending = [t.id for t in tasks if not is_final(prior.get(t.id, {}))]
    base_usage, base_usd = _spent(root)  # earlier runs: their ledgers are in the logs now
    clear(root)
    forget_shares(root / RESULTS)  # a killed driver's (its chunks' lines are merged below)
    run = uuid.uuid4().hex[:8]
    watch = Watch(root, run, tasks, prior, base_usd)
    base = {"usage": msgspec.to_builtins(base_usage), "cost_usd": base_usd}
    interrupted = False
    calls = dict.fromkeys(("denied", "asked", "approved", "rejected"), 0)  # the tool policy's
    parts: list[list[str]] = []
    nworkers = workers
    left: set = set()
    ended = False  # every chunk ended: not stopped by Ctrl-C or an error
    cluster = client = None
    # a LocalCluster's servers read their settings as they run (a nanny restarting a killed
    # worker, say) and the nannies pass them to the workers: set for the cluster's life
    settings = dask.config.set(LOCAL_CLUSTER if not scheduler else {})
    try:  # Ctrl-C anywhere here still merges what the chunks finished
        try:
            if scheduler:
                client = Client(scheduler)
            else:
                from distributed.utils import get_mp_context
                from distributed.worker_memory import parse_memory_limit

                # a nanny's first start asks Dask for its multiprocessing context, which
                # imports NumPy, pandas and lz4 where installed, for the preload of a fork
                # server Dask would start: ours runs already, with its own preload. Asked here
                # with them deferred, it imports none (~0.07 s of the driver's on the way to
                # the first chunk with NumPy alone, ~0.3 s more with pandas; decision 0472)
                with numpy_deferred("pandas", "lz4"):
                    get_mp_context()

                # the scheduler alone first: the chunks wait there while the workers start,
                # and each worker takes its chunks as it registers (decision 0470); each
                # worker's memory limit as ``LocalCluster(n_workers=workers)`` sets it
                limit = parse_memory_limit("auto", 1, workers,
                                           logger=logging.getLogger("distributed.deploy.local"))
                cluster = LocalCluster(n_workers=0, threads_per_worker=1, processes=True,
                                       dashboard_address=None, silence_logs=40,
                                       memory_limit=limit)
                client = Client(cluster)
            nworkers = (workers if cluster is not None
                        else max(1, len(client.scheduler_info()["workers"]) or workers))
            parts = chunks_of(pending, nworkers)
            by_id = {t.id: t for t in tasks}
            # absolute: a worker of a cluster you run has its own working directory (the
            # storage is shared, at the same path; docs/scale.md)
            job = msgspec.structs.replace(runner.job, path=runner.job.path.absolute(), text="",
                                          spec=msgspec.structs.replace(runner.job.spec, tasks=[]))
            n = len(parts)
            names = [f"{run}-{i}" for i in range(n)]
            futures = dict(zip(client.map(run_chunk, [job] * n,
                                          [[by_id[x] for x in ids] for ids in parts],
                                          [str(root.absolute())] * n, names, [run] * n, [base] * n,
                                          [log_level] * n, [trace] * n,
                                          shares(root / RESULTS, run, tasks, parts),
                                          key=[f"mnemon-chunk-{x}" for x in names], retries=3,
                                          pure=False), names))
            if cluster is not None:
                # the workers' specs, then their start awaited as ``SpecCluster`` does in its
                # own constructor: a worker that fails to start raises here, not a job left
                # waiting (``scale`` starts them in a callback that only logs the failure)
                while len(cluster.worker_spec) < workers:
                    cluster.worker_spec.update(cluster.new_worker_spec())
                cluster.sync(cluster._correct_state)
            log.info("chunks sent", scheduler=scheduler or "local", workers=nworkers,
                     chunks=n, tasks=len(pending), run=run,  # the cluster's start, and this:
                     seconds=round(time.monotonic() - watch.counts.started_at, 3))
            left = set(futures)
            while left:
                for fut in [f for f in left if f.done()]:
                    left.discard(fut)
                    summary = fut.result()  # a chunk that failed every retry: raised here
                    watch.ended.add(futures[fut])
                    for k in calls:
                        calls[k] += summary.get(k, 0)
                    log.info("chunk ended", chunk=summary["chunk"], pid=summary["pid"],
                             **{k: summary[k] for k in ("done", "failed", "budget", "cancelled",
                                                        "elapsed_s")})
                    if on_chunk is not None:
                        on_chunk(summary, len(futures) - len(left), len(futures))
                watch.poll()
                if on_progress is not None:
                    on_progress(watch)
                if left:  # until the next chunk ends or the next poll is due
                    try:
                        wait(list(left), timeout=interval_s, return_when="FIRST_COMPLETED")
                    except TimeoutError:
                        pass
            ended = True
        finally:
            try:
                if not ended:  # stopped or failed: no chunk takes another task, each ends
                    # once the tasks it runs end (decision 0472) — marked, then removed: a
                    # chunk still running reads the mark through its open file, one that
                    # starts after finds no claims
                    stop_claims(root / RESULTS / f"{run}.claims")
                    forget_shares(root / RESULTS)
                if client is not None:
                    if left:  # interrupted: a LocalCluster's workers stop with it; on a cluster
                        # you run, a chunk already running finishes its tasks
                        client.cancel(list(left), force=True)
                    client.close()
                if cluster is not None:
                    cluster.close()
                    end_early()  # its workers gone: freed while the driver merges (0471)
            finally:
                settings.__exit__(None, None, None)
    except KeyboardInterrupt:
        interrupted = True
        log.info("job interrupted")
    lines = dict(prior)
    folder = root / RESULTS
    files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    # this run's chunks last: an older run's file (its driver killed before it merged) only
    # fills what is not final
    for f in sorted(files, key=lambda f: f.name.startswith(run + "-")):
        for task, line in read_results(f).items():
            if not is_final(lines.get(task, {})):
                lines[task] = line
    rewrite(out, [lines[t.id] for t in tasks if t.id in lines])
    forget_shares(folder)  # merged: what the chunks shared is no longer needed
    watch.reader.close()
    final = Reader(folder_of(root, run))
    attempts = final.entries()
    final.close()
    if len(attempts) <= len(parts):  # every turn's spend is in the ledgers
        own_usage = sum((e.usage for e in attempts.values()), Usage())
        usage, usd = base_usage + own_usage, base_usd + sum(e.usd for e in attempts.values())
    else:  # a worker died: the turn it was in may not be in its ledger; the logs have it all
        usage, usd = _spent(root)
    statuses = [lines[t.id]["status"] for t in tasks if t.id in lines]
    summary = JobSummary(
        run_root=str(root), output=str(out), tasks=len(tasks), done=statuses.count("done"),
        failed=statuses.count("failed"), budget=statuses.count("budget"),
        cancelled=statuses.count("cancelled"), pending=len(tasks) - len(statuses),
        skipped=len(tasks) - len(pending), usage=_usage(usage), cost_usd=round(usd, 6),
        elapsed_s=round(time.monotonic() - watch.counts.started_at, 3),
        interrupted=interrupted, **calls)
    log.info("job ended", engine="dask", done=summary.done, failed=summary.failed,
             budget=summary.budget, cancelled=summary.cancelled, pending=summary.pending,
             skipped=summary.skipped, cost_usd=summary.cost_usd, elapsed_s=summary.elapsed_s)
    return {**msgspec.to_builtins(summary), "chunks": len(parts), "workers": nworkers,
            "engine": "dask"}
