"""Reading a JSON-lines recording into ``(line number, object)`` pairs.

Three of the four formats (neutral, Claude Code, Codex) are JSON lines; what counts as a readable
line, and what happens to one that is not, is decided here once for all of them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .model import TrajectoryFormatError


def read_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, object)`` of a JSONL file; a torn last line is skipped, others refused."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TrajectoryFormatError(path, f"cannot read: {exc.strerror or exc}") from None
    lines = raw.split(b"\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            if number == len(lines) and not raw.endswith(b"\n"):
                return  # torn tail: the recorder died mid-line
            raise TrajectoryFormatError(path, "line is not JSON", line=number) from None
        if not isinstance(obj, dict):
            raise TrajectoryFormatError(path, f"line is a JSON {type(obj).__name__}, not an object", line=number)
        yield number, obj
