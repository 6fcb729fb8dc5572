"""The models' context windows: what a run assumes when ``--context-window`` (a job's
``[agent] context_window``, ``Settings.context_window``) is not given.

A model is matched by its name's prefix, or by the part after a ``/`` (``openrouter/gpt-4o``) or
after ``anthropic.`` (a Bedrock id, ``us.anthropic.claude-…-v1:0``);
an unknown model has no window (``None``), and the caller must name one. A library caller reads
the same table the CLI and jobs do (``mnemon.window_for``).
"""

from __future__ import annotations

__all__ = ["KNOWN_WINDOWS", "window_for"]

#: model-name prefix → context window in tokens (``None``: the scripted provider has none)
KNOWN_WINDOWS: dict[str, int | None] = {
    "claude": 200_000, "gpt-4.1": 1_047_576, "gpt-4o": 128_000, "gpt-5": 400_000,
    "o3": 200_000, "o4": 200_000, "scripted": None,
    "gemini-2": 1_048_576, "gemini-3": 1_048_576}


def window_for(model: str | None) -> int | None:
    """The context window of ``model`` in tokens, or None when it is not known."""
    if not model:
        return None
    m = model.lower()
    if ".anthropic." in m or m.startswith("anthropic."):  # a Bedrock id: its Claude model
        m = m[m.index("anthropic.") + len("anthropic."):]
    for prefix, w in KNOWN_WINDOWS.items():
        if m.startswith(prefix) or f"/{prefix}" in m:
            return w
    return None
