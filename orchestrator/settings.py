"""Agent and run settings: one frozen Struct, the same for every agent of a run."""

from __future__ import annotations

from msgspec import Struct

from ..session.constants import GREP_TIMEOUT_S, KEEP, MAX_TURNS

from .mcp.config import McpServerSpec


class Settings(Struct, kw_only=True, frozen=True):
    system: str | None = None
    model: str | None = None
    context_window: int | None = None
    keep: float = KEEP
    max_turns: int = MAX_TURNS
    max_tokens: int = 8192
    max_depth: int = 4
    max_agents: int = 64
    concurrency: int = 16  # provider calls in flight across the run
    budget_tokens: int | None = None  # all tokens (input, cache, output) across the run
    budget_usd: float | None = None
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
