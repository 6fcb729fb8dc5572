"""``mnemon mcp RUN_ROOT --agents``: delegation from another harness — the MCP server also
starts agents, reads their status, sends them messages, waits for them and cancels them
(docs/mcp.md, "Delegating to mnemon agents").

A supervisor lives inside the MCP server's process for the server's life (its Trio nursery),
with the run's provider, policy, roles and budgets as ``mnemon serve`` and ``ask`` take them on
the command line. A caller outside the run is no agent: what it starts is a root agent (or,
naming a running ``parent``, that agent's child, its caps split from the parent's as
``agents_start`` splits them); a message it sends is a person's (``Steering`` by ``user``).
What the agents wrote is read back through the door's tools the same server serves
(``transcript_index``, ``transcript_read``, ``transcript_grep``), whole.

The tools answer compact JSON, and refuse (an error result, one line) what they cannot do:
an agent this process did not start, a message to one that has ended, caps that are not
positive numbers, a parent that has less left than asked.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import trio

from ...errors import UserError
from ...session.errors import Refusal
from ..caps import Caps, caps_record
from ..delegation import MESSAGE_MAX_BYTES
from ..projection import project_first_request
from .door import DoorError

if TYPE_CHECKING:
    from ..node import AgentNode
    from ..supervisor import Supervisor

__all__ = ["AGENT_TOOLS", "AgentDesk", "WAIT_DEFAULT_S", "WAIT_MAX_S"]

#: how long ``agents_wait`` waits when not told, and the most it may be told (an MCP host has a
#: timeout of its own per call: a caller that waits longer asks again)
WAIT_DEFAULT_S = 60.0
WAIT_MAX_S = 3600.0

_CAPS = {
    "budget_usd": {"type": "number", "exclusiveMinimum": 0,
                   "description": "optional: dollars it (with any children it starts) may spend"},
    "budget_tokens": {"type": "integer", "minimum": 1,
                      "description": "optional: tokens it (with its children) may spend"},
    "max_turns": {"type": "integer", "minimum": 1, "description": "optional: turns it may take"},
}
_IDS = {"type": "array", "items": {"type": "string"}, "maxItems": 1000}

#: name → (description, input schema), after the door's in ``tools/list``
AGENT_TOOLS: dict[str, tuple[str, dict]] = {
    "agents_start": (
        "Start a mnemon agent on a task; answers at once with its id, its caps and the "
        "projected cost of its first request. It runs in this server's run (its provider, "
        "policy, roles and budgets); read what it wrote with the transcript tools. With "
        "`parent` (a running agent of this server) it is that agent's child: `mnemon` inherits "
        "its context, `fresh` starts empty; without one it is a new root agent (`fresh`).",
        {"type": "object", "properties": {
            "task": {"type": "string", "minLength": 1, "description": "its first prompt, verbatim"},
            "kind": {"type": "string", "enum": ["mnemon", "fresh"]},
            "role": {"type": "string", "description": "a named role of the run (docs/roles.md)"},
            "parent": {"type": "string",
                       "description": "optional: a running agent to start it as the child of"},
            **_CAPS},
         "required": ["task"], "additionalProperties": False}),
    "agents_status": (
        "The agents this server runs (or the ones named) now: state, turns, tokens, cost, "
        "caps beside spend, the tools each is in, approvals it waits on, messages it was sent, "
        "the last line it wrote. Cheap: ask whenever you like.",
        {"type": "object", "properties": {"agents": _IDS}, "additionalProperties": False}),
    "agents_send": (
        "Send a message to a running agent: its next request carries it (steer it, correct "
        "it, give it what it lacks). An agent that has ended is refused by name.",
        {"type": "object", "properties": {
            "agent": {"type": "string"},
            "text": {"type": "string", "minLength": 1, "maxLength": MESSAGE_MAX_BYTES}},
         "required": ["agent", "text"], "additionalProperties": False}),
    "agents_wait": (
        "Wait until the agents named (default: every agent this server started that still "
        f"runs) have ended, or timeout_s (default {WAIT_DEFAULT_S:g}, at most {WAIT_MAX_S:g}) "
        "has passed; answers each one's state, final answer and cost, and whether the wait "
        "timed out.",
        {"type": "object", "properties": {
            "agents": _IDS,
            "timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": WAIT_MAX_S}},
         "additionalProperties": False}),
    "agents_cancel": (
        "Cancel a running agent (and its descendants); answers its outcome.",
        {"type": "object", "properties": {"agent": {"type": "string"}},
         "required": ["agent"], "additionalProperties": False}),
}


def _arg(args: dict, name: str, kind: Any, default: Any = ..., *, tool: str) -> Any:
    v = args.get(name, default)
    if v is ...:
        raise DoorError(f"{tool} needs {name!r}")
    if v is None and default is None:
        return None
    if isinstance(v, bool) or not isinstance(v, kind):
        raise DoorError(f"{tool}: {name!r} is of the wrong type ({type(v).__name__})")
    return v


def _caps(args: dict) -> Caps:
    usd = _arg(args, "budget_usd", (int, float), None, tool="agents_start")
    tok = _arg(args, "budget_tokens", int, None, tool="agents_start")
    turns = _arg(args, "max_turns", int, None, tool="agents_start")
    for name, v in (("budget_usd", usd), ("budget_tokens", tok), ("max_turns", turns)):
        if v is not None and (v <= 0 or not math.isfinite(v)):
            raise DoorError(f"{name} must be a positive number, not {v!r}")
    return Caps(float(usd) if usd is not None else None, tok, turns)


def _ids(args: dict, tool: str) -> list[str] | None:
    ids = _arg(args, "agents", list, None, tool=tool)
    if ids is not None and not all(isinstance(a, str) for a in ids):
        raise DoorError(f"{tool}: 'agents' must be a list of agent ids")
    return ids


class AgentDesk:
    """The agents tools over one open supervisor (``open_supervisor``'s, for the server's
    life). Every call runs on the event loop that drives the agents: the supervisor's tables
    are read and changed only there."""

    def __init__(self, sup: "Supervisor"):
        self.sup = sup
        self.started: list[str] = []  # the agents started through this server, in order

    async def call(self, name: str, args: Any) -> Any:
        if name not in AGENT_TOOLS:
            raise DoorError(f"unknown tool {name!r}")
        args = args or {}
        if not isinstance(args, dict):
            raise DoorError(f"{name} takes a JSON object")
        extra = sorted(set(args) - set(AGENT_TOOLS[name][1]["properties"]))
        if extra:
            raise DoorError(f"{name} takes no {', '.join(map(repr, extra))}")
        try:
            out = getattr(self, name)(args)
            return await out if hasattr(out, "__await__") else out
        except (Refusal, UserError) as e:
            if isinstance(e, DoorError):
                raise
            raise DoorError(" ".join(str(e).split())) from None

    # ------------------------------------------------------------------ the tools

    def agents_start(self, args: dict) -> dict[str, Any]:
        task = _arg(args, "task", str, tool="agents_start")
        kind = _arg(args, "kind", str, None, tool="agents_start")
        role = _arg(args, "role", str, None, tool="agents_start")
        parent_id = _arg(args, "parent", str, None, tool="agents_start")
        caps = _caps(args)
        if not task.strip():
            raise DoorError("an agent's task may not be empty")
        if kind not in (None, "mnemon", "fresh"):
            raise DoorError(f"kind is mnemon or fresh, not {kind!r}")
        sup = self.sup
        if parent_id is not None:
            parent = self._node(parent_id)
            if parent.state != "running" or parent.nursery is None:
                raise DoorError(f"agent {parent_id} is not running ({parent.state}): a child "
                                "lives inside its running parent")
            own = None
            if role is not None and sup.env.roles is not None:  # a role's kind is its own
                r = sup.env.roles.get(role)
                own = r.kind if r is not None else None
                if own is not None and kind is not None and kind != own:
                    raise DoorError(f"the {role} role is a {own} agent, not {kind}")
            node = sup.new_child(parent, task, own or kind or "mnemon", role=role, caps=caps)
            sup.start(node, parent.nursery)
            projected = project_first_request(sup.env, parent, node)
        else:
            if kind == "mnemon":
                raise DoorError("a new root agent starts empty (fresh): name a running "
                                "'parent' for a mnemon child that inherits its context")
            node = sup.new_root(task, role=role, caps=caps)
            sup.start(node)
            projected = _project_root(sup, node)
        self.started.append(node.id)
        out: dict[str, Any] = {"agent": node.id, "kind": node.kind, "state": node.state}
        if node.parent is not None:
            out["parent"] = node.parent.id
        if node.role is not None:
            out["role"] = node.role
        if projected:
            projected = dict(projected)
            out["projected_usd"] = projected.pop("usd")
            out["projected"] = projected
        given = caps_record(node)
        if given is not None:
            out["budget"] = given
        return out

    def agents_status(self, args: dict) -> dict[str, Any]:
        ids = _ids(args, "agents_status")
        targets = sorted(self.sup.agents, key=lambda a: (len(a), a)) if ids is None else ids
        for a in targets:
            self._node(a)
        return {"agents": [self.sup.status(a) for a in targets]}

    def agents_send(self, args: dict) -> dict[str, Any]:
        aid = _arg(args, "agent", str, tool="agents_send")
        text = _arg(args, "text", str, tool="agents_send")
        self._node(aid)
        return self.sup.steer(aid, text, by="user")

    async def agents_wait(self, args: dict) -> dict[str, Any]:
        ids = _ids(args, "agents_wait")
        timeout = _arg(args, "timeout_s", (int, float), None, tool="agents_wait")
        if timeout is not None and not 0 < timeout <= WAIT_MAX_S:
            raise DoorError(f"timeout_s is more than 0 and at most {WAIT_MAX_S:g}, "
                            f"not {timeout!r}")
        if ids is None:
            targets = [self.sup.agents[a] for a in self.started
                       if self.sup.agents[a].state == "running"]
        else:
            targets = [self._node(a) for a in ids]
        with trio.move_on_after(WAIT_DEFAULT_S if timeout is None else timeout) as scope:
            for t in targets:
                await t.done.wait()
        return {"agents": [t.outcome() for t in targets], "timed_out": scope.cancelled_caught}

    async def agents_cancel(self, args: dict) -> dict[str, Any]:
        aid = _arg(args, "agent", str, tool="agents_cancel")
        node = self._node(aid)
        if node.state != "running":
            why = f" ({node.reason})" if node.reason else ""
            raise DoorError(f"agent {aid} is not running: it has {node.state}{why}")
        node.scope.cancel()
        with trio.move_on_after(10):
            await node.done.wait()
        return node.outcome()

    # ------------------------------------------------------------------ the end

    async def close(self, grace_s: float = 10.0) -> None:
        """Cancel every agent still running (each records its end, ``cancelled``) and wait
        for them: the server is going away, and nothing outlives it."""
        running = [n for n in self.sup.agents.values() if n.state == "running"]
        for n in running:
            n.scope.cancel()
        with trio.move_on_after(grace_s):
            for n in running:
                await n.done.wait()

    def _node(self, aid: str) -> "AgentNode":
        node = self.sup.agents.get(aid)
        if node is None:
            known = ", ".join(sorted(self.sup.agents, key=lambda a: (len(a), a))) or "none"
            raise DoorError(f"no agent {aid!r} runs in this server (its agents: {known}); an "
                            "agent of the run that ran elsewhere is read with the transcript "
                            "tools")
        return node


def _project_root(sup: "Supervisor", node: "AgentNode") -> dict[str, Any]:
    """What a new root's first request will cost: its whole context written to the cache (it
    shares none), on the run's cache model and prices — ``projection``'s arithmetic with no
    parent to read from; the output, not known yet, counted as none."""
    from ...providers.cache import CacheModel
    from ...providers.prices import cost_usd
    from ..projection import _cache_model, _request
    from ..weighing import priced_as

    if node.log is None:
        return {}
    env = sup.env
    s = env.settings_for(node)
    cm: CacheModel = _cache_model(env, node, s.cache_ttl)
    u = cm.usage_for(_request(env, node, False), 0, 1.0, model=s.model)
    return {"usd": round(cost_usd(u, priced_as(s, s.model), s.cache_ttl), 6),
            "input_tokens": u.input_tokens, "cache_read_tokens": u.cache_read_tokens,
            "cache_write_tokens": u.cache_write_tokens, "output_tokens": u.output_tokens}
