"""Helpers for the lineage tests: parents built through AgentLog, render comparison."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import msgspec

from mnemon.lineage.fork import fork
from mnemon.lineage.runroot import agent_source, make_loader
from mnemon.session import chain
from mnemon.session.agentlog import AgentLog
from mnemon.session.context import Context
from mnemon.session.records import (
    AssistantMessage,
    Evicted,
    Marked,
    Residue,
    SessionStarted,
    Swept,
    Text,
    ToolResult,
    ToolResults,
    ToolUse,
    UserPrompt,
)
from mnemon.session.render import render, turn_messages
from mnemon.session.resume import fold_file
from tests.helpers import answer, new_agent, prompt, tool_turn

STARTED = dict(system="You are careful.", tools=[{"name": "bash", "description": "run",
                                                   "input_schema": {"type": "object"}}],
               provider="scripted", model="m", context_window=200_000, tokens_per_byte=0.26,
               depth=0)


def evict(log: AgentLog, a: int, b: int, note: str | None = None, by: str = "model") -> None:
    log.append(Evicted(residue=Residue(span=(a, b), note=note, by=by)))  # type: ignore[arg-type]


def start_call(log: AgentLog, task: str = "go", kind: str = "mnemon") -> int:
    """The turn in hand of a fork: an assistant turn calling agents_start (unanswered)."""
    tid = log.next_id()
    log.append(AssistantMessage(turn=tid, blocks=[ToolUse(f"tu_{tid}", "agents_start",
                                                          {"task": task, "kind": kind})],
                                stop_reason="tool_use", model="m", usage=None))
    return tid


def sweep(log: AgentLog, turn: int, index: int, replacement: str) -> None:
    log.append(Marked(block=(turn, index), replacement=replacement))
    log.append(Swept(blocks=[(turn, index)]))


def busy_parent(root: Path, agent: str = "p", n: int = 6) -> AgentLog:
    """A parent with prompts, tool turns, answers, a nested pair of residues and a sweep."""
    log = new_agent(root, agent, **STARTED)
    for i in range(n):
        prompt(log, f"question {i}: what is in part {i}?\nsecond line")
        tool_turn(log, f"reading part {i}", f"cat part{i}", f"contents of part {i}\n" * 20)
        answer(log, f"part {i} holds {i * 7} widgets")
    evict(log, 1, 3, "first part read; 0 widgets")
    evict(log, 1, 6, None, "harness")
    t = tool_turn(log, "big read", "cat big", "x" * 3000)
    answer(log, "that was big")
    sweep(log, t, 2, "3000 x's")
    return log


def blocks(messages: list[dict]) -> list[tuple[str, bytes]]:
    """Messages flattened to (role, encoded block): merging does not change this sequence."""
    return [(m["role"], msgspec.json.encode(b)) for m in messages for b in m["content"]]


def parent_prefix(ctx: Context) -> list[tuple[str, bytes]]:
    """The parent's render at the fork minus its turn in hand, as blocks."""
    out = blocks(render(ctx))
    if ctx.in_hand is not None:
        t = ctx.turn(ctx.in_hand)
        if t is not None and t.state == "resident":
            n = len(blocks(turn_messages(t)))
            assert out[len(out) - n:] == blocks(turn_messages(t))
            out = out[:len(out) - n]
    return out


def assert_prefix(parent_ctx: Context, child_ctx: Context, task: str | None = None) -> None:
    """The child's render begins byte-for-byte with the parent's over the inherited turns.

    Checked block by block and message by message: every message but the last inherited one is
    byte-identical; the last one may have the child's first prompt merged after it.
    """
    want = parent_prefix(parent_ctx)
    got = blocks(render(child_ctx))
    assert got[: len(want)] == want
    if task is not None:
        assert got[len(want)] == ("user", msgspec.json.encode({"type": "text", "text": task}))
    pm, cm = render(parent_ctx), render(child_ctx)
    # message level: the messages wholly made of inherited blocks are identical
    n = 0
    for i, m in enumerate(cm):
        n += len(m["content"])
        if n >= len(want):
            break
        assert msgspec.json.encode(m) == msgspec.json.encode(pm[i])


def refold(root: Path, agent: str) -> Context:
    src = agent_source(agent)
    ctx, _ = fold_file(root / src, src, loader=make_loader(root))
    return ctx


def copy_root(root: Path, dest: Path) -> Path:
    shutil.copytree(root, dest, symlinks=True)
    return dest


def rewrite_inherited(path: Path, edit) -> None:
    """Hand-edit the Inherited line of a child's log (a foreign tool writing pointers, and
    recomputing the log's chain)."""
    lines = path.read_bytes().split(b"\n")
    for i, line in enumerate(lines):
        if line.startswith(b'{"t":"Inherited"'):
            obj = json.loads(line)
            obj.pop("c", None)
            edit(obj)
            lines[i] = json.dumps(obj, separators=(",", ":")).encode()
    if lines[0].startswith(b"{") and chain.VERSIONED.search(lines[0][-chain.TAIL:]):
        # the tool recomputes the chain too: what is tested is the pointers, not the chain
        redo = chain.Running()
        path.write_bytes(b"".join(redo.seal(chain.strip(x)) for x in lines if x))
        return
    path.write_bytes(b"\n".join(lines))


__all__ = ["STARTED", "evict", "start_call", "sweep", "busy_parent", "blocks", "parent_prefix",
           "assert_prefix", "refold", "copy_root", "rewrite_inherited", "fork", "prompt",
           "answer", "tool_turn", "new_agent", "SessionStarted", "UserPrompt", "Text",
           "ToolResult", "ToolResults", "ToolUse", "AssistantMessage"]
