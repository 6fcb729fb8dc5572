"""Approvals: the tool calls waiting for a person's yes, and the decisions on them.

A call the policy asks about is recorded (``ApprovalRequested``) in its agent's log before
anything else happens, so a request survives the process: the log, not this registry, is the
truth. The registry is what this process knows of the requests its agents wait on now — the
list the service, the chat and Python read (``pending``), and the door a decision comes in by
(``decide``), which records ``ApprovalDecided`` in the agent's log and wakes the agent.

A decision is recorded before the call runs; the call's result after it. A process that dies
between the two leaves an approved call with no result: it is never run again (a call runs at
most once — decision 0275).

``decider`` (Python) decides in code: called with each new request, sync or async, it answers a
``Decision`` (or ``"approve"`` / ``"reject"``), or None to leave the request to a person.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import structlog
import trio

from ..lineage.runroot import now_iso
from ..session.records import ApprovalDecided, ApprovalRequested, ToolUse
from ..errors import UserError
from .delegation import ask_note

if TYPE_CHECKING:
    from .node import AgentNode
    from .policy import Verdict

__all__ = ["AlreadyDecided", "Approvals", "BadDecision", "Decision", "PendingApproval",
           "UnknownApproval", "address", "reject_every_ask"]

log = structlog.get_logger("mnemon.approvals")

DECISIONS = ("approve", "reject")
DECIDED_KEPT = 10_000  # decisions remembered for telling a repeat (409) from an unknown call


class UnknownApproval(UserError, LookupError):
    """No such request of this agent (the service answers 404)."""


class AlreadyDecided(UserError):
    """The request was decided already, or is not waiting now (409)."""


class BadDecision(UserError, ValueError):
    """Not ``approve`` or ``reject``, or an edited input that is not a JSON object (400)."""


@dataclass(frozen=True)
class Decision:
    """What a decider answers: ``approve`` (optionally with an edited ``input``, what the tool
    will receive) or ``reject`` (``reason``: what the model reads)."""

    decision: str
    reason: str | None = None
    input: dict[str, Any] | None = None
    by: str | None = None
    """Who decided, as recorded (default ``callback``)."""


class PendingApproval:
    """One request this process's agents wait on now."""

    __slots__ = ("node", "request", "event", "decided", "to")

    def __init__(self, node: "AgentNode", request: ApprovalRequested):
        self.node = node
        self.request = request
        self.event = trio.Event()
        self.decided: ApprovalDecided | None = None
        # the agent that decides it now (``ask_parent``: the parent, or an ancestor it climbed
        # to); None: a person (a person may decide any request, this one included)
        self.to: str | None = None

    agent = property(lambda self: self.node.id)
    call_id = property(lambda self: self.request.call_id)
    tool = property(lambda self: self.request.tool)
    input = property(lambda self: self.request.input)
    reason = property(lambda self: self.request.reason)
    rule = property(lambda self: self.request.rule)
    requested_at = property(lambda self: self.request.at)

    def as_dict(self) -> dict[str, Any]:
        out = {"agent": self.agent, "call_id": self.call_id, "tool": self.tool,
               "input": self.input, "reason": self.reason, "rule": self.rule,
               "requested_at": self.requested_at}
        if self.to is not None:
            out["to"] = self.to
        return out


