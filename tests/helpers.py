"""Helpers to write logs in the real on-disk format."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from pathlib import Path

import structlog
from structlog.testing import capture_logs

from mnemon.lineage.runroot import agent_source, make_loader
from mnemon.orchestrator import logs
from mnemon.session import chain
from mnemon.session.agentlog import AgentLog
from mnemon.session.records import (
    AssistantMessage,
    SessionStarted,
    Text,
    ToolResult,
    ToolResults,
    ToolUse,
    UserPrompt,
)


def new_agent(root: Path, agent: str, **started) -> AgentLog:
    src = agent_source(agent)
    return AgentLog.create(root / src, src, SessionStarted(agent=agent, at="2026-11-30T00:00:00Z",
                                                           **started),
                           loader=make_loader(root))


def tool_turn(log: AgentLog, text: str, command: str, output: str) -> int:
    """An assistant turn with one bash call and its result."""
    tid = log.next_id()
    cid = f"tu_{tid}"
    log.append(AssistantMessage(turn=tid, blocks=[Text(text), ToolUse(cid, "bash", {"command": command})],
                                stop_reason="tool_use", model="m", usage=None))
    log.append(ToolResults(results=[ToolResult(tool_use_id=cid, content=output)]))
    return tid


def prompt(log: AgentLog, text: str) -> int:
    tid = log.next_id()
    log.append(UserPrompt(turn=tid, text=text))
    return tid


def answer(log: AgentLog, text: str) -> int:
    tid = log.next_id()
    log.append(AssistantMessage(turn=tid, blocks=[Text(text)], stop_reason="end_turn", model="m",
                                usage=None))
    return tid


def door_open(path):
    """From outside, as the CLI: ``(door, torn tail or None)`` for an agent directory."""
    from mnemon.lineage.view import open_door

    door = open_door(path)
    return door, door.torn


@contextmanager
def harness_events():
    """The structlog events the loop logs, captured: ``capture_logs`` alone sees none where the
    logs are quiet (``logs.quiet`` filters below CRITICAL before any processor runs), so the
    filter is opened for the block and the logs made quiet again after it."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        with capture_logs() as events:
            yield events
    finally:
        logs.quiet()


def rechain(path: Path, lines: list) -> None:
    """Write ``lines`` (records, str or bytes, with or without chain keys) as the log at
    ``path``, chained anew: a foreign tool that keeps the log's chain, so that what a test damages
    is refused by the fold or the reader it tests, not by the chain (tests/chain tests that)."""
    redo = chain.Running()
    path.write_bytes(b"".join(redo.seal(chain.strip(x.encode() if isinstance(x, str) else x))
                              for x in lines))


def by_task(scripts: dict[str, list], final: dict[str, str] | None = None, seen=None):
    """A scripted model over a real supervisor: ``a1`` plays ``scripts["a1"]``; a child the
    script whose key its task holds. A step is
    a list of ``(tool, input)``, or a callable ``step(request)`` giving one (made when the call
    is); after its script an agent answers ``final[key]`` (default ``done``). ``seen``: a list
    given each request as ``(agent, request)``."""
    def policy(request, state):
        agent = request.meta["agent"]
        if seen is not None:
            seen.append((agent, request))
        key = agent
        if agent != "a1":
            text = state.setdefault("task", repr(request.messages[-1]))
            key = next((k for k in scripts if k != "a1" and k in text), agent)
        i = state["i"] = state.get("i", 0) + 1
        script = scripts.get(key, [])
        if i <= len(script):
            step = script[i - 1]
            step = step(request) if callable(step) else step
            if step and isinstance(step[0], Text):
                return step, "end_turn"
            return [ToolUse(f"{agent}_{i}_{k}", n, a) for k, (n, a) in enumerate(step)], \
                "tool_use"
        return [Text((final or {}).get(key, "done"))], "end_turn"
    return policy
