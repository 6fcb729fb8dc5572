"""A slow ``note``: task k1's take 0.6 s (its agent is neither waiting on a batch nor on a child
meanwhile)."""

from __future__ import annotations

import time


def note(text: str) -> str:
    """Write a note down (slowly for task k1)."""
    if text.startswith("k1 "):
        time.sleep(0.6)
    return f"noted: {text}"
