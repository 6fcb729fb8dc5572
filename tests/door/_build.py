"""Builders for door tests: replay real trajectories into logs, make evictions."""

from __future__ import annotations

import json
from pathlib import Path

from mnemon.session.agentlog import AgentLog
from mnemon.session.context import Turn
from mnemon.session.records import (
    AssistantMessage,
    Evicted,
    Residue,
    Steering,
    Text,
    ToolResult,
    ToolResults,
    ToolUse,
    UserPrompt,
    encode,
)
from tests.helpers import new_agent


def evict_prefix(log: AgentLog, items: int, note: str | None = None, add=None
                 ) -> tuple[int, int] | None:
    """Evict the first ``items`` frontier items (never the turn in hand); returns the span."""
    ctx = log.ctx
    fr = [x for x in ctx.frontier() if not (isinstance(x, Turn) and x.id == ctx.in_hand)]
    if not fr:
        return None
    fr = fr[:items]
    first, last = fr[0], fr[-1]
    a = first.id if isinstance(first, Turn) else first.first
    b = last.id if isinstance(last, Turn) else last.last
    if len(fr) == 1 and not isinstance(first, Turn):
        return None
    (add or log.append)(Evicted(residue=Residue(span=(a, b), note=note, by="model")))
    return (a, b)


class Replayed:
    """An agent log replayed from a neutral trajectory, with what was appended, per turn."""

    def __init__(self, log: AgentLog):
        self.log = log
        self.lines: dict[int, list[bytes]] = {}  # turn -> encoded records of that turn
        self.texts: list[str] = []  # every searchable text, in order (computed independently)

    def add(self, rec) -> None:
        self.log.append(rec)
        tid = self.log.ctx.in_hand
        self.lines.setdefault(tid, []).append(encode(rec))


def _compact(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def replay(root: Path, agent: str, traj: Path, *, evict_every: int = 6, limit: int | None = None
           ) -> Replayed:
    rows = [json.loads(line) for line in traj.read_text().splitlines() if line.strip()]
    system = rows[0]["text"] if rows and rows[0]["role"] == "system" else None
    log = new_agent(root, agent, system=system)
    rp = Replayed(log)
    n_turns = 0
    for row in rows[1 if system is not None else 0:][:limit]:
        role = row["role"]
        if role == "user":
            rp.add(UserPrompt(turn=log.next_id(), text=row["text"]))
            rp.texts.append(row["text"])
            n_turns += 1
        elif role == "assistant":
            blocks = [Text(row["text"])]
            rp.texts.append(row["text"])
            seen = set()
            for c in row.get("tool_calls") or []:
                if c["id"] in seen:
                    continue
                seen.add(c["id"])
                blocks.append(ToolUse(c["id"], c["name"], c["arguments"]))
                rp.texts.append(_compact(c["arguments"]))
            rp.add(AssistantMessage(turn=log.next_id(), blocks=blocks, stop_reason="tool_use",
                                    model="m", usage=None))
            n_turns += 1
        elif role == "tool":
            if row.get("tool_call_id") in log.ctx.pending:
                rp.add(ToolResults(results=[ToolResult(tool_use_id=row["tool_call_id"],
                                                       content=row["text"])]))
                rp.texts.append(row["text"])
            if n_turns % evict_every == 0 and not log.ctx.pending:
                note = f"evicted at turn {log.ctx.in_hand}; parser notes"
                if evict_prefix(log, 3, note, rp.add) is not None:
                    rp.texts.append(note)
                    n_turns += 1
                if n_turns % 3 == 0:
                    rp.add(Steering(text="keep going\nyou are close"))
                    rp.texts.append("keep going\nyou are close")
    return rp
