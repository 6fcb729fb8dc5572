"""The gate every tool call passes: the agent's policy says allow, deny or ask (docs/policy.md).

``gated_call`` is what the loop runs for each call in place of ``tools.call_tool``: an allowed
call runs; a denied one is not run and the model reads an error result naming the rule and its
reason; a call the policy asks about is recorded as an ``ApprovalRequested`` and waits for the
decision (``approvals.Approvals``) — approved, it runs once (with the edited input, if the
person edited it); rejected, the model reads the reason. Built-in tools pass the same gate.

**Child creation is one policy subject** (decision 0307): a call that starts children under
another name — ``agents_synod``, ``ask_<role>`` — is judged as well as the ``agents_start``
call it amounts to (``child_start``: ``{task, kind, role?, n?}``), and the stricter verdict
decides; so a rule on ``agents_start`` governs every way a model starts a child.

``resume_approvals`` is what a resumed agent does first: the calls of its turn in hand whose
approval its log shows pending are waited on again, then answered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import structlog
import trio

from ..session.records import ApprovalDecided, ToolResult, ToolResults, ToolUse
from .policy import ToolPolicy, Verdict, combine, strictest
from .tools import BUILTIN, call_tool

if TYPE_CHECKING:
    from .env import AgentEnv
    from .node import AgentNode

__all__ = ["effective_policy", "gated_call", "resume_approvals"]

log = structlog.get_logger("mnemon.gate")

_BUILTIN_NAMES = frozenset(d.name for d in BUILTIN)  # a built-in answers before any tool

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


def child_start(env: "AgentEnv", node: "AgentNode", call: ToolUse,
                tools: dict[str, Any] | None, builtin: bool | None) -> dict[str, Any] | None:
    """The ``agents_start`` input a call amounts to when it starts children under another name
    (None: it does not): ``agents_synod`` → ``{task: question, kind: mnemon, n}``; a tool that
    starts an agent (``ask_<role>``, ``starts_agent``) → ``{task, role, kind}``. Absent
    arguments are left out, so a ``when`` on them does not match."""
    if call.name == "agents_start":
        return None
    if builtin is None:
        builtin = env.settings_for(node).builtin_tools
    inp = call.input if isinstance(call.input, dict) else {}
    if builtin and call.name == "agents_synod":
        out = {"task": inp.get("question"), "kind": "mnemon", "n": inp.get("n")}
    else:
        t = (tools if tools is not None else env.tools_for(node)).get(call.name)
        role = getattr(t, "starts_agent", None)
        if not role or (builtin and call.name in _BUILTIN_NAMES):
            return None
        spec = env.roles.get(role) if env.roles is not None else None
        out = {"task": inp.get("task"), "role": role,
               "kind": spec.kind if spec is not None else None}
    return {k: v for k, v in out.items() if v is not None}


async def judge(env: "AgentEnv", node: "AgentNode", policy: ToolPolicy, call: ToolUse,
                tools: dict[str, Any] | None = None, builtin: bool | None = None) -> Verdict:
    """The policy's verdict on a call; for a call that starts children, the stricter of its own
    and that of the ``agents_start`` call it amounts to (``child_start``)."""
    verdict = await decide_off_loop(policy, call)
    start = child_start(env, node, call, tools, builtin)
    if start is None:
        return verdict
    as_start = ToolUse(id=call.id, name="agents_start", input=start)
    return strictest([verdict, await decide_off_loop(policy, as_start)])


async def gated_call(env: "AgentEnv", node: "AgentNode", call: ToolUse,
                     tools: dict[str, Any] | None = None, *,
                     builtin: bool | None = None) -> ToolResult:
    """Answer one call through the agent's policy (``tools.call_tool`` when it is allowed)."""
    policy = effective_policy(env, node)
    if policy is None:
        return await call_tool(env, node, call, tools, builtin=builtin)
    verdict = await judge(env, node, policy, call, tools, builtin)
    if verdict.action == "allow":
        return await call_tool(env, node, call, tools, builtin=builtin)
    if verdict.action == "deny":
        env.approvals.denied += 1
        log.info("tool call denied", call_id=call.id, tool=call.name, rule=verdict.rule)
        return ToolResult(tool_use_id=call.id, content=verdict.text(call.name), is_error=True)
    decided = await env.approvals.wait_for(node, call, verdict, policy.timeout_s)
    return await _answer(env, node, call, decided, policy, tools, builtin)


async def _answer(env: "AgentEnv", node: "AgentNode", call: ToolUse, decided: ApprovalDecided,
                  policy: ToolPolicy | None, tools: dict[str, Any] | None,
                  builtin: bool | None) -> ToolResult:
    if decided.decision != "approve":
        why = f": {decided.reason}" if decided.reason else ""
        return ToolResult(tool_use_id=call.id, is_error=True,
                          content=f"the tool call {call.name} was not approved (rejected, "
                                  f"decided by {decided.by or 'a person'}){why}")
    if decided.input is not None:
        call = ToolUse(id=call.id, name=call.name, input=decided.input)
        # an edited input is judged again: a person may approve an ask, not lift a deny
        verdict = (await judge(env, node, policy, call, tools, builtin)
                   if policy is not None else None)
        if verdict is not None and verdict.action == "deny":
            return ToolResult(tool_use_id=call.id, content=verdict.text(call.name) +
                              " (the edited input)", is_error=True)
    return await call_tool(env, node, call, tools, builtin=builtin)


async def resume_approvals(env: "AgentEnv", node: "AgentNode") -> None:
    """Answer the calls of a resumed agent's turn in hand that its log shows asked about:
    a pending request is waited on again (and run once if approved), a rejection answered with
    its reason, an approval with no recorded result answered as not run again. Calls asked
    about are answered in one ``ToolResults``; other unanswered calls stay interrupted."""
    ctx = node.ctx
    todo = [(req, done) for req, done in ctx.approvals.values() if req.call_id in ctx.pending]
    if not todo:
        return
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
        results[i] = await _answer(env, node, call, done, policy, None, None)

    async with trio.open_nursery() as nursery:
        for i, (req, done) in enumerate(todo):
            nursery.start_soon(one, i, req, done)
    node.log.append(ToolResults(results=[r for r in results if r is not None]))
