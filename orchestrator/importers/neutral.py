"""The neutral JSONL of ``data/trajectories``: one ``role``/``text`` line per step.

It is the format the bench's trajectories are written in, so it maps one line to one step and
refuses a line that does not fit rather than guess at it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...session.records import Block, Text, ToolUse
from .builder import Linear
from .lines import read_lines
from .model import Trajectory, TrajectoryFormatError

ROLES = {"system", "user", "assistant", "tool"}


def looks_like(obj: Any) -> bool:
    """Whether one parsed line has the neutral signature: a known ``role`` and a string ``text``."""
    return isinstance(obj, dict) and isinstance(obj.get("role"), str) and obj["role"] in ROLES and \
        isinstance(obj.get("text"), str)


def load_neutral(path: str | Path) -> Trajectory:
    """Import the neutral JSONL of ``data/trajectories`` (``role``/``text``/``tool_calls``/``tool_call_id``).

    Raises:
        TrajectoryFormatError: a line without a known ``role`` or with a non-string ``text``, or a
            file in which no line holds a JSON object (lines that hold none are otherwise skipped
            and listed in ``skipped_lines``).
    """
    path = Path(path)
    b = Linear()
    system: str | None = None
    skipped: dict[str, int] = {}
    lines = read_lines(path)
    for number, obj in lines.objects:
        role, text = obj.get("role"), obj.get("text")
        if not isinstance(role, str) or role not in ROLES or not isinstance(text, str):
            raise TrajectoryFormatError(path, "not a neutral line: wants a role and a string text", line=number)
        if role == "system":
            if system is None and not b.out.steps:
                system = text
            else:
                b.user(text)  # a later system line is kept, as a user text
        elif role == "user":
            b.user(text)
        elif role == "assistant":
            blocks: list[Block] = [Text(text=text)] if text else []
            for call in obj.get("tool_calls") or []:
                blocks.append(ToolUse(id=str(call.get("id")), name=str(call.get("name")),
                                      input=call.get("arguments")))
            b.assistant(blocks, stop_reason="tool_use" if obj.get("tool_calls") else "end_turn")
        else:
            b.result(str(obj.get("tool_call_id")), text)
    return b.finish(system=system, source_format="neutral", name=path.stem, skipped=skipped,
                    skipped_lines=lines.skipped)
