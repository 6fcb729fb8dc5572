"""The Trio supervisor: owns the run root, the agent environment, the table of agents and the
nurseries; every agent runs in its own nursery inside its parent's, so cancelling a parent cancels
its descendants and nothing outlives it.

It sits on top of the agent core: it builds the run's ``AgentEnv`` (``env``) and hands it to the
loops it starts (``loop.run_agent``); the loop, the tools and the synod below read that env and
create children through it (``spawner.Spawner``, which this class implements), never this
module. What a caller reads and sets on the supervisor — ``settings``, ``provider``, ``policy``,
``usage``, ``cost_usd``, … — are the env's and its spend meter's fields, shown here.
"""

from __future__ import annotations

import itertools
import mmap
import os
import re
import weakref
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Callable

import msgspec
import structlog
import trio

from ..lineage.runroot import (Sources, agent_source, create_run_root, list_agents,
                               make_loader, now_iso)
from ..providers.base import Provider
from ..providers.typed import OutputType
from ..session.agentlog import AgentLog
from ..lineage.fork import ForkError, fork
from ..session.errors import LogBusy, Refusal
from ..session.records import SessionStarted, Usage

from .ancestry import recorded_budgets, recorded_policy
from .env import AgentEnv
from .tools.gate import effective_policy
from .loop import HarnessPolicy, run_agent
from .mcp.config import McpServerSpec
from .node import AgentNode
from .policy import policy_record
from .roles.book import RoleBook
from .roles.load import as_roles
from .servers import open_servers
from .sandbox.spec import SandboxSettings, narrowed
from .settings import Settings
from .caps import Caps, grant
from .delegation import note, send
from .delegation import status as status_of
from .spend import Spend
from .spend import tokens as spent_tokens
from .synod import SynodResult, run_synod
from .tools.definitions import tool_defs
from .typed.load import as_output_type
from .workspace.history import read_history
from .workspace.life import open_child, open_root, reopen
from .workspace.life import rewind as ws_rewind
from .tools.base import Tool

__all__ = ["AgentNode", "Supervisor", "open_servers", "open_supervisor", "set_aside_unopened"]

log = structlog.get_logger("mnemon.supervisor")


def _env_field(name: str, doc: str, *, settable: bool = False) -> property:
    def get(self: "Supervisor") -> Any:
        return getattr(self.env, name)

    def put(self: "Supervisor", value: Any) -> None:
        setattr(self.env, name, value)

    return property(get, put if settable else None, doc=doc)


def _spend_field(name: str, doc: str) -> property:
    def get(self: "Supervisor") -> Any:
        return getattr(self.env.spend, name)

    def put(self: "Supervisor", value: Any) -> None:
        setattr(self.env.spend, name, value)

    return property(get, put, doc=doc)


