"""A job's ``[[score]]`` tables applied to its results rows: at the end of ``mnemon run`` and
by ``mnemon score RUN_ROOT`` from the recorded answers (docs/scores.md).

The pure scorers (``scores/scorers.py``) run in a worker thread — a ``regex`` scorer's pattern
is the user's and may use its whole timeout — and the judges of ``model`` scorers run as
agents of the run root under the job's supervisor, ``concurrency`` at a time: each is created,
or reopened from its log, so a judge's verdict once recorded is never asked again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import trio

from ...lineage.runroot import agent_source
from ..scores.judge import VERDICT, judge_id, judge_prompt, verdict_score
from ..scores.scorers import Score, score
from ..scores.spec import ScoreSpec
from .results import is_final
from .spec import Job, JobError, _line
from .state import complete
from .tasks import Task

__all__ = ["Scoring", "scoring_for"]


class Scoring:
    """The job's scorers, checked: each ``python`` scorer's function imported (relative to
    the job file), refused naming its line when it does not resolve."""

    def __init__(self, job: Job) -> None:
        from ..importpath import ImportPathError, resolve

        self.job = job
        self.specs: list[ScoreSpec] = list(job.spec.score)
        self.users: dict[str, Any] = {}
        for i, s in enumerate(self.specs):
            if s.kind == "python":
                assert s.python is not None
                try:
                    self.users[s.name] = resolve(s.python, job.folder, want_callable=True)
                except ImportPathError as e:
                    raise JobError(f"{job.path}:{_line(job.text, ('score', i, 'python')) or '?'}"
                                   f": {e}") from None
        self.judged = any(s.kind == "model" for s in self.specs)

    def pure(self, task: Task, row: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """The row's scores from every scorer but the judges (synchronous: in a thread)."""
        return {s.name: score(s, row, task.target_for(s.name), self.users.get(s.name)).as_dict()
                for s in self.specs if s.kind != "model"}

    async def judge(self, sup: Any, spec: ScoreSpec, task: Task,
                    row: dict[str, Any]) -> dict[str, Any]:
        """A ``model`` scorer's verdict on one row: its judge created, or reopened from its
        log (a verdict recorded is read back without a request)."""
        answer = row.get("answer")
        if answer is None and row.get("output") is None:
            return Score(value=0.0, explanation=f"no answer ({row.get('reason')})").as_dict()
        if not isinstance(answer, str):
            answer = msgspec.json.encode(row.get("output")).decode()
        target = task.target_for(spec.name)
        prompt = judge_prompt(spec, task=task.prompt, target=target, answer=answer)
        aid = judge_id(spec, task.agent, prompt)
        path = sup.root / agent_source(aid)
        if path.exists() and complete(path):
            node = sup.resume_agent(aid, spend=True)
        else:
            own = None if spec.role is not None else msgspec.structs.replace(
                sup.settings, system=None, roles=None)
            node = sup.new_root(prompt, aid, output=VERDICT, role=spec.role, settings=own)
        try:
            await sup.run(node)
            return verdict_score(node.output, node.reason, aid, node.cost_usd)
        finally:
            if node.log is not None:
                node.log.close()
            sup.agents.pop(node.id, None)

    async def score_lines(self, sup: Any, tasks: list[Task], lines: dict[str, dict[str, Any]],
                          *, again: bool = False, limit: int = 8) -> int:
        """Score every final line of ``lines`` (by task id) that has no scores yet (``again``:
        every final line), in place; returns how many were scored."""
        todo = [(t, lines[t.id]) for t in tasks
                if t.id in lines and is_final(lines[t.id])
                and (again or not _complete(lines[t.id], self.specs))]
        if not todo:
            return 0
        pure = await trio.to_thread.run_sync(
            lambda: [self.pure(t, row) for t, row in todo])
        judged: dict[tuple[str, str], dict[str, Any]] = {}
        if self.judged:
            gate = trio.Semaphore(max(1, limit))

            async def one(spec: ScoreSpec, t: Task, row: dict[str, Any]) -> None:
                async with gate:
                    judged[(spec.name, t.id)] = await self.judge(sup, spec, t, row)

            async with trio.open_nursery() as n:
                for t, row in todo:
                    for s in self.specs:
                        if s.kind == "model":
                            n.start_soon(one, s, t, row)
        for (t, row), got in zip(todo, pure):
            scores = {}
            for s in self.specs:  # in the job file's order
                scores[s.name] = got[s.name] if s.kind != "model" else judged[(s.name, t.id)]
            row["scores"] = scores
            if t.target is not None:
                row["target"] = t.target
        return len(todo)


def _complete(line: dict[str, Any], specs: list[ScoreSpec]) -> bool:
    have = line.get("scores")
    return isinstance(have, dict) and all(s.name in have for s in specs)


def scoring_for(job: Job) -> Scoring | None:
    """The job's scorers (None without ``[[score]]``), every import path resolved now."""
    return Scoring(job) if job.spec.score else None


def job_of(root: Path, named: str | Path | None) -> Path:
    """The job file a run root was run from (its ``job.json``), or the one ``--job`` names."""
    import json

    if named is not None:
        return Path(named)
    try:
        return Path(json.loads((root / "job.json").read_text(encoding="utf-8"))["job"])
    except (OSError, ValueError, KeyError, TypeError):
        raise JobError(f"{root} holds no job (no readable job.json): name the job file with "
                       "--job") from None


def same_tasks(root: Path, job: Job, tasks: list[Task]) -> None:
    """A job named for rescoring must be the run root's: the same task ids, in order."""
    import json

    try:
        old = json.loads((root / "job.json").read_text(encoding="utf-8"))["tasks"]
    except (OSError, ValueError, KeyError, TypeError):
        raise JobError(f"{root} holds no job (no readable job.json)") from None
    ids = [t.id for t in tasks]
    if [o[0] for o in old] != ids[:len(old)]:
        raise JobError(f"{job.path} is not the job of {root}: its tasks differ "
                       f"(at {_line(job.text, ('input',)) or _line(job.text, ('tasks',)) or 1})")
