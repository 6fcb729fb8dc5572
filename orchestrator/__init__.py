"""The Trio supervisor, the agent loop and its tools, and the CLI."""

from .loop import AgentDone, HarnessPolicy
from .settings import Settings
from .supervisor import AgentNode, Supervisor, open_supervisor
from .usertools import UserTool, tool

__all__ = ["AgentDone", "AgentNode", "HarnessPolicy", "Settings", "Supervisor", "UserTool",
           "open_supervisor", "tool"]
