"""An agent's workspace history, read from its log alone (``History``): pure, no store access.

Every surface that asks "the files at turn N" — a rewind, ``mnemon workspace DIR --turn N``,
the service's routes, the page, a resumed agent — answers from the log's ``WorkspaceSnapshot``
records, never from a live object (a reopened agent must rebuild what it is from its log).

"At turn N" means: as the files stood after turn N's tools, i.e. the last snapshot recorded
before turn N+1 began (or before the log's end). A turn whose tools changed nothing has the
snapshot of the turn before it; turns before the agent's first own turn (a forked child's
inherited ones) have its starting snapshot.

Reading the log for this decodes only the few lines that matter: the ``WorkspaceSnapshot``
lines, and the turn number of each ``TurnStarted``/``AssistantMessage`` (read off its first
bytes, whose shape the format fixes).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from pathlib import Path

from ...session.records import WorkspaceSnapshot, decode

__all__ = ["History", "read_history"]

_SNAP = b'{"t":"WorkspaceSnapshot"'
_TURN = re.compile(rb'^\{"t":"(?:TurnStarted|AssistantMessage)","turn":(\d{1,12})[,}]')


@dataclass
class History:
    """The workspace records of one log, in log order, and the turn each followed."""

    records: list[WorkspaceSnapshot] = field(default_factory=list)
    # (turn id, the snapshot after it): one per turn the log shows, in order
    turns: list[tuple[int, str]] = field(default_factory=list)
    start: WorkspaceSnapshot | None = None

    @property
    def exists(self) -> bool:
        return self.start is not None or bool(self.records)

    @property
    def latest(self) -> str | None:
        return self.records[-1].snapshot if self.records else None

    @property
    def dir(self) -> str | None:
        """The user's directory an in-place workspace was started on (None: the run root's)."""
        return self.start.dir if self.start is not None else None

    def at(self, turn: int | None) -> str | None:
        """The snapshot as it stood after turn ``turn``'s tools (None: the starting one)."""
        if self.start is None and not self.records:
            return None
        if turn is None:
            return self.start.snapshot if self.start is not None else self.records[0].snapshot
        ids = [t for t, _ in self.turns]
        i = bisect.bisect_right(ids, turn)
        if i == 0:
            return self.start.snapshot if self.start is not None else self.records[0].snapshot
        return self.turns[i - 1][1]

    def known_turns(self) -> list[int]:
        return [t for t, _ in self.turns]


def history_of_lines(lines) -> History:
    """The history of a log given its lines (bytes, newline-free or not)."""
    h = History()
    state: str | None = None
    current: int | None = None
    seen: dict[int, int] = {}  # turn -> its index in h.turns
    for raw in lines:
        if raw.startswith(_SNAP):
            try:
                rec = decode(raw.rstrip(b"\r\n"))
            except Exception:
                continue  # verify names a line that does not decode; the history skips it
            if not isinstance(rec, WorkspaceSnapshot):
                continue
            h.records.append(rec)
            if rec.why == "start" and h.start is None:
                h.start = rec
            state = rec.snapshot
            if current is not None:
                h.turns[seen[current]] = (current, state)
            continue
        m = _TURN.match(raw[:80])
        if m is None:
            continue
        t = int(m.group(1))
        if t == current:
            continue
        if state is None and h.start is None and not h.records:
            current = t  # before any workspace record: no workspace yet
            continue
        current = t
        if t in seen:
            h.turns[seen[t]] = (t, state or "")
        else:
            seen[t] = len(h.turns)
            h.turns.append((t, state or ""))
    h.turns = [(t, s) for t, s in h.turns if s]
    h.turns.sort()
    return h


def read_history(log: Path) -> History:
    """The workspace history of the log at ``log`` (``record.jsonl``)."""
    with open(log, "rb") as f:
        return history_of_lines(f)
