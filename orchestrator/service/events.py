"""Server-sent events, derived from the agents' logs.

Every event is one record of one agent's ``record.jsonl``, described by its sizes (never tool
bodies); its id is where the next record of that log starts, so a ``Last-Event-ID`` names
positions in the logs themselves and a stream resumes without gaps across reconnects and across
restarts of the service. An agent's stream id is ``<agent>:<offset>``; the whole run's stream id
lists every agent's position, ``a1:812,a2:4410`` (decision 0230). One ``Hub`` reads and describes
each record once for every stream; each stream keeps its own positions, so a slow client holds up
nobody, and one far behind reads the file itself.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import msgspec
import trio

from ...lineage.runroot import AGENT_ID, agent_source, list_agents
from ...providers.prices import cost_usd
from ...session.log import iter_lines
from ...session.records import (ApprovalDecided, ApprovalRequested, AssistantMessage, Cleared, Evicted, Inherited, Marked,
                                ProviderCall, Rewound, SessionEnded, SessionResumed,
                                SessionStarted, Steering, Swept, Text, ToolResults, ToolUse,
                                TurnStarted, UserPrompt, compact, decode)

from ...errors import UserError

POLL_S = 0.05  # how often logs written by another process are looked at
PING_S = 15.0  # a comment line keeps proxies from closing an idle stream


class BadEventId(UserError, ValueError):
    pass


def _usage(u) -> dict[str, int] | None:
    return None if u is None else msgspec.to_builtins(u)


def describe(rec: Any, *, ttl: str = "5m", model: str | None = None) -> dict[str, Any] | None:
    """One record as an event: its kind and sizes; ``None`` for a record no one watches."""
    if isinstance(rec, UserPrompt):
        return {"type": "prompt", "turn": rec.turn, "bytes": len(rec.text.encode())}
    if isinstance(rec, TurnStarted):
        return {"type": "turn_started", "turn": rec.turn, "at": rec.at}
    if isinstance(rec, AssistantMessage):
        text = "".join(b.text for b in rec.blocks if isinstance(b, Text))
        return {"type": "assistant", "turn": rec.turn, "stop_reason": rec.stop_reason,
                "text": text[:2000], "text_bytes": len(text.encode()),
                "tool_calls": [{"id": b.id, "name": b.name, "input_bytes": len(compact(b.input))}
                               for b in rec.blocks if isinstance(b, ToolUse)],
                "usage": _usage(rec.usage)}
    if isinstance(rec, ToolResults):
        return {"type": "tool_results", "results": [
            {"id": r.tool_use_id, "bytes": len(r.content.encode()) if isinstance(r.content, str)
             else len(compact(r.content)), "is_error": bool(r.is_error)} for r in rec.results]}
    if isinstance(rec, Steering):
        return {"type": "steering", "by": rec.by, "bytes": len(rec.text.encode())}
    if isinstance(rec, Inherited):
        return {"type": "inherited", "turns": len(rec.turns), "residues": len(rec.residues)}
    if isinstance(rec, Evicted):
        r = rec.residue
        return {"type": "evicted", "span": list(r.span), "by": r.by, "note": r.note}
    if isinstance(rec, Marked):
        return {"type": "marked", "block": f"{rec.block[0]}.{rec.block[1]}",
                "replacement_bytes": len(rec.replacement.encode())}
    if isinstance(rec, Swept):
        return {"type": "swept", "blocks": [f"{a}.{b}" for a, b in rec.blocks]}
    if isinstance(rec, Cleared):
        return {"type": "cleared"}
    if isinstance(rec, Rewound):
        return {"type": "rewound", "to": rec.to}
    if isinstance(rec, SessionStarted):
        out = {"type": "started", "parent": rec.parent, "kind": rec.kind, "depth": rec.depth,
               "model": rec.model, "at": rec.at}
        if rec.role is not None:  # an agent of a named role (docs/roles.md)
            out["role"] = rec.role
        return out
    if isinstance(rec, SessionResumed):
        return {"type": "resumed", "at": rec.at}
    if isinstance(rec, SessionEnded):
        return {"type": "ended", "reason": rec.reason, "at": rec.at}
    if isinstance(rec, ApprovalRequested):  # what a person needs to decide: the input too
        return {"type": "approval_requested", "call_id": rec.call_id, "tool": rec.tool,
                "input": rec.input, "rule": rec.rule, "reason": rec.reason, "at": rec.at}
    if isinstance(rec, ApprovalDecided):
        return {"type": "approval_decided", "call_id": rec.call_id, "decision": rec.decision,
                "reason": rec.reason, "edited": rec.input is not None, "by": rec.by,
                "at": rec.at}
    if isinstance(rec, ProviderCall):
        cost = (round(cost_usd(rec.usage, rec.model or model, ttl), 6)
                if rec.usage is not None else 0.0)
        return {"type": "usage", "attempt": rec.attempt, "latency_s": rec.latency_s,
                "error": rec.error, "usage": _usage(rec.usage), "cost_usd": cost, "at": rec.at}
    return None


def parse_positions(last_event_id: str | None, *, agent: str | None = None) -> dict[str, int]:
    """``Last-Event-ID`` → each agent's position; malformed ids are refused, never guessed."""
    if not last_event_id:
        return {}
    out: dict[str, int] = {}
    for part in last_event_id.split(","):
        aid, sep, off = part.strip().rpartition(":")
        if not sep or not AGENT_ID.match(aid) or not off.isdigit():
            raise BadEventId(f"Last-Event-ID {last_event_id[:80]!r} is not <agent>:<offset>,…")
        if agent is not None and aid != agent:
            raise BadEventId(f"Last-Event-ID names agent {aid}, not {agent}")
        out[aid] = int(off)
    return out