class Supervisor:
    """Runs agents on one provider under one run root, with run-wide limits and budgets."""

    def __init__(self, root: Path, provider: Provider, settings: Settings, *,
                 user_tools: Sequence[Tool] | None = None, provider_name: str | None = None,
                 policy: Any = None, tool_fallback: Any = None, on_edit: Any = None,
                 existing: list[str] | None = None, spend: Spend | None = None):
        """``policy`` replaces what the loop does around each request (default: ours, the
        ``HarnessPolicy``); ``tool_fallback(node, call) -> ToolResult`` answers calls no tool
        claims (replay answers them as recorded); ``on_edit(node, kind, history_bytes_before)``
        is told of every cache-invalidating edit; ``spend`` is the run's spend meter (default:
        a ``Spend`` of this process's turns)."""
        self.root = Path(root)
        self.env = AgentEnv(
            self.root, provider, settings,
            provider_name=provider_name or getattr(provider, "name", None),
            policy=policy or HarnessPolicy(),
            tools={t.name: t for t in (user_tools or [])}, tool_fallback=tool_fallback,
            limiter=trio.CapacityLimiter(settings.concurrency),
            spend=spend if spend is not None else Spend(settings),
            sources=Sources(self.root),  # the transcript tools' opener: each log confined once
            spawner=self, on_edit=on_edit)
        self.agents: dict[str, AgentNode] = {}
        self.env.approvals.agents = self.agents  # a decision's 404 / 409 looks them up
        if settings.roles is not None:  # each role's provider built once, here (docs/roles.md)
            self.env.roles = RoleBook(settings.roles, settings, provider,
                                      self.env.provider_name, tools=self.env.tools)
        # the opening record's form of the last tool list offered (``_started``): made once
        # per set of tools, not per agent
        self._started_tools: tuple[list, list[dict]] | None = None
        self.loader = make_loader(self.root)
        self.nursery: trio.Nursery | None = None
        # the ids in use, listed now: an agent set aside later (its creation cut) keeps its id
        # (``existing``: the caller's listing of this run root, made just before)
        existing = list_agents(self.root) if existing is None else existing
        self._ids = itertools.count(len(existing) + 1)
        self._taken = set(existing)
        # the agents counted against ``max_agents``: those made or reopened here, the ended
        # ones dropped when the count comes near the limit (``check_limits``; decision 0306).
        # Weak: a node its host has let go of (a job's finished task) is freed at once
        self._live: weakref.WeakValueDictionary[str, AgentNode] = weakref.WeakValueDictionary()

    # ------------------------------------------------------------------ the env's fields

    settings = _env_field("settings", "The run's settings (an agent's own: ``settings_for``).")
    provider = _env_field("provider", "The run's provider.")
    provider_name = _env_field("provider_name", "The provider's name, as recorded.")
    policy = _env_field("policy", "What the loop does around each request.", settable=True)
    tool_fallback = _env_field("tool_fallback", "Answers calls no tool claims.", settable=True)
    user_tools = _env_field("tools", "The run's tool table, name → tool (user tools, the run's "
                            "MCP servers'); updating it offers more tools to every agent.")
    text_listeners = _env_field("text_listeners", "Told ``(agent id, text)`` as answer text "
                                "streams in: a live preview, never recorded.")
    limiter = _env_field("limiter", "Provider calls in flight across the run.")
    sources = _env_field("sources", "The door's opener, each log confined once.")
    approvals = _env_field("approvals", "The tool calls waiting for a decision: ``pending()``, "
                           "``decide(agent, call_id, decision, …)``, ``decider``.")
    usage = _spend_field("usage", "The run's usage so far.")
    cost_usd = _spend_field("cost_usd", "The run's cost so far, in USD.")
    provider_calls = _spend_field("provider_calls", "Provider call attempts so far.")

    def settings_for(self, node: AgentNode | None) -> Settings:
        """An agent's settings: its own where it was started with some, else the run's."""
        return self.env.settings_for(node)

    def tools_for(self, node: AgentNode | None) -> dict[str, Any]:
        """The tools an agent is offered beyond the built-ins (``AgentEnv.tools_for``)."""
        return self.env.tools_for(node)

    def over_budget(self, node: AgentNode | None = None) -> str | None:
        """Why no further request may start (``Spend.over_budget``)."""
        return self.env.spend.over_budget(node)

    def on_edit(self, node: AgentNode, kind: str, history_before: int) -> None:
        self.env.on_edit(node, kind, history_before)

    # ------------------------------------------------------------------ ids and limits

    def mint_agent_id(self) -> str:
        """The next free ``a<n>``: neither taken here nor a log on disk — another process of
        the run (a Dask job's chunks share its run root) may have made it since the listing."""
        agents = os.path.join(os.fspath(self.root), "agents")  # a string: half a Path's cost
        while True:
            aid = f"a{next(self._ids)}"
            if aid not in self._taken and not os.path.exists(os.path.join(agents, aid)):
                self._taken.add(aid)
                return aid

    def check_limits(self, parent: AgentNode | None) -> None:
        """Refuse an agent past the run's depth, or past ``max_agents`` agents running at once
        in this supervisor — an ended agent does not count, so a service that runs for weeks
        is not full after its 64th agent (decision 0306)."""
        depth = 0 if parent is None else parent.depth + 1
        if depth > self.settings.max_depth:
            raise Refusal(f"a child here would be at depth {depth}; this run allows depth "
                          f"{self.settings.max_depth}")
        limit, live = self.settings.max_agents, self._live
        if len(live) >= limit:  # an agent that has ended no longer counts
            for aid in [a for a, n in list(live.items()) if n.state != "running"]:
                del live[aid]
        if len(live) >= limit:
            n = len(live)
            raise Refusal(f"this run already has {n} agent{'s' if n != 1 else ''} running, the "
                          f"most it allows at once (max_agents {limit}): wait for one to end, "
                          "or raise the limit (mnemon serve --max-agents N, "
                          "Settings(max_agents=N))")

    def _started(self, agent: str, settings: Settings | None = None,
                 node: AgentNode | None = None, **extra: Any) -> SessionStarted:
        s = settings or self.settings
        defs = tool_defs(self.env, node)
        memo = self._started_tools
        if memo is None or memo[0] is not defs:  # one list per tool set, shared by the records
            memo = self._started_tools = (defs, [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema}
                for t in defs])
        tools = memo[1]
        if node is not None and node.role is not None:
            extra.setdefault("role", node.role)
        if node is not None:
            extra.setdefault("policy", self._policy_record(node))
            extra.setdefault("sandbox", sandbox_record(s, node))
        return SessionStarted(agent=agent, at=now_iso(), system=s.system, tools=tools,
                              provider=self.env.provider_name_for(node), model=s.model,
                              context_window=s.context_window, **extra)

    def _policy_record(self, node: AgentNode) -> list[dict[str, Any]] | None:
        """The effective policy ``node`` starts under, as its ``SessionStarted`` records it
        (``policy.policy_record``): what any process that reopens it judges its calls by
        (``ancestry.recorded_policy``); None when no policy is in force (``[]`` in a run with
        roles, where a log without the field would send a reader up its ancestors' roles)."""
        p = effective_policy(self.env, node)
        if p is None:  # in a run with roles, "none" is said: a reader need not walk the roles
            return [] if self.env.roles is not None else None
        return policy_record(p)

    def new_root(self, task: str, agent_id: str | None = None, *,
                 settings: Settings | None = None,
                 mcp_servers: "tuple[McpServerSpec, ...] | None" = None,
                 unborn: int | None = None, output: Any = None,
                 role: str | None = None, caps: Caps | None = None) -> AgentNode:
        """Create a root agent with its task as the first prompt; ``settings``, when given, are
        this agent's own (and its descendants').

        ``role``: its named role (default: the run's roles' ``root``; docs/roles.md) — its
        settings, tools, provider, output type and budget are the role's.

        ``caps``: what it may spend (with its descendants) and how many turns, given by a
        caller outside the run (``mnemon mcp --agents``' ``agents_start``): held as a child's
        caps are, recorded in its ``SessionStarted.budget``; bounded by the run's budget only.

        ``output``: its output type — a JSON Schema dict, a msgspec Struct, dataclass or
        TypedDict, or a ``providers.typed.OutputType`` — recorded in ``SessionStarted``; its
        final answer must fit it (docs/orchestrator.md, "Typed answers").

        ``unborn``: its log's file, made ahead off the loop (``session.log.unborn``), owned from
        here on: named at the birth, or closed when the birth waits for MCP servers.

        ``mcp_servers`` (default: the settings' ``agent_mcp_servers``) are MCP servers this
        agent starts for itself: they start in its nursery when it runs, and its log —
        ``SessionStarted`` listing their tools, then the task — is written once they have
        listed their tools. Until then ``node.log`` is None.
        """
        try:
            self.check_limits(None)
        except BaseException:
            if unborn is not None:
                os.close(unborn)
            raise
        book = self.env.roles
        role = role if role is not None or book is None else book.roles.root
        if role is not None and (book is None or role not in book.roles):
            if unborn is not None:
                os.close(unborn)
            raise Refusal(f"there is no role {role!r} in this run (roles: "
                          f"{', '.join(book.roles.names()) if book else 'none'})")
        aid = agent_id or self.mint_agent_id()
        node = AgentNode(aid, None, kind=None, depth=0, parent=None)
        if role is not None:
            settings, output = self._as_role(node, role, settings or self.settings, output)
        servers = tuple((settings or self.settings).agent_mcp_servers
                        if mcp_servers is None else mcp_servers)
        node.settings = settings
        node.mcp_servers = servers
        node.output_type = typed = as_output_type(output)
        typed_extra: dict[str, Any] = {"output_type": typed.as_record()} if typed is not None else {}
        if caps:  # given from outside the run (``mnemon mcp --agents``): recorded as a child's
            node.cap_usd, node.cap_tokens, node.cap_turns = caps.usd, caps.tokens, caps.turns
            typed_extra["budget"] = caps.record()
        if unborn is not None and servers:  # born later, if ever: not worth holding it open
            os.close(unborn)
            unborn = None
        spec = (settings or self.settings).workspace
        ws_start = None
        if spec is not None:  # its files (docs/workspace.md): made before its opening record
            try:                # lists the file tools it is offered
                node.workspace, ws_start = open_root(self.root, aid, spec)
            except BaseException:
                if unborn is not None:
                    os.close(unborn)
                raise

        def birth() -> AgentLog:
            src = agent_source(aid)
            alog = AgentLog.create(self.root / src, src,
                                   self._started(aid, settings, node, depth=0, **typed_extra),
                                   loader=self.loader,
                                   fsync=self.settings.fsync,  # type: ignore[arg-type]
                                   unborn=unborn)
            alog.prompt(task)
            if ws_start is not None:
                alog.append(ws_start)
            return alog

        self._taken.add(aid)
        self._born(node, birth)
        node.edit_hook = self.env.on_edit
        self.agents[aid] = self._live[aid] = node
        return node

    def _as_role(self, node: AgentNode, role: str, base: Settings,
                 output: Any) -> tuple[Settings, Any]:
        """Make ``node`` an agent of ``role``: ``(its settings, its output type)``."""
        book = self.env.roles
        assert book is not None
        r = book.roles[role]
        node.role = role
        node.budget_tokens, node.budget_usd = r.budget_tokens, r.budget_usd
        return book.settings_for_role(role, base), (output if output is not None else r.output)

    def new_child(self, parent: AgentNode, task: str, kind: str,
                  agent_id: str | None = None, *,
                  mcp_servers: "tuple[McpServerSpec, ...]" = (),
                  output: Any = None, role: str | None = None,
                  caps: Caps | None = None) -> AgentNode:
        """Fork a child of ``parent`` (``mnemon``: it inherits the parent's table; ``fresh``:
        an empty context). Either kind is offered every tool its parent is, the parent's own
        MCP servers' included (they outlive it). A fresh child may be given ``mcp_servers``
        of its own, started in its nursery (born as ``new_root`` says); a mnemon child may not:
        it keeps its parent's tools, byte for byte, so that its prefix is the parent's
        (decision 0244). ``output``: the child's own output type, as ``new_root`` takes it (a
        child does not inherit its parent's).

        ``role``: a named role (docs/roles.md) the parent's role may start — refused naming the
        ones it may; the child runs as the role says (a fresh one with its own system prompt,
        model, provider and tools). Without one, a child is of its parent's role.

        ``caps``: what the parent gives it to spend and how many turns (``caps.grant``: never
        more than the parent has left — refused naming what is left; the run's
        ``child_budget_*`` fill the ones not given), recorded in its ``SessionStarted.budget``.
        """
        if kind not in ("mnemon", "fresh"):
            raise Refusal(f"kind must be 'mnemon' or 'fresh', not {kind!r}")
        if mcp_servers and kind == "mnemon":
            raise Refusal("a mnemon child keeps its parent's tools (its context begins "
                          "byte-identical to the parent's): give MCP servers to a fresh child, "
                          "or to the parent")
        self.check_limits(parent)
        book = self.env.roles
        if book is not None:
            book.check_start(parent, role, parent.depth + 1)
        elif role is not None:
            raise Refusal("this run has no roles; start a child without one")
        ps = self.settings_for(parent)
        given = grant(parent, caps or Caps(), Caps(ps.child_budget_usd, ps.child_budget_tokens,
                                                  ps.child_max_turns), ps,
                      (spent_tokens(self.env.spend.usage), self.env.spend.cost_usd),
                      parent.cap_turns if parent.cap_turns is not None else ps.max_turns)
        aid = agent_id or self.mint_agent_id()
        node = AgentNode(aid, None, kind=kind, depth=parent.depth + 1, parent=parent)
        node.cap_usd, node.cap_tokens, node.cap_turns = given.usd, given.tokens, given.turns
        node.settings = parent.settings
        node.role = parent.role
        if role is not None:
            if kind == "mnemon" and book.roles[role].kind != "mnemon":  # type: ignore[union-attr]
                raise Refusal(f"the {role} role is a fresh agent: it starts with its own "
                              "context, not a fork of yours")
            base = (parent.settings or self.settings) if kind == "mnemon" else self.settings
            node.settings, output = self._as_role(node, role, base, output)
            if kind == "fresh" and not mcp_servers:
                mcp_servers = node.settings.agent_mcp_servers
        node.mcp_servers = tuple(mcp_servers)
        node.output_type = typed = as_output_type(output)
        tpb = parent.tokens_per_byte
        own_prefix = role is not None and kind == "fresh"  # the role's system, model, tools
        ws_start = None
        if parent.workspace is not None:  # its parent's files at the fork, by reference
            node.workspace, ws_start = open_child(parent.workspace, aid)

        def birth() -> AgentLog:
            extra: dict[str, Any] = {}
            if node.mcp_servers or own_prefix:  # fresh: its own tools (the parent's, then its
                # own servers'; a role's: the role's)
                opening = self._started(aid, node.settings, node)
                extra["tools"] = opening.tools
                if own_prefix:
                    extra.update(system=opening.system, model=opening.model,
                                 provider=opening.provider,
                                 context_window=opening.context_window)
            if node.role is not None:
                extra["role"] = node.role
            extra["policy"] = self._policy_record(node)
            extra["sandbox"] = sandbox_record(node.settings or self.settings, node)
            if typed is not None:
                extra["output_type"] = typed.as_record()
            if given:
                extra["budget"] = given.record()
            alog = fork(self.root, parent.log, aid, kind=kind,  # type: ignore[arg-type]
                        task=task, depth=parent.depth + 1, tokens_per_byte=tpb,
                        fsync=self.settings.fsync, **extra)
            if ws_start is not None:
                node.workspace.rename(aid)  # the id another process's agent left free
                alog.append(ws_start)
            return alog

        self._taken.add(aid)
        if agent_id is None and not node.mcp_servers:
            for _ in range(8):
                try:
                    node.log = birth()
                    break
                except (FileExistsError, LogBusy, ForkError):
                    if not (self.root / agent_source(aid)).exists():
                        raise
                    # made at the same moment by another process of the run: the next id
                    aid = node.id = self.mint_agent_id()
            else:
                raise Refusal(f"no free agent id after {aid} (another process keeps taking "
                              "them)")
        else:
            self._born(node, birth)
        node.edit_hook = self.env.on_edit
        node.tokens_per_byte = tpb
        parent.children[aid] = node
        self.agents[aid] = self._live[aid] = node
        return node

    @staticmethod
    def _born(node: AgentNode, birth: Callable[[], AgentLog]) -> None:
        """Open the agent's log now, or — when it has MCP servers of its own — leave ``birth``
        for its loop to call once they have started (``loop.run_agent``)."""
        if node.mcp_servers:
            node.birth = birth
        else:
            node.log = birth()

    def resume_agent(self, agent_id: str, parent: AgentNode | None = None, *,
                     spend: bool | None = None,
                     mcp_servers: "tuple[McpServerSpec, ...] | None" = None) -> AgentNode:
        """Reopen an agent's log (torn tail moved aside, replayed through ``step``). Its turns
        so far count towards ``max_turns``; its usage and cost so far are read back from the
        log when ``spend`` (default: when the settings hold a budget), a second pass over it.
        ``mcp_servers`` are started again when it runs (default: a root's are the settings'
        ``agent_mcp_servers``; a child's, none — configuration with commands and secrets is
        never recorded, so the caller supplies it again)."""
        src = agent_source(agent_id)
        alog, _torn = AgentLog.resume(self.root / src, src, loader=self.loader,
                                      fsync=self.settings.fsync)  # type: ignore[arg-type]
        st = alog.ctx.started
        depth = (st.depth if st and st.depth is not None else
                 (parent.depth + 1 if parent else 0))
        node = AgentNode(agent_id, alog, kind=st.kind if st else None, depth=depth, parent=parent)
        node.edit_hook = self.env.on_edit
        node.tokens_per_byte = st.tokens_per_byte if st else None
        node.resumed = True
        if st is not None and st.budget is not None:  # its caps, from its log (0441)
            c = Caps.from_record(st.budget)
            node.cap_usd, node.cap_tokens, node.cap_turns = c.usd, c.tokens, c.turns
        if st is not None and st.output_type is not None:  # a typed agent stays typed
            node.output_type = OutputType.from_record(st.output_type)
        node.mcp_servers = tuple(
            mcp_servers if mcp_servers is not None else
            (self.settings.agent_mcp_servers if parent is None else ()))
        node.turns_taken = node.ctx.count(role="assistant", origin="own")
        node.requests = _answered(alog.path)
        if alog.ctx.workspace is not None:  # its files, from its log alone (0356)
            try:
                node.workspace = reopen(self.root, agent_id, read_history(alog.path),
                                        self.settings_for(node).workspace)
            except BaseException:
                alog.close()
                raise
        book = self.env.roles
        try:  # its ancestors' policy, from the logs: with or without its live parent (0305)
            node.lineage_policy = recorded_policy(self.root, st, book)
        except Refusal:
            alog.close()
            raise
        if st is not None and st.role is not None and book is not None and st.role in book.roles:
            base = (parent.settings or self.settings) if (
                parent is not None and node.kind == "mnemon") else self.settings
            node.settings, _ = self._as_role(node, st.role, base, None)
            if parent is not None and parent.role == st.role:
                node.budget_tokens = node.budget_usd = None  # counted in its parent's
            if mcp_servers is None and node.kind != "mnemon" and parent is not None:
                node.mcp_servers = tuple(node.settings.agent_mcp_servers)
        if st is not None and st.sandbox is not None:  # never wider than it started (0366)
            s_now = self.settings_for(node)
            node.settings = msgspec.structs.replace(s_now, sandbox=narrowed(
                msgspec.convert(st.sandbox, SandboxSettings), s_now.sandbox or SandboxSettings()))
        s = self.settings
        if parent is None:  # its ancestors' budgets, read from the logs (decision 0305)
            node.lineage_budgets = recorded_budgets(self.root, st, book, s)
        capped = any(n.cap_usd is not None or n.cap_tokens is not None
                     for n in _up(node))
        if spend or (spend is None and (any(b is not None for b in (
                s.budget_tokens, s.budget_usd, s.task_budget_tokens, s.task_budget_usd,
                node.budget_tokens, node.budget_usd)) or node.lineage_budgets or capped)):
            _restore_spend(self, node)
        if node.cap_usd is not None or node.cap_tokens is not None:
            node.spent_before = _ended_below(self, node)
        if parent is not None:
            parent.children[agent_id] = node
        self.agents[agent_id] = self._live[agent_id] = node
        self._taken.add(agent_id)
        return node

    def resume_run(self) -> list[AgentNode]:
        """Reopen every agent of the run root whose log has not ended, parents before children,
        each attached to its parent; return the roots to run. A resumed child starts inside its
        parent's nursery when the parent's loop begins, as it did the first time."""
        from ..lineage.tree import _first_started

        for aid in list_agents(self.root):
            aside = set_aside_unopened(self.root / agent_source(aid))
            if aside is not None:
                log.warning("agent creation interrupted: its log moved aside", agent=aid,
                            to=str(aside))
        opening: dict[str, SessionStarted | None] = {
            aid: _first_started(self.root / agent_source(aid)) for aid in list_agents(self.root)}
        order: list[str] = []
        seen: set[str] = set()

        def visit(aid: str) -> None:
            if aid in seen:
                return
            seen.add(aid)
            st = opening.get(aid)
            if st is not None and st.parent in opening:
                visit(st.parent)
            order.append(aid)

        for aid in sorted(opening, key=lambda a: (len(a), a)):
            visit(aid)
        roots: list[AgentNode] = []
        found: dict[str, list[str]] = {}  # parent → what its resume found of its children
        heard: dict[str, set[str]] = {}  # parent → the children whose end its log holds
        for aid in order:
            st = opening[aid]
            parent_id = st.parent if st is not None else None
            parent = self.agents.get(parent_id) if parent_id else None
            if parent_id and parent is None:
                continue  # its parent ended: nothing outlives its parent
            path = self.root / agent_source(aid)
            ended = _has_ended(path)
            if ended:
                if parent is not None and aid not in heard.setdefault(
                        parent.id, _heard(parent.log.path)):
                    found.setdefault(parent.id, []).append(f"{aid} ended {ended}")
                continue
            if parent is None:
                roots.append(self.resume_agent(aid))
                continue
            try:
                self.resume_agent(aid, parent=parent)
            except Exception as e:  # a child that cannot be reopened: its parent is told
                log.warning("child not resumed", agent=aid, error=str(e))
                found.setdefault(parent.id, []).append(
                    f"{aid} could not be resumed ({type(e).__name__}: {e})")
            else:
                found.setdefault(parent.id, []).append(f"{aid} was resumed and goes on")
        for pid, lines in found.items():  # told at its next request (docs/orchestrator.md)
            note(self.agents.get(pid), "[resumed] the run stopped and was resumed; your "
                 "children: " + "; ".join(lines) + ". agents_status shows them now.")
        return roots

    # ------------------------------------------------------------------ running

    async def run(self, node: AgentNode) -> AgentNode:
        """Run an agent (and, inside it, its children) to its end."""
        await run_agent(self.env, node)
        return node

    def start(self, node: AgentNode, nursery: trio.Nursery | None = None) -> None:
        """Run ``node``'s loop in ``nursery`` (default: the supervisor's) — the ``Spawner``'s
        "start it"."""
        target = nursery or self.nursery
        if target is None:
            raise RuntimeError("the supervisor is not open")
        target.start_soon(run_agent, self.env, node, name=f"agent {node.id}")

    async def spawn(self, node: AgentNode, nursery: trio.Nursery | None = None) -> None:
        """Start an agent like ``start``, and return once its log is open — after its own MCP
        servers have started (at most their ``startup_timeout_sec``) — so ``node.ctx`` can be
        read. An error before then (a fork refused) is raised here. A typed agent is typed when
        it is made (``new_root``/``new_child(…, output=…)``: its opening record holds the type)."""
        target = nursery or self.nursery
        if target is None:
            raise RuntimeError("the supervisor is not open")
        await target.start(run_agent, self.env, node, name=f"agent {node.id}")
        if node.log is None:
            raise Refusal(f"agent {node.id} ended before its log opened ({node.reason})")

    async def ask(self, task: str, agent_id: str | None = None, *,
                  mcp_servers: "tuple[McpServerSpec, ...] | None" = None,
                  output: Any = None) -> AgentNode:
        """Run a root agent on ``task`` to its end; ``mcp_servers`` are its own (``new_root``).
        With ``output`` (an output type, as ``new_root`` takes it) its answer is typed: read
        ``node.output`` (the parsed JSON; None unless it ended ``done``)."""
        return await self.run(self.new_root(task, agent_id, mcp_servers=mcp_servers,
                                            output=output))

    async def synod(self, parent: AgentNode, question: str, *, n: int, reduce: str = "vote",
                    stances: list[str] | None = None, output: Any = None,
                    apply: str | None = None, caps: Caps | None = None) -> SynodResult:
        """Fork ``n`` mnemon children of ``parent`` at one turn boundary, each given
        ``question`` (and its stance, if any), run them and wait for all; returns a
        ``synod.SynodResult`` (the vote, or every answer for a merge). With ``output`` (an
        output type) every child answers in it and a vote is taken field by field. With
        ``apply="winner"`` the winning member's file changes are merged into ``parent``'s
        workspace (docs/workspace.md, "Synods over changes"). ``caps``: each member's
        (``caps.Caps``; all ``n`` set aside from what ``parent`` has left, or refused).

        Cancellation: cancelling the caller cancels the children.
        """
        return await run_synod(self.env, parent, question, n=n, reduce=reduce, stances=stances,
                               output=as_output_type(output), apply=apply, caps=caps)

    # ------------------------------------------------------------------ live operations

    def clear(self, agent_id: str) -> None:
        """``/clear``: withdraw every turn from the agent's context and cancel its descendants."""
        from ..session.records import Cleared

        node = self.agents[agent_id]
        node.log.append(Cleared())
        for child in node.children.values():
            child.scope.cancel()

    def rewind(self, agent_id: str, to: int) -> None:
        """``/rewind``: withdraw every turn with id > ``to``; an agent with a workspace finds
        its files as they stood after turn ``to`` (docs/workspace.md)."""
        from ..session.records import Rewound

        node = self.agents[agent_id]
        node.log.append(Rewound(to=to))  # refused (nothing written) into a residue
        if node.workspace is not None:
            rec = ws_rewind(node.workspace, node.log.path, to)
            if rec is not None:
                node.log.append(rec)

    def steer(self, agent_id: str, text: str, *, by: str = "user") -> dict[str, Any]:
        """A message to a running agent (chat's ``/steer``, ``POST /v1/agents/{id}/steer``):
        its next request carries it (``delegation.send``); refused naming the state."""
        node = self.agents.get(agent_id)
        if node is None:
            raise Refusal(f"there is no agent {agent_id!r} running in this process")
        return send(node, text, by=by)

    def status(self, agent_id: str) -> dict[str, Any]:
        """An agent as ``agents_status`` shows it (``delegation.status``)."""
        return status_of(self.agents[agent_id], self.env.approvals)

    def cancel(self, agent_id: str) -> None:
        self.agents[agent_id].scope.cancel()

    def close(self) -> None:
        from .logs import flush

        for node in self.agents.values():
            if node.log is not None:  # an agent cancelled before its log opened has none
                node.log.close(checkpoint=True)  # a clean stop: the next resume need not refold
        flush()  # the run's log lines are buffered, not flushed line by line


