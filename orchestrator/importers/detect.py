"""Which format a file is in, and loading it: the one entry point most callers need.

Detection reads only a file's extension and the keys of its first JSON values, so a file is named
by what it holds, not by where it came from; each format module owns its own signature. Lines that
hold no JSON are passed over here as the loaders pass over them, and several values on one line are
each looked at.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from .claude_code import load_claude_code
from .claude_code import looks_like as claude_code_looks_like
from .codex import load_codex
from .codex import looks_like as codex_looks_like
from .lines import split_values
from .model import Trajectory, TrajectoryFormatError
from .neutral import load_neutral
from .neutral import looks_like as neutral_looks_like
from .openai_messages import is_openai_messages, load_openai_messages

FORMATS = ("neutral", "claude-code", "codex", "openai-messages")

_LOADERS: dict[str, Callable[[Path], Trajectory]] = {
    "neutral": load_neutral,
    "claude-code": load_claude_code,
    "codex": load_codex,
    "openai-messages": load_openai_messages,
}

# the signatures of the line formats, in the order they are tried on each line
_SIGNATURES = (("codex", codex_looks_like), ("claude-code", claude_code_looks_like),
               ("neutral", neutral_looks_like))


def load(path: str | Path, format: str = "auto") -> Trajectory:
    """Import the recording at ``path``; ``format`` is ``"auto"`` or one of :data:`FORMATS`.

    Raises:
        TrajectoryFormatError: the format is unknown, cannot be detected, or the file breaks it.
    """
    path = Path(path)
    if format == "auto":
        format = detect_format(path)
    loader = _LOADERS.get(format)
    if loader is None:
        raise TrajectoryFormatError(path, f"unknown format {format!r} (known: auto, {', '.join(FORMATS)})")
    return loader(path)


def detect_format(path: str | Path) -> str:
    """Name the format of ``path`` from its extension and the keys of its first lines.

    Raises:
        TrajectoryFormatError: the file is missing, empty, not JSON, or matches no format.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TrajectoryFormatError(path, f"cannot read: {exc.strerror or exc}") from None
    if not raw.strip():
        raise TrajectoryFormatError(path, "empty file")
    if path.suffix.lower() == ".json" or raw.lstrip()[:1] == b"[":
        try:
            whole = json.loads(raw)
        except ValueError:
            whole = None
        if is_openai_messages(whole):
            return "openai-messages"
        if path.suffix.lower() == ".json":
            raise TrajectoryFormatError(
                path, "a .json file that is neither a list of chat messages nor {\"messages\": [...]}")
    seen = 0  # JSON values read; lines that hold none are passed over, as the loaders skip them
    for line in raw.split(b"\n"):
        if not line.strip():
            continue
        for value in split_values(line)[0]:
            seen += 1
            found = _sniff(value)
            if found:
                return found
            if seen >= 50:
                break
        if seen >= 50:
            break
    if seen == 0:
        raise TrajectoryFormatError(path, "not JSON lines: no line of the file parses as JSON")
    raise TrajectoryFormatError(
        path, f"no line matches a known recording format ({', '.join(FORMATS)}) in the first {seen} lines")


def _sniff(obj: object) -> str | None:
    for name, looks_like in _SIGNATURES:
        if looks_like(obj):
            return name
    return None
