"""``mnemon run --engine dask``: a job's root tasks spread over a LocalCluster of worker
processes; a worker killed mid-job; the same results and summary as ``--engine local``; the
progress advancing per task; one job budget over every worker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .kit import write_job

pytest.importorskip("distributed")

TASKS = 50


def _job(folder: Path, latency: float = 0.2) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tasks = "".join(f'[[tasks]]\nid = "q{i}"\nprompt = "question number {i}"\n\n'
                    for i in range(TASKS))
    (folder / "job.toml").write_text(
        f'concurrency = 2\n\n[provider]\nname = "scripted"\nlatency_s = {latency}\n\n'
        f'[agent]\nmax_turns = 3\n\n{tasks}')
    return folder / "job.toml"


def _results(path: Path) -> dict[str, tuple]:
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(lines) == len({x["task"] for x in lines}), "one line per task"
    return {x["task"]: (x["status"], x["answer"], x["agent"]) for x in lines}


def _verify(root: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "mnemon", "verify", str(root)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-800:]


def _log_lines(root: Path) -> list[dict]:
    """The run's log lines: ``mnemon.log``, and each Dask chunk's own file (decision 0254),
    whose every line names its chunk and worker process."""
    main = root / "mnemon.log"  # the driver's: only where its program configured logging
    lines = [json.loads(x) for x in main.read_text().splitlines()] if main.exists() else []
    for f in sorted((root / "mnemon.log.d").glob("*.log")):
        chunk = [json.loads(x) for x in f.read_text().splitlines()]
        assert all(x["chunk"] == f.name.split(".")[0] and x["pid"] == int(f.name.split(".")[2])
                   for x in chunk), f.name
        lines += chunk
    return lines


def test_dask_and_local_give_the_same_results(tmp_path):
    job = _job(tmp_path / "job", latency=0.01)
    runs, summaries, ended = {}, {}, {}
    for engine in ("local", "dask"):
        root = tmp_path / f"{engine}.run"
        proc = subprocess.run([sys.executable, "-m", "mnemon", "run", str(job), "--engine",
                               engine, "--workers", "2", "--run-root", str(root), "--json"],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        summary = json.loads(proc.stdout)
        assert summary["done"] == TASKS
        runs[engine] = _results(root / "results.jsonl")
        lines = [json.loads(x) for x in (root / "results.jsonl").read_text().splitlines()]
        assert summary["usage"] == {k: sum(x["usage"][k] for x in lines)
                                    for k in summary["usage"]}, "the job's spend, every turn"
        # each row's cost is rounded to 6 places: their sum may drift by half a unit per row
        assert summary["cost_usd"] == pytest.approx(sum(x["cost_usd"] for x in lines),
                                                    abs=TASKS * 5e-7 + 1e-9)
        summaries[engine] = summary
        ended[engine] = sorted(x["agent"] for x in _log_lines(root) if x["event"] == "agent ended")
        _verify(root)
    assert runs["local"] == runs["dask"]
    assert ended["local"] == ended["dask"] == sorted(a for _, _, a in runs["local"].values()), \
        "every agent's end logged, as the local engine logs it"
    driver = [json.loads(x)["event"] for x in
              (tmp_path / "dask.run" / "mnemon.log").read_text().splitlines()]
    assert driver == ["chunks sent"] + ["chunk ended"] * summaries["dask"]["chunks"] \
        + ["job ended"]
    assert set(summaries["local"]) <= set(summaries["dask"]), "the same --json summary"
    again = subprocess.run([sys.executable, "-m", "mnemon", "run", str(job), "--engine", "dask",
                            "--run-root", str(tmp_path / "dask.run"), "--json"],
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and json.loads(again.stdout)["skipped"] == TASKS


def test_a_worker_killed_mid_job_loses_nothing(tmp_path):
    from mnemon.orchestrator.jobs.spread import run_job

    job = _job(tmp_path / "job", latency=0.2)
    root = tmp_path / "job.run"
    killed: list[int] = []

    def on_chunk(summary, done, total):
        if not killed:  # the worker that just finished a chunk is working on its next one
            killed.append(summary["pid"])
            os.kill(summary["pid"], signal.SIGKILL)

    summary = run_job(job, run_root=root, output=None, scheduler=None, workers=2,
                      on_chunk=on_chunk)
    assert killed
    assert summary["done"] == TASKS and summary["pending"] == 0
    results = _results(root / "results.jsonl")
    assert {s for s, _, _ in results.values()} == {"done"}
    lines = [json.loads(x) for x in (root / "results.jsonl").read_text().splitlines()]
    assert summary["usage"] == {k: sum(x["usage"][k] for x in lines) for k in summary["usage"]}
    _verify(root)
    _each_turn_once(root)


def _each_turn_once(root: Path) -> None:
    """No turn of any agent recorded twice, no provider call repeated for a recorded turn."""
    for agent in (root / "agents").iterdir():
        recs = [json.loads(x) for x in (agent / "record.jsonl").read_text().splitlines()]
        turns = [r["turn"] for r in recs if r["t"] in ("UserPrompt", "AssistantMessage")]
        assert turns == sorted(set(turns)), f"{agent.name}: a turn recorded twice"
        ok = [r for r in recs if r["t"] == "ProviderCall" and not r.get("error")]
        assert len(ok) == sum(r["t"] == "AssistantMessage" for r in recs), \
            f"{agent.name}: a provider call repeated for a recorded turn"


def _chunk_files(root: Path) -> dict[int, list[str]]:
    """Each chunk's results file of the run: the tasks it ran, by chunk number."""
    return {int(f.stem.rsplit("-", 1)[1]): [json.loads(x)["task"] for x in
                                              f.read_text().splitlines()]
            for f in (root / "results.d").glob("*.jsonl")}


