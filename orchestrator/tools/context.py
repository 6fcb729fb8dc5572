"""``ToolContext``: what one tool call is handed — the calling agent, narrowly.

A call gets the agent's id, its role and depth, its settings, its log, its door, its cancel
scope and the call's own id and name; what it may start (children, through the run's spawner,
within the run's limits); and, for the built-ins that act on the agent's context, a few methods
that do exactly that (``survey``, ``evict``, ``mark``). Never the supervisor, never the run's
whole environment: a tool that needs more of the harness than this is a harness change, made
here, in the open (openai-agents' ``tool_context.py`` is the model; STYLE.md §6).

A context is made per call (``table.ToolTable.call``); it holds the agent environment and node
privately, and nothing a tool is handed lets it reach past them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import trio

from ...session.context import Context, check_note
from ...session.door import Door
from ...session.errors import Refusal
from ...session.records import Evicted, Marked, Residue
from ...session.sweep import FILE_POINTER
from ..delegation import send
from ..delegation import status as status_of
from ..projection import project_first_request
from ..weighing import sweep_gate, sweep_pending
from .survey import survey

if TYPE_CHECKING:
    from ...session.agentlog import AgentLog
    from ..caps import Caps
    from ..env import AgentEnv
    from ..node import AgentNode
    from ..settings import Settings
    from ..synod import SynodResult
    from ..workspace.handle import Workspace

__all__ = ["ToolContext"]


class ToolContext:
    """The calling agent as one tool call sees it.

    - ``agent``: its id; ``role``: its named role (or None); ``depth``: 0 for a root;
    - ``call_id`` and ``tool``: the call's id and the tool's name;
    - ``settings``: the agent's own settings (frozen for its run);
    - ``log``: its append-only log (``AgentLog``); ``context``: its context table;
    - ``cancel_scope``: the agent's — cancelling it ends the agent (and this call);
    - ``door(agent=None)``: the transcript door on it or one of its descendants;
    - ``descendant(id)``, ``descendants()``, ``children()``: the agents below it;
    - ``start_child(task, kind, role, caps)``: a child, started in the agent's own nursery;
      ``project(child)``: what its first request will cost;
    - ``status(agents)``, ``send(agent, text)``, ``decide(agent, call_id, decision, reason)``,
      ``asked()``, ``wait(targets, timeout_s)``: steering the agents below it;
    - ``synod(question, n, …)``: N mnemon children on one question, waited for and reduced;
    - ``survey()``, ``evict(a, b, note)``, ``mark(block, replacement)``: the context's edits.
    """

    __slots__ = ("_env", "_node", "call_id", "tool")

    def __init__(self, env: "AgentEnv", node: "AgentNode", call_id: str, tool: str):
        self._env = env
        self._node = node
        self.call_id = call_id
        self.tool = tool

    # ------------------------------------------------------------------ who is calling

    @property
    def agent(self) -> str:
        return self._node.id

    @property
    def role(self) -> str | None:
        return self._node.role

    @property
    def depth(self) -> int:
        return self._node.depth

    @property
    def settings(self) -> "Settings":
        return self._env.settings_for(self._node)

    @property
    def log(self) -> "AgentLog":
        return self._node.log

    @property
    def context(self) -> Context:
        return self._node.ctx

    @property
    def workspace(self) -> "Workspace | None":
        """The agent's workspace (``workspace.handle.Workspace``; docs/workspace.md), or None
        when it has none."""
        return self._node.workspace

    @property
    def cancel_scope(self) -> trio.CancelScope:
        return self._node.scope

    # ------------------------------------------------------------------ reading

    def descendant(self, agent: str | None) -> "AgentNode":
        """The agent itself (``agent`` None or its own id) or one of its descendants; any other
        id is refused, naming the agent's descendants."""
        node = self._node
        if agent is None or agent == node.id:
            return node
        desc = node.descendants()
        if agent not in desc:
            known = ", ".join(sorted(desc)) or "none"
            raise Refusal(f"{agent!r} is not one of your descendants (yours: {known})")
        return desc[agent]

    def descendants(self) -> dict[str, "AgentNode"]:
        """Every agent below this one, by id."""
        return self._node.descendants()

    def children(self) -> list["AgentNode"]:
        return list(self._node.children.values())

    def door(self, agent: str | None = None) -> Door:
        """The transcript door on the agent or a descendant (``descendant``). It resolves under
        that agent's seam and reads in a worker thread, so a long grep stalls neither its
        appends nor any other agent on the Trio thread."""
        env = self._env
        return Door.of_agent(env.root, self.descendant(agent).log, own=True,
                             sources=env.sources)

    def survey(self) -> dict:
        """What ``context_survey`` answers (``survey.survey``)."""
        return survey(self._env, self._node)

    # ------------------------------------------------------------------ the context's edits

    def evict(self, first: int, last: int, note: str | None) -> int:
        """Evict turns ``[first, last]`` as the model's own cut, leaving a residue with
        ``note``; the bytes that left the context."""
        node, ctx = self._node, self._node.ctx
        check_note(note)
        ctx.check_span((first, last))
        sweep_pending(node)  # the region is rewritten anyway
        before = ctx.history_bytes()
        node.log.append(Evicted(residue=Residue(span=(first, last), note=note, by="model")))
        node.edited = True
        self._env.on_edit(node, "evict", before)
        return before - ctx.history_bytes()

    def mark(self, block: tuple[int, int], replacement: str) -> dict[str, Any]:
        """Mark ``block`` dead with its replacement (refused past ``mark_cap_bytes``); the
        sweep gate's figures after it."""
        s = self.settings
        node = self._node
        if node.workspace is not None:  # a file read's pointer goes with its replacement
            replacement = with_pointer(node.ctx, block, replacement)
        size = len(replacement.encode())
        if size > s.mark_cap_bytes:
            raise Refusal(f"a replacement is at most {s.mark_cap_bytes} bytes — this one has "
                          f"{size}")
        node.log.append(Marked(block=block, replacement=replacement))
        g = sweep_gate(self._env, node)
        pb = g.payback_requests
        return {"marked": f"{block[0]}.{block[1]}", "pending": len(node.ctx.marks),
                "reclaimed_tokens": round(g.reclaimed_tokens),
                "payback_requests": None if math.isinf(pb) else round(pb, 1),
                "sweeps_when_payback_at_most": s.sweep_horizon}

    # ------------------------------------------------------------------ starting agents

    def role_kind(self, role: str) -> str | None:
        """The kind of the run's role of that name (None: no such role, or a run without
        roles)."""
        roles = self._env.roles
        own = roles.get(role) if roles is not None else None
        return own.kind if own is not None else None

    @property
    def has_roles(self) -> bool:
        return self._env.roles is not None

    def start_child(self, task: str, kind: str, *, role: str | None = None,
                    caps: "Caps | None" = None) -> "AgentNode":
        """Fork a child on ``task`` (``mnemon``: it inherits this agent's context; ``fresh``:
        empty) within the run's limits and start it in this agent's nursery, so that it ends
        with this agent; refused (``Refusal``) past a limit, a role it may not start, or caps
        past what this agent has left to give (``caps.grant``)."""
        node = self._node
        spawner = self._env.spawner
        kw: dict[str, Any] = {}
        if role is not None:
            kw["role"] = role
        if caps:
            kw["caps"] = caps
        child = spawner.new_child(node, task, kind, **kw)
        assert node.nursery is not None, "a tool runs inside its agent's nursery"
        spawner.start(child, node.nursery)
        return child

    def project(self, child: "AgentNode") -> dict[str, Any]:
        """What ``child``'s first request will cost (``projection.project_first_request``)."""
        return project_first_request(self._env, self._node, child)

    # ------------------------------------------------------------------ steering children

    def status(self, agents: list[str] | None = None) -> list[dict[str, Any]]:
        """``agents_status``: each child (or each named descendant) as
        ``delegation.status`` reads it off the live tables."""
        targets = (self.children() if agents is None
                   else [self.descendant_only(a) for a in agents])
        return [status_of(t, self._env.approvals) for t in targets]

    def descendant_only(self, agent: str) -> "AgentNode":
        """One of this agent's descendants (never itself), or a refusal naming them."""
        if agent == self._node.id:
            raise Refusal("that is you: name one of your descendants")
        return self.descendant(agent)

    def send(self, agent: str, text: str) -> dict[str, Any]:
        """``agents_send``: a message to a running descendant (``delegation.send``)."""
        return send(self.descendant_only(agent), text, by="parent", sender=self._node.id)

    async def decide(self, agent: str, call_id: str, decision: str,
                     reason: str | None) -> dict[str, Any]:
        """``approvals_decide`` (``gate.decide_as``)."""
        return await self._env.decide_as(self._node, agent, call_id, decision, reason)

    def asked(self) -> list[dict[str, Any]]:
        """The approvals waiting for this agent's decision now."""
        return [p.as_dict() for p in self._env.approvals.pending() if p.to == self._node.id]

    async def wait_blocked(self, child: "AgentNode", tool: str) -> None:
        """Wait for ``child`` to end inside a tool that cannot return before it does (an
        ``ask_<role>``): meanwhile an ``ask_parent`` below this agent goes to a person, since
        this agent cannot decide it (``approvals.address``)."""
        node = self._node
        before, node.blocked_in = node.blocked_in, tool
        try:
            await child.done.wait()
        finally:
            node.blocked_in = before

    async def wait(self, targets: list["AgentNode"], timeout_s: float | None) -> None:
        """Wait until every target has ended, ``timeout_s`` passes, or an approval is
        addressed to this agent (it must decide: its children wait on it)."""
        node = self._node
        if self.asked():
            return
        node.attention = ev = trio.Event()
        try:
            with trio.move_on_after(timeout_s if timeout_s is not None else math.inf):
                async with trio.open_nursery() as nursery:
                    async def ended() -> None:
                        for t in targets:
                            await t.done.wait()
                        nursery.cancel_scope.cancel()

                    async def asked() -> None:
                        await ev.wait()
                        nursery.cancel_scope.cancel()

                    nursery.start_soon(ended)
                    nursery.start_soon(asked)
        finally:
            if node.attention is ev:
                node.attention = None

    async def synod(self, question: str, *, n: int, reduce: str = "vote",
                    stances: list[str] | None = None,
                    caps: "Caps | None" = None) -> "SynodResult":
        """``n`` mnemon children forked at once on ``question``, waited for and reduced
        (through the spawner, as every child this agent starts); ``caps``: each member's."""
        kw: dict[str, Any] = {"caps": caps} if caps else {}
        return await self._env.spawner.synod(self._node, question, n=n, reduce=reduce,
                                             stances=stances, **kw)


def with_pointer(ctx: Context, block: tuple[int, int], replacement: str) -> str:
    """A mark's replacement with the recovery pointer of the file read it replaces appended,
    unless the model wrote it already (docs/workspace.md, "Recoverable reads")."""
    refs = ctx.blocks(block[0])
    if not 0 <= block[1] < len(refs) or refs[block[1]].kind != "tool_result":
        return replacement
    m = FILE_POINTER.match(refs[block[1]].text[:400])
    if m is None:
        return replacement
    ptr = f"{m.group(1)} @ {m.group(2)}"
    if ptr in replacement or m.group(2) in replacement:
        return replacement
    out = f"{replacement} [file {ptr}: fs_read {{path, at}} reads it back as it was]"
    # a replacement is shorter than its block (the fold's rule): a read too small to carry
    # the pointer beside the model's words keeps the model's words
    return out if len(out.encode()) < refs[block[1]].length else replacement
