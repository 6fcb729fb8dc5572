"""``mnemon run --engine dask``: a job's root tasks spread over a LocalCluster of worker
processes; a worker killed mid-job; the same results as ``--engine local``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_dask_and_local_give_the_same_results(tmp_path):
    job = _job(tmp_path / "job", latency=0.01)
    runs = {}
    for engine in ("local", "dask"):
        root = tmp_path / f"{engine}.run"
        proc = subprocess.run([sys.executable, "-m", "mnemon", "run", str(job), "--engine",
                               engine, "--workers", "2", "--run-root", str(root), "--json"],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        summary = json.loads(proc.stdout)
        assert summary["done"] == TASKS
        runs[engine] = _results(root / "results.jsonl")
        _verify(root)
    assert runs["local"] == runs["dask"]
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
    _verify(root)
    for agent in (root / "agents").iterdir():
        recs = [json.loads(x) for x in (agent / "record.jsonl").read_text().splitlines()]
        turns = [r["turn"] for r in recs if r["t"] in ("UserPrompt", "AssistantMessage")]
        assert turns == sorted(set(turns)), f"{agent.name}: a turn recorded twice"
        ok = [r for r in recs if r["t"] == "ProviderCall" and not r.get("error")]
        assert len(ok) == sum(r["t"] == "AssistantMessage" for r in recs), \
            f"{agent.name}: a provider call repeated for a recorded turn"
