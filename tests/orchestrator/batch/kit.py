"""Batch test jobs: a job file beside ``batch_policy.py``, run by ``python -m mnemon run``
against the loopback server (``server.py``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
KEYS = {"ANTHROPIC_API_KEY": "test-key", "OPENAI_API_KEY": "test-key"}


def write_job(folder: Path, *, provider: str, url: str | None, tasks: int, synod: int = 2,
              retries: int = 1, extra: str = "", name: str = "job.toml") -> Path:
    """A job of ``tasks`` tasks (``task k1`` …) with the ``note`` tool and a synod of
    ``synod`` children (none at 0), on ``provider`` at ``url`` (the scripted provider plays
    the same model when ``provider`` is ``scripted``)."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / "batch_policy.py", folder / "batch_policy.py")
    if provider == "scripted":
        head = ('name = "scripted"\npolicy = "batch_policy:model"\n'
                'price_as = "claude-sonnet-4-5"\n')
    else:
        base = url if provider == "anthropic" else f"{url}/v1"  # (openai, openai-responses)
        head = f'name = "{provider}"\nbase_url = "{base}"\nbatch_poll_s = 0.01\n'
    text = (f"retries = {retries}\nconcurrency = 16\n[provider]\n{head}\n"
            '[agent]\nsystem = "You work through tasks."\ntools = ["batch_policy:note"]\n'
            f"{extra}\n")
    if synod:
        text += f'[synod]\nn = {synod}\nquestion = "Vote on {{id}}."\n'
    text += "".join(f'\n[[tasks]]\nid = "k{i}"\nprompt = "task k{i}"\n'
                    for i in range(1, tasks + 1))
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def run_cli(*args: str, cwd: Path, env: dict | None = None, timeout: float = 120):
    full = {**os.environ, **KEYS, **(env or {})}
    return subprocess.run([sys.executable, "-m", "mnemon", *args], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=timeout)


def popen_cli(*args: str, cwd: Path, env: dict | None = None) -> subprocess.Popen:
    full = {**os.environ, **KEYS, **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "mnemon", *args], cwd=cwd, env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def records(path: Path) -> list[dict]:
    out = []
    for line in path.read_bytes().split(b"\n"):
        if line.strip():
            out.append(json.loads(line))
    return out


def results(path: Path) -> dict[str, dict]:
    return {r["task"]: r for r in map(json.loads, path.read_text().splitlines())}


def turns(root: Path) -> dict[str, list]:
    """Each agent's assistant turns: (turn id, blocks)."""
    return {p.parent.name: [(r["turn"], r["blocks"]) for r in records(p)
                            if r["t"] == "AssistantMessage"]
            for p in sorted(root.glob("agents/*/record.jsonl"))}


def check_once(root: Path) -> None:
    """No turn recorded twice, no row's usage counted twice, every custom id recorded once as
    a submission and at most once with its outcome."""
    for p in sorted(root.glob("agents/*/record.jsonl")):
        recs = records(p)
        opened = [r["turn"] for r in recs if r["t"] in ("UserPrompt", "AssistantMessage")]
        assert len(opened) == len(set(opened)), p
        subs = [r["custom_id"] for r in recs if r["t"] == "ProviderCall" and r.get("custom_id")
                and r.get("usage") is None and r.get("error") is None]
        outs = [r["custom_id"] for r in recs if r["t"] == "ProviderCall" and r.get("custom_id")
                and (r.get("usage") is not None or r.get("error") is not None)]
        assert len(subs) == len(set(subs)), p
        assert len(outs) == len(set(outs)), p