def sandbox_record(settings: Settings, node: AgentNode) -> dict[str, Any] | None:
    """What an agent's opening record says of its sandbox: the settings its shell runs under,
    for an agent with a workspace (the shell is offered to no other), else None."""
    if node.workspace is None:
        return None
    return msgspec.to_builtins(settings.sandbox or SandboxSettings())


def _up(node: AgentNode | None):
    while node is not None:
        yield node
        node = node.parent


def _ended_below(sup: Supervisor, node: AgentNode) -> tuple[int, float]:
    """What the descendants of a reopened capped agent that have ended spent, read from their
    logs: counted against its cap beside the live ones (those are reopened and count their
    own)."""
    from ..lineage.tree import _first_started
    from .costs import agent_cost

    kids: dict[str, list[str]] = {}
    for aid in list_agents(sup.root):
        opening = _first_started(sup.root / agent_source(aid))
        if opening is not None and opening.parent:
            kids.setdefault(opening.parent, []).append(aid)
    s = sup.settings_for(node)
    used, usd, todo = 0, 0.0, list(kids.get(node.id, ()))
    while todo:
        aid = todo.pop()
        todo.extend(kids.get(aid, ()))
        path = sup.root / agent_source(aid)
        if not _has_ended(path):
            continue
        c = agent_cost(path, aid, price_as=s.price_model or s.model, ttl=s.cache_ttl)
        used += c.input_tokens + c.output_tokens + c.cache_read_tokens + c.cache_write_tokens
        usd += c.cost_usd
    return used, usd


