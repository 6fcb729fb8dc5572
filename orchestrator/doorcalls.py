"""The transcript tools, answered by the agent's own door (or a descendant's).

The door resolves under the agent's seam and reads in a worker thread after releasing it, so a
long grep stalls neither this agent's appends nor any other agent on the Trio thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..session.door import Door

if TYPE_CHECKING:
    from .env import AgentEnv
    from .node import AgentNode


def _door(env: "AgentEnv", node: "AgentNode") -> Door:
    return Door.of_agent(env.root, node.log, own=True, sources=env.sources)


async def index(env: "AgentEnv", node: "AgentNode") -> list[dict]:
    return await _door(env, node).aindex()


async def read(env: "AgentEnv", node: "AgentNode", turns: Any) -> list[dict]:
    return await _door(env, node).aread(turns)


async def grep(env: "AgentEnv", node: "AgentNode", pattern: str, turns: Any, *,
               timeout_s: float) -> dict:
    """``timeout_s``: the calling agent's ``grep_timeout_s`` (``node`` may be its descendant)."""
    return await _door(env, node).agrep(pattern, turns, timeout_s=timeout_s)
