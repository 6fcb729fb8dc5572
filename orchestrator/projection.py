"""What a new child's first request will cost, said before it is sent (``agents_start``'s
``projected_usd``; docs/orchestrator.md, "Delegation").

A mnemon child's first request is its parent's context — which the parent's last request left
in the provider's cache — and then its task: it reads the prefix and writes the rest. A fresh
child shares at most the tools and the system prompt, and writes its own. Both are worked out
here on the run's own cache model (``providers.cache.CacheModel``: the provider's, where it
has one — the scripted provider — else the provider's documented rules with the parent's
measured tokens per byte), by replaying the parent's last request into an empty cache and then
the child's, and priced with the run's prices and cache TTL (``weighing.priced_as``).

The output is not known before it is written: it is estimated as the parent's mean output per
turn so far (said apart in ``projected.output_tokens``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..providers.base import Request
from ..providers.cache import CacheEntry, CacheModel
from ..providers.prices import cost_usd
from ..session.render import render
from .weighing import priced_as

if TYPE_CHECKING:
    from .env import AgentEnv
    from .node import AgentNode

__all__ = ["project_first_request"]


def _request(env: "AgentEnv", node: "AgentNode", drop_last_assistant: bool) -> Request:
    s = env.settings_for(node)
    messages = render(node.ctx)
    if drop_last_assistant and messages and messages[-1].get("role") == "assistant":
        messages = messages[:-1]  # the response the parent's last request produced
    return Request(system=s.system, messages=messages, tools=env.table_for(node).definitions(),
                   max_tokens=s.max_tokens, model=s.model)


def _cache_model(env: "AgentEnv", parent: "AgentNode", ttl: str) -> CacheModel:
    """An empty cache on the run's model. Its memos of hashed blocks are shared — the
    provider's own model's, else the run's (``AgentEnv.memos``) — so replaying the parent's
    last request hashes only what no request of the run has had: the parent's context was
    hashed when it was sent (a projection otherwise cost two full hashings of a context per
    ``agents_start``)."""
    own = getattr(env.provider_for(parent), "cache_model", None)
    if isinstance(own, CacheModel):
        return CacheModel(ttl=own.ttl, min_prefix_tokens=own.min_prefix_tokens,
                          tokens_per_byte=own.tokens_per_byte, lookback=own.lookback,
                          memos=own.memos)
    return CacheModel(ttl=ttl, tokens_per_byte=parent.tokens_per_byte or 0.25, memos=env.memos)


def _copy(entries: dict[str, CacheEntry]) -> dict[str, CacheEntry]:
    """The cache's entries, each its own (a request that reads one moves its expiry)."""
    return {k: CacheEntry(position=e.position, tokens=e.tokens, expires_at=e.expires_at)
            for k, e in entries.items()}


def _replayed(env: "AgentEnv", parent: "AgentNode", ttl: str,
              model: str | None) -> CacheModel:
    """An empty cache with the parent's last request replayed into it (at time 0). The cache
    it leaves depends on that request, the model and the cache model's settings alone, so it
    is worked out once per parent request and copied for each child: a synod's N children, or
    the several ``agents_start`` calls of one response, replay their parent once, not N times
    (remembered on the parent as ``projection_base``; its next request replaces it)."""
    last = parent.last_request  # as it was sent (the same blocks: the memos know them)
    cm = _cache_model(env, parent, ttl)
    settings = (ttl, model, cm.min_prefix_tokens, cm.tokens_per_byte, cm.lookback)
    base = parent.projection_base
    if last is not None and base is not None and base[0] is last and base[1] == settings:
        cm.entries = _copy(base[2])
        cm._scan_at = min((e.expires_at for e in cm.entries.values()), default=math.inf)
        return cm
    cm.usage_for(last if last is not None else _request(env, parent, True), 0, 0.0, model=model)
    if last is not None:
        parent.projection_base = (last, settings, _copy(cm.entries))
    return cm


def project_first_request(env: "AgentEnv", parent: "AgentNode",
                          child: "AgentNode") -> dict[str, Any]:
    """``{"usd", "input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens"}``
    for ``child``'s first request, as the run's cache model and prices say (an empty dict for a
    child whose log is not open yet: one with MCP servers of its own)."""
    if child.log is None or parent.log is None:
        return {}
    s = env.settings_for(child)
    model = s.model
    cm = _replayed(env, parent, s.cache_ttl, model)
    out = round(parent.usage.output_tokens / parent.turns_taken) if parent.turns_taken else 0
    u = cm.usage_for(_request(env, child, False), out, 1.0, model=model)
    return {"usd": round(cost_usd(u, priced_as(s, model), s.cache_ttl), 6),
            "input_tokens": u.input_tokens, "cache_read_tokens": u.cache_read_tokens,
            "cache_write_tokens": u.cache_write_tokens, "output_tokens": u.output_tokens}
