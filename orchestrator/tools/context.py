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
from ..weighing import sweep_gate, sweep_pending
from .survey import survey

if TYPE_CHECKING:
    from ...session.agentlog import AgentLog
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
    - ``start_child(task, kind, role)``: a child, started in the agent's own nursery;
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

    def start_child(self, task: str, kind: str, *, role: str | None = None) -> "AgentNode":
        """Fork a child on ``task`` (``mnemon``: it inherits this agent's context; ``fresh``:
        empty) within the run's limits and start it in this agent's nursery, so that it ends
        with this agent; refused (``Refusal``) past a limit or a role it may not start."""
        node = self._node
        spawner = self._env.spawner
        child = (spawner.new_child(node, task, kind, role=role) if role is not None
                 else spawner.new_child(node, task, kind))
        assert node.nursery is not None, "a tool runs inside its agent's nursery"
        spawner.start(child, node.nursery)
        return child

    async def synod(self, question: str, *, n: int, reduce: str = "vote",
                    stances: list[str] | None = None) -> "SynodResult":
        """``n`` mnemon children forked at once on ``question``, waited for and reduced
        (through the spawner, as every child this agent starts)."""
        return await self._env.spawner.synod(self._node, question, n=n, reduce=reduce,
                                             stances=stances)


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
