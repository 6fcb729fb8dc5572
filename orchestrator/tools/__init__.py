"""The tool pipeline: every tool a model can call, one shape, dispatched once.

- ``base``: the ``Tool`` protocol (name, definition, mode, ``call(ctx, input)``, ``starts``),
  the modes a tool runs in beside others, and the errors a tool answers the model with;
- ``context``: ``ToolContext``, what one call is handed — the calling agent, narrowly;
- ``builtin``: the built-ins, each definition beside its handler;
- ``function``: a typed Python function as a tool (``@tool``, ``UserTool``);
- ``definitions``: the list of definitions offered to one agent (``tool_defs``);
- ``table``: one agent's table, the one place a call is dispatched (``ToolTable``);
- ``gate``: the policy and approvals as a wrapper over a table (``Gated``).

The loop reads an agent's table (``env.AgentEnv.table_for``) once per turn, asks it how each
call may run and has it answer each call. MCP servers' tools (``mcp.client.McpTool``) and
``ask_<role>`` (``roles.book.AskTool``) answer the same protocol.

Who may import what: a tool of one's own needs ``Tool``/``ToolBase``, ``ToolContext``,
``ToolError``, ``ToolInputError`` and ``tool`` — all here, and at the top level (``mnemon.Tool``,
``mnemon.ToolContext``, ``mnemon.tool``). ``table`` and ``gate`` are the loop's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import MODES, Mode, Tool, ToolBase, ToolError, ToolInputError, is_tool
from .builtin import BUILTIN, BUILTINS, parse_block
from .context import ToolContext
from .definitions import tool_defs
from .function import UserTool, as_tool, tool
from .survey import survey
from .table import ToolTable

if TYPE_CHECKING:
    from ...session.records import ToolResult, ToolUse
    from ..env import AgentEnv
    from ..node import AgentNode

__all__ = ["BUILTIN", "BUILTINS", "EXCLUSIVE", "MODES", "Mode", "Tool", "ToolBase",
           "ToolContext", "ToolError", "ToolInputError", "ToolTable", "UserTool", "as_tool",
           "call_tool", "is_tool", "parse_block", "survey", "tool", "tool_defs"]

#: the built-ins that run ``exclusive`` — kept one release for readers of the old name set;
#: the loop asks each tool its ``mode``
EXCLUSIVE = frozenset(t.name for t in BUILTINS if t.mode == "exclusive")


async def call_tool(env: "AgentEnv", node: "AgentNode", call: "ToolUse",
                    tools: dict[str, Any] | None = None, *,
                    builtin: bool | None = None) -> "ToolResult":
    """Answer one call without the gate (kept one release: the loop dispatches through
    ``env.table_for(node)``)."""
    if builtin is None:
        builtin = env.settings_for(node).builtin_tools
    table = ToolTable(env, node, env.tools_for(node) if tools is None else tools,
                      builtin=builtin, fallback=env.tool_fallback)
    return await table.call(call)
