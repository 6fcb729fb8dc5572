"""A run's roles at work (``RoleBook``): each role's provider, built once per run and shared by
its agents; each role's settings; the tools each agent is offered; the delegation check.

Two roles matter for an agent (docs/roles.md):

- its own (``node.role``): what it may start (``may_start``), its policy, output type, budget
  and depth cap;
- its **prefix role** (``prefix_role``): the role of the agent its context descends from — up
  through mnemon children to the nearest root or fresh child. It says which provider, model,
  system prompt and tools the agent's requests carry, so that a mnemon child's prefix stays
  byte-identical to its parent's (a mnemon role may set none of those: ``roles.spec``).

An agent without a role (``node.role`` None) in a run with roles may start none of them and is
offered the run's tools, as in a run without roles.
"""

from __future__ import annotations

import fnmatch
import os
from typing import TYPE_CHECKING, Any

import msgspec

from ...providers.base import ToolDef
from ...providers.errors import ProviderConfigError
from ...providers.select import KEY_VARIABLES, make_provider
from ...session.errors import Refusal
from ...session.records import compact
from ..policy import combine
from ..sandbox.spec import SandboxSettings, narrowed
from ..settings import Settings
from ..tools.base import ToolBase, ToolError, ToolInputError
from ..tools.builtin import CAPS_SCHEMA, caps_of
from ..tools.context import ToolContext
from .spec import Role, Roles, RolesError, check_tools

if TYPE_CHECKING:
    from ...providers.base import Provider
    from ..env import AgentEnv
    from ..node import AgentNode

__all__ = ["AskTool", "RoleBook", "check_providers", "prefix_node"]


def prefix_node(node: "AgentNode") -> "AgentNode":
    """The agent whose context ``node``'s descends from (itself unless a mnemon child)."""
    while node.kind == "mnemon" and node.parent is not None:
        node = node.parent
    return node


def check_providers(roles: Roles, run_provider: str | None, env: Any = None) -> None:
    """Refuse, before anything runs, a role whose own provider has no key (the provider is
    built when the run opens; a missing key is named here, in one line, instead)."""
    env = os.environ if env is None else env
    for role in roles.roles.values():
        name = role.provider
        if name is None or (name == run_provider and role.base_url is None):
            continue
        var = KEY_VARIABLES.get(name)
        # as make_provider: an OpenAI-style server of one's own may go without a key
        if var and not env.get(var) and not (name.startswith("openai") and role.base_url):
            raise RolesError(f"{roles.source}: role {role.name}: {var} is not set (needed by "
                             f"provider {name})")


class AskTool(ToolBase):
    """``ask_<role>``: start an agent of the role on a task, wait for it, and answer with its
    answer — the JSON of its typed output when the role has an output type (agent-as-tool).
    ``shared``: several delegations of one response run side by side. The gate judges a call
    of it as the ``agents_start`` of that role it amounts to (``starts``, decision 0307)."""

    mode = "shared"

    def __init__(self, role: Role):
        self.role = role.name
        self.kind = role.kind
        self.name = f"ask_{role.name}"
        typed = " — its answer is JSON of the role's output type" if role.output else ""
        self.description = (f"Delegate a task to an agent of the {role.name} role "
                            f"({role.blurb()}): it starts on the task (its first prompt, "
                            f"verbatim), works to its end, and its final answer is this tool's "
                            f"result{typed}.")
        self.schema = {"type": "object", "properties": {
            "task": {"type": "string", "description": "the task, complete: the agent starts "
                     "with no other context"}, **CAPS_SCHEMA}, "required": ["task"],
            "additionalProperties": False}
        self._definition = ToolDef(self.name, self.description, self.schema)

    def starts(self, input: dict[str, Any]) -> dict[str, Any]:
        out = {"task": input.get("task"), "role": self.role, "kind": self.kind}
        return {k: v for k, v in out.items() if v is not None}

    async def call(self, ctx: ToolContext, input: Any) -> str:
        task = input.get("task") if isinstance(input, dict) else None
        if not isinstance(task, str) or not task.strip():
            raise ToolInputError(f"{self.name} needs a task (a non-empty string)")
        child = ctx.start_child(task, ctx.role_kind(self.role) or "fresh", role=self.role,
                                caps=caps_of(input, self.name))
        await ctx.wait_blocked(child, self.name)
        if child.reason != "done":
            raise ToolError(f"agent {child.id} ({self.role}) ended {child.reason}"
                            + (f"; its last text: {child.answer}" if child.answer else ""))
        if child.output_type is not None:
            return compact(child.output).decode("utf-8")
        return child.answer or ""


