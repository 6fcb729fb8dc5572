"""OpenAI-style chat messages: a JSON array of messages, or ``{"messages": [...], "model"?: ...}``.

The one format that is a whole JSON value rather than lines: many tools dump a chat this way, and
it is the shape an OpenAI chat request already has.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...session.records import Block, Text, Thinking, ToolUse
from .builder import Linear, bump
from .content import openai_text, parse_arguments
from .model import Trajectory, TrajectoryFormatError


def is_openai_messages(value: Any) -> bool:
    """Whether a parsed JSON value is a non-empty list of messages with a ``role`` (or holds one)."""
    if isinstance(value, dict):
        value = value.get("messages")
    return (isinstance(value, list) and bool(value)
            and all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in value))


def load_openai_messages(path: str | Path) -> Trajectory:
    """Import a JSON array of chat messages, or ``{"messages": [...]}``.

    Raises:
        TrajectoryFormatError: the file is not such a JSON value.
    """
    path = Path(path)
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise TrajectoryFormatError(path, f"not a JSON file: {exc}") from None
    if not is_openai_messages(value):
        raise TrajectoryFormatError(path, "not a list of chat messages nor {\"messages\": [...]}")
    messages = value["messages"] if isinstance(value, dict) else value
    default_model = value.get("model") if isinstance(value, dict) else None
    b = Linear()
    system: str | None = None
    skipped: dict[str, int] = {}
    for m in messages:
        role = m["role"]
        if role in ("system", "developer"):
            text = openai_text(m.get("content"))
            if system is None and not b.out.steps:
                system = text
            else:
                b.user(text)
        elif role == "user":
            b.user(openai_text(m.get("content")))
        elif role == "assistant":
            blocks: list[Block] = []
            for key in ("reasoning_content", "reasoning"):
                if isinstance(m.get(key), str) and m[key]:
                    blocks.append(Thinking(text=m[key], signature=None))
            text = openai_text(m.get("content"))
            if text:
                blocks.append(Text(text=text))
            calls = m.get("tool_calls") or []
            for call in calls:
                fn = call.get("function") or {}
                blocks.append(ToolUse(id=str(call.get("id")), name=str(fn.get("name")),
                                      input=parse_arguments(fn.get("arguments"))))
            b.assistant(blocks, stop_reason="tool_use" if calls else "end_turn",
                        model=m.get("model") or default_model)
        elif role == "tool":
            b.result(str(m.get("tool_call_id")), openai_text(m.get("content")))
        else:
            bump(skipped, f"role:{role}")
    return b.finish(system=system, source_format="openai-messages", name=path.stem, skipped=skipped)
