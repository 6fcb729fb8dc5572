"""Scale-out benchmark: one job, ``--engine local`` against ``--engine dask`` (a LocalCluster of
worker processes × 1 thread), on a CPU-bound swarm (scripted provider, short latency).

    python bench/scale.py [--tasks 600] [--turns 6] [--skew 0] [--latency 0.02] [--workers 2]
                          [--runs 3] [--with-budget] [--baseline PYTHON] [--quiet CORES] [--json]

Each task is a root agent that calls ``transcript_index`` for ``--turns`` − 1 turns, then
answers; with ``--skew F`` the turns rise with the task's place, from ``turns × (1 − F)`` to
``turns × (1 + F)`` (decision 0472: chunks cut equal in advance are then unequal work).
Figures: agent-turns per second of each engine (whole ``mnemon run`` process, median of
``--runs``), and their ratio. ``--with-budget`` adds ``--engine dask`` on the same job with a job
budget it never reaches: what reading the other workers' ledgers before every turn costs
(decision 0251). This is a benchmark, not a test.

Also, per engine: the CPU of the whole process tree (``cpu_s_median``: the driver, the fork
server and the workers, sampled every 50 ms with psutil — the workers of a LocalCluster are the
fork server's children, so ``/usr/bin/time`` and ``RUSAGE_CHILDREN`` miss them) and what the
rest of the machine used meanwhile (``others_cores_median``, from ``/proc/stat``; of it, what a
virtual machine's host stole, ``steal_cores_median``): on a machine shared with other sessions,
a wall time says little beside it (decision 0252). Per round,
``dask_cpu_above_local_s``: the Dask run's CPU above the local run's — what Dask itself costs,
the steadiest figure when the machine is shared (decision 0253).
``--baseline PYTHON`` adds both engines run by another interpreter (another checkout's venv),
interleaved with these run by run: a before/after side by side. ``--quiet CORES`` waits (up to
two minutes) before each run for two seconds in which the machine used less than CORES.
``python_c_pass_s``: ``python -c pass`` (median of 5) before the first run and after the last,
the machine's floor for starting a process.
"""

from __future__ import annotations

import argparse
import inspect
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
    if said + 1 < turns_of(request):
        return [{"type": "tool_use", "id": f"c{said}", "name": "transcript_index",
                 "input": {"turns": "1"}}], "tool_use"
    return [{"type": "text", "text": "done"}], "end_turn"
'''


def turns_for(i: int, turns: int, skew: float, tasks: int) -> int:
    """Task i's turns: ``turns × (1 − skew)`` for the first, ``× (1 + skew)`` for the last."""
    return max(1, round(turns * (1 + skew * (2 * i / max(1, tasks - 1) - 1))))


TURNS_OF = inspect.getsource(turns_for) + '''

def turns_of(request):
    first = request.messages[0]["content"]
    text = first if isinstance(first, str) else first[0]["text"]
    return turns_for(int(text.rsplit(" ", 1)[1]), TURNS, SKEW, TASKS)  # its prompt: "task i"
