"""Server-sent events, derived from the agents' logs.

Every event is one record of one agent's ``record.jsonl``, described by its sizes (never tool
bodies); its id is where the next record of that log starts, so a ``Last-Event-ID`` names
positions in the logs themselves and a stream resumes without gaps across reconnects and across
restarts of the service. An agent's stream id is ``<agent>:<offset>``; the whole run's stream id
lists every agent's position, ``a1:812,a2:4410`` (decision 0230). Each subscriber reads the logs
from its own positions; the service only wakes subscribers, so a slow client holds up nobody.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import msgspec
import trio

from ...lineage.runroot import AGENT_ID, agent_source, list_agents
from ...providers.prices import cost_usd
from ...session.log import iter_lines
from ...session.records import (AssistantMessage, Cleared, Evicted, Inherited, Marked,
                                ProviderCall, Rewound, SessionEnded, SessionResumed,
                                SessionStarted, Steering, Swept, Text, ToolResults, ToolUse,
                                TurnStarted, UserPrompt, compact, decode)

POLL_S = 0.05  # how often logs written by another process are looked at
PING_S = 15.0  # a comment line keeps proxies from closing an idle stream


class BadEventId(ValueError):
    pass


def _usage(u) -> dict[str, int] | None:
    return None if u is None else msgspec.to_builtins(u)


def describe(rec: Any, *, ttl: str = "5m", model: str | None = None) -> dict[str, Any] | None:
    """One record as an event: its kind and sizes; ``None`` for a record no one watches."""
    if isinstance(rec, UserPrompt):
        return {"type": "prompt", "turn": rec.turn, "bytes": len(rec.text.encode())}
    if isinstance(rec, TurnStarted):
        return {"type": "turn_started", "turn": rec.turn}
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
        return {"type": "started", "parent": rec.parent, "kind": rec.kind, "depth": rec.depth,
                "model": rec.model}
    if isinstance(rec, SessionResumed):
        return {"type": "resumed"}
    if isinstance(rec, SessionEnded):
        return {"type": "ended", "reason": rec.reason}
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


async def stream(root: Path, changed: Callable[[], trio.Event], *, agent: str | None,
                 positions: dict[str, int], ttl: str = "5m", follow: bool = True,
                 closing: Callable[[], bool] = lambda: False,
                 previews: Any = None) -> AsyncIterator[bytes]:
    """The SSE byte stream of one agent (``agent``) or of the whole run, from ``positions``.
    ``previews`` (``drain() -> [(agent, text)]``) adds streamed answer text as ``text`` events
    without an id: a preview is not in the log, so a resumed stream does not replay it."""
    tails: dict[str, Tail] = {}
    order: list[str] = []
    for aid in ([agent] if agent else list_agents(root)):
        tails[aid] = Tail(root / agent_source(aid), positions.get(aid, 0))
        order.append(aid)
    for aid, off in positions.items():
        if aid not in tails:
            raise BadEventId(f"Last-Event-ID names agent {aid}, which this run does not have")
    last_ping = trio.current_time()
    while True:
        sent = False
        for aid, text in (previews.drain() if previews is not None else ()):
            yield sse({"type": "text", "agent": aid, "text": text}, event="text")
            sent = True
        if agent is None:  # agents started since
            for aid in list_agents(root):
                if aid not in tails:
                    tails[aid] = Tail(root / agent_source(aid), 0)
                    order.append(aid)
        for aid in order:
            tail = tails[aid]
            for end, rec in tail.new():
                if rec is None:
                    continue
                ev = describe(rec, ttl=ttl, model=tail.model)
                if ev is None:
                    continue
                ev["agent"] = aid
                eid = (f"{aid}:{end}" if agent else
                       format_positions({a: tails[a].pos if a != aid else end for a in order}))
                yield sse(ev, event=ev["type"], id=eid)
                sent = True
        if not follow or closing():
            return
        if sent:
            last_ping = trio.current_time()
        elif trio.current_time() - last_ping >= PING_S:
            yield b": ping\n\n"
            last_ping = trio.current_time()
        with trio.move_on_after(POLL_S):
            await changed().wait()
