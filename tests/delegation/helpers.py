"""Shared by the delegation tests: a scripted model per agent, chosen by the words of its task,
on a real supervisor and real logs."""

from __future__ import annotations

import json
from pathlib import Path

from mnemon.session.records import Text, ToolUse


def records(root: Path, agent: str = "a1") -> list[dict]:
    return [json.loads(line) for line in
            (root / "agents" / agent / "record.jsonl").read_text().splitlines()]


def results(root: Path, agent: str = "a1") -> list[dict]:
    return [x for r in records(root, agent) if r["t"] == "ToolResults" for x in r["results"]]


def steering(root: Path, agent: str) -> list[dict]:
    return [r for r in records(root, agent) if r["t"] == "Steering"]


def by_task(scripts: dict[str, list], final: dict[str, str] | None = None, seen=None):
    """``a1`` plays ``scripts["a1"]``; a child the script whose key its task holds. A step is
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


def text_of(request) -> str:
    """Every text a request carries, joined (to look for a message or a note in it)."""
    out = []
    for m in request.messages:
        content = m.get("content")
        if isinstance(content, str):
            out.append(content)
            continue
        for b in content or ():
            if b.get("type") == "text":
                out.append(b.get("text", ""))
            elif b.get("type") == "tool_result":
                c = b.get("content")
                out.append(c if isinstance(c, str) else json.dumps(c))
    return "\n".join(out)
