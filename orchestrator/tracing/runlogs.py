"""A whole run's spans, read from its run root's logs (``mnemon trace``).

Read-only, like ``mnemon cost``: each log's complete lines are decoded one at a time and fed to
the builder; a torn tail is reported, never read. Every agent is met first through its opening
record, so a child's spans land in its root's trace whichever log is read first.
"""

from __future__ import annotations

import re
from pathlib import Path

from ...lineage.runroot import RunRootError, agent_source, list_agents, read_run_json
from ...session.log import TornTail, find_torn_tail, iter_lines
from ...session.records import DECODE_ERRORS, SessionStarted, decode
from . import ids
from .build import TraceBuilder
from .spans import Span
from ...errors import UserError

__all__ = ["TraceError", "RunTrace", "read_run"]


class TraceError(UserError):
    """A log that cannot be read for tracing: a line that is not a record."""


class RunTrace:
    """The spans of a run, and what reading it met: ``torn`` (source → torn tail)."""

    def __init__(self, root: Path, run: dict, spans: list[Span], torn: dict[str, TornTail]):
        self.root = root
        self.run = run
        self.spans = spans
        self.torn = torn


def _natural(agent: str) -> list:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", agent)]


def read_run(path: Path, *, content: bool = False, latest_only: bool = False) -> RunTrace:
    """Every span of the run at ``path``. Raises ``RunRootError`` when ``path`` is not a run
    root, ``TraceError`` naming the file and line of a log that does not decode."""
    root = Path(path)
    if not (root / "run.json").is_file():
        raise RunRootError(f"{path} is not a run root (no run.json in it)")
    run = read_run_json(root)
    builder = TraceBuilder(ids.run_key(run), content=content, latest_only=latest_only,
                           hold_agents=True)
    agents = sorted(list_agents(root), key=_natural)
    for agent in agents:
        builder.meet(agent, _opening(root, agent))
    spans: list[Span] = []
    torn: dict[str, TornTail] = {}
    for agent in agents:
        src = agent_source(agent)
        t = find_torn_tail(root / src)
        if t is not None:
            torn[src] = t
        for lineno, (off, line) in enumerate(iter_lines(root / src), 1):
            try:
                rec = decode(line)
            except DECODE_ERRORS as e:
                raise TraceError(f"{src}:{lineno}: not a record at offset {off} ({e})") from None
            spans += builder.feed(agent, rec, len(line))
    spans += builder.finish()
    return RunTrace(root, run, spans, torn)


def _opening(root: Path, agent: str) -> SessionStarted | None:
    for _, line in iter_lines(root / agent_source(agent)):
        try:
            rec = decode(line)
        except DECODE_ERRORS:
            return None  # the whole read names the line
        return rec if isinstance(rec, SessionStarted) else None
    return None