'''


def make_job(folder: Path, tasks: int, turns: int, latency: float,
             budget: int | None = None, skew: float = 0.0) -> Path:
    """The job: ``tasks`` root tasks, each calling ``transcript_index`` for ``turns`` − 1 turns
    then answering. ``skew``: task i's turns rise linearly from ``turns × (1 − skew)`` for the
    first to ``turns × (1 + skew)`` for the last (the same total): a job whose later tasks are
    longer, as when its documents grow — chunks cut equal in advance are then not equal work."""
    folder.mkdir(parents=True)
    most = max(turns_for(i, turns, skew, tasks) for i in range(tasks))  # no task cut short
    (folder / "swarm.py").write_text(f"TURNS = {turns}\nSKEW = {skew}\nTASKS = {tasks}\n"
                                     + TURNS_OF + POLICY)
    rows = "".join(f'[[tasks]]\nid = "t{i}"\nprompt = "task {i}"\n\n' for i in range(tasks))
    (folder / "job.toml").write_text(
        f'concurrency = 64\n\n[provider]\nname = "scripted"\npolicy = "swarm:policy"\n'
        f'latency_s = {latency}\n\n[agent]\nmax_turns = {most + 2}\n\n'
        + (f'[budget]\ntokens = {budget}\n\n' if budget else '') + rows)
    return folder / "job.toml"


def _stat() -> list[int] | None:
    try:
        with open("/proc/stat") as f:
            return [int(x) for x in f.readline().split()[1:9]]
    except OSError:
        return None


def _busy() -> float | None:
    """CPU seconds the whole machine has used (Linux), or None: the hypervisor's steal too."""
    v = _stat()
    return None if v is None else (sum(v[:3]) + sum(v[5:8])) / os.sysconf("SC_CLK_TCK")


def _steal() -> float | None:
    """CPU seconds a virtual machine's host has taken from it (Linux), or None."""
    v = _stat()
    return None if v is None else v[7] / os.sysconf("SC_CLK_TCK")


def wait_quiet(cores: float, longest: float = 120.0) -> None:
    """Until two seconds in which the machine used less than ``cores`` (at most ``longest``)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < longest:
        b0 = _busy()
        time.sleep(2.0)
        b1 = _busy()
        if b0 is None or b1 is None or (b1 - b0) / 2.0 < cores:
            return


def one(job: Path, engine: str, workers: int, root: Path,
        python: str = sys.executable) -> tuple[float, float | None, float | None, float | None]:
    """Wall seconds, CPU seconds of the process tree (None without psutil), cores the rest of
    the machine used meanwhile and, of those, cores the host stole (None where unknown)."""
    try:
        import psutil
    except ImportError:
        psutil = None
    b0, s0 = _busy(), _steal()
    t0 = time.monotonic()
    proc = subprocess.Popen([python, "-m", "mnemon", "run", str(job), "--engine",
                             engine, "--workers", str(workers), "--run-root", str(root),
                             "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    cpu: dict[int, float] = {}  # pid -> CPU seconds when last seen
    if psutil is not None:
        top = psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                tree = [top, *top.children(recursive=True)]
            except psutil.Error:
                tree = [top]
            for p in tree:
                try:
                    t = p.cpu_times()
                    cpu[p.pid] = t.user + t.system
                except psutil.Error:
                    pass
            time.sleep(0.05)
    out, err = proc.communicate()
    took = time.monotonic() - t0
    b1, s1 = _busy(), _steal()
    if proc.returncode != 0:
        raise SystemExit(err[-2000:])
    assert json.loads(out)["done"] > 0
    shutil.rmtree(root)
    used = sum(cpu.values()) if psutil is not None else None
    others = (b1 - b0 - used) / took if None not in (b0, b1, used) else None
    return took, used, others, (s1 - s0) / took if None not in (s0, s1) else None


def floor(python: str = sys.executable, n: int = 5) -> float:
    """The machine's floor for a process: the median wall time of ``python -c pass``."""
    took = []
    for _ in range(n):
        t0 = time.monotonic()
        subprocess.run([python, "-c", "pass"], check=True)
        took.append(time.monotonic() - t0)
    return round(statistics.median(took), 3)


def _above(times: dict, dask: str, local: str) -> list[float | None]:
    """Per round, the CPU seconds of ``dask`` minus those of ``local`` (None without psutil)."""
    return [round(d[1] - l[1], 2) if d[1] is not None and l[1] is not None else None
            for d, l in zip(times[dask], times[local])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=600)
    ap.add_argument("--turns", type=int, default=6)
    ap.add_argument("--skew", type=float, default=0.0,
                    help="task i's turns from turns×(1−SKEW), the first, to turns×(1+SKEW)")
    ap.add_argument("--latency", type=float, default=0.02)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--with-budget", action="store_true",
                    help="also --engine dask with a job budget never reached")
    ap.add_argument("--baseline", metavar="PYTHON",
                    help="also both engines under this interpreter (another checkout's venv)")
    ap.add_argument("--quiet", type=float, metavar="CORES",
                    help="before each run, wait for the machine to use less than CORES")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="mnemon-scale-"))
    job = make_job(tmp / "job", a.tasks, a.turns, a.latency, skew=a.skew)
    jobs = {"local": job, "dask": job}
    if a.with_budget:
        jobs["dask with a job budget"] = make_job(tmp / "budgeted", a.tasks, a.turns, a.latency,
                                                  budget=10**15)
    runs = [(name, path, sys.executable) for name, path in jobs.items()]
    if a.baseline:
        runs += [(f"{name} (baseline)", path, a.baseline) for name, path in jobs.items()]
    times: dict[str, list[tuple]] = {name: [] for name, _, _ in runs}
    load = os.getloadavg()[0]
    floors = [floor()]
    for r in range(a.runs):
        for i, (name, path, python) in enumerate(runs):
            if a.quiet is not None:
                wait_quiet(a.quiet)
            engine = name.split()[0]
            times[name].append(one(path, engine, a.workers, tmp / f"{i}-{r}.run", python))
    floors.append(floor())
    turns = sum(turns_for(i, a.turns, a.skew, a.tasks) for i in range(a.tasks))

    def median(e: str, k: int) -> float | None:
        v = [x[k] for x in times[e] if x[k] is not None]
        return round(statistics.median(v), 2) if v else None

    med = {e: statistics.median(x[0] for x in v) for e, v in times.items()}
    out = {"tasks": a.tasks, "turns_per_task": a.turns, "skew": a.skew, "latency_s": a.latency,
           "workers": a.workers, "runs": a.runs, "cpus": os.cpu_count(),
           "seconds_median": {e: round(v, 2) for e, v in med.items()},
           "agent_turns_per_s": {e: round(turns / v, 1) for e, v in med.items()},
           "dask_over_local": round(med["local"] / med["dask"], 2),
           **({"baseline_dask_over_local": round(med["local (baseline)"]
                                                 / med["dask (baseline)"], 2)}
              if a.baseline else {}),
           "cpu_s_median": {e: median(e, 1) for e in times},
           # the Dask run's CPU above the local run's of the same round: on a shared machine
           # steadier than either wall time (the rest of the machine slows both alike)
           "dask_cpu_above_local_s": _above(times, "dask", "local"),
           **({"baseline_dask_cpu_above_local_s": _above(times, "dask (baseline)",
                                                         "local (baseline)")}
              if a.baseline else {}),
           "others_cores_median": {e: median(e, 2) for e in times},
           # of which the host's steal: a VM's CPU second is worth less while it is high
           "steal_cores_median": {e: median(e, 3) for e in times},
           # ``python -c pass`` before the first run and after the last: the machine's floor
           "python_c_pass_s": floors,
           "load_average": [round(load, 2), round(os.getloadavg()[0], 2)],
           "each_run": {e: [[round(x, 2) if x is not None else None for x in run] for run in v]
                        for e, v in times.items()}}  # [wall, CPU, others' cores, steal], in order
    shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out) if a.json else json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
