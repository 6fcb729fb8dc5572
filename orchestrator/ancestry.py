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
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..lineage.runroot import agent_source
from ..lineage.tree import _first_started
from ..session.errors import Refusal
from ..session.records import SessionStarted
from .policy import PolicyError, ToolPolicy, combine, policy_from_record

if TYPE_CHECKING:
    from .roles.book import RoleBook

__all__ = ["recorded_policy"]


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
