"""A job's tasks: inline ``[[tasks]]``, or the rows of a JSONL or CSV file through a prompt
template. Every row is checked before anything runs — a template naming a column a row lacks
is a ``JobError`` naming the column and the row's line.
"""

from __future__ import annotations

import csv
import json
import string
from pathlib import Path
from typing import Any

from msgspec import Struct

from .spec import Job, JobError, _line


class Task(Struct, kw_only=True, frozen=True):
    index: int
    """Position in the job (0-based); names the task's agent, ``t<index+1>``."""
    id: str
    prompt: str
    row: dict[str, Any] | None = None
    """The input row (None for an inline task)."""
    question: str | None = None
    """The synod's question for this task (its template filled from the row)."""
    target: str | None = None
    """The task's expected answer (``[input] target`` filled, or an inline task's own)."""
    targets: dict[str, str] = {}
    """The targets of the ``[[score]]`` tables that name their own, by scorer."""

    def target_for(self, scorer: str) -> str | None:
        return self.targets.get(scorer, self.target)

    @property
    def agent(self) -> str:
        return f"t{self.index + 1}"


def fields(template: str, where: str) -> list[str]:
    """The column names a ``{column}`` template uses; only plain names are allowed."""
    names: list[str] = []
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as e:
        raise JobError(f"{where}: the template is not valid ({e}); write {{{{ and }}}} for "
                       "literal braces") from None
    for _lit, name, spec, conv in parsed:
        if name is None:
            continue
        if not name or not name.replace("_", "a").replace("-", "a").replace(" ", "a").isalnum():
            raise JobError(f"{where}: {{{name}}} is not a column name (use {{column}}; "
                           "write {{ and }} for literal braces)")
        if spec or conv:
            raise JobError(f"{where}: {{{name}{'!' + conv if conv else ''}"
                           f"{':' + spec if spec else ''}}} — a template takes plain {{column}}")
        names.append(name)
    return names


def fill(template: str, row: dict[str, Any], names: list[str], where: str) -> str:
    for name in names:
        if name not in row:
            have = ", ".join(sorted(row)) or "none"
            raise JobError(f"{where}: no column {name!r} (the row has: {have})")
    return template.format_map({k: _text(v) for k, v in row.items()})


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False)


class _Where:
    """A ``path:line`` found only when an error is written (``f"{where}: …"``): looking a key's
    line up scans the file, and doing it for every task made loading quadratic."""

    __slots__ = ("job", "key")

    def __init__(self, job: Job, key: tuple):
        self.job, self.key = job, key

    def __str__(self) -> str:
        return f"{self.job.path}:{_line(self.job.text, self.key) or '?'}"


def load_tasks(job: Job) -> list[Task]:
    """Every task of the job, each prompt filled in; raises ``JobError`` before anything runs."""
    spec = job.spec
    qtemplate = spec.synod.question if spec.synod is not None else None
    own = [(s.name, s.target, fields(s.target, _Where(job, ('score', i, 'target'))))
           for i, s in enumerate(spec.score) if s.target is not None]
    tasks: list[Task] = []
    if spec.input is None:
        for i, t in enumerate(spec.tasks):
            where = _Where(job, ('tasks', i, 'prompt'))
            q = None
            seen = {"id": t.id, "prompt": t.prompt, "target": t.target or ""}
            if qtemplate is not None:
                q = fill(qtemplate, seen, fields(qtemplate, where), where)
            tasks.append(Task(index=i, id=t.id, prompt=t.prompt, question=q, target=t.target,
                              targets={n: fill(tpl, seen, names, where)
                                       for n, tpl, names in own}))
        _unique(tasks, lambda t: f"{job.path}:{_line(job.text, ('tasks', t.index, 'id')) or '?'}")
        return tasks
    inp = spec.input
    at = f"{job.path}:{_line(job.text, ('input', 'prompt')) or '?'}"
    names = fields(inp.prompt, at)
    qnames = fields(qtemplate, f"{job.path}:{_line(job.text, ('synod', 'question')) or '?'}") \
        if qtemplate is not None else []
    tnames = fields(inp.target, f"{job.path}:{_line(job.text, ('input', 'target')) or '?'}") \
        if inp.target is not None else []
    source = job.resolve(inp.path)
    lines: dict[int, int] = {}
    for n, (line, row) in enumerate(_rows(source)):
        where = f"{source}:{line}"
        if inp.id is not None:
            if inp.id not in row:
                raise JobError(f"{where}: no column {inp.id!r} for the task id ([input] id)")
            tid = _text(row[inp.id])
        else:
            tid = str(n + 1)
        prompt = fill(inp.prompt, row, names, where)
        q = fill(qtemplate, row, qnames, where) if qtemplate is not None else None
        target = fill(inp.target, row, tnames, where) if inp.target is not None else None
        lines[n] = line
        tasks.append(Task(index=n, id=tid, prompt=prompt, row=row, question=q, target=target,
                          targets={name: fill(tpl, row, names, where)
                                   for name, tpl, names in own}))
    if not tasks:
        raise JobError(f"{source}: no rows")
    _unique(tasks, lambda t: f"{source}:{lines[t.index]}")
    return tasks


def _unique(tasks: list[Task], where) -> None:
    seen: set[str] = set()
    for t in tasks:
        if t.id in seen:
            raise JobError(f"{where(t)}: task id {t.id!r} is not unique in the job")
        if not t.id:
            raise JobError(f"{where(t)}: a task id may not be empty")
        seen.add(t.id)


def _rows(path: Path):
    """(line number, row) of a ``.jsonl`` or ``.csv`` file."""
    try:
        if path.suffix.lower() == ".csv":
            yield from _csv(path)
        elif path.suffix.lower() in (".jsonl", ".ndjson", ".json"):
            yield from _jsonl(path)
        else:
            raise JobError(f"{path}: an input file is .jsonl or .csv")
    except OSError as e:
        raise JobError(f"{path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise JobError(f"{path}: not UTF-8 ({e.reason} at byte {e.start})") from None


def _jsonl(path: Path):
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise JobError(f"{path}:{n}: not JSON ({e.msg})") from None
            if not isinstance(row, dict):
                raise JobError(f"{path}:{n}: a row is a JSON object")
            yield n, row


def _csv(path: Path):
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        try:
            header = next(reader)
        except StopIteration:
            return
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            line = reader.line_num
            if len(row) != len(header):
                raise JobError(f"{path}:{line}: {len(row)} cells under a header of "
                               f"{len(header)} columns")
            yield line, dict(zip(header, row))
