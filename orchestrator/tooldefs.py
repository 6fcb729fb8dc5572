"""Moved to ``orchestrator.tools`` (each built-in's definition now sits beside its handler in
``tools.builtin``; the list offered to one agent is ``tools.definitions.tool_defs``); the names
kept here for one release."""

from __future__ import annotations

from .tools.builtin import BUILTIN
from .tools.definitions import tool_defs

__all__ = ["BUILTIN", "tool_defs"]
