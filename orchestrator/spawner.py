"""All that the tools and the synod know of agent creation: make a child, start it (and a
synod: many at once, waited for and reduced).

``agents_start`` and ``agents_synod`` create agents, but creating one is the supervisor's
business — ids, run-wide limits, the fork, the opening records, the table of agents. The
``Spawner`` protocol is the narrow door between them: the tools and the synod hold one (through
the env) and never see the supervisor behind it, so the supervisor can sit on top of the loop,
the tools and the synod instead of in a cycle with them.

Waiting for a child and cancelling one need no door: a node carries its own ``done`` event and
cancel scope (``agents_wait``, ``agents_cancel``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import trio

    from .node import AgentNode
    from .synod import SynodResult


class Spawner(Protocol):
    def new_child(self, parent: "AgentNode", task: str, kind: str,
                  agent_id: str | None = None, *, output: Any = None,
                  role: str | None = None, caps: Any = None) -> "AgentNode":
        """Fork a child of ``parent`` on ``task`` (``mnemon``: it inherits the parent's table;
        ``fresh``: an empty context), within the run's limits, or refuse (``Refusal``);
        ``output``: the child's output type (``providers.typed.OutputType``), if typed;
        ``role``: the named role it is an agent of (docs/roles.md; default: its parent's),
        refused unless the parent's role may start it; ``caps``: what the parent gives it
        (``caps.Caps``; never more than it has left)."""
        ...

    def start(self, node: "AgentNode", nursery: "trio.Nursery | None" = None) -> None:
        """Run ``node``'s loop in ``nursery`` (a parent's own, so that it ends with it)."""
        ...

    async def synod(self, parent: "AgentNode", question: str, *, n: int,
                    reduce: str = "vote", stances: list[str] | None = None,
                    output: Any = None, caps: Any = None) -> "SynodResult":
        """Fork ``n`` mnemon children of ``parent`` on ``question`` at once, run them, wait
        for all and reduce their answers (``synod.run_synod``)."""
        ...