def test_a_chunk_runs_what_the_others_have_not_started(tmp_path):
    """Four chunks on two workers (decision 0472): a worker's first chunk, its own tasks done,
    runs the tasks no chunk has started — its second chunk's among them, which would otherwise
    wait for it to drain — and every task is run once; what the chunks shared is removed."""
    from mnemon.orchestrator.jobs.spread import run_job

    job = _job(tmp_path / "job", latency=0.05)
    root = tmp_path / "job.run"
    summary = run_job(job, run_root=root, output=None, scheduler=None, workers=2)
    assert summary["done"] == TASKS and summary["chunks"] == 4
    ran = _chunk_files(root)
    every = [t for tasks in ran.values() for t in tasks]
    assert sorted(every) == sorted(f"q{i}" for i in range(TASKS)), "each task run once"
    size = -(-TASKS // 4)
    stolen = {c: [t for t in tasks if int(t[1:]) // size != c] for c, tasks in ran.items()}
    assert any(stolen.values()), f"no chunk ran another's task: {ran}"
    started = {f.name.split(".")[0] for f in (root / "mnemon.log.d").glob("*.log")}
    assert len(started) < 4, "a chunk that started once every task was taken built no runner"
    assert all(not ran.get(int(c.rsplit("-", 1)[1])) for c in
               {f"{x.split('-')[0]}-{i}" for x in started for i in range(4)} - started)
    assert _results(root / "results.jsonl") and len(_results(root / "results.jsonl")) == TASKS
    assert not [p.name for p in (root / "results.d").iterdir() if p.suffix != ".jsonl"], \
        "the tasks file and the claims are gone once merged"
    _verify(root)
    _each_turn_once(root)


def test_a_worker_killed_while_it_runs_another_chunks_task_loses_nothing(tmp_path):
    """The chunk whose worker died runs again elsewhere, finds its claims, and resumes the
    tasks it had taken from another chunk from their logs — even with none of its own left,
    and every task of the run claimed (a chunk that never ran would have nothing to do)."""
    from mnemon.orchestrator.jobs.spread import run_job

    job = _job(tmp_path / "job", latency=0.2)
    root = tmp_path / "job.run"
    size = -(-TASKS // 4)
    killed: list[tuple[str, int, int]] = []

    def on_progress(watch):
        if killed:
            return
        from mnemon.orchestrator.jobs.claims import SLOT

        path = root / "results.d" / f"{watch.run}.claims"
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return
        slots = [raw[i:i + SLOT].rstrip(b"\0").decode() for i in range(0, len(raw), SLOT)]
        for name, holder in enumerate(slots[2:]):
            if not holder:
                continue
            task = f"q{name}"
            own = int(holder.rsplit("-", 1)[1])  # its own tasks all ended: run again, it has
            if holder != f"{watch.run}-{int(name) // size}" and task not in watch.lines \
                    and all(f"q{k}" in watch.lines  # none of them left to run
                            for k in range(own * size, min(TASKS, own * size + size))) \
                    and slots[0]:  # and every task already claimed (the end mark)
                attempts = sorted((root / "mnemon.log.d").glob(f"{holder}.*.log"))
                pid = int(attempts[-1].name.split(".")[2])
                killed.append((holder, int(name), pid))
                os.kill(pid, signal.SIGKILL)
                return

    summary = run_job(job, run_root=root, output=None, scheduler=None, workers=2,
                      on_progress=on_progress, interval_s=0.05)
    assert killed, "no chunk was seen running another's task"
    holder, index, _ = killed[0]
    assert summary["done"] == TASKS and summary["pending"] == 0
    assert len(list((root / "mnemon.log.d").glob(f"{holder}.*.log"))) >= 2, "run again"
    ran = _chunk_files(root)
    assert sorted(t for tasks in ran.values() for t in tasks) == \
        sorted(f"q{i}" for i in range(TASKS)), "each task in one chunk's file, once"
    assert f"q{index}" in ran[int(holder.rsplit("-", 1)[1])], \
        "the stolen task was finished by the chunk that had claimed it"
    _verify(root)
    _each_turn_once(root)


def test_progress_advances_per_task_before_any_chunk_ends(tmp_path):
    """The driver's view counts a task when its worker writes its line, not when its chunk
    ends; tasks running and the cost so far come from the workers' ledgers."""
    from mnemon.orchestrator.jobs.spread import run_job

    job = _job(tmp_path / "job", latency=0.1)
    seen: list[tuple] = []

    def on_progress(watch):
        c = watch.counts
        seen.append((c.done + c.failed + c.budget + c.cancelled, c.running, watch.cost_usd,
                     len(watch.ended)))

    summary = run_job(job, run_root=tmp_path / "job.run", output=None, scheduler=None,
                      workers=2, on_progress=on_progress, interval_s=0.05)
    assert summary["done"] == TASKS
    early = [s for s in seen if s[3] == 0]  # no chunk had ended
    assert any(0 < s[0] < TASKS for s in early), "tasks counted as they finish"
    assert any(s[1] > 0 for s in early) and any(s[2] > 0 for s in early)
    assert max(s[1] for s in seen) <= 2 * 2, "at most concurrency × chunks at once"
    finished = [s[0] for s in seen]
    assert finished == sorted(finished) and finished[-1] == TASKS
    assert seen[-1][1] == 0
    assert seen[-1][2] == pytest.approx(summary["cost_usd"], abs=1e-5)


def test_the_job_budget_holds_across_workers(tmp_path):
    """Two workers spend one budget: both stop their agents with ``budget`` once the job's
    total is reached, and the overshoot is at most one turn per agent in flight."""
    from mnemon.orchestrator.jobs.spread import run_job

    budget, in_flight = 150_000, 2 * 2  # workers × concurrency
    # ~75 turns at 0.2 s, four at a time: a few seconds, so both workers are running agents
    # when the budget runs out even if one started late

    def job_with(tokens: int) -> Path:
        return write_job(tmp_path / "job", 'concurrency = 2\n\n[provider]\nname = "scripted"\n'
                         'policy = "job_policy:forever"\nlatency_s = 0.2\n\n[agent]\n'
                         'max_turns = 500\ntools = ["job_policy:note"]\n\n[budget]\n'
                         f'tokens = {tokens}\n', tasks=8)

    job = job_with(budget)
    root = tmp_path / "job.run"
    pids: dict[str, int] = {}

    def on_chunk(summary, done, total):
        pids[summary["chunk"]] = summary["pid"]

    summary = run_job(job, run_root=root, output=None, scheduler=None, workers=2,
                      on_chunk=on_chunk)
    assert summary["budget"] == 8
    lines = [json.loads(x) for x in (root / "results.jsonl").read_text().splitlines()]
    assert {x["status"] for x in lines} == {"budget"} and len(lines) == 8
    stopped = set()  # workers whose agents the budget stopped mid-task
    for chunk, pid in pids.items():
        for x in (json.loads(y) for y in (root / "results.d" / f"{chunk}.jsonl")
                  .read_text().splitlines()):
            if x["agent"] is not None and x["reason"] == "budget":
                stopped.add(pid)
    assert len(stopped) == 2, f"budget stops on both workers, not only {stopped}"
    logged = {x["pid"] for x in _log_lines(root) if x["event"] == "budget stop"}
    assert logged == stopped, "each worker's budget stops in its chunks' log files"
    turns = [sum(r["usage"].values())
             for agent in (root / "agents").iterdir()
             for r in map(json.loads, (agent / "record.jsonl").read_text().splitlines())
             if r["t"] == "ProviderCall" and r.get("usage")]
    total = sum(turns)
    assert total == sum(summary["usage"].values())
    assert budget <= total <= budget + in_flight * max(turns), (total, max(turns))
    _verify(root)

    # raise the budget and run again: the tasks resume, and what the first run spent counts
    again = run_job(job_with(2 * budget), run_root=root, output=None, scheduler=None, workers=2)
    assert again["budget"] == 8 and again["skipped"] == 0
    turns = []
    for agent in (root / "agents").iterdir():
        recs = [json.loads(x) for x in (agent / "record.jsonl").read_text().splitlines()]
        ids = [r["turn"] for r in recs if r["t"] in ("UserPrompt", "AssistantMessage")]
        assert ids == sorted(set(ids)), f"{agent.name}: a turn recorded twice"
        turns += [sum(r["usage"].values()) for r in recs
                  if r["t"] == "ProviderCall" and r.get("usage")]
    total = sum(turns)
    assert total == sum(again["usage"].values()), "the job's spend over both runs"
    assert 2 * budget <= total <= 2 * budget + in_flight * max(turns), (total, max(turns))
    assert len((root / "results.jsonl").read_text().splitlines()) == 8
    _verify(root)


def test_a_cluster_you_run_whose_workers_have_their_own_working_directory(tmp_path):
    """``--scheduler ADDRESS``: a scheduler and a worker you started yourself, in another
    working directory than the driver's; the job file and the run root named relatively, as a
    user types them. The chunks are sent absolute paths (shared storage, same path), so the
    worker writes into the driver's run root, not a namesake under its own directory."""
    import time

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    job = _job(tmp_path / "here", latency=0.01)
    file = tmp_path / "scheduler.json"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "cwd": elsewhere}
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler",
                                  "--port", "0", "--no-dashboard", "--scheduler-file", str(file)],
                                 **quiet)
    worker = None
    try:
        deadline = time.monotonic() + 60
        while not file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        address = json.loads(file.read_text())["address"]
        worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address,
                                   "--nthreads", "1", "--no-dashboard"], **quiet)
        proc = subprocess.run([sys.executable, "-m", "mnemon", "run", "job.toml", "--engine",
                               "dask", "--scheduler", address, "--run-root", "job.run",
                               "--json"], cwd=job.parent, capture_output=True, text=True,
                              timeout=180)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert json.loads(proc.stdout)["done"] == TASKS
        assert len(_results(job.parent / "job.run" / "results.jsonl")) == TASKS
        assert not (elsewhere / "job.run").exists()
        _verify(job.parent / "job.run")
    finally:
        for p in (worker, scheduler):
            if p is not None:
                p.terminate()
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()


