"""The Trio supervisor, the agent loop and its tools, and the CLI."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    "AgentDone": ".loop",
    "AgentNode": ".node",
    "HarnessPolicy": ".loop",
    "Settings": ".settings",
    "Supervisor": ".supervisor",
    "UserTool": ".usertools",
    "open_supervisor": ".supervisor",
    "tool": ".usertools",
})

if TYPE_CHECKING:
    from .loop import AgentDone, HarnessPolicy
    from .settings import Settings
    from .node import AgentNode
    from .supervisor import Supervisor, open_supervisor
    from .usertools import UserTool, tool
