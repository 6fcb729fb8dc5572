"""Agent and run settings: one frozen Struct, the same for every agent of a run."""

from __future__ import annotations

from typing import Literal

from msgspec import Struct

from ..session.constants import GREP_TIMEOUT_S, KEEP_FLOOR_TOKENS, MAX_TURNS

from .mcp.config import McpServerSpec
from .policy import ToolPolicy
from .roles.spec import Roles
from .workspace.spec import WorkspaceSpec
from .sandbox.spec import SandboxSettings


class Settings(Struct, kw_only=True, frozen=True):
    system: str | None = None
    model: str | None = None
    context_window: int | None = None
    keep: float | Literal["auto"] = "auto"  # a share of the history, or "auto" (decision 0220)
    keep_floor_tokens: int = KEEP_FLOOR_TOKENS  # under "auto": verbatim tokens a cut keeps
    max_turns: int = MAX_TURNS
    max_tokens: int = 8192
    max_depth: int = 4
    max_agents: int = 64
    concurrency: int = 16  # provider calls in flight across the run
    budget_tokens: int | None = None  # all tokens (input, cache, output) across the run
    budget_usd: float | None = None
    task_budget_tokens: int | None = None  # per root agent and its descendants (a job's task)
    task_budget_usd: float | None = None
    # the caps a child gets when its parent gives none (docs/orchestrator.md, "Delegation"; a
    # job's or role's ``[agent] child_budget_usd``): lowered to what the parent has left
    child_budget_usd: float | None = None
    child_budget_tokens: int | None = None
    child_max_turns: int | None = None
    grep_timeout_s: float = GREP_TIMEOUT_S
    mark_cap_bytes: int = 4096  # the longest replacement a mark may carry
    sweep_horizon: float = 10.0  # sweep when the payback (requests) is at most this (0205)
    cache_ttl: str = "5m"
    fsync: str = "none"
    price_model: str | None = None  # price a scripted run as this model
    builtin_tools: bool = True  # offer the context, transcript and agents tools (replay: off)
    # MCP servers whose tools every agent of the run is offered (``--mcp``; docs/mcp.md); they
    # start in the run's nursery and stop with it
    mcp_servers: tuple[McpServerSpec, ...] = ()
    # MCP servers each root agent started with these settings starts for itself, in its own
    # nursery: they stop when that agent ends (a job's ``[agent] mcp``; decision 0244)
    agent_mcp_servers: tuple[McpServerSpec, ...] = ()
    # which tool calls are allowed, denied or asked about (``--policy``, a job's ``[policy]``;
    # docs/policy.md): an agent's effective policy is its own narrowed by its ancestors'
    tool_policy: ToolPolicy | None = None
    # the run's named roles (``roles.Roles``, docs/roles.md; its ``root``: the root agents'
    # role): None, a run without roles
    roles: Roles | None = None
    # the root agents' workspace (docs/workspace.md): the user's directory in place
    # (``--workspace DIR``), a copy of a source per root (a job's ``[workspace]``), or None
    workspace: WorkspaceSpec | None = None
    # how the ``shell`` tool runs commands (docs/sandbox.md): None, the defaults (bubblewrap)
    sandbox: SandboxSettings | None = None

    def __post_init__(self) -> None:
        """A keep the plan cannot use is refused here, not at the first eviction."""
        if self.keep != "auto" and (isinstance(self.keep, bool) or
                                    not isinstance(self.keep, (int, float))
                                    or not 0.0 < self.keep < 1.0):
            raise ValueError(f"keep must be 'auto' or a share between 0 and 1, not {self.keep!r}")
        if self.keep_floor_tokens < 0:
            raise ValueError(f"keep_floor_tokens must be ≥ 0, not {self.keep_floor_tokens}")