def _restore_spend(sup: Supervisor, node: AgentNode) -> None:
    """A resumed agent's usage and cost so far, read back from its own log (``mnemon cost``'s
    reading), so that budgets count what it did before the interruption."""
    from .costs import agent_cost

    s = sup.settings_for(node)
    spent = agent_cost(node.log.path, node.id, price_as=s.price_model or s.model,
                       ttl=s.cache_ttl)
    node.usage = Usage(input_tokens=spent.input_tokens, output_tokens=spent.output_tokens,
                       cache_read_tokens=spent.cache_read_tokens,
                       cache_write_tokens=spent.cache_write_tokens)
    node.cost_usd = spent.cost_usd


def set_aside_unopened(path: Path) -> Path | None:
    """A log cut before its task prompt is recorded (a crash while the agent was being created:
    no whole record, or only its opening) holds no turn and nothing points into it. It is moved
    to ``<run root>/incomplete/<agent>-<ms>.jsonl`` — kept, not deleted — under the writer's lock,
    so the run resumes (or a job creates the agent again) without it. Returns where it went."""
    import fcntl
    import os
    import time

    from ..session.errors import LogBusy
    from ..session.log import iter_lines

    for n, (_, line) in enumerate(iter_lines(path)):
        raw = bytes(line)
        # the opening is SessionStarted (and a child's Inherited): a log with any other line,
        # or a line that is not a record, was opened whole and then damaged — not set aside
        # here, but refused by its fold naming the line
        if b'"t":"UserPrompt"' in raw or n >= 2 or not (
                raw.startswith(b'{"t":"SessionStarted"') or raw.startswith(b'{"t":"Inherited"')):
            return None
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LogBusy(f"{path} is open for writing elsewhere (one writer per log)") from None
        root = path.parents[2]
        aside = root / "incomplete" / f"{path.parent.name}-{int(time.time() * 1e3)}.jsonl"
        aside.parent.mkdir(exist_ok=True)
        os.rename(path, aside)
    finally:
        os.close(fd)
    try:
        path.parent.rmdir()
    except OSError:  # a torn tail set aside beside it: a directory with no log is no agent
        pass
    return aside