def format_positions(pos: dict[str, int]) -> str:
    return ",".join(f"{a}:{o}" for a, o in pos.items())


def sse(data: dict[str, Any], *, event: str | None = None, id: str | None = None) -> bytes:
    head = (f"id: {id}\n" if id is not None else "") + (f"event: {event}\n" if event else "")
    return (head + "data: " + json.dumps(data, separators=(",", ":")) + "\n\n").encode()


class Tail:
    """Reads an agent's new complete records from a position; a start beyond the file's end
    (a log replaced behind the id's back) is refused."""

    def __init__(self, path: Path, start: int):
        self.path = path
        self.pos = start
        self.model: str | None = None

    def new(self) -> list[tuple[int, Any]]:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return []
        if size <= self.pos:
            if size < self.pos:
                raise BadEventId(f"{self.path.name}: position {self.pos} is past the end ({size})")
            return []
        out = []
        for off, line in iter_lines(self.path, start=self.pos):
            end = off + len(line) + 1
            try:
                rec = decode(line)
            except Exception:  # noqa: BLE001 - a line the fold refuses: skip it, keep going
                rec = None
            self.pos = end
            if isinstance(rec, SessionStarted):
                self.model = rec.model
            out.append((end, rec))
        return out


def _body(ev: dict[str, Any]) -> bytes:
    return (f"event: {ev['type']}\ndata: " + json.dumps(ev, separators=(",", ":")) + "\n\n").encode()


class Feed:
    """One agent's recorded events, read and described once for every stream that watches it.
    Only the latest ``WINDOW``…``2×WINDOW`` events stay in memory: a stream further behind (a
    resume from long ago) reads the file itself until it reaches them."""

    WINDOW = 256

    def __init__(self, aid: str, path: Path, ttl: str):
        self.aid = aid
        self.tail = Tail(path, 0)
        self.ttl = ttl
        self.ends: list[int] = []  # where the next record starts, per event
        self.bodies: list[bytes] = []  # the event without its id
        self.floor = 0  # every event that ends after ``floor`` is in memory

    def refresh(self) -> bool:
        try:
            new = self.tail.new()
        except BadEventId:  # the file shrank under us (replaced): nothing to add
            return False
        added = False
        for end, rec in new:
            ev = None if rec is None else describe(rec, ttl=self.ttl, model=self.tail.model)
            if ev is None:
                continue
            ev["agent"] = self.aid
            self.ends.append(end)
            self.bodies.append(_body(ev))
            added = True
        if len(self.ends) > 2 * self.WINDOW:
            cut = len(self.ends) - self.WINDOW
            self.floor = self.ends[cut - 1]
            del self.ends[:cut], self.bodies[:cut]
        return added


