"""Moved to ``orchestrator.tools.function`` (a typed function is one kind of ``Tool``); the
names kept here for one release."""

from __future__ import annotations

from .tools.base import ToolError, ToolInputError
from .tools.function import UserTool, as_tool, tool

__all__ = ["ToolError", "ToolInputError", "UserTool", "as_tool", "tool"]
