"""The gate every tool call passes: the agent's policy says allow, deny or ask (docs/policy.md),
as a wrapper over its tool table (``Gated``), so the loop has no policy branch.

An allowed call runs; a denied one is not run and the model reads an error result naming the
rule and its reason; a call the policy asks about is recorded as an ``ApprovalRequested`` and
waits for the decision (``approvals.Approvals``) — approved, it runs once (with the edited
input, if the person edited it, judged again); rejected, the model reads the reason. Built-in
tools pass the same gate. pydantic-ai's ``toolsets/approval_required.py`` is the model.

The policy is the agent's narrowed by every ancestor's (``effective_policy``), its recorded
ancestry's included when it was reopened from its log (decision 0305): what the wrapper
consults is what the lineage on disk allows, whichever path reopened the agent.

**Child creation is one policy subject** (decision 0307): a call that starts children under
another name — ``agents_synod``, ``ask_<role>`` — is judged as well as the ``agents_start``
call it amounts to (``Tool.starts``: ``{task, kind, role?, n?}``), and the stricter verdict
decides; so a rule on ``agents_start`` governs every way a model starts a child.

``ask_parent`` climbs (docs/policy.md): the call waits for the agent's parent, which decides
with ``approvals_decide`` — approving only a call its own policy would let it make; anything
else goes on up, or to a person (``decide_as``). A root's ``ask_parent`` is an ``ask``.

``resume_approvals`` is what a resumed agent does first: the calls of its turn in hand whose
approval its log shows pending are waited on again, then answered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import structlog
import trio

from ...session.errors import Refusal
from ...session.records import ApprovalDecided, ToolResult, ToolResults, ToolUse
from ..approvals import address
from ..policy import ToolPolicy, Verdict, combine, strictest
from .base import ToolInputError
from .table import ToolTable

if TYPE_CHECKING:
    from ...providers.base import ToolDef
    from ..env import AgentEnv
    from ..node import AgentNode
    from .base import Mode, Tool

__all__ = ["Gated", "decide_as", "decide_off_loop", "effective_policy", "gated", "judge",
           "resume_approvals"]

log = structlog.get_logger("mnemon.gate")

NOT_AGAIN = ("this call was approved, but the process stopped before its result was recorded: "
             "it may have run, so it is not run again")


def effective_policy(env: "AgentEnv", node: "AgentNode | None") -> ToolPolicy | None:
    """An agent's policy narrowed by every ancestor's: a call an ancestor denies or asks about
    is never allowed below it (``policy.combine``). The ancestors are the live ``parent``
    links and, for an agent reopened from its log, what its recorded ancestry imposes
    (``node.lineage_policy``, ``ancestry.recorded_policy``): the same verdicts either way."""
    chain = []
    n = node
    while n is not None:
        chain.append(env.settings_for(n).tool_policy)
        if n.lineage_policy is not None:
            chain.append(n.lineage_policy)
        n = n.parent
    if node is None:
        chain.append(env.settings.tool_policy)
    out: ToolPolicy | None = None
    for p in reversed(chain):
        out = combine(out, p)
    return out


async def decide_off_loop(policy: ToolPolicy, call: ToolUse) -> Verdict:
    """The policy's verdict on a call. One that may run a ``when`` regex over the model's
    arguments is judged in a worker thread (the regex module releases the GIL as it matches), so
    a slow match — bounded, and failing closed — never stalls the other agents on the Trio
    thread (decision 0309); the rest, most calls, are judged here."""
    if not policy.matches_text(call.name):
        return policy.decide(call.name, call.input)
    return await trio.to_thread.run_sync(policy.decide, call.name, call.input,
                                         abandon_on_cancel=True)


async def judge(table: ToolTable, policy: ToolPolicy, call: ToolUse) -> Verdict:
    """The policy's verdict on a call; for a call that starts children, the stricter of its own
    and that of the ``agents_start`` call it amounts to (``ToolTable.starts``)."""
    verdict = await decide_off_loop(policy, call)
    start = table.starts(call)
    if start is None:
        return verdict
    as_start = ToolUse(id=call.id, name="agents_start", input=start)
    return strictest([verdict, await decide_off_loop(policy, as_start)])


class Gated:
    """A tool table whose every call passes a policy first; otherwise the table itself (the
    loop reads both the same way: ``mode``, ``call``, ``definitions``)."""

    __slots__ = ("inner", "policy")

    def __init__(self, inner: ToolTable, policy: ToolPolicy):
        self.inner = inner
        self.policy = policy

    def get(self, name: str) -> "Tool | None":
        return self.inner.get(name)

    def mode(self, call: ToolUse) -> "Mode | None":
        return self.inner.mode(call)

    def definitions(self) -> "list[ToolDef]":
        return self.inner.definitions()

    def names(self) -> list[str]:
        return self.inner.names()

    def starts(self, call: ToolUse) -> dict[str, Any] | None:
        return self.inner.starts(call)

    async def call(self, call: ToolUse) -> ToolResult:
        inner, policy = self.inner, self.policy
        verdict = await judge(inner, policy, call)
        if verdict.action == "allow":
            return await inner.call(call)
        env, node = inner.env, inner.node
        if verdict.action == "deny":
            env.approvals.denied += 1
            log.info("tool call denied", call_id=call.id, tool=call.name, rule=verdict.rule)
            return ToolResult(tool_use_id=call.id, content=verdict.text(call.name),
                              is_error=True)
        decided = await env.approvals.wait_for(node, call, verdict, policy.timeout_s,
                                               to_parent=verdict.action == "ask_parent")
        return await answer(inner, policy, call, decided)


async def decide_as(env: "AgentEnv", by: "AgentNode", agent: str, call_id: str,
                    decision: str, reason: str | None) -> dict[str, Any]:
    """An agent's decision on a call below it that waits for it (``ask_parent``;
    ``approvals_decide``). A rejection is always its to make. An approval stands only for a
    call the deciding agent's own effective policy allows it to make: one its policy sends up
    (``ask_parent``) climbs to its parent; one it would have to ask a person about, or may not
    make at all, goes to a person (decision 0443). Refused (``Refusal``) for a call that does
    not wait for this agent."""
    approvals = env.approvals
    desc = by.descendants()
    if agent not in desc:
        raise Refusal(f"{agent!r} is not one of your descendants (yours: "
                      f"{', '.join(sorted(desc)) or 'none'})")
    p = approvals.waiting(agent, call_id)
    if p is None:
        raise Refusal(f"agent {agent} has no call {call_id!r} waiting for a decision (see "
                      "agents_status)")
    if p.to != by.id:
        raise Refusal(f"the call {call_id} of agent {agent} waits for "
                      f"{'agent ' + p.to if p.to else 'a person'}, not for you")
    who = f"agent {by.id}"
    if decision == "reject":
        approvals.decide(agent, call_id, "reject", reason=reason, by=who)
        return {"agent": agent, "call_id": call_id, "decision": "reject"}
    if decision != "approve":
        raise ToolInputError("approvals_decide: decision is \"approve\" or \"reject\"")
    policy = effective_policy(env, by)
    call = ToolUse(id=call_id, name=p.tool, input=p.input)
    verdict = (await judge(env.tool_table(by), policy, call) if policy is not None
               else None)
    if verdict is None or verdict.action == "allow":
        approvals.decide(agent, call_id, "approve", reason=reason, by=who)
        return {"agent": agent, "call_id": call_id, "decision": "approve"}
    if verdict.action == "ask_parent" and by.parent is not None:
        address(p, by.parent)
        if p.to is not None:
            return {"agent": agent, "call_id": call_id, "forwarded": p.to,
                    "why": f"your own policy sends this call to your parent ({verdict.rule})"}
    await approvals.escalate(p)
    out: dict[str, Any] = {"agent": agent, "call_id": call_id, "escalated": "a person",
                           "why": f"your own policy would {verdict.action} this call "
                                  f"({verdict.rule}): you may approve only what you could "
                                  "make yourself"}
    if p.decided is not None:
        out["decided"] = p.decided.decision
    return out


def gated(table: ToolTable, policy: ToolPolicy | None) -> "ToolTable | Gated":
    """``table`` behind ``policy`` (the table itself when there is none)."""
    return table if policy is None else Gated(table, policy)


async def answer(table: ToolTable, policy: ToolPolicy | None, call: ToolUse,
                 decided: ApprovalDecided) -> ToolResult:
    """Answer a call a person decided: rejected, the model reads why; approved, it runs once —
    with the edited input, judged again (a person may approve an ask, not lift a deny)."""
    if decided.decision != "approve":
        why = f": {decided.reason}" if decided.reason else ""
        return ToolResult(tool_use_id=call.id, is_error=True,
                          content=f"the tool call {call.name} was not approved (rejected, "
                                  f"decided by {decided.by or 'a person'}){why}")
    if decided.input is not None:
        call = ToolUse(id=call.id, name=call.name, input=decided.input)
        verdict = await judge(table, policy, call) if policy is not None else None
        if verdict is not None and verdict.action == "deny":
            return ToolResult(tool_use_id=call.id, content=verdict.text(call.name) +
                              " (the edited input)", is_error=True)
    return await table.call(call)


async def resume_approvals(env: "AgentEnv", node: "AgentNode",
                           table: ToolTable | None = None) -> None:
    """Answer the calls of a resumed agent's turn in hand that its log shows asked about:
    a pending request is waited on again (and run once if approved), a rejection answered with
    its reason, an approval with no recorded result answered as not run again. Calls asked
    about are answered in one ``ToolResults``; other unanswered calls stay interrupted.
    ``table``: the agent's tools, ungated (the decision is the gate's answer; default
    ``env.tool_table(node)``)."""
    ctx = node.ctx
    todo = [(req, done) for req, done in ctx.approvals.values() if req.call_id in ctx.pending]
    if not todo:
        return
    tools = table if table is not None else env.tool_table(node)
    policy = effective_policy(env, node)
    results: list[ToolResult | None] = [None] * len(todo)

    async def one(i: int, req, done: ApprovalDecided | None) -> None:
        call = ToolUse(id=req.call_id, name=req.tool, input=req.input)
        if done is not None and done.decision == "approve":
            results[i] = ToolResult(tool_use_id=call.id, content=NOT_AGAIN, is_error=True)
            return
        if done is None:
            done = await env.approvals.wait_for(node, call, None,
                                                policy.timeout_s if policy else None)
        results[i] = await answer(tools, policy, call, done)

    async with trio.open_nursery() as nursery:
        for i, (req, done) in enumerate(todo):
            nursery.start_soon(one, i, req, done)
    node.log.append(ToolResults(results=[r for r in results if r is not None]))
