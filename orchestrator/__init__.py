"""The Trio supervisor, the agent loop and its tools, and the CLI."""

from __future__ import annotations

TYPE_CHECKING = False  # as typing's, without importing typing (~2 ms of every start)

from .._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    "AgentDone": ".loop",
    "AgentNode": ".node",
    "Decision": ".approvals",
    "HarnessPolicy": ".loop",
    "Settings": ".settings",
    "Supervisor": ".supervisor",
    "Tool": ".tools.base",
    "ToolContext": ".tools.context",
    "ToolPolicy": ".policy",
    "UserTool": ".tools.function",
    "load_policy": ".policy",
    "open_supervisor": ".supervisor",
    "parse_policy": ".policy",
    "tool": ".tools.function",
})

if TYPE_CHECKING:
    from .approvals import Decision
    from .loop import AgentDone, HarnessPolicy
    from .policy import ToolPolicy, load_policy, parse_policy
    from .settings import Settings
    from .node import AgentNode
    from .supervisor import Supervisor, open_supervisor
    from .tools.base import Tool
    from .tools.context import ToolContext
    from .tools.function import UserTool, tool