def test_a_worker_that_fails_to_start_fails_the_run(tmp_path):
    """The LocalCluster's workers start after the chunks are sent (decision 0470): a worker
    that cannot start still ends the command with an error, not a job waiting for ever."""
    job = _job(tmp_path / "job", latency=0.01)
    env = dict(os.environ, DASK_DISTRIBUTED__WORKER__PRELOAD='["mnemon_no_such_module"]')
    proc = subprocess.run([sys.executable, "-m", "mnemon", "run", str(job), "--engine", "dask",
                           "--workers", "2", "--run-root", str(tmp_path / "x.run"), "--json"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode != 0
    assert "failed to start" in proc.stderr
    shared = tmp_path / "x.run" / "results.d"  # no chunk ever ran, and what the run had
    assert not shared.exists() or not list(shared.iterdir())  # made for its chunks is gone


def _left_running(marker: str) -> list[str]:
    """The processes whose environment holds ``marker`` that are still running (a zombie has
    ended): each as its pid and command line. Every process a command starts inherits its
    environment: its fork server, the workers forked from it, ``multiprocessing``'s resource
    tracker."""
    needle = f"MNEMON_TEST_RUN={marker}".encode()
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{pid}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace")
            alive.append(f"{pid}: {command}")
        except OSError:  # ended meanwhile, or not ours to read
            continue
    return alive


def _ours(alive: list[str]) -> list[str]:
    """Of ``alive``, the run's fork server and workers and anything else of it but
    ``multiprocessing``'s resource tracker, which ends on its own as the command's end closes
    its pipe (it may still be tearing itself down; decision 0471)."""
    return [p for p in alive if "resource_tracker" not in p]


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_nothing_of_the_run_outlives_the_command(tmp_path):
    """The moment ``mnemon run --engine dask`` has ended, no process it started is running:
    not a worker, not the fork server the workers were forked from (decision 0471). Its output
    goes to files, not pipes, so the command is waited for, not its pipes' readers' end."""
    import uuid

    job = _job(tmp_path / "job", latency=0.01)
    marker = uuid.uuid4().hex
    env = dict(os.environ, MNEMON_TEST_RUN=marker)
    with open(tmp_path / "out", "wb") as out, open(tmp_path / "err", "wb") as err:
        proc = subprocess.run([sys.executable, "-m", "mnemon", "run", str(job), "--engine",
                               "dask", "--workers", "2", "--run-root", str(tmp_path / "job.run"),
                               "--json"], stdout=out, stderr=err, env=env, timeout=180)
        left = _left_running(marker)
    assert proc.returncode == 0, (tmp_path / "err").read_text()[-2000:]
    assert json.loads((tmp_path / "out").read_text())["done"] == TASKS
    assert not _ours(left), left


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_ctrl_c_merges_what_finished_and_leaves_nothing_running(tmp_path):
    """Ctrl-C while the chunks run: the command ends 130 with the tasks that finished merged
    into ``results.jsonl``, and nothing it started still running."""
    import time
    import uuid

    job = _job(tmp_path / "job", latency=0.2)
    root = tmp_path / "job.run"
    marker = uuid.uuid4().hex
    env = dict(os.environ, MNEMON_TEST_RUN=marker)
    with open(tmp_path / "out", "wb") as out, open(tmp_path / "err", "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "mnemon", "run", str(job), "--engine",
                                 "dask", "--workers", "2", "--run-root", str(root), "--json"],
                                stdout=out, stderr=err, env=env)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and proc.poll() is None:
                done = sum(len(f.read_bytes().splitlines())
                           for f in (root / "results.d").glob("*.jsonl")) \
                    if (root / "results.d").is_dir() else 0
                if done >= 4:
                    break
                time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            code = proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        left = _left_running(marker)
    assert code == 130, (tmp_path / "err").read_text()[-2000:]
    summary = json.loads((tmp_path / "out").read_text())
    assert summary["interrupted"] and 4 <= summary["done"] < TASKS
    results = _results(root / "results.jsonl")
    assert sum(s == "done" for s, _, _ in results.values()) == summary["done"]
    assert not _ours(left), left
