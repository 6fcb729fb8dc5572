"""The caps a parent gives a child: what it may spend (dollars, tokens — with its descendants)
and how many turns it may take, and the rule that a tree's budget is split among its children,
never multiplied (docs/orchestrator.md, "Delegation").

A cap is a **reservation**: giving a child $0.30 sets $0.30 of the giver's money aside for it,
so a parent with $1 left can give three children $0.30 each, not a fourth. What an agent has
left to give (``left``) is, at the nearest capped agent at or above it, its cap less what its
tree has spent and less what its running capped children still hold in reserve; with no capped
agent above it, the task's and the run's budgets in the same way. A role's budget (docs/roles.md)
limits as a cap does, but was not carved from anyone's: it bounds what is left and is walked
through. Spending is stopped by ``spend.role_over_budget`` at every capped ancestor, so even a
child with no cap of its own never spends past what an ancestor was given.

Turns are an agent's own, not a currency a tree shares: a child's ``max_turns`` is at most the
turns its parent may take itself (decision 0441).

Pure: reads the live nodes and the settings, writes nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..session.errors import Refusal
from ..session.records import Usage

if TYPE_CHECKING:
    from .node import AgentNode
    from .settings import Settings

__all__ = ["Caps", "caps_record", "grant", "left", "reserved", "status", "tokens", "tree_spend"]


def tokens(u: Usage) -> int:
    """All the tokens of a usage: input, output, cache reads and cache writes."""
    return u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens


def tree_spend(node: "AgentNode") -> tuple[int, float]:
    """What an agent and all its descendants have spent, (tokens, usd): the live tree, and what
    descendants that ended before it was reopened spent (``node.spent_before``)."""
    used, usd = node.spent_before
    used += tokens(node.usage)
    usd += node.cost_usd
    for c in node.children.values():
        t, d = tree_spend(c)
        used += t
        usd += d
    return used, usd


@dataclass(frozen=True)
class Caps:
    """What a child is given: ``usd`` and ``tokens`` for it and its descendants, ``turns`` its
    own (``max_turns``); None: not capped (it spends against its ancestors' caps)."""

    usd: float | None = None
    tokens: int | None = None
    turns: int | None = None

    def __bool__(self) -> bool:
        return self.usd is not None or self.tokens is not None or self.turns is not None

    def record(self) -> dict[str, Any] | None:
        """As ``SessionStarted.budget`` records it (None: no cap)."""
        out: dict[str, Any] = {}
        if self.usd is not None:
            out["usd"] = self.usd
        if self.tokens is not None:
            out["tokens"] = self.tokens
        if self.turns is not None:
            out["max_turns"] = self.turns
        return out or None

    @classmethod
    def from_record(cls, rec: Any) -> "Caps":
        if not isinstance(rec, dict):
            return cls()
        usd, tok, turns = rec.get("usd"), rec.get("tokens"), rec.get("max_turns")
        return cls(float(usd) if isinstance(usd, (int, float)) else None,
                   tok if isinstance(tok, int) else None,
                   turns if isinstance(turns, int) else None)


def caps_record(node: "AgentNode") -> dict[str, Any] | None:
    return Caps(node.cap_usd, node.cap_tokens, node.cap_turns).record()


def _capped(n: "AgentNode") -> bool:
    return n.cap_usd is not None or n.cap_tokens is not None


def reserved(node: "AgentNode") -> tuple[int, float]:
    """What the running capped agents of ``node``'s tree (below it, the nearest capped ones on
    each path) still hold in reserve: each one's cap less what its tree has spent, never
    below zero. An ended child holds nothing: what it spent is spent."""
    tok, usd = 0, 0.0
    for c in node.children.values():
        if _capped(c) and c.state == "running":
            used, spent = tree_spend(c)
            if c.cap_tokens is not None:
                tok += max(0, c.cap_tokens - used)
            if c.cap_usd is not None:
                usd += max(0.0, c.cap_usd - spent)
        else:
            t, d = reserved(c)
            tok += t
            usd += d
    return tok, usd


def _room(n: "AgentNode", limit_tokens: int | None, limit_usd: float | None,
          spent: tuple[int, float] | None = None) -> tuple[float, float]:
    """What a limit over ``n``'s tree leaves to give: the limit less the tree's spend and its
    capped children's reserves (∞ where there is no limit)."""
    used, usd = spent if spent is not None else tree_spend(n)
    r_tok, r_usd = reserved(n)
    return (math.inf if limit_tokens is None else limit_tokens - used - r_tok,
            math.inf if limit_usd is None else limit_usd - usd - r_usd)


def left(node: "AgentNode", settings: "Settings", run_spent: tuple[int, float]) -> tuple[float, float]:
    """What ``node`` may still give a new child, ``(tokens, usd)`` (∞: no limit): walked up
    from it to the nearest capped agent (whose reserve was checked against everything above it
    when it was given); with none, the task's budget over its whole tree and the run's budget
    (``run_spent``: the run's tokens and dollars so far). Never below zero."""
    tok, usd = math.inf, math.inf
    n: AgentNode | None = node
    top = node
    while n is not None:
        top = n
        if _capped(n) or n.budget_tokens is not None or n.budget_usd is not None:
            lt = n.cap_tokens if n.budget_tokens is None else (
                n.budget_tokens if n.cap_tokens is None else min(n.cap_tokens, n.budget_tokens))
            lu = n.cap_usd if n.budget_usd is None else (
                n.budget_usd if n.cap_usd is None else min(n.cap_usd, n.budget_usd))
            t, u = _room(n, lt, lu)
            tok, usd = min(tok, t), min(usd, u)
            if _capped(n):
                return max(0.0, tok), max(0.0, usd)
        n = n.parent
    s = settings
    if s.task_budget_tokens is not None or s.task_budget_usd is not None:
        t, u = _room(top, s.task_budget_tokens, s.task_budget_usd)
        tok, usd = min(tok, t), min(usd, u)
    if s.budget_tokens is not None or s.budget_usd is not None:
        # the run's budget: what the run spent, less the reserves held in this agent's tree
        t, u = _room(top, s.budget_tokens, s.budget_usd, spent=run_spent)
        tok, usd = min(tok, t), min(usd, u)
    return max(0.0, tok), max(0.0, usd)


def grant(parent: "AgentNode", asked: Caps, default: Caps, settings: "Settings",
          run_spent: tuple[int, float], parent_turns: int) -> Caps:
    """The caps a new child of ``parent`` gets: ``asked`` (the call's), each one left out taken
    from ``default`` (the run's ``child_budget_*``, ``child_max_turns``). An asked cap past
    what ``parent`` has left is refused (``Refusal`` naming what is left: the model learns the
    figure); a default past it is lowered to it. ``parent_turns``: the turns the parent may
    take itself, the most a child may be given."""
    tok_left, usd_left = left(parent, settings, run_spent)
    usd, tok, turns = asked.usd, asked.tokens, asked.turns
    for name, v in (("budget_usd", usd), ("budget_tokens", tok), ("max_turns", turns)):
        if v is not None and (isinstance(v, bool) or v <= 0):
            raise Refusal(f"{name} must be a positive number, not {v!r}")
    if usd is not None and usd > usd_left + 1e-12:
        raise Refusal(f"budget_usd {usd:g} is more than you have left to give (${usd_left:.4f}): "
                      "a child's budget is set aside from yours")
    if tok is not None and tok > tok_left:
        raise Refusal(f"budget_tokens {tok} is more than you have left to give "
                      f"({int(tok_left)} tokens): a child's budget is set aside from yours")
    if turns is not None and turns > parent_turns:
        raise Refusal(f"max_turns {turns} is more than you may take yourself ({parent_turns})")
    if usd is None and default.usd is not None:
        usd = min(default.usd, usd_left)
    if tok is None and default.tokens is not None:
        tok = int(min(default.tokens, tok_left))
    if turns is None and default.turns is not None:
        turns = min(default.turns, parent_turns)
    return Caps(usd, tok, turns)


def status(node: "AgentNode") -> dict[str, Any] | None:
    """A capped agent's caps beside what its tree has spent (``agents_status``, the page,
    ``mnemon cost``); None for an agent with no cap."""
    if not _capped(node) and node.cap_turns is None:
        return None
    used, usd = tree_spend(node)
    out: dict[str, Any] = {}
    if node.cap_usd is not None:
        out.update(usd=node.cap_usd, spent_usd=round(usd, 6))
    if node.cap_tokens is not None:
        out.update(tokens=node.cap_tokens, spent_tokens=used)
    if node.cap_turns is not None:
        out.update(max_turns=node.cap_turns, turns=node.turns_taken)
    return out

