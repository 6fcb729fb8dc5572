"""One live agent (``AgentNode``) and the rule that says which settings it runs under.

The node is what every layer of the orchestrator core reads and none of them owns: the loop
advances it, the tools and the synod act on it, the supervisor creates it and keeps the table of
them. It lives in its own module, below all of them, so that none of them has to import the
supervisor to name it.
"""

from __future__ import annotations

from typing import Any, Callable

import trio

from ..session.agentlog import AgentLog
from ..session.errors import Refusal
from ..session.eviction import PressureLatch
from ..session.records import Usage
from ..session.sweep import Growth

from .settings import Settings


def settings_of(node: "AgentNode | None", run: Settings) -> Settings:
    """The one settings rule: an agent runs under its own settings where it was started with
    some (``new_root(…, settings=…)``, a service ``POST /v1/agents`` with overrides; a child
    carries its parent's), else under the run's. Everything the harness works out for one
    agent — its turns, its context, its economy, its cache multipliers, its cost — reads the
    settings this answers (decision 0274)."""
    return node.settings if node is not None and node.settings is not None else run


def _no_edit_hook(node: "AgentNode", kind: str, history_before: int) -> None:
    return None


class AgentNode:
    """One live agent: its log, its place in the lineage, its cancel scope and its outcome."""

    def __init__(self, agent_id: str, log_: AgentLog | None, *, kind: str | None, depth: int,
                 parent: "AgentNode | None"):
        self.id = agent_id
        self.log: AgentLog = log_  # type: ignore[assignment]  # None until born (see ``birth``)
        self.kind = kind or "root"
        self.depth = depth
        self.parent = parent
        self.children: dict[str, AgentNode] = {}
        self.state = "running"  # running | ended | failed | cancelled
        self.reason: str | None = None
        self.answer: str | None = None
        self.usage = Usage()
        self.cost_usd = 0.0
        self.turns_taken = 0
        self.done = trio.Event()
        self.scope = trio.CancelScope()
        self.nursery: trio.Nursery | None = None
        self.latch = PressureLatch()
        self.growth = Growth()
        self.edited = False  # an edit since the last request (for the growth meter)
        self.tokens_per_byte: float | None = None
        self.evictions = 0
        self.short_at: int | None = None  # the request of the last cut that fell short (weighing)
        self.cut_at: int | None = None  # the request of the last harness cut (the revisit)
        self.cut_reach = 0  # the newest turn id at that cut: a revisit takes nothing newer
        self.sweeps = 0
        self.started = False  # its loop has begun (a resumed child waits for its parent's)
        self.resumed = False  # reopened from its log: a turn that ended the agent ends it again
        # the env's edit hook, ``hook(node, kind, history_before)``: a bound method, not a
        # closure over the node, so a finished agent is freed at once (no reference cycle
        # for the collector to find: a job's thousands of agents kept it busy)
        self.edit_hook: Callable[[AgentNode, str, int], None] = _no_edit_hook
        # MCP servers this agent starts for itself, in its own nursery, before its log opens
        self.mcp_servers: tuple[Any, ...] = ()
        # the tools of those servers, once started: offered to it and to its descendants
        self.own_tools: dict[str, Any] = {}
        # writes the agent's opening records once its own servers have listed their tools (an
        # agent with servers of its own is born in its loop's task, not when it is created)
        self.birth: Callable[[], AgentLog] | None = None

    settings: Settings | None = None  # this agent's own settings, where they differ from the run's
    _lineage: str | None = None  # ``lineage()``, worked out on its first call
    # the request it sent last (``loop._loop``), which a child's projected cost replays
    # (``projection``) rather than rendering it again; None before its first in this process
    last_request: Any = None
    # that request replayed into an empty cache, kept for the next child's projection
    # (``projection._replayed``): ``(request, settings, entries)``
    projection_base: Any = None
    # a typed agent (docs/orchestrator.md, "Typed answers"): its output type
    # (``providers.typed.OutputType``), the answer accepted, and the tries that did not fit
    output_type: Any = None
    output: Any = None
    output_tries: int = 0
    # its named role (docs/roles.md; None: none) and that role's budget for it and its
    # descendants (``spend.Spend.over_budget``)
    role: str | None = None
    budget_tokens: int | None = None
    budget_usd: float | None = None
    # the policy its recorded ancestry imposes (``ancestry.recorded_policy``): set when it is
    # reopened from its log, so that it answers to its ancestors with or without its live parent
    lineage_policy: Any = None
    # the budgets of its recorded ancestors it spends against when reopened without them
    # (``ancestry.recorded_budgets``; ``spend.role_over_budget``)
    lineage_budgets: tuple[Any, ...] = ()
    # the provider answers its log records (``ProviderCall`` with usage, no error): sent as
    # ``meta["requests"]``, so a scripted provider continues its script where the log stands
    requests: int = 0
    # its workspace (``workspace.handle.Workspace``; docs/workspace.md), or None: no file tools
    workspace: Any = None
    # the caps its parent gave it (``agents_start {budget_usd, budget_tokens, max_turns}``;
    # ``caps``): dollars and tokens for it with its descendants, turns its own; None: no cap
    cap_usd: float | None = None
    cap_tokens: int | None = None
    cap_turns: int | None = None
    # what its descendants that ended before it was reopened spent: (tokens, usd), counted
    # against its caps (``spend.tree_spend``)
    spent_before: tuple[int, float] = (0, 0.0)
    # the tool calls it is in now, call id → tool name (``agents_status``; set by the loop)
    in_tools: dict[str, str] | None = None
    # messages steered into it (``agents_send``, ``/steer``), and every steering record written
    # into it from outside its loop (messages and harness notes) with the count its last
    # request had seen: a turn that would end it with one unseen goes on (``loop``)
    messages: int = 0
    steered: int = 0
    steered_seen: int = 0
    # set when an approval is addressed to it (``ask_parent``): wakes its ``agents_wait``
    attention: Any = None
    # the tool it is blocked in while children it cannot decide for run (a synod, an
    # ``ask_<role>``): an ``ask_parent`` of theirs then goes to a person, not to it
    blocked_in: str | None = None

    def on_edit(self, kind: str, history_before: int) -> None:
        self.edit_hook(self, kind, history_before)

    @property
    def ctx(self):
        if self.log is None:
            raise Refusal(f"agent {self.id} has not opened its log yet (its MCP servers are "
                          "starting)")
        return self.log.ctx

    def descendants(self) -> dict[str, "AgentNode"]:
        out: dict[str, AgentNode] = {}
        for c in self.children.values():
            out[c.id] = c
            out.update(c.descendants())
        return out

    def lineage(self) -> str:
        """The id of the agent this one's context descends from: up through mnemon forks to
        the nearest root or fresh child. Forks and synod members share it (and so their
        provider's cache key); a fresh child starts its own."""
        if self.kind != "mnemon" or self.parent is None:
            return self.id
        got = self._lineage
        if got is None:  # its ancestors' ids and kinds are fixed by now: walked once
            node = self
            while node.kind == "mnemon" and node.parent is not None:
                node = node.parent
            got = self._lineage = node.id
        return got

    def tree_root(self) -> "AgentNode":
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def outcome(self) -> dict[str, Any]:
        kind = self.kind if self.kind != "root" else "root"
        out = {"agent": self.id, "kind": kind, "state": self.state, "answer": self.answer,
               "cost_usd": round(self.cost_usd, 6)}
        if self.reason is not None and self.reason != "done":
            out["reason"] = self.reason
        if self.output_type is not None:
            out["output"] = self.output
        return out
