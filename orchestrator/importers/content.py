"""Recorded content parts turned into the strings and inputs a Trajectory holds.

Several formats share the shapes of OpenAI chat and Responses content (a string, or a list of
parts with ``text``) and of JSON-encoded call arguments; non-text parts of every format get the
same short placeholder. Writing these once keeps the joins identical across formats.
"""

from __future__ import annotations

import json
from typing import Any


def placeholder(block: Any) -> str:
    """A short factual stand-in for a block with no text (an image, a document)."""
    if not isinstance(block, dict):
        return f"[{type(block).__name__} content not imported]"
    kind = block.get("type", "unknown")
    source = block.get("source")
    if isinstance(source, dict):
        media = source.get("media_type") or source.get("type") or "unknown"
        data = source.get("data")
        size = f", {len(data)} base64 characters" if isinstance(data, str) else ""
        return f"[{kind} ({media}{size}) not imported]"
    return f"[{kind} block not imported]"


def openai_text(content: Any) -> str:
    """OpenAI-style content as one string: kept as is, or its parts' texts joined with ``"\\n"``."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
            else:
                parts.append(placeholder(part))
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False)


def parse_arguments(arguments: Any) -> Any:
    """A JSON-encoded arguments string becomes its object; anything else stays as recorded."""
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments)
        except ValueError:
            return arguments
        return value if isinstance(value, dict) else arguments
    return arguments