class Hub:
    """Reads every agent's log once for all event streams; wakes them when there is news (an
    append it saw, or a preview). While no stream watches, it reads nothing."""

    def __init__(self, root: Path, ttl: str = "5m"):
        self.root = root
        self.ttl = ttl
        self.feeds: dict[str, Feed] = {}
        self.order: list[str] = []
        self.updated = trio.Event()
        self.watchers = 0

    def refresh(self) -> bool:
        for aid in list_agents(self.root):
            if aid not in self.feeds:
                self.feeds[aid] = Feed(aid, self.root / agent_source(aid), self.ttl)
                self.order.append(aid)
        added = False
        for aid in self.order:
            added |= self.feeds[aid].refresh()
        return added

    def notify(self) -> None:
        self.updated.set()
        self.updated = trio.Event()

    async def run(self, changed: Callable[[], trio.Event],
                  closing: Callable[[], bool] = lambda: False) -> None:
        while not closing():
            woken = False
            with trio.move_on_after(POLL_S):
                await changed().wait()
                woken = True
            if self.watchers and (self.refresh() or woken):
                self.notify()
            elif woken:
                self.notify()
        self.notify()


async def stream(hub: Hub, *, agent: str | None, positions: dict[str, int],
                 follow: bool = True, closing: Callable[[], bool] = lambda: False,
                 previews: Any = None) -> AsyncIterator[bytes]:
    """The SSE byte stream of one agent (``agent``) or of the whole run, from ``positions``.
    Everything ready is sent as one chunk. ``previews`` (``drain() -> [(agent, text)]``) adds
    streamed answer text as ``text`` events without an id: a preview is not in the log, so a
    resumed stream does not replay it."""
    for aid in positions:
        if aid not in list_agents(hub.root):
            raise BadEventId(f"Last-Event-ID names agent {aid}, which this run does not have")
    pos: dict[str, int] = {}
    cells: list[str] = []  # the run stream's id, one "agent:position" per agent
    slot: dict[str, int] = {}
    private: dict[str, Tail] = {}

    def place(aid: str) -> None:
        pos[aid] = positions.get(aid, 0)
        slot[aid] = len(cells)
        cells.append(f"{aid}:{pos[aid]}")

    def advance(aid: str, end: int) -> bytes:
        pos[aid] = end
        if agent is not None:
            return f"id: {aid}:{end}\n".encode()
        cells[slot[aid]] = f"{aid}:{end}"
        return ("id: " + ",".join(cells) + "\n").encode()

    hub.watchers += 1
    try:
        last_ping = trio.current_time()
        while True:
            updated = hub.updated
            if not follow:
                hub.refresh()
            out: list[bytes] = []
            for aid, text in (previews.drain() if previews is not None else ()):
                out.append(sse({"type": "text", "agent": aid, "text": text}, event="text"))
            for aid in ([agent] if agent is not None else list(hub.order)):
                if aid not in pos:
                    place(aid)
                feed = hub.feeds.get(aid)
                if feed is None:
                    continue
                p = pos[aid]
                if p < feed.floor:  # behind the memory window: read the file itself
                    tail = private.setdefault(aid, Tail(feed.tail.path, p))
                    for end, rec in tail.new():
                        ev = None if rec is None else describe(rec, ttl=hub.ttl, model=tail.model)
                        if ev is not None:
                            ev["agent"] = aid
                            out.append(advance(aid, end) + _body(ev))
                    pos[aid] = max(pos[aid], tail.pos)
                    continue
                private.pop(aid, None)
                ends = feed.ends
                for j in range(bisect_right(ends, p), len(ends)):
                    out.append(advance(aid, ends[j]) + feed.bodies[j])
            if out:
                yield b"".join(out)
                last_ping = trio.current_time()
            if not follow or closing():
                return
            if trio.current_time() - last_ping >= PING_S:
                yield b": ping\n\n"
                last_ping = trio.current_time()
            with trio.move_on_after(PING_S):
                await updated.wait()
    finally:
        hub.watchers -= 1
