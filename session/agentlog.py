"""One agent's log and table together: the seam where records are judged, written, applied.

``append`` is the only path a record takes into a live agent: ``check`` (refuse naming the
state) → write the whole line → ``apply`` with its Locus. Resume folds the file through the same
``step`` and then appends ``SessionResumed``.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

import trio

from .chain import Beside, resume_state, sign, signing_key
from .checkpoint import layout
from .checkpoint.layout import Key
from .checkpoint.reopening import reopen
from .checkpoint.writing import save
from .context import Context
from .log import Fsync, RecordLog, TornTail
from .records import (AssistantMessage, Block, Locus, Record, SessionResumed, SessionStarted,
                      Usage, UserPrompt)
from .turn import Loader


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class AgentLog:
    #: told of every record once it is written and applied: ``tap(agent_log, record, locus)``.
    #: None — the default, and always so unless a run is traced — costs one test per record;
    #: set only by ``orchestrator.tracing.switch.live_tracing`` (decision 0292).
    tap = None

    def __init__(self, path: Path, source: str, ctx: Context, log: RecordLog, key=None):
        self.path = path
        self.source = source
        self.ctx = ctx
        self.log = log
        self.seam = trio.Lock()  # the agent's lock: the door resolves pointers under it
        # what a checkpoint written at a clean stop is keyed by: the first and the last record
        # and the lines so far (session.checkpoint.layout.Key), kept up to date by ``append``
        self._first = key.first if key is not None else None
        self._last = key.last if key is not None else None
        self._lines = key.lines if key is not None else 0

    @classmethod
    def create(cls, path: Path, source: str, started: SessionStarted, *,
               loader: Loader | None = None, fsync: Fsync = "none",
               unborn: int | None = None) -> "AgentLog":
        """``unborn``: the log's file made ahead (``session.log.unborn``)."""
        signing_key()  # a key that cannot be read is refused before the agent starts
        log = RecordLog(path, fsync=fsync, new=True, unborn=unborn, chain=True)
        agent = cls(path, source, Context(source, loader=loader), log)
        agent.append(started)
        return agent

    @classmethod
    def resume(cls, path: Path, source: str, *, loader: Loader | None = None,
               fsync: Fsync = "none") -> tuple["AgentLog", TornTail | None]:
        """Move a torn tail aside, replay the file through ``step``, record the resume.

        A fold checkpoint beside the log (written at the last clean stop) that still describes
        it spares the replay: the table is restored from it, the lines appended since are folded
        through ``step``, and the resident turns' records are loaded through their loci; a
        stale or damaged one is ignored and the file refolded (``session.checkpoint.reopening``,
        the one place that decides)."""
        signing_key()
        log = RecordLog(path, fsync=fsync, chain=True)  # moves a torn tail aside
        try:
            # the chain is checked (a broken one refused by name, nothing appended) beside the
            # fold on a large log, before it on a small one; a broken chain is named rather
            # than whatever the fold refused of the same damage
            chain: Beside | None = Beside(path, source) if log.size >= layout.MIN_BYTES else None
            if chain is None and log.size:
                log.go_on(resume_state(path, source))
            try:
                ctx, key, _ = reopen(path, source, loader=loader)
            except BaseException:
                if chain is not None:
                    chain.result()
                raise
            if chain is not None:
                log.go_on(chain.result())
        except BaseException:  # a log that does not fold: its writer (and lock) let go
            log.close()
            raise
        agent = cls(path, source, ctx, log, key)
        torn = log.torn
        agent.append(SessionResumed(at=_now(), records=ctx.records_folded,
                                    torn_bytes=torn.length if torn else None))
        return agent, torn

    def append(self, record: Record) -> Locus:
        """Judge, write, apply. A refused record is never written."""
        self.ctx.check(record)
        locus = self.log.append(record)
        self.ctx.apply(record, locus)
        if self._first is None:
            self._first = locus
        self._last = locus
        self._lines += 1
        tap = self.tap
        if tap is not None:
            tap(self, record, locus)
        return locus

    def checkpoint(self) -> Path | None:
        """Save the fold checkpoint beside the log (derived data: ``session.checkpoint``), so
        that the next resume and the door from outside need not refold it. Logs under
        ``checkpoint.layout.MIN_BYTES`` get none."""
        if self._last is None or self.log.size < layout.MIN_BYTES:
            return None
        key = Key(tuple(self._first), tuple(self._last),  # type: ignore[arg-type]
                  self._last[0] + self._last[1] + 1, self._lines)
        if key.end != self.log.size:
            return None  # something else wrote to the file: let the next reader refold
        return save(self.ctx, self.path, key)

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

    def close(self, *, checkpoint: bool = False) -> None:
        """Close the log; ``checkpoint`` (a clean stop) saves the fold checkpoint first. With
        a signing key (``MNEMON_SIGN_KEY``) the chain's head is signed beside the log
        (``record.jsonl.sig``) once the last record is durable."""
        if checkpoint:
            try:
                self.checkpoint()
            except OSError:
                pass  # an optimisation only
        head = self.log.head() if self.log.broken is None else None
        self.log.close()
        key = signing_key() if head is not None else None
        if key is not None and head is not None:
            sign(self.path, self.source, *head, key)
