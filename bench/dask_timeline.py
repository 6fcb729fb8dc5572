"""Where one ``mnemon run --engine dask`` spends its wall time, start to end, in every process.

    python bench/dask_timeline.py [--tasks 4000] [--turns 6] [--latency 0.02] [--workers 2]
                                  [--runs 3] [--quiet CORES] [--json]

Runs ``bench/scale.py``'s job (``make_job``) with ``--engine dask`` as ``mnemon run`` would, in a
process of its own, and marks, as seconds after that process was started:

- the driver: the fork server started, the job file read (``build.load``), ``import
  distributed`` done, the scheduler up (``LocalCluster``), the chunks sent (``Client.map``), the
  workers started (``_correct_state``), each worker registered (``Scheduler.add_worker``), each
  chunk's result received, ``client.close()``, ``cluster.close()``, the merge (``rewrite``, the
  ledger read), ``run_job`` returned, ``leave`` and ``os._exit``;
- the fork server and each worker (this module is added to the fork server's preload; a worker
  is forked from it with the marks in place): the preload done, each fork, each chunk's
  ``run_chunk`` called, its ``prepare`` done, its ``trio.run`` started and ended, its return;
- from outside (``psutil``, every 10 ms): when each process of the tree was last seen, and when
  the command's process exited.

Per run it prints the marks in order and a summary: the first chunk running, each worker's last
chunk ended (how far apart: the chunks' balance), the last result received, the close, the
merge, the exit and what outlived the command. Every process appends its marks to one file
(``MNEMON_TIMELINE``); the marks cost microseconds each, the 10 ms watch a little CPU.
This is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ENV = "MNEMON_TIMELINE"


def mark(what: str, **kw) -> None:
    """One mark, from any process of the run: wall clock, pid, what."""
    path = os.environ.get(ENV)
    if not path:
        return
    line = json.dumps({"t": time.time(), "pid": os.getpid(), "what": what, **kw}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def around(owner, name: str, label: str, *, start: bool = True, detail=None) -> None:
    """Wrap ``owner.name`` (a function or a coroutine function) with marks at its start and
    end."""
    import inspect

    fn = getattr(owner, name)
    if getattr(fn, "_timeline", False):
        return
    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def wrapped(*a, **kw):
            extra = detail(*a, **kw) if detail else {}
            if start:
                mark(label + " start", **extra)
            try:
                return await fn(*a, **kw)
            finally:
                mark(label + " end", **extra)
    else:
        @functools.wraps(fn)
        def wrapped(*a, **kw):
            extra = detail(*a, **kw) if detail else {}
            if start:
                mark(label + " start", **extra)
            try:
                return fn(*a, **kw)
            finally:
                mark(label + " end", **extra)
    wrapped._timeline = True  # type: ignore[attr-defined]
    setattr(owner, name, wrapped)


# -- the driver ------------------------------------------------------------------------------

def _patch_forks(m) -> None:
    if not getattr(m.start_fork_server, "_timeline", False):  # the first call only
        orig = m.start_fork_server

        def start_fork_server():
            if not started:
                mark("start_fork_server start")
            orig()
            if not started:
                mark("start_fork_server end")
            started.append(1)

        started: list = []
        start_fork_server._timeline = True  # type: ignore[attr-defined]
        m.start_fork_server = start_fork_server


def _patch_build(m) -> None:
    around(m, "load", "build.load")


def _patch_distributed(m) -> None:
    mark("import distributed done")
    from distributed import Client
    from distributed.deploy.spec import SpecCluster
    from distributed.scheduler import Scheduler

    around(SpecCluster, "__init__", "LocalCluster()")
    around(SpecCluster, "close", "cluster.close()")
    around(Client, "map", "client.map()", start=False)
    around(Client, "close", "client.close()")
    # ``add_worker`` awaits the worker's stream for its whole life: its start is the mark
    around(SpecCluster, "_correct_state_internal", "_correct_state")
    around(Scheduler, "add_worker", "worker registered",
           detail=lambda self, *a, address=None, **kw: {"address": address})


def _patch_spread(m) -> None:
    orig = m.run_job

    @functools.wraps(orig)
    def run_job(*a, **kw):
        def on_chunk(summary, ended, total):
            mark("chunk result received", chunk=summary["chunk"], worker_pid=summary["pid"],
                 elapsed_s=summary["elapsed_s"])

        kw["on_chunk"] = on_chunk
        mark("run_job start")
        try:
            return orig(*a, **kw)
        finally:
            mark("run_job end")

    m.run_job = run_job


def _patch_results(m) -> None:
    around(m, "rewrite", "merge: rewrite")


def _patch_ledger(m) -> None:
    around(m.Reader, "entries", "ledger entries", start=False)


def _patch_cli(m) -> None:
    orig = m.leave

    def leave(code):
        mark("leave", code=code)
        return orig(code)

    m.leave = leave


AFTER = {  # module -> what to patch once it is imported (driver and fork server alike)
    "mnemon.orchestrator.jobs.forks": _patch_forks,
    "mnemon.orchestrator.jobs.build": _patch_build,
    "distributed": _patch_distributed,
    "mnemon.orchestrator.jobs.spread": _patch_spread,
    "mnemon.orchestrator.jobs.results": _patch_results,
    "mnemon.orchestrator.jobs.ledger": _patch_ledger,
    "mnemon.orchestrator.cli": _patch_cli,
}


class _After:
    """A meta path finder: each module of ``AFTER``, once executed, gets its marks."""

    def find_spec(self, name, path=None, target=None):
        if name not in AFTER:
            return None
        import importlib.util

        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def run(module):
            exec_module(module)
            AFTER[name](module)

        loader.exec_module = run  # type: ignore[method-assign]
        return spec


def driver(argv: list[str]) -> None:
    """The command, in this process, with the marks: ``mnemon ARGV``."""
    import multiprocessing.context as mpc

    mark("driver: interpreter ready")
    _gc_marks()
    sys.meta_path.insert(0, _After())
    real_exit = os._exit

    def _exit(code):
        mark("os._exit", code=code)
        real_exit(code)

    os._exit = _exit
    preload = mpc.ForkServerContext.set_forkserver_preload

    def set_preload(self, names):
        return preload(self, [*names, "dask_timeline"])  # the worker's marks, after warm

    mpc.ForkServerContext.set_forkserver_preload = set_preload
    sys.argv = ["mnemon", *argv]
    from mnemon.orchestrator.cli import console

    console()


def _gc_marks() -> None:
    """A mark for each collection that took 5 ms or more (the process's own collector)."""
    import gc

    began: list[float] = []

    def on_gc(phase, info):
        if phase == "start":
            began[:] = [time.perf_counter()]
        elif began and time.perf_counter() - began[0] >= 0.005:
            mark("gc", generation=info["generation"],
                 ms=round((time.perf_counter() - began[0]) * 1e3, 1))

    gc.callbacks.append(on_gc)


# -- the fork server and the workers ---------------------------------------------------------

def _in_fork_server() -> None:
    """Imported by the fork server after ``warm``: the marks of each worker forked from it."""
    from mnemon.orchestrator.jobs import build, spread
    import trio

    if getattr(spread.run_chunk, "_timeline", False):  # a worker imports the driver's main again
        return
    mark("fork server: preload done")
    os.register_at_fork(after_in_child=lambda: mark("forked"))
    real_exit = os._exit

    def _exit(code):  # how a worker process ends (``multiprocessing``'s child)
        mark("worker os._exit", code=code)
        real_exit(code)

    os._exit = _exit
    orig = spread.run_chunk

    @functools.wraps(orig)
    def run_chunk(job, tasks, run_root, chunk, *a, **kw):
        mark("run_chunk start", chunk=chunk, tasks=len(tasks))
        try:
            return orig(job, tasks, run_root, chunk, *a, **kw)
        finally:
            mark("run_chunk end", chunk=chunk)

    _gc_marks()
    run_chunk._timeline = True  # type: ignore[attr-defined]
    spread.run_chunk = run_chunk
    around(build, "prepare", "prepare", start=False)
    around(trio, "run", "trio.run")


if __name__ != "__main__" and os.environ.get(ENV) and "multiprocessing.forkserver" in sys.modules:
    _in_fork_server()


# -- outside: the run, the process tree, the report -------------------------------------------

def one(job: Path, root: Path, workers: int, marks: Path) -> dict:
    import psutil

    env = {**os.environ, ENV: str(marks),
           "PYTHONPATH": os.pathsep.join([str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])])}
    t0 = time.time()
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--driver", "--",
                             "run", str(job), "--engine", "dask", "--workers", str(workers),
                             "--run-root", str(root), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    ended: list[float] = []
    out: list[bytes] = []

    def reap():
        o, e = proc.communicate()
        ended.append(time.time())
        out.extend([o, e])

    th = threading.Thread(target=reap)
    th.start()
    seen: dict[int, dict] = {}
    top = psutil.Process(proc.pid)
    looked = 0.0
    while True:
        now = time.time()
        if not ended and now - looked > 0.25:  # the tree, now and then: its pids
            looked = now
            try:
                tree = [top, *top.children(recursive=True)]
            except psutil.Error:
                tree = []
            for p in tree:
                if p.pid not in seen:
                    try:
                        cmd = " ".join(p.cmdline())
                    except psutil.Error:
                        cmd = "?"
                    seen[p.pid] = {"first": now, "cmd": cmd}
        for pid, info in seen.items():  # gone: no process, or a zombie (ended, not reaped)
            if not info.get("gone") and _gone(pid):
                info["gone"] = now
        if ended and all(i.get("gone") for i in seen.values()):
            break
        if ended and now - ended[0] > 10:
            break
        time.sleep(0.005)
    th.join()
    if proc.returncode != 0:
        raise SystemExit(out[1].decode()[-3000:])
    summary = json.loads(out[0])
    rows = [json.loads(x) for x in marks.read_text().splitlines()]
    # the chunk logs: each chunk's first and last task's end (the worker's own clock)
    from datetime import datetime

    ends: dict[str, list[float]] = {}
    for f in (root / "mnemon.log.d").glob("*.log"):
        chunk = f.name.split(".")[0]
        for raw in f.read_text().splitlines():
            line = json.loads(raw)
            if line.get("event") == "agent ended":
                ends.setdefault(chunk, []).append(
                    datetime.fromisoformat(line["timestamp"].replace("Z", "+00:00")).timestamp())
    shutil.rmtree(root)
    return {"t0": t0, "exit": ended[0], "rows": rows, "procs": seen, "tasks_ended": ends,
            "driver": proc.pid, "elapsed_s": summary["elapsed_s"]}


