"""The agent environment: everything the loop, the tools and the synod read about the run an
agent runs in, in one object, and nothing more.

Before it, the supervisor was handed whole into nearly every loop and tool function and used as
a bag: settings here, the provider there, the limiter, the tool table, the spend. The env makes
that bag explicit and narrow. The supervisor builds one per run and owns it; the layers below
it (``loop``, ``tools``, ``synod``, ``weighing``, ``servers``) take an
``AgentEnv`` and an ``AgentNode`` and never import the supervisor. What they need of agent
creation is the ``spawner`` (``spawner.Spawner``: make a child, start it) — the supervisor, seen
through that protocol only.

A harness policy (``loop.HarnessPolicy`` and its replacements) is called with the env and the
node: ``before_request(env, node)``, ``after_tools(env, node)``, ``on_idle(env, node)``,
``shape_request(env, node, request)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from .approvals import Approvals
from .node import settings_of
from .settings import Settings
from .tools.gate import Gated, decide_as, effective_policy
from .tools.table import ToolTable

if TYPE_CHECKING:
    import trio

    from ..lineage.runroot import Sources
    from ..providers.base import Provider
    from .node import AgentNode
    from .roles.book import RoleBook
    from .spawner import Spawner
    from .spend import Spend


class AgentEnv:
    """What an agent's loop, tools and synod read, shared by every agent of one run.

    - ``root``: the run root (where MCP servers log, what the door confines reads to);
    - ``provider`` and ``provider_name`` (the name also selects the cache multipliers);
    - ``settings``: the run's; an agent's own are ``settings_for(node)`` — the one rule;
    - ``policy``: what the loop does around each request (``loop.HarnessPolicy`` by default);
    - ``tools``: the run's tool table, name → tool (user tools, the run's MCP servers'); an
      agent's tools beyond the built-ins are ``tools_for(node)``, its whole table — the one
      place its calls are dispatched, behind its policy's gate — ``table_for(node)``;
      ``tool_fallback(node, call)`` answers calls no tool claims (replay);
    - ``limiter``: provider calls in flight across the run;
    - ``spend``: the run's spend meter and budgets (``spend.Spend``);
    - ``sources``: the door's opener, each log confined to the run root once;
    - ``text_listeners``: told ``(agent id, text)`` as answer text streams in (never recorded);
    - ``on_edit(node, kind, history_before)``: told of every cache-invalidating edit;
    - ``spawner``: makes and starts children (``spawner.Spawner``);
    - ``approvals``: the tool calls waiting for a decision (``approvals.Approvals``);
    - ``roles``: the run's named roles at work (``roles.book.RoleBook``), or None: an agent's
      provider is then ``provider_for(node)``, its tools its role's (docs/roles.md).
    """

    __slots__ = ("root", "provider", "provider_name", "settings", "policy", "tools",
                 "tool_fallback", "limiter", "spend", "sources", "text_listeners", "spawner",
                 "edit_hook", "tool_sets", "approvals", "roles", "memos")

    def __init__(self, root: Path, provider: "Provider", settings: Settings, *,
                 provider_name: str | None, policy: Any, tools: dict[str, Any],
                 tool_fallback: Any, limiter: "trio.CapacityLimiter", spend: "Spend",
                 sources: "Sources", spawner: "Spawner",
                 on_edit: Callable[["AgentNode", str, int], None] | None = None):
        self.root = root
        self.provider = provider
        self.provider_name = provider_name
        self.settings = settings
        self.policy = policy
        self.tools = tools
        self.tool_fallback = tool_fallback
        self.limiter = limiter
        self.spend = spend
        self.sources = sources
        self.text_listeners: list[Callable[[str, str], None]] = []
        self.spawner = spawner
        self.edit_hook = on_edit
        # the tool lists offered so far (``tools.definitions.tool_defs``): each made once per set of
        # tools, not per request or per agent
        self.tool_sets: list[tuple[tuple, list]] = []
        self.approvals = Approvals()
        self.roles: RoleBook | None = None
        # the run's memos of hashed request blocks, for projections on a provider without a
        # cache model of its own (``projection._cache_model``)
        self.memos: tuple[dict[tuple, tuple], dict[tuple, tuple]] = ({}, {})

    def settings_for(self, node: "AgentNode | None") -> Settings:
        """An agent's settings: its own where it was started with some, else the run's."""
        return settings_of(node, self.settings)

    def tools_for(self, node: "AgentNode | None") -> dict[str, Any]:
        """The tools an agent is offered beyond the built-ins, by name: the run's (user tools,
        the run's MCP servers), then the tools of the MCP servers its ancestors and it started
        for themselves, oldest first (decision 0244). An agent's own tool never shadows one
        already in the table.

        Read-only: while no agent of the lineage has servers of its own (the common case) this
        is the run's table itself, not a copy made for every turn."""
        n = node
        while n is not None and not n.own_tools:
            n = n.parent
        if n is None:
            if self.roles is not None:  # its role's tools (docs/roles.md)
                return self.roles.table_for(node, self.tools, True)
            return self.tools
        table = dict(self.tools)
        chain: list[AgentNode] = []
        while node is not None:
            chain.append(node)
            node = node.parent
        for a in reversed(chain):
            for name, t in a.own_tools.items():
                table.setdefault(name, t)
        if self.roles is not None:
            return self.roles.table_for(chain[0] if chain else None, table, False)
        return table

    def tool_table(self, node: "AgentNode") -> ToolTable:
        """The agent's whole tool table: the built-ins (unless its settings turn them off),
        ``tools_for(node)`` and the run's fallback — without its gate."""
        return ToolTable(self, node, self.tools_for(node),
                         builtin=self.settings_for(node).builtin_tools,
                         fallback=self.tool_fallback)

    def table_for(self, node: "AgentNode", *, gate: bool = True) -> "ToolTable | Gated":
        """The agent's tool table (``tool_table``) behind the gate of its effective policy
        (``tools.gate``; ``gate=False``: the table alone). The loop reads it once per turn and
        dispatches every call through it."""
        table = self.tool_table(node)
        if not gate:
            return table
        policy = effective_policy(self, node)
        return table if policy is None else Gated(table, policy)

    def provider_for(self, node: "AgentNode | None") -> "Provider":
        """The provider an agent's requests go to: its role's (built once per run), else the
        run's."""
        return self.provider if self.roles is None else self.roles.provider_for(node)

    def provider_name_for(self, node: "AgentNode | None") -> str | None:
        """The name of ``provider_for(node)``, as recorded (it selects the cache multipliers)."""
        return self.provider_name if self.roles is None else \
            self.roles.provider_name_for(node)

    def on_edit(self, node: "AgentNode", kind: str, history_before: int) -> None:
        if self.edit_hook is not None:
            self.edit_hook(node, kind, history_before)

    async def decide_as(self, by: "AgentNode", agent: str, call_id: str, decision: str,
                        reason: str | None) -> dict[str, Any]:
        """An agent's decision on a call below it that waits for it (``gate.decide_as``)."""
        return await decide_as(self, by, agent, call_id, decision, reason)