class RoleBook:
    """The roles of one run: built once when the run opens (``Supervisor``), read by the env."""

    def __init__(self, roles: Roles, settings: Settings, provider: "Provider",
                 provider_name: str | None, *, tools: "dict[str, Any] | None" = None,
                 make: Any = make_provider):
        """``tools``: the run's tool table as it opens — a role naming a tool not in it is
        refused (``spec.check_tools``)."""
        if tools is not None:
            check_tools(roles, frozenset(tools))
        self.roles = roles
        self.run_settings = settings
        self.run_provider = provider
        self.run_provider_name = provider_name
        self._providers: dict[str, "Provider"] = {}  # role → provider
        self._names: dict[str, str | None] = {}  # role → provider name
        self.built: list["Provider"] = []  # the providers this book made (closed with the run)
        by_key: dict[tuple[str, str | None], "Provider"] = {}
        for role in roles.roles.values():
            name = role.provider or provider_name
            if role.provider is None and role.base_url is None or (
                    name == provider_name and role.base_url is None):
                self._providers[role.name] = provider
                self._names[role.name] = provider_name
                continue
            key = (name or "scripted", role.base_url)
            if key not in by_key:
                try:
                    by_key[key] = make(name or "scripted", model=role.model,
                                       base_url=role.base_url, max_tokens=settings.max_tokens,
                                       cache_ttl=settings.cache_ttl)
                except ProviderConfigError as e:
                    raise RolesError(f"{roles.source}: role {role.name}: {e}") from None
                self.built.append(by_key[key])
            self._providers[role.name] = by_key[key]
            self._names[role.name] = name
        self._asks = {name: AskTool(role) for name, role in roles.roles.items()}
        self._settings: dict[tuple[str, int], tuple[Settings, Settings]] = {}
        self._tables: dict[str, tuple[dict, dict, int]] = {}
        self._builtins: dict[str, list[ToolDef]] = {}

    def get(self, name: str) -> Role | None:
        """The role of that name, or None."""
        return self.roles.roles.get(name)

    # ------------------------------------------------------------------ per agent

    def prefix_role(self, node: "AgentNode | None") -> str | None:
        return prefix_node(node).role if node is not None else None

    def provider_for(self, node: "AgentNode | None") -> "Provider":
        role = self.prefix_role(node)
        return self._providers.get(role, self.run_provider) if role else self.run_provider

    def provider_name_for(self, node: "AgentNode | None") -> str | None:
        role = self.prefix_role(node)
        return self._names.get(role, self.run_provider_name) if role else \
            self.run_provider_name

    def settings_for_role(self, name: str, base: Settings) -> Settings:
        """An agent of role ``name``: ``base`` (the run's for a fresh agent, its parent's for a
        mnemon one) with what the role sets; its policy narrows ``base``'s."""
        key = (name, id(base))
        hit = self._settings.get(key)
        if hit is not None and hit[0] is base:
            return hit[1]
        role = self.roles[name]
        over: dict[str, Any] = {}
        if role.system is not None:
            over["system"] = role.system
        if role.model is not None:
            over["model"] = role.model
            over["price_model"] = None  # priced as its own model
        for key_, field in (("context_window", "context_window"), ("keep", "keep"),
                            ("max_turns", "max_turns"), ("child_budget_usd", "child_budget_usd"),
                            ("child_budget_tokens", "child_budget_tokens"),
                            ("child_max_turns", "child_max_turns")):
            v = getattr(role, key_)
            if v is not None:
                over[field] = v
        if role.policy is not None:
            over["tool_policy"] = combine(base.tool_policy, role.policy)
        if role.sandbox is not None:  # a role only narrows its caller's sandbox
            over["sandbox"] = narrowed(base.sandbox or SandboxSettings(), role.sandbox)
        if role.kind == "fresh" and role.mcp:
            over["agent_mcp_servers"] = tuple(role.mcp)
        out = msgspec.structs.replace(base, **over) if over else base
        self._settings[key] = (base, out)
        return out

    def table_for(self, node: "AgentNode | None", table: dict[str, Any],
                  run_table: bool) -> dict[str, Any]:
        """The tools the agent is offered beyond the built-ins: ``table`` (the run's, then its
        lineage's own MCP servers') narrowed to its prefix role's ``tools``, with that role's
        own user tools and an ``ask_<role>`` per role it may start. ``run_table``: ``table`` is
        the run's own (the result is then remembered)."""
        name = self.prefix_role(node)
        if name is None or name not in self.roles:
            return table
        if run_table:
            hit = self._tables.get(name)
            if hit is not None and hit[0] is table and len(hit[0]) == hit[2]:
                return hit[1]
        role = self.roles[name]
        if role.tools is None and not role.user_tools and not role.may_start:
            return table
        if role.tools is None:
            out = dict(table)
        else:
            out = {n: t for n, t in table.items()
                   if any(fnmatch.fnmatchcase(n, g) for g in role.tools)}
        for t in role.user_tools:
            out[t.name] = t
        for other in role.may_start:
            out[f"ask_{other}"] = self._asks[other]
        if run_table:
            self._tables[name] = (table, out, len(table))
        return out

    def builtins_for(self, node: "AgentNode | None", builtin: list[ToolDef]) -> list[ToolDef]:
        """The built-ins, ``agents_start`` taking a ``role`` among those the prefix role may
        start (each named with what it is for); unchanged for an agent that may start none."""
        name = self.prefix_role(node)
        if not builtin or name is None or name not in self.roles or \
                not self.roles[name].may_start:
            return builtin
        hit = self._builtins.get(name)
        if hit is not None:
            return hit
        may = self.roles[name].may_start
        told = "; ".join(f"{r}: {self.roles[r].blurb()}" for r in may)
        out = []
        for d in builtin:
            if d.name == "agents_start":
                schema = {**d.input_schema, "properties": {
                    **d.input_schema["properties"],
                    "role": {"type": "string", "enum": list(may),
                             "description": f"start an agent of this role (its own model, "
                                            f"tools, rules and output; its kind is the "
                                            f"role's): {told}"}}}
                d = ToolDef(d.name, d.description + " With a role, the child is that role's "
                            "specialist.", schema)
            out.append(d)
        self._builtins[name] = out
        return out

    # ------------------------------------------------------------------ delegation

    def check_start(self, caller: "AgentNode", role: str | None, depth: int) -> Role | None:
        """May ``caller`` start an agent of ``role`` at ``depth``? Returns the role (None: the
        child inherits the caller's role), or raises ``Refusal`` naming the allowed roles."""
        mine = self.roles.roles.get(caller.role) if caller.role else None
        allowed = list(mine.may_start) if mine is not None else []
        if role is not None:
            if role not in allowed:
                why = (f"there is no role {role!r}" if role not in self.roles else
                       f"{'the ' + caller.role + ' role' if caller.role else 'an agent without a role'} "
                       f"may not start {role!r}")
                raise Refusal(f"{why}; you may start: "
                              f"{', '.join(allowed) if allowed else 'no role'}")
            target = self.roles[role]
        else:
            target = mine
        if target is not None and target.max_depth is not None and depth > target.max_depth:
            raise Refusal(f"an agent of the {target.name} role runs at depth {target.max_depth} "
                          f"at most; this one would be at depth {depth}")
        return target if role is not None else None

    async def aclose(self) -> None:
        for p in self.built:
            close = getattr(p, "aclose", None)
            if close is not None:
                await close()