def _gone(pid: int) -> bool:
    """The process ended (a zombie not yet reaped counts as ended): a read of /proc, cheap."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except OSError:
        return True


def _role(pid: int, run: dict, forked: set[int]) -> str:
    cmd = run["procs"].get(pid, {}).get("cmd", "")
    if pid == run["driver"]:
        return "driver"
    if pid in forked:
        return "worker"
    if "forkserver" in cmd:
        return "fork server"
    if "resource_tracker" in cmd:
        return "resource tracker"
    return cmd[:40] or "?"


def report(run: dict) -> dict:
    t0 = run["t0"]
    rows = sorted(run["rows"], key=lambda r: r["t"])
    forked = {r["pid"] for r in rows if r["what"] == "forked"}
    at = lambda t: round(t - t0, 3)  # noqa: E731
    events = [(at(r["t"]), _role(r["pid"], run, forked),
               r["what"] + "".join(f" {k}={v}" for k, v in r.items()
                                   if k not in ("t", "pid", "what")))
              for r in rows]
    for pid, info in run["procs"].items():
        if info.get("gone"):
            events.append((at(info["gone"]), _role(pid, run, forked), "gone (watched)"))
    events.append((at(run["exit"]), "outside", "the command's pipes closed, reaped"))
    events.sort()

    def first(what, role=None):
        for t, r, w in events:
            if w.startswith(what) and (role is None or r == role):
                return t
        return None

    def last(what, role=None):
        v = [t for t, r, w in events if w.startswith(what) and (role is None or r == role)]
        return v[-1] if v else None

    # per worker: its chunks' starts and ends (run_chunk), and its tasks' last end
    workers: dict[int, list] = {}
    for r in rows:
        if r["what"] in ("run_chunk start", "run_chunk end"):
            workers.setdefault(r["pid"], []).append((at(r["t"]), r["what"], r["chunk"]))
    chunk_ends = {ch: (at(min(v)), at(max(v))) for ch, v in run["tasks_ended"].items()}
    # each chunk: run_chunk's wall, and above what its tasks take at the chunk's steady rate
    # (the rate between its 20th and 80th percent of tasks ended): its start, ramp and tail
    spans = {}
    for r in rows:
        if r["what"] in ("run_chunk start", "run_chunk end"):
            spans.setdefault(r["chunk"], {})[r["what"].split()[1]] = r["t"]
    over = {}
    for ch, v in run["tasks_ended"].items():
        v = sorted(v)
        n = len(v)
        if n < 10 or ch not in spans or len(spans[ch]) < 2:
            continue
        rate = (v[int(n * .8)] - v[int(n * .2)]) / (int(n * .8) - int(n * .2))
        wall = spans[ch]["end"] - spans[ch]["start"]
        over[ch] = {"wall_s": round(wall, 3), "steady_ms_per_task": round(rate * 1e3, 3),
                    "above_steady_s": round(wall - n * rate, 3)}
    last_ends = [max(t for t, w, _ in v if w == "run_chunk end") for v in workers.values()
                 if any(w == "run_chunk end" for _, w, _ in v)]
    gone = {(_role(pid, run, forked), pid): at(i["gone"]) for pid, i in run["procs"].items()
            if i.get("gone")}
    summary = {
        "fork server started": first("start_fork_server end"),
        "fork server preload done": first("fork server: preload done"),
        "import distributed done (driver)": first("import distributed done", "driver"),
        "scheduler up": first("LocalCluster() end"),
        "chunks sent": first("client.map() end"),
        "workers registered": [t for t, r, w in events if w.startswith("worker registered")],
        "workers started (_correct_state)": first("_correct_state end"),
        "first chunk running": first("run_chunk start"),
        "first trio.run": first("trio.run start"),
        "chunks (start, end) by worker": {str(k): v for k, v in workers.items()},
        "chunks' tasks ended (first, last)": chunk_ends,
        "chunks: wall, steady rate, above it": over,
        "gc >= 5 ms": [(t, r, w) for t, r, w in events if w.startswith("gc ")],
        "workers' last chunk ended": sorted(last_ends),
        "imbalance_s": round(max(last_ends) - min(last_ends), 3) if len(last_ends) > 1 else None,
        "last result received": last("chunk result received"),
        "client.close()": (first("client.close() start"), first("client.close() end")),
        "cluster.close()": (first("cluster.close() start"), first("cluster.close() end")),
        "merge: rewrite": (first("merge: rewrite start"), first("merge: rewrite end")),
        "run_job returned": last("run_job end"),
        "leave": first("leave"),
        "os._exit": first("os._exit"),
        "pipes closed, reaped": at(run["exit"]),
        "processes gone": {f"{r} {p}": t for (r, p), t in gone.items()},
        "elapsed_s (the command's own)": run["elapsed_s"],
    }
    return {"events": events, "summary": summary}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--driver":
        return driver(sys.argv[3:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=4000)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--latency", type=float, default=0.02)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quiet", type=float, metavar="CORES")
    ap.add_argument("--json", action="store_true", help="the summaries only, as JSON")
    a = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from scale import make_job, wait_quiet

    tmp = Path(tempfile.mkdtemp(prefix="mnemon-timeline-"))
    job = make_job(tmp / "job", a.tasks, a.turns, a.latency)
    out = []
    for i in range(a.runs):
        if a.quiet is not None:
            wait_quiet(a.quiet)
        rep = report(one(job, tmp / f"run{i}", a.workers, tmp / f"marks{i}.jsonl"))
        out.append(rep["summary"])
        if not a.json:
            print(f"--- run {i + 1}")
            for t, role, what in rep["events"]:
                print(f"{t:8.3f}  {role:<16} {what}")
            print(json.dumps(rep["summary"], indent=1))
    shutil.rmtree(tmp, ignore_errors=True)
    if a.json:
        print(json.dumps(out))
    elif len(out) > 1:
        keys = [k for k, v in out[0].items() if isinstance(v, (int, float))]
        print("--- medians:", {k: round(statistics.median(s[k] for s in out if s[k] is not None), 3)
                              for k in keys})


if __name__ == "__main__":
    main()
