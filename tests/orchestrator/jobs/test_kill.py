"""Resume after SIGKILL at 20 points, and Ctrl-C: ``python -m mnemon run JOB.toml`` in a
subprocess, killed and run again until it finishes. Every task's result exactly once, no turn
recorded twice, every log folds."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from .kit import records, results, run_cli, write_job

TASKS = 30
JOB = """\
concurrency = 3
[provider]
name = "scripted"
policy = "job_policy:steps"
latency_s = 0.02
[agent]
system = "You work through tasks."
tools = ["job_policy:note"]
[synod]
n = 2
question = "Vote on {id}."
"""


def _written(root: Path) -> int:
    return sum(p.stat().st_size for p in root.glob("agents/*/record.jsonl"))


def _killed_at_a_random_moment(job: Path, root: Path, rng: random.Random) -> None:
    """Kill within 0.15 s of the run's first write (interpreter start varies with the load)."""
    before = _written(root) if root.exists() else 0
    proc = subprocess.Popen([sys.executable, "-m", "mnemon", "run", str(job), "--run-root",
                             str(root)], cwd=job.parent, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while proc.poll() is None and time.monotonic() < deadline:
        if root.exists() and _written(root) > before:
            break
        time.sleep(0.005)
    time.sleep(rng.uniform(0.0, 0.15))
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


def check_logs(root: Path, *, final: bool = False) -> None:
    """No turn recorded twice: a task agent's steps are 1..n once each, in order; a synod
    child votes once; every turn id is opened once."""
    for path in sorted(root.glob("agents/*/record.jsonl")):
        recs = records(path)
        opened = [r["turn"] for r in recs if r["t"] in ("UserPrompt", "AssistantMessage")]
        assert len(opened) == len(set(opened)), path
        said = [b["text"] for r in recs if r["t"] == "AssistantMessage"
                for b in r["blocks"] if b["type"] == "text"]
        if ".s" in path.parent.name:
            assert (len(said) == 1) if final else (len(said) <= 1), (path, said)
            assert all(x.startswith("vote ") for x in said), (path, said)
        else:
            steps = [int(s.split()[1].rstrip(":")) for s in said]
            assert steps == list(range(1, len(steps) + 1)), (path, said)
            assert len(steps) <= 3, (path, said)


def test_resume_after_sigkill_at_twenty_points(tmp_path):
    job = write_job(tmp_path / "j", JOB, tasks=TASKS)
    root = tmp_path / "run"
    rng = random.Random(15)
    kills = 0
    progress: list[int] = []
    for i in range(20):
        if i % 3 == 0:
            _killed_at_a_random_moment(job, root, rng)
        else:
            variable = "KILL_AT_CALL" if i % 3 == 1 else "KILL_IN_TOOL"
            proc = run_cli("run", str(job), "--run-root", str(root), cwd=job.parent,
                           env={variable: str(rng.randint(2, 9))})
            assert proc.returncode in (0, -signal.SIGKILL), proc.stderr
        kills += 1
        if (root / "agents").exists():
            check_logs(root)
        done = sum(1 for r in results(root / "results.jsonl")) if (root / "results.jsonl"
                                                                     ).exists() else 0
        progress.append(done)
    proc = run_cli("run", str(job), "--run-root", str(root), "--json", cwd=job.parent)
    assert proc.returncode == 0, proc.stderr
    lines = results(root / "results.jsonl")
    assert [r["task"] for r in lines] == [f"k{i}" for i in range(1, TASKS + 1)], \
        "exactly one line per task, in task order"
    for r in lines:
        assert r["status"] == "done", r
        assert r["answer"] == f"vote {r['task']}", r
        assert r["synod"]["vote"]["counts"] == {f"vote {r['task']}": 2}
    check_logs(root, final=True)
    tasks = [records(root / "agents" / f"t{i}" / "record.jsonl") for i in range(1, TASKS + 1)]
    assert all(sum(1 for r in t if r["t"] == "AssistantMessage") == 3 for t in tasks)
    assert run_cli("verify", str(root), cwd=tmp_path).returncode == 0
    assert kills == 20
    unfinished = sum(1 for done in progress if done < TASKS)
    assert unfinished >= 14, f"most kills land while the job has work left: {progress}"
    resumed = sum(1 for p in root.glob("agents/*/record.jsonl") for r in records(p)
                  if r["t"] == "SessionResumed")
    assert resumed >= 10, "the kills interrupted agents, which resumed from their logs"


def test_ctrl_c_stops_cleanly_and_the_same_command_resumes(tmp_path):
    job = write_job(tmp_path / "j", JOB.replace("latency_s = 0.02", "latency_s = 0.3"),
                    tasks=6)
    root = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "mnemon", "run", str(job), "--run-root",
                             str(root)], cwd=job.parent, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while not list(root.glob("agents/*/record.jsonl")) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.4)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "re-run the same command to resume" in out
    lines = results(root / "results.jsonl")
    assert lines and all(r["status"] == "cancelled" for r in lines)
    for path in root.glob("agents/*/record.jsonl"):
        assert records(path)[-1] == {**records(path)[-1], "t": "SessionEnded",
                                     "reason": "cancelled"}, path
    assert run_cli("verify", str(root), cwd=tmp_path).returncode == 0
    again = run_cli("run", str(job), "--run-root", str(root), cwd=job.parent)
    assert again.returncode == 0, again.stderr
    lines = results(root / "results.jsonl")
    assert [r["status"] for r in lines] == ["done"] * 6
    check_logs(root, final=True)


def test_a_task_agents_own_children_resume_with_it(tmp_path):
    """A task's agent starts a child (agents_start) and waits; the job is killed inside the
    child's tool call. The re-run reopens the agent and its open child under it: the child
    finishes, the interrupted wait is made again, nothing is started twice."""
    job = write_job(tmp_path / "j", JOB.replace("job_policy:steps", "job_policy:delegate")
                    .split("[synod]")[0], tasks=1)
    root = tmp_path / "run"
    proc = run_cli("run", str(job), "--run-root", str(root), cwd=job.parent,
                   env={"KILL_IN_TOOL": "1"})
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    kids = [p.parent.name for p in root.glob("agents/*/record.jsonl") if p.parent.name != "t1"]
    assert len(kids) == 1 and records(root / "agents" / kids[0] / "record.jsonl")[-1]["t"] == \
        "AssistantMessage", "killed inside the child's tool call"
    proc = run_cli("run", str(job), "--run-root", str(root), "--json", cwd=job.parent)
    assert proc.returncode == 0, proc.stderr
    [line] = results(root / "results.jsonl")
    assert (line["status"], line["answer"]) == ("done", "root got: child done k1")
    logs = sorted(p.parent.name for p in root.glob("agents/*/record.jsonl"))
    assert logs == sorted(["t1", *kids]), "no child started twice"
    child = records(root / "agents" / kids[0] / "record.jsonl")
    assert child[-1] == {**child[-1], "t": "SessionEnded", "reason": "done"}
    assert sum(1 for r in child if r["t"] == "AssistantMessage") == 2
    parent_cost = sum(r["usage"]["output_tokens"] for r in
                      records(root / "agents" / "t1" / "record.jsonl")
                      if r["t"] == "ProviderCall" and r["usage"])
    assert line["usage"]["output_tokens"] > parent_cost, "the child's spend is the task's too"
    assert run_cli("verify", str(root), cwd=tmp_path).returncode == 0
