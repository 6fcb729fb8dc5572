"""One agent's log and table together: the seam where records are judged, written, applied.

``append`` is the only path a record takes into a live agent: ``check`` (refuse naming the
state) → write the whole line → ``apply`` with its Locus. Resume folds the file through the same
``step`` and then appends ``SessionResumed``.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

import trio

from .context import Context, Loader
from .log import Fsync, RecordLog, TornTail
from .records import AssistantMessage, Block, Locus, Record, SessionResumed, SessionStarted, Usage, UserPrompt
from .resume import fold_file


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class AgentLog:
    def __init__(self, path: Path, source: str, ctx: Context, log: RecordLog):
        self.path = path
        self.source = source
        self.ctx = ctx
        self.log = log
        self.seam = trio.Lock()  # the agent's lock: the door resolves pointers under it

    @classmethod
    def create(cls, path: Path, source: str, started: SessionStarted, *,
               loader: Loader | None = None, fsync: Fsync = "none") -> "AgentLog":
        if path.exists() and path.stat().st_size > 0:
            raise FileExistsError(f"{path} already holds a log")
        log = RecordLog(path, fsync=fsync)
        agent = cls(path, source, Context(source, loader=loader), log)
        agent.append(started)
        return agent

    @classmethod
    def resume(cls, path: Path, source: str, *, loader: Loader | None = None,
               fsync: Fsync = "none") -> tuple["AgentLog", TornTail | None]:
        """Move a torn tail aside, replay the file through ``step``, record the resume."""
        log = RecordLog(path, fsync=fsync)  # moves a torn tail aside
        ctx, _ = fold_file(path, source, loader=loader)
        agent = cls(path, source, ctx, log)
        torn = log.torn
        agent.append(SessionResumed(at=_now(), records=ctx.records_folded,
                                    torn_bytes=torn.length if torn else None))
        return agent, torn

    def append(self, record: Record) -> Locus:
        """Judge, write, apply. A refused record is never written."""
        self.ctx.check(record)
        locus = self.log.append(record)
        self.ctx.apply(record, locus)
        return locus

    def next_id(self) -> int:
        return self.ctx.next_id()

    def prompt(self, text: str) -> int:
        tid = self.next_id()
        self.append(UserPrompt(turn=tid, text=text))
        return tid

    def assistant(self, blocks: list[Block], stop_reason: str | None, model: str | None,
                  usage: Usage | None, recorded_usage: Usage | None = None) -> int:
        tid = self.next_id()
        self.append(AssistantMessage(turn=tid, blocks=blocks, stop_reason=stop_reason, model=model,
                                     usage=usage, recorded_usage=recorded_usage))
        return tid

    def close(self) -> None:
        self.log.close()
