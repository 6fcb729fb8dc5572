"""An agent's recorded ancestry: the tool policy its log and its ancestors' logs say it answers
to, whatever process reopens it and however (decision 0305).

A live agent is judged by its own policy narrowed by every ancestor's, walking the live
``parent`` link (``gate.effective_policy``). An agent reopened without its parent — a service
started again, ``POST /v1/agents/{id}/resume`` or ``/prompt`` while the parent is not running,
``chat --resume``, a Python ``resume_agent(aid)`` — has no such link, so the walk would stop at
it and a call its ancestors deny would run. The log is the authority instead:

- an agent started by this version records its effective policy in its ``SessionStarted``
  (``policy``, every layer, outermost first): that is what it answers to, whichever roles and
  policy files the reopening process was given;
- a log written before that field existed is walked up through its ``parent`` links under the
  run root, each ancestor's recorded ``role`` standing for that role's policy; a role the
  reopening process does not know is refused by name rather than read as no rule.

The run's own policy (``--policy``, a job's ``[policy]``) is the reopening process's, and applies
as it always does; what this module adds can only make a verdict stricter.

The same holds for the budgets an ancestor's role (or the task) sets on its whole tree: an agent
reopened without its ancestors still spends against them (``recorded_budgets``), what the rest
of each tree spent read back from its logs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..lineage.runroot import agent_source, list_agents
from ..lineage.tree import _first_started
from ..session.errors import Refusal
from ..session.records import SessionStarted
from .caps import Caps
from .costs import agent_cost
from .policy import PolicyError, ToolPolicy, combine, policy_from_record

if TYPE_CHECKING:
    from .roles.book import RoleBook
    from .settings import Settings

__all__ = ["CAP", "RecordedBudget", "recorded_budgets", "recorded_policy"]

#: ``RecordedBudget.role`` for the caps a parent gave an ancestor (``agents_start``)
CAP = "\0cap"


def recorded_policy(root: Path, started: SessionStarted | None,
                    book: "RoleBook | None") -> ToolPolicy | None:
    """The policy an agent's recorded ancestry imposes (None: none). ``started``: its own
    ``SessionStarted``; ``book``: the reopening run's roles, for logs that name a role but
    record no policy. Raises ``Refusal`` naming the agent for a recorded policy that cannot be
    read, or a legacy ancestor's role this run does not know."""
    layers: list[ToolPolicy] = []
    st, seen = started, set()
    while st is not None and st.agent not in seen:
        seen.add(st.agent)
        if st.policy is not None:  # everything above it is in it
            try:
                p = policy_from_record(st.policy, f"agent {st.agent}'s SessionStarted")
            except PolicyError as e:
                raise Refusal(f"{e}: the agent is not reopened under a policy it cannot read") \
                    from None
            if p is not None:
                layers.append(p)
            break
        if st.role is not None:
            role = book.get(st.role) if book is not None else None
            if role is None:
                raise Refusal(f"agent {st.agent} was started as the {st.role} role, which this "
                              "run does not know: reopen it with the roles it was started "
                              "under (--roles)")
            if role.policy is not None:
                layers.append(role.policy)
        if st.parent is None:
            break
        st = _first_started(root / agent_source(st.parent))
    out: ToolPolicy | None = None
    for p in reversed(layers):
        out = combine(out, p)
    return out


@dataclass(frozen=True)
class RecordedBudget:
    """A budget a reopened agent still spends against though the agent that set it is not
    live: whose (``agent``; ``role``, None for the task's budget), its limits, and what that
    agent's tree spent before — its logs under the run root, the reopened agent's own subtree
    left out (that is counted live, its past spend read back by the supervisor)."""

    agent: str
    role: str | None
    budget_tokens: int | None
    budget_usd: float | None
    tokens_before: int
    usd_before: float


def recorded_budgets(root: Path, started: SessionStarted | None, book: "RoleBook | None",
                     settings: "Settings") -> tuple[RecordedBudget, ...]:
    """The budgets of an agent's recorded ancestors — each ancestor's role's, and the task's
    (``task_budget_*``, its tree root's) — with what the rest of each tree has spent; none for
    a root, or where no budget applies (then no log but the agent's own ancestry is read)."""
    if started is None or started.parent is None:
        return ()
    chain: list[SessionStarted] = []
    st, seen = _first_started(root / agent_source(started.parent)), {started.agent}
    while st is not None and st.agent not in seen:
        seen.add(st.agent)
        chain.append(st)
        st = _first_started(root / agent_source(st.parent)) if st.parent else None
    wanted: list[tuple[str, str | None, int | None, float | None]] = []
    for a in chain:
        role = book.get(a.role) if book is not None and a.role else None
        if role is not None and (role.budget_tokens is not None or role.budget_usd is not None):
            wanted.append((a.agent, a.role, role.budget_tokens, role.budget_usd))
        caps = Caps.from_record(a.budget)  # the caps its parent gave it (docs/orchestrator.md)
        if caps.tokens is not None or caps.usd is not None:
            wanted.append((a.agent, CAP, caps.tokens, caps.usd))
    if chain and (settings.task_budget_tokens is not None or settings.task_budget_usd is not None):
        wanted.append((chain[-1].agent, None, settings.task_budget_tokens,
                       settings.task_budget_usd))
    if not wanted:
        return ()
    kids: dict[str, list[str]] = {}
    for aid in list_agents(root):
        opening = _first_started(root / agent_source(aid))
        if opening is not None and opening.parent:
            kids.setdefault(opening.parent, []).append(aid)

    def tree(top: str) -> set[str]:
        out, todo = set(), [top]
        while todo:
            a = todo.pop()
            if a not in out:
                out.add(a)
                todo.extend(kids.get(a, ()))
        return out

    mine = tree(started.agent)
    price_as = settings.price_model or settings.model
    out = []
    for agent, role, budget_tokens, budget_usd in wanted:
        used, usd = 0, 0.0
        for aid in sorted(tree(agent) - mine):
            c = agent_cost(root / agent_source(aid), aid, price_as=price_as,
                           ttl=settings.cache_ttl)
            used += (c.input_tokens + c.output_tokens + c.cache_read_tokens +
                     c.cache_write_tokens)
            usd += c.cost_usd
        out.append(RecordedBudget(agent, role, budget_tokens, budget_usd, used, usd))
    return tuple(out)
