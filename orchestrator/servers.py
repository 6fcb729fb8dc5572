"""MCP servers an agent starts for itself, and the context manager that starts any set of them.

Below the loop and the synod, above the tool definitions: the loop starts an agent's own
servers inside its cancel scope before its log opens (``own_servers``), the synod starts a
parent's again while its children run after it ended (``serving``), and the supervisor starts
the run's (``open_servers``). None of them needs the supervisor for it; the MCP SDK is imported
only when some server is configured (decision 0244).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from .tools.builtin import BY_NAME

if TYPE_CHECKING:
    from .env import AgentEnv
    from .mcp.config import McpServerSpec
    from .node import AgentNode

log = structlog.get_logger("mnemon.agent")


@asynccontextmanager
async def open_servers(specs: "tuple[McpServerSpec, ...]",
                       log_dir: Path) -> AsyncIterator[list[Any]]:
    """Start MCP servers in a nursery of the caller's and yield their tools; leaving the block
    stops them. None configured: no tools, and the SDK is not imported."""
    if not specs:
        yield []
        return
    from .mcp.client import open_mcp_tools

    async with open_mcp_tools(specs, log_dir=log_dir) as mcp:
        yield mcp.tools


@asynccontextmanager
async def serving(env: "AgentEnv", node: "AgentNode") -> AsyncIterator[None]:
    """The agent's own MCP servers, running for the block in a nursery of the caller's, their
    tools in ``node.own_tools`` (none configured: nothing started). Leaving stops the servers;
    the tools stay in the table (a call then answers that the server is not running), so a
    descendant still running elsewhere keeps the tool list it recorded."""
    async with open_servers(node.mcp_servers, env.root / "mcp" / node.id) as tools:
        if node.mcp_servers:
            taken = set(env.tools_for(node.parent)) | set(BY_NAME)
            node.own_tools = {}
            for t in tools:
                if t.name in taken or t.name in node.own_tools:
                    log.warning("mcp tool name taken", tool=t.name)
                    continue
                node.own_tools[t.name] = t
        yield


@asynccontextmanager
async def own_servers(env: "AgentEnv", node: "AgentNode") -> AsyncIterator[None]:
    """The agent's own MCP servers, started inside its cancel scope (``serving``); then its
    log opened (``node.birth``) — so its ``SessionStarted`` lists their tools."""
    async with serving(env, node):
        if node.log is None:
            birth, node.birth = node.birth, None
            assert birth is not None, "an agent without a log has a birth"
            node.log = birth()
        yield
