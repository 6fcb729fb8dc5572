"""One root agent, prompted again and again: the chat's logic over the supervisor.

The agent's loop runs once per prompt, until a turn without tool calls; its log then holds
``SessionEnded``, so the next prompt first appends ``SessionResumed`` (as the service does).
Forks made with ``/fork`` run in the session's own nursery — the chat agent's lifetime — so
none outlives the session, and each is forked at a turn boundary (between prompts).

Cancellation: ``cancel_turn`` cancels the agent's scope; its loop records
``SessionEnded{cancelled}`` and the session goes on with the next prompt.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from ...lineage.runroot import now_iso
from ...session.door import Door
from ...session.records import SessionResumed
from ..tools.gate import resume_approvals
from ..node import AgentNode
from ..report import cost_rows
from ..supervisor import Supervisor


class ChatSession:
    def __init__(self, sup: Supervisor, nursery: trio.Nursery, node: AgentNode | None = None):
        """``node``: a resumed agent (its reopening already recorded ``SessionResumed``)."""
        self.sup = sup
        self.nursery = nursery
        self.node = node
        self._needs_resume = False
        self.in_flight = False

    @property
    def agent(self) -> str | None:
        return self.node.id if self.node is not None else None

    # ------------------------------------------------------------------ prompts

    async def send(self, text: str) -> AgentNode:
        """Run the agent on one more prompt, to its end (or its cancellation)."""
        if self.node is None:
            self.node = self.sup.new_root(text)
        else:
            self._reopen()
            if self.node.resumed and self.node.ctx.approvals:  # asked before the stop: the
                await resume_approvals(self.sup.env, self.node)  # answer comes before the prompt
            self.node.log.prompt(text)
        node = self.node
        self.in_flight = True
        try:
            await self.sup.run(node)
        finally:
            self.in_flight = False
            self._needs_resume = True
            if node.log is None:  # cancelled while its own MCP servers started: no agent yet
                self.sup.agents.pop(node.id, None)
                self.node = None
        return node

    def cancel_turn(self) -> bool:
        if self.in_flight and self.node is not None:
            self.node.scope.cancel()
            return True
        return False

    def _reopen(self) -> None:
        node = self._need_node()
        if self._needs_resume:
            node.log.append(SessionResumed(at=now_iso()))
            self._needs_resume = False
        node.state, node.reason, node.answer = "running", None, None
        node.done = trio.Event()
        node.scope = trio.CancelScope()
        node.turns_taken = 0

    def _need_node(self) -> AgentNode:
        if self.node is None:
            from ...session.errors import Refusal

            raise Refusal("there is no agent yet: send a prompt first")
        return self.node

    # ------------------------------------------------------------------ edits

    def clear(self) -> None:
        self.sup.clear(self._need_node().id)

    def rewind(self, to: int) -> None:
        self.sup.rewind(self._need_node().id, to)  # a refusal writes nothing

    # ------------------------------------------------------------------ reads

    def survey(self) -> dict:
        from ..tools.survey import survey

        return survey(self.sup.env, self._need_node())

    def _door(self) -> Door:
        return Door.of_agent(self.sup.root, self._need_node().log, own=False)

    async def index(self) -> list[dict]:
        return await self._door().aindex()

    async def read(self, turns: Any) -> list[dict]:
        return await self._door().aread(turns)

    async def grep(self, pattern: str, turns: Any = None) -> dict:
        return await self._door().agrep(pattern, turns,
                                        timeout_s=self.sup.settings.grep_timeout_s)

    def cost(self) -> list[dict]:
        return cost_rows(self.sup)

    # ------------------------------------------------------------------ messages

    def steer(self, agent_id: str, text: str) -> dict[str, Any]:
        """``/steer ID TEXT``: a person's message to a running agent of this session (a fork,
        while the chat waits for its prompt), carried by its next request
        (``Supervisor.steer``); refused naming the state of one that is not running."""
        return self.sup.steer(agent_id, text, by="user")

    # ------------------------------------------------------------------ forks

    def fork(self, task: str, on_end: Callable[[AgentNode], None]) -> AgentNode:
        """A mnemon child of the chat agent on ``task``; ``on_end(child)`` when it ends."""
        parent = self._need_node()
        child = self.sup.new_child(parent, task, "mnemon")

        async def watch() -> None:
            await self.sup.run(child)
            on_end(child)

        self.nursery.start_soon(watch, name=f"fork {child.id}")
        return child
