"""What a run root says about a job's tasks: the manifest, whether an agent's log was opened
whole, how its sessions ended, who started whom. Read from the logs, which
stay the truth; the only writes are the manifest, new agents' directories, and moving a log cut
during its creation aside.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
import structlog

from ...lineage.runroot import agent_source
from ...session.log import iter_lines, unborn
from .spec import Job, JobError
from .tasks import Task

log = structlog.get_logger("mnemon.jobs")

MANIFEST = "job.json"


def check_manifest(root: Path, job: Job, tasks: list[Task]) -> None:
    """A run root holds one job: task ``i`` keeps its id and prompt across runs (tasks may be
    added at the end). Refuse, before anything runs, a run root holding other tasks."""
    path = root / MANIFEST
    now = [[t.id, t.prompt] for t in tasks]
    if path.exists():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))["tasks"]
        except (OSError, ValueError, KeyError, TypeError):
            raise JobError(f"{path}: not a job manifest") from None
        for i, (was, is_) in enumerate(zip(old, now)):
            if list(was) != is_:
                raise JobError(f"{root} holds another job: its task {i + 1} is {was[0]!r} with "
                               f"another prompt or id than {is_[0]!r} — name a new run root")
        if len(old) > len(now):
            raise JobError(f"{root} holds a job of {len(old)} tasks; this one has {len(now)} — "
                           "name a new run root")
    tmp = path.with_name(MANIFEST + ".tmp")
    tmp.write_text(json.dumps({"format": 1, "job": str(job.path), "tasks": now},
                              ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)


def hold(root: Path) -> int:
    """The run root held for one run of a job, from its checks to its end: an exclusive lock on
    its ``run.json`` (a descriptor; closing it lets go). A second ``mnemon run`` of the run
    root — the same command typed twice, a service job — is refused before it writes anything:
    two runs would start the same tasks and each rewrite ``results.jsonl`` with what it saw."""
    import fcntl

    fd = os.open(root / "run.json", os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise JobError(f"{root} is in use by another run of a job (one at a time per run root): "
                       "wait for it to end, or name another run root") from None
    return fd


def session_state(path: Path, display: str | None = None) -> tuple[str | None, int]:
    """(the reason of the last SessionEnded if nothing resumed it since, failures so far). A
    line naming either that is not a record is refused naming it (``LogRefused``)."""
    from ...session.errors import LogRefused
    from ...session.records import DECODE_ERRORS, SessionEnded, SessionResumed, decode

    ended: str | None = None
    failures = 0
    for n, (off, view) in enumerate(iter_lines(path), 1):
        line = bytes(view)
        if b"SessionEnded" in line or b"SessionResumed" in line:
            try:
                rec = decode(line)
            except DECODE_ERRORS as e:
                raise LogRefused(display or str(path), n, f"not a record: {e}", off) from None
            if isinstance(rec, SessionEnded):
                ended = rec.reason
                if rec.reason.startswith("failed"):
                    failures += 1
            elif isinstance(rec, SessionResumed):
                ended = None
    return ended, failures


def children_of(root: Path, agents: set[str]) -> dict[str, list[str]]:
    """Each agent's children, from the ``parent`` of their ``SessionStarted`` (creation order)."""
    from ...lineage.tree import _first_started

    out: dict[str, list[str]] = {}
    for aid in sorted(agents, key=lambda a: (len(a), a)):
        st = _first_started(root / agent_source(aid))
        if st is not None and st.parent:
            out.setdefault(st.parent, []).append(aid)
    return out


def prepare(paths: list[Path]) -> dict[Path, int]:
    """Make each new agent's directory and its log's file, unnamed (``session.log.unborn``), in
    a worker thread, many at a time: on a slow file system creating them is much of what
    starting a task costs. A directory with no ``record.jsonl`` is no agent, so one left by a
    task that never starts (or by a killed process) is harmless."""
    made: dict[Path, int] = {}
    for path in paths:
        fd = unborn(path)
        if fd is not None:
            made[path] = fd
    return made


def tidy(paths: set[Path], unborn: dict[Path, int]) -> None:
    """Close the files made for tasks that did not start and remove their directories."""
    for fd in unborn.values():
        os.close(fd)
    unborn.clear()
    for path in paths:
        try:
            path.parent.rmdir()  # only if empty
        except OSError:
            pass


def complete(path: Path) -> bool:
    """Whether an agent's log was opened whole — its task prompt is recorded. A log cut before
    that is moved aside (``Supervisor``'s ``set_aside_unopened``) and the agent created again."""
    from ..supervisor import set_aside_unopened

    if not path.exists():
        return False
    aside = set_aside_unopened(path)
    if aside is not None:
        log.warning("incomplete log moved aside", path=str(path), to=str(aside))
        return False
    return True
