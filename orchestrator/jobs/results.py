"""``results.jsonl``: one JSON object per task (a public shape, ``docs/jobs.md``).

During a run a line is appended when a task reaches a status; at the end of every run that is
not killed the file is rewritten (to a temporary file, then renamed) with exactly one line per
task that has a status, in task order. A line torn by a crash is dropped when the file is read
and cut off before the next append. The logs stay the truth: a task whose agent ended without
its line being written gets its line from the log on the next run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import msgspec
from msgspec import Struct

_encode = msgspec.json.Encoder().encode  # compact JSON, several times cheaper than json.dumps
_decode = msgspec.json.Decoder().decode


def decode_line(raw: bytes) -> Any:
    """One line of a results file as ``json.loads`` reads it, ~3× cheaper: msgspec first
    (~2.5 µs for a task's line against ~9 µs), ``json.loads`` for what msgspec refuses and it
    takes (``NaN``, a lone surrogate, a float out of range). Raises ``ValueError`` as it does.
    A Dask run's driver reads every task's line twice, its progress as the chunks write them and
    the merge at the end, on the command's path (decision 0471)."""
    try:
        return _decode(raw)
    except msgspec.DecodeError:
        return json.loads(raw)

STATUSES = ("done", "failed", "budget", "cancelled")
FINAL = frozenset({"done", "failed"})
"""A re-run skips these; a task stopped by a budget or a cancel is resumed from its log."""

DAMAGED = "failed: damaged log: "
"""How the reason of a task failed on a log that does not read begins (decision 0319): the
task is failed, and a re-run — once the log is repaired or set aside — tries it again."""


def is_final(line: dict) -> bool:
    """Whether a re-run skips the task this results line is about (``FINAL``, except a task
    failed on a damaged log)."""
    return line.get("status") in FINAL and not str(line.get("reason") or "").startswith(DAMAGED)


class Result(Struct, kw_only=True):
    task: str
    status: str
    answer: str | None
    agent: str | None
    reason: str | None
    usage: dict[str, int]
    cost_usd: float
    input: dict[str, Any] | None = None
    attempts: int = 1
    synod: dict[str, Any] | None = None
    output: Any = None
    """The typed answer (the parsed JSON), for a job with an output type."""
    typed: bool = False
    """The job has an output type: the row carries ``output`` (null when there is none)."""
    workspace: str | None = None
    """The task root's last workspace snapshot (a git tree id, as its log names it last): what
    ``mnemon results --patch`` and ``mnemon workspace`` read; null without a workspace."""

    def as_dict(self) -> dict[str, Any]:
        out = {"task": self.task, "status": self.status, "answer": self.answer,
               "agent": self.agent, "reason": self.reason, "usage": self.usage,
               "cost_usd": round(self.cost_usd, 6), "input": self.input,
               "attempts": self.attempts, "workspace": self.workspace}
        if self.synod is not None:
            out["synod"] = self.synod
        if self.typed:
            out["output"] = self.output
        return out


def read_results(path: Path) -> dict[str, dict[str, Any]]:
    """The last line per task of an existing file (a torn last line is ignored)."""
    out: dict[str, dict[str, Any]] = {}
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return out
    for raw in data.split(b"\n")[:-1] if not data.endswith(b"\n") else data.split(b"\n"):
        if not raw.strip():
            continue
        try:
            line = decode_line(raw)
        except ValueError:
            continue  # a line a crash tore, or not ours: the logs still hold the outcome
        if isinstance(line, dict) and isinstance(line.get("task"), str):
            out[line["task"]] = line
    return out


class ResultsFile:
    """Appends whole lines; a torn tail left by a crash is cut off first."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        _cut_torn_tail(path)
        self._f = open(path, "ab")

    def append(self, line: dict[str, Any]) -> None:
        self._f.write(_encode(line) + b"\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


def _cut_torn_tail(path: Path) -> None:
    try:
        with open(path, "rb+") as f:
            data = f.read()
            if data and not data.endswith(b"\n"):
                f.truncate(data.rfind(b"\n") + 1)
    except FileNotFoundError:
        pass


def rewrite(path: Path, lines: list[dict[str, Any]]) -> None:
    """Replace the file with ``lines`` (one per task), atomically."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        for line in lines:
            f.write(_encode(line) + b"\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
