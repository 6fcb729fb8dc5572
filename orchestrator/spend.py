"""The run's spend meter: tokens and dollars spent so far, provider calls made, and the budgets
they are weighed against before every turn.

One meter per run, shared by all its agents through the env: the loop adds each turn's usage and
cost (``add``) and asks, before each request, whether a budget is spent (``over_budget``). It is
an object of its own, not fields of the supervisor, for two reasons: the loop accounts without
knowing the supervisor, and a job's worker puts in its place a meter whose run-wide figures are
the whole job's across workers (``jobs.ledger.LedgerSpend``, decision 0251).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..session.records import Usage

from .caps import tokens, tree_spend
from .node import settings_of
from .settings import Settings

if TYPE_CHECKING:
    from .node import AgentNode


def _over(used: int, usd: float, budget_tokens: int | None, budget_usd: float | None,
          whose: str, agent: str) -> str | None:
    """Why a tree that used ``used`` tokens and ``usd`` dollars is past a budget (None: it is not)."""
    if budget_tokens is not None and used >= budget_tokens:
        return f"{used} tokens used of {whose} budget of {budget_tokens} (agent {agent})"
    if budget_usd is not None and usd >= budget_usd:
        return f"${usd:.4f} spent of {whose} budget of ${budget_usd:.4f} (agent {agent})"
    return None


def role_over_budget(node: "AgentNode") -> str | None:
    """A role's budget (docs/roles.md): each agent of a role with a budget, with all its
    descendants, spends at most that; checked for the agent and every ancestor that has one.
    The same for the caps a parent gave a child (``agents_start {budget_usd, budget_tokens}``;
    docs/orchestrator.md, "Delegation"): a capped agent's tree stops at its cap, and so does
    every tree below it — a child never spends past what any ancestor was given."""
    n: AgentNode | None = node
    while n is not None:
        if n.cap_tokens is not None or n.cap_usd is not None:
            used, usd = tree_spend(n)
            why = _over(used, usd, n.cap_tokens, n.cap_usd, f"{n.id}'s", n.id)
            if why is not None:
                return why
        for b in n.lineage_budgets:  # an ancestor's not live here (``ancestry.recorded_budgets``)
            tree = [n, *n.descendants().values()]
            whose = (f"{b.agent}'s" if b.role == "\0cap" else  # ``ancestry.CAP``
                     f"the {b.role} role's" if b.role is not None else "the task's")
            why = _over(b.tokens_before + sum(tokens(a.usage) for a in tree),
                        b.usd_before + sum(a.cost_usd for a in tree),
                        b.budget_tokens, b.budget_usd, whose, b.agent)
            if why is not None:
                return why
        if n.budget_tokens is not None or n.budget_usd is not None:
            tree = [n, *n.descendants().values()]
            why = _over(sum(tokens(a.usage) for a in tree), sum(a.cost_usd for a in tree),
                        n.budget_tokens, n.budget_usd, f"the {n.role} role's", n.id)
            if why is not None:
                return why
        n = n.parent
    return None


class Spend:
    """What the run has spent, and whether a budget stops the next turn.

    ``usage`` and ``cost_usd`` are plain fields a subclass may turn into properties (the
    ledger's meter does: an assignment there changes only this process's part and publishes
    it); ``add`` assigns each once per turn, ``usage`` first."""

    def __init__(self, settings: Settings):
        self.settings = settings  # the run's: its budgets, and the settings of agents without own
        self.usage = Usage()
        self.cost_usd = 0.0
        self.provider_calls = 0

    def add(self, usage: Usage, cost: float) -> None:
        """One turn's spend (or one summarisation request's)."""
        self.usage = self.usage + usage
        self.cost_usd += cost

    def over_budget(self, node: "AgentNode | None" = None) -> str | None:
        """Why no further request may start: the run's budget, or (given ``node``) the budget
        of its tree — the root agent it descends from and all that root's descendants."""
        s = self.settings
        if s.budget_tokens is not None and (total := tokens(self.usage)) >= s.budget_tokens:
            return f"{total} tokens used of a budget of {s.budget_tokens}"
        if s.budget_usd is not None and self.cost_usd >= s.budget_usd:
            return f"${self.cost_usd:.4f} spent of a budget of ${s.budget_usd:.4f}"
        if node is None:
            return None
        if (why := role_over_budget(node)) is not None:
            return why
        top = node.tree_root()
        s = settings_of(top, s)  # a root started with its own settings keeps its own budget
        if s.task_budget_tokens is None and s.task_budget_usd is None:
            return None
        tree = [top, *top.descendants().values()]
        used = sum(tokens(n.usage) for n in tree)
        usd = sum(n.cost_usd for n in tree)
        if s.task_budget_tokens is not None and used >= s.task_budget_tokens:
            return f"{used} tokens used of the task's budget of {s.task_budget_tokens}"
        if s.task_budget_usd is not None and usd >= s.task_budget_usd:
            return f"${usd:.4f} spent of the task's budget of ${s.task_budget_usd:.4f}"
        return None
