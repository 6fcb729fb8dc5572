"""One agent's tools: who answers each call, said once (``ToolTable``).

The table holds the built-ins (unless the agent's settings turn them off; a built-in answers
before any other tool of its name), then the tools beyond them — the run's (``@tool`` functions,
the run's MCP servers'), its lineage's own MCP servers', its role's (``env.AgentEnv.tools_for``)
— and the run's fallback for calls no tool claims (a replay answers them as recorded). The loop
asks it how each call may run (``mode``) and to answer it (``call``); the gate
(``gate.Gated``) wraps it with the same two methods.

``call`` isolates every failure into an error result: a refusal, an input that does not fit, a
tool's own error with its text, any other exception named — a tool never fails its agent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import structlog

from ...session.errors import Refusal, SessionError
from ...session.records import ToolResult, ToolUse
from .base import Mode, ToolError, ToolInputError
from .builtin import BY_NAME
from .files import FS_BY_NAME
from .context import ToolContext
from .definitions import tool_defs

if TYPE_CHECKING:
    from ...providers.base import ToolDef
    from ..env import AgentEnv
    from ..node import AgentNode
    from .base import Tool

__all__ = ["NO_BUILTINS", "ToolTable"]

log = structlog.get_logger("mnemon.tools")

NO_BUILTINS: Mapping[str, Any] = {}
# an agent with a workspace is offered the file tools beside the built-ins (docs/workspace.md)
_WITH_FILES: Mapping[str, Any] = {**BY_NAME, **FS_BY_NAME}

Fallback = Callable[["AgentNode", ToolUse], Awaitable[ToolResult]]


class ToolTable:
    """The tools one agent is offered for one turn, and the one place a call is dispatched."""

    __slots__ = ("env", "node", "builtin", "tools", "fallback")

    def __init__(self, env: "AgentEnv", node: "AgentNode", tools: Mapping[str, "Tool"], *,
                 builtin: bool = True, fallback: Fallback | None = None):
        self.env = env
        self.node = node
        files = getattr(node, "workspace", None) is not None
        self.builtin: Mapping[str, Any] = (
            (_WITH_FILES if files else BY_NAME) if builtin else (FS_BY_NAME if files
                                                                 else NO_BUILTINS))
        self.tools = tools
        self.fallback = fallback

    def get(self, name: str) -> "Tool | None":
        """The tool that answers calls of ``name`` (None: the fallback's, or unknown)."""
        t = self.builtin.get(name)
        return t if t is not None else self.tools.get(name)

    def mode(self, call: ToolUse) -> Mode | None:
        """How the call may run beside the response's others; None when no tool claims it and
        the fallback answers it (as recorded: beside any other call)."""
        t = self.get(call.name)
        if t is not None:
            return t.mode
        return None if self.fallback is not None else "shared"

    def definitions(self) -> "list[ToolDef]":
        """What the model is told (``definitions.tool_defs``): the same list object while the
        tools are the same."""
        return tool_defs(self.env, self.node, self.tools)

    def names(self) -> list[str]:
        return [d.name for d in self.definitions()]

    def starts(self, call: ToolUse) -> dict[str, Any] | None:
        """The ``agents_start`` input the call amounts to (``Tool.starts``), or None."""
        if call.name == "agents_start":
            return None
        t = self.get(call.name)
        return t.starts(call.input if isinstance(call.input, dict) else {}) \
            if t is not None else None

    async def call(self, call: ToolUse) -> ToolResult:
        """Answer one call with its tool, the fallback, or an error naming the known tools."""
        t = self.get(call.name)
        if t is None:
            if self.fallback is not None:
                return await self.fallback(self.node, call)
            return ToolResult(tool_use_id=call.id, content=f"unknown tool {call.name!r}; the "
                              f"known tools are: {', '.join(self.names())}", is_error=True)
        try:
            out = await t.call(ToolContext(self.env, self.node, call.id, call.name), call.input)
            return ToolResult(tool_use_id=call.id, content=out, is_error=False)
        except (Refusal, ToolInputError, ToolError, SessionError) as e:
            return ToolResult(tool_use_id=call.id, content=str(e), is_error=True)
        except Exception as e:  # a user tool's crash never reaches the loop
            log.warning("tool failed", tool=call.name, error=repr(e))
            return ToolResult(tool_use_id=call.id, content=f"tool {call.name} failed: "
                              f"{type(e).__name__}: {e}", is_error=True)