class Approvals:
    """The run's pending approvals (one per run, on the agent environment)."""

    def __init__(self) -> None:
        self._pending: dict[tuple[str, str], PendingApproval] = {}
        self.decider: Callable[[PendingApproval], Any] | None = None
        # told ``(event, pending)``, event ``requested`` or ``decided`` (the chat's prompt, the
        # service's wake-up); never awaited
        self.listeners: list[Callable[[str, PendingApproval], None]] = []
        # the agents of the run by id (the supervisor's table): where a request not waiting
        # now is looked up in its log, to tell "decided" (409) from "unknown" (404)
        self.agents: dict[str, "AgentNode"] = {}
        # decisions made by this process, newest last (bounded): a second decision on a call
        # whose turn has since closed is still told "decided" (409), not "unknown"
        self._decided: dict[tuple[str, str], ApprovalDecided] = {}
        # counts for a job's final table
        self.asked = 0
        self.approved = 0
        self.rejected = 0
        self.denied = 0

    def waiting(self, agent: str, call_id: str) -> PendingApproval | None:
        """The request of ``agent`` on ``call_id`` waiting now, or None."""
        return self._pending.get((agent, call_id))

    def pending(self) -> list[PendingApproval]:
        """The requests waiting now, oldest first."""
        return sorted(self._pending.values(), key=lambda p: (p.requested_at or "", p.agent))

    def _tell(self, event: str, p: PendingApproval) -> None:
        for listen in list(self.listeners):
            try:
                listen(event, p)
            except Exception as e:  # a listener's fault never stops an agent
                log.warning("approval listener failed", error=repr(e))

    def decide(self, agent: str, call_id: str, decision: str, *, reason: str | None = None,
               input: Any = None, by: str = "api") -> ApprovalDecided:
        """Record the decision on a waiting request and wake its agent; returns the record.

        Raises ``BadDecision`` (400), ``UnknownApproval`` (404: no such request of this
        agent) or ``AlreadyDecided`` (409: decided before, or not waiting in this process)."""
        if decision not in DECISIONS:
            raise BadDecision(f"a decision is approve or reject, not {decision!r}")
        if input is not None and (decision != "approve" or not isinstance(input, dict)):
            raise BadDecision("an edited input goes with approve, and is a JSON object")
        if reason is not None and not isinstance(reason, str):
            raise BadDecision("a reason is a string")
        p = self._pending.get((agent, call_id))
        if p is None:
            done = self._decided.get((agent, call_id))
            if done is not None:
                raise AlreadyDecided(f"the call {call_id} of agent {agent} was decided already "
                                     f"({done.decision})")
            node = self.agents.get(agent)
            entry = None
            if node is not None and node.log is not None:
                entry = node.ctx.approvals.get(call_id)
            if entry is None:
                raise UnknownApproval(f"agent {agent} has no approval request for the call "
                                      f"{call_id!r}")
            if entry[1] is not None:
                raise AlreadyDecided(f"the call {call_id} of agent {agent} was decided already "
                                     f"({entry[1].decision})")
            raise AlreadyDecided(f"agent {agent} is not running, so it is not waiting on the "
                                 f"call {call_id}: resume it first")
        if p.decided is not None:
            raise AlreadyDecided(f"the call {call_id} of agent {agent} was decided already "
                                 f"({p.decided.decision})")
        rec = ApprovalDecided(call_id=call_id, decision=decision,  # type: ignore[arg-type]
                              reason=reason, input=input, by=by, at=now_iso())
        p.node.log.append(rec)  # judged by the fold: nothing is woken unless it is recorded
        p.decided = rec
        del self._pending[(agent, call_id)]
        self._decided[(agent, call_id)] = rec
        if len(self._decided) > DECIDED_KEPT:
            del self._decided[next(iter(self._decided))]
        if decision == "approve":
            self.approved += 1
        else:
            self.rejected += 1
        log.info("approval decided", agent=agent, call_id=call_id, decision=decision, by=by)
        p.event.set()
        self._tell("decided", p)
        return rec

    async def wait_for(self, node: "AgentNode", call: ToolUse, verdict: "Verdict | None",
                       timeout_s: float | None, *, to_parent: bool = False) -> ApprovalDecided:
        """Ask about ``call`` (recorded now, unless its agent's log holds the request already:
        a resumed agent) and wait for the decision; one not made within ``timeout_s`` is
        recorded as a rejection (``by: timeout``).

        ``to_parent`` (the policy said ``ask_parent``; recorded as ``to: "parent"``, so a
        resumed agent asks again where it asked): the agent's parent decides — told by a note
        its next request carries (``address``) — unless it has none running here, or is blocked
        waiting on its children in a tool it cannot leave (a synod, an ``ask_<role>``): then a
        person does, as for ``ask``. The decider (``mnemon ask``'s on_ask, a Python callback)
        answers only what a person would be asked.

        Cancellation: the request stays pending in the log; whoever resumes the agent sees it.
        """
        entry = node.ctx.approvals.get(call.id)
        if entry is None:
            req = ApprovalRequested(call_id=call.id, tool=call.name, input=call.input,
                                    rule=verdict.rule if verdict else None,
                                    reason=verdict.reason if verdict else None, at=now_iso(),
                                    to="parent" if to_parent else None)
            node.log.append(req)
            self.asked += 1
            log.info("approval requested", call_id=call.id, tool=call.name,
                     rule=req.rule, to=req.to)
        else:
            req, done = entry
            if done is not None:
                return done
        key = (node.id, call.id)
        p = self._pending[key] = PendingApproval(node, req)
        try:
            if req.to == "parent":
                address(p, node.parent)
            self._tell("requested", p)
            if self.decider is not None and p.to is None:
                await self._ask_decider(p)
            if p.decided is None:
                with trio.move_on_after(timeout_s if timeout_s is not None else math.inf):
                    await p.event.wait()
            if p.decided is None:
                self.decide(node.id, call.id, "reject", by="timeout",
                            reason=f"no decision within {timeout_s:g} s")
            assert p.decided is not None
            return p.decided
        finally:
            if self._pending.get(key) is p:
                del self._pending[key]

    async def escalate(self, p: PendingApproval) -> None:
        """Send a request its deciding agent may not decide to a person (``approvals_decide``
        by an agent whose own policy would not let it make the call): the people's listeners
        are told again, and the decider asked."""
        p.to = None
        log.info("approval escalated to a person", agent=p.agent, call_id=p.call_id)
        self._tell("requested", p)
        if self.decider is not None and p.decided is None:
            await self._ask_decider(p)

    async def _ask_decider(self, p: PendingApproval) -> None:
        out = self.decider(p)  # type: ignore[misc]
        if inspect.isawaitable(out):
            out = await out
        if out is None or p.decided is not None:
            return
        if isinstance(out, str):
            out = Decision(out)
        if not isinstance(out, Decision):
            raise BadDecision(f"a decider answers a Decision, 'approve', 'reject' or None, not "
                              f"{out!r}")
        self.decide(p.agent, p.call_id, out.decision, reason=out.reason, input=out.input,
                    by=out.by or "callback")


def address(p: PendingApproval, to: "AgentNode | None") -> None:
    """Address a request to the agent ``to`` (an ``ask_parent``, or one climbing): it decides
    with ``approvals_decide``, told by a note its next request carries, its ``agents_wait``
    woken. With no such agent running here, or one blocked in a tool waiting on its children,
    the request goes to a person (``p.to`` None)."""
    if to is None or to.state != "running" or to.log is None or to.blocked_in is not None:
        p.to = None
        return
    p.to = to.id
    ask_note(to, p)
    if to.attention is not None:
        to.attention.set()


def reject_every_ask(reason: str) -> Callable[[PendingApproval], Decision]:
    """A decider for where nobody is there to ask (``mnemon ask``, a job's ``on_ask =
    "deny"``): every request is rejected at once, recorded (``by: on_ask``) with ``reason``."""

    def decide(pending: PendingApproval) -> Decision:
        return Decision("reject", reason=reason, by="on_ask")

    return decide
