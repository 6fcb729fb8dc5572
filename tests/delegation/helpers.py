"""Shared by the delegation tests: a scripted model per agent, chosen by the words of its task,
on a real supervisor and real logs."""

from __future__ import annotations

import json
from pathlib import Path

from ..helpers import by_task  # noqa: F401  (the delegation tests' scripted model)


def records(root: Path, agent: str = "a1") -> list[dict]:
    return [json.loads(line) for line in
            (root / "agents" / agent / "record.jsonl").read_text().splitlines()]


def results(root: Path, agent: str = "a1") -> list[dict]:
    return [x for r in records(root, agent) if r["t"] == "ToolResults" for x in r["results"]]


def steering(root: Path, agent: str) -> list[dict]:
    return [r for r in records(root, agent) if r["t"] == "Steering"]


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
