"""The transcript tools, answered by the agent's own door (or a descendant's).

The door resolves under the agent's seam and reads in a worker thread after releasing it, so a
long grep stalls neither this agent's appends nor any other agent on the Trio thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..session.door import Door

if TYPE_CHECKING:
    from .supervisor import AgentNode, Supervisor


def _door(sup: "Supervisor", node: "AgentNode") -> Door:
    return Door.of_agent(sup.root, node.log, own=True, sources=sup.sources)


async def index(sup: "Supervisor", node: "AgentNode") -> list[dict]:
    return await _door(sup, node).aindex()


async def read(sup: "Supervisor", node: "AgentNode", turns: Any) -> list[dict]:
    return await _door(sup, node).aread(turns)


async def grep(sup: "Supervisor", node: "AgentNode", pattern: str, turns: Any) -> dict:
    return await _door(sup, node).agrep(pattern, turns, timeout_s=sup.settings.grep_timeout_s)
