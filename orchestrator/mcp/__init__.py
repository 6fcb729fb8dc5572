"""MCP both ways: MCP servers' tools offered to agents (``McpTools``, ``open_mcp_tools``), and
``mnemon mcp RUN_ROOT`` — the transcript door of a run served over MCP (see docs/mcp.md).

The ``mcp`` SDK is imported only by the modules that talk to it (``client``, ``server``), so
``Settings`` can carry an MCP configuration without loading it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    "McpServerSpec": ".config",
    "McpConfigError": ".config",
    "load_config": ".config",
    "parse_config": ".config",
    "McpTool": ".client",
    "McpTools": ".client",
    "open_mcp_tools": ".client",
    "RunDoor": ".door",
    "DOOR_TOOLS": ".door",
    "AgentDesk": ".agents",
    "AGENT_TOOLS": ".agents",
    "build_server": ".server",
    "serve_stdio": ".server",
    "serve_http": ".server",
})

if TYPE_CHECKING:
    from .client import McpTool, McpTools, open_mcp_tools
    from .config import McpConfigError, McpServerSpec, load_config, parse_config
    from .agents import AGENT_TOOLS, AgentDesk
    from .door import DOOR_TOOLS, RunDoor
    from .server import build_server, serve_http, serve_stdio
