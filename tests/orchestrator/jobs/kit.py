"""Writing test jobs: a job file and the policy module beside it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def write_job(folder: Path, body: str, *, tasks: int | None = None) -> Path:
    """``folder/job.toml`` holding ``body`` (plus ``tasks`` inline tasks ``task k``), with
    ``job_policy.py`` copied beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / "job_policy.py", folder / "job_policy.py")
    text = body
    if tasks:
        text += "".join(f'\n[[tasks]]\nid = "k{i}"\nprompt = "task k{i}"\n'
                        for i in range(1, tasks + 1))
    path = folder / "job.toml"
    path.write_text(text, encoding="utf-8")
    return path


def run_cli(*args: str, cwd: Path, env: dict | None = None, timeout: float = 60):
    """``python -m mnemon ARGS`` in a subprocess."""
    full = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "mnemon", *args], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=timeout)


def results(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def records(path: Path) -> list[dict]:
    """The log's records; a torn last line (a SIGKILL can cut a long write short) is left out,
    as the log's next writer moves it aside — any other line that does not parse fails."""
    lines = path.read_bytes().split(b"\n")
    out = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except ValueError:
            if i == len(lines) - 1:  # no newline after it: the tail a kill tore
                break
            raise
    return out
