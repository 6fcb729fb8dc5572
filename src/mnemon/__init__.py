"""mnemon: multi-agent orchestration for LLM agents — evict, never summarise.

The public API in one place. Everything a program needs to run agents and read their transcripts
is importable from here; the subpackages (``mnemon.session``, ``mnemon.lineage``,
``mnemon.providers``, ``mnemon.orchestrator``) hold the rest. Names load on first use, so
``import mnemon`` (and ``mnemon --help``) stays cheap: no HTTP client is imported until a provider
is asked for.

>>> import mnemon
>>> mnemon.Settings(model="claude-sonnet-4-5").keep
'auto'
"""

from __future__ import annotations

TYPE_CHECKING = False  # as typing's, without importing typing (~2 ms of every start)

from ._lazy import attach

#: public name → the module that defines it (relative to this package), ``:attr`` if renamed
_WHERE: dict[str, str] = {
    # running agents
    "open_supervisor": ".orchestrator.supervisor",
    "Supervisor": ".orchestrator.supervisor",
    "AgentNode": ".orchestrator.node",
    "Settings": ".orchestrator.settings",
    "tool": ".orchestrator.tools.function",
    "UserTool": ".orchestrator.tools.function",
    "Tool": ".orchestrator.tools.base",
    "ToolBase": ".orchestrator.tools.base",
    "ToolContext": ".orchestrator.tools.context",
    "ToolError": ".orchestrator.tools.base",
    "ToolInputError": ".orchestrator.tools.base",
    "create_run_root": ".lineage.runroot",
    # workspaces (docs/workspace.md)
    "WorkspaceSpec": ".orchestrator.workspace.spec",
    "Workspace": ".orchestrator.workspace.handle",
    # providers
    "make_provider": ".providers.select",
    "Provider": ".providers.base",
    "ScriptedProvider": ".providers.scripted",
    "AnthropicProvider": ".providers.anthropic",
    "OpenAIProvider": ".providers.openai",
    "window_for": ".providers.windows",
    # reading transcripts from outside
    "open_agent": ".lineage.view:open_door",
    "Door": ".session.door",
    "fold_file": ".session.resume",
    "build_tree": ".lineage.tree",
    # refusals and errors
    "MnemonError": ".errors",
    "SessionError": ".session.errors",
    "Refusal": ".session.errors",
    "LogRefused": ".session.errors",
    "LogCorrupt": ".session.errors",
    "DigestMismatch": ".session.errors",
    "AncestorUnreadable": ".session.errors",
    "LogClosed": ".session.errors",
    "RunRootError": ".lineage.runroot",
    "ForkError": ".lineage.fork",
    "ProviderError": ".providers.errors",
    "ProviderConfigError": ".providers.errors",
    "RateLimited": ".providers.errors",
    "AuthError": ".providers.errors",
    "ContextTooLong": ".providers.errors",
}

_getattr, __dir__, _names = attach(__name__, _WHERE)
__all__ = ["__version__", *_names]


def __getattr__(name: str) -> Any:
    if name == "__version__":  # a constant written at build time (setup.py), not the metadata
        from ._about import __version__ as value

        globals()["__version__"] = value
        return value
    return _getattr(name)


if TYPE_CHECKING:  # for type checkers and IDEs: the same names, eagerly
    from typing import Any

    from .errors import MnemonError
    from .lineage.fork import ForkError
    from .lineage.runroot import RunRootError, create_run_root
    from .lineage.tree import build_tree
    from .orchestrator.settings import Settings
    from .orchestrator.node import AgentNode
    from .orchestrator.supervisor import Supervisor, open_supervisor
    from .orchestrator.tools.base import Tool, ToolBase, ToolError, ToolInputError
    from .orchestrator.tools.context import ToolContext
    from .orchestrator.tools.function import UserTool, tool
    from .orchestrator.workspace.handle import Workspace
    from .orchestrator.workspace.spec import WorkspaceSpec
    from .providers.anthropic import AnthropicProvider
    from .providers.base import Provider
    from .providers.errors import (AuthError, ContextTooLong, ProviderConfigError,
                                   ProviderError, RateLimited)
    from .providers.openai import OpenAIProvider
    from .providers.scripted import ScriptedProvider
    from .providers.select import make_provider
    from .providers.windows import window_for
    from .session.door import Door
    from .session.errors import (AncestorUnreadable, DigestMismatch, LogClosed, LogCorrupt,
                                 LogRefused, Refusal, SessionError)
    from .lineage.view import open_door as open_agent
    from .session.resume import fold_file