def _answered(path: Path) -> int:
    """The provider answers a log records: its ``ProviderCall`` lines with usage and no error
    (a batch's submission has no usage). A raw scan: the writer puts the tag first, and a key
    appears unescaped only as a key."""
    from ..session.log import iter_lines

    n = 0
    for _, line in iter_lines(path):
        head = bytes(line[:24])
        if b"ProviderCall" in head:
            raw = bytes(line)
            if b'"usage":{' in raw and b'"error":' not in raw:
                n += 1
    return n


#: an outcome as a tool result records it (``AgentNode.outcome`` inside a result's text)
_OUTCOME = re.compile(rb'\{\\"agent\\":\\"([A-Za-z0-9_.-]{1,64})\\",\\"kind\\":\\"\w{1,16}\\",'
                      rb'\\"state\\":\\"(?:ended|failed|cancelled)\\"')


def _heard(parent_log: Path) -> set[str]:
    """The agents whose end a parent's log records (an ``agents_wait``, ``agents_cancel`` or
    synod result holding the outcome): one linear scan of its bytes at resume. A child that
    ended without its parent hearing of it — the parent was killed inside its wait — is what
    a resumed parent is told."""
    try:
        with open(parent_log, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return {x.group(1).decode() for x in _OUTCOME.finditer(m)}
    except (OSError, ValueError):  # an empty file cannot be mapped
        return set()


def _has_ended(path: Path) -> str | None:
    """Why a log ended, when its last ``SessionEnded`` is not followed by a ``SessionResumed``
    (an ended agent given a new prompt reopens), else None: a raw scan, decoding only the
    lines that name them. A line among them that is not a record is refused naming it
    (``LogRefused``)."""
    from ..session.errors import LogRefused
    from ..session.log import iter_lines
    from ..session.records import DECODE_ERRORS, SessionEnded, SessionResumed, decode

    ended: str | None = None
    for n, (off, line) in enumerate(iter_lines(path), 1):
        head = bytes(line[:32])  # the writer puts the tag first; a memoryview has no substring test
        try:
            if b"SessionEnded" in head and isinstance(rec := decode(line), SessionEnded):
                ended = rec.reason or "?"
            elif ended and b"SessionResumed" in head and isinstance(decode(line), SessionResumed):
                ended = None
        except DECODE_ERRORS as e:
            raise LogRefused(str(path), n, f"not a record: {e}", off) from None
    return ended


@asynccontextmanager
async def open_supervisor(root: Path, provider: Provider, settings: Settings, *,
                          user_tools: Sequence[Tool] | None = None, started_by: str = "mnemon",
                          provider_name: str | None = None, roles: Any = None,
                          role: str | None = None) -> AsyncIterator[Supervisor]:
    """A supervisor with its nursery; leaving the block waits for (or cancels) every agent.
    ``roles`` (a ``roles.Roles`` or a dict of role tables) and ``role`` (the root agents')
    replace the settings' (docs/roles.md)."""
    if roles is not None or role is not None:
        settings = msgspec.structs.replace(
            settings, roles=as_roles(roles if roles is not None else settings.roles, root=role))
    create_run_root(Path(root), started_by)
    if not structlog.is_configured():  # a library caller: log to the run root, never stdout
        from .logs import configure

        configure(Path(root))
    async with _open_mcp(Path(root), settings) as mcp_tools:  # outlives every agent of the run
        sup = Supervisor(Path(root), provider, settings,
                         user_tools=[*(user_tools or []), *mcp_tools], provider_name=provider_name)
        try:
            async with trio.open_nursery() as nursery:
                sup.nursery = nursery
                yield sup
        finally:
            sup.close()
            if sup.env.roles is not None:  # the providers the roles built for this run
                with trio.CancelScope(shield=True):
                    await sup.env.roles.aclose()


@asynccontextmanager
async def _open_mcp(root: Path, settings: Settings) -> AsyncIterator[list[Any]]:
    """The run's MCP servers' tools (none, and no SDK imported, when none are configured)."""
    async with open_servers(settings.mcp_servers, root / "mcp") as tools:
        yield tools
