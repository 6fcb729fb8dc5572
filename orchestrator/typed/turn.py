"""The loop's hook for a typed agent: after each response, settle whether the agent has given
its answer, must try again, or goes on working — and record what the model is told.

* A response stopped as a refusal (OpenAI's ``refusal``) ends the agent ``failed: refused``.
* A message with tool calls other than the final-answer tool goes on as any turn (a final
  answer called beside them is answered with an error: it must come alone, at the end).
* Otherwise the message is the answer: the final-answer tool's input, or the text as JSON
  (``check_answer``). One that fits ends the agent ``done``, with ``node.output`` set (and recorded
  in ``SessionEnded.output``). One that does not is answered with its problems — as the
  tool's error result, or as harness ``Steering`` after a text answer — and the model tries
  again, up to ``output_type.retries`` times; each try is an ordinary turn (recorded, priced,
  counted against the budget and ``max_turns``). After the last the agent ends
  ``failed: output: <the problems>``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...providers.typed import OUTPUT_TOOL
from ...session.records import (AssistantMessage, Steering, ToolResult, ToolResults, ToolUse,
                                compact)
from .answer import check_answer_off_loop, retry_text

if TYPE_CHECKING:
    from ...providers.base import Response
    from ..env import AgentEnv
    from ..node import AgentNode

__all__ = ["settle", "settle_resumed", "ACCEPTED", "ALONE"]

ACCEPTED = "accepted: this answer fits the output type"
ALONE = (f"{OUTPUT_TOOL} ends your work, so it is called alone, once, after your other calls "
         "have been answered: call it again then")


def _mode(env: "AgentEnv", node: "AgentNode | None" = None) -> str:
    return getattr(env.provider_for(node), "output_mode", "native")


async def settle(env: "AgentEnv", node: "AgentNode", response: "Response",
           calls: list[ToolUse]) -> tuple[str | None, list[ToolUse]]:
    """``(reason, calls)``: the reason the agent ends with (``done``, ``failed: …``), or None
    and the calls the loop runs next — none when the model is to answer again."""
    if response.stop_reason == "refusal":
        return "failed: refused", []
    finals = [c for c in calls if c.name == OUTPUT_TOOL]
    others = [c for c in calls if c.name != OUTPUT_TOOL]
    if others:
        if finals:
            node.log.append(ToolResults(results=[
                ToolResult(tool_use_id=c.id, content=ALONE, is_error=True) for c in finals]))
        return None, others
    return await _verdict(env, node, response.blocks, finals), []


async def _verdict(env: "AgentEnv", node: "AgentNode", blocks: list[Any],
             finals: list[ToolUse]) -> str | None:
    output = node.output_type
    verdict = await check_answer_off_loop(output, blocks)
    extra = [ToolResult(tool_use_id=c.id, content=ALONE, is_error=True) for c in finals[1:]]
    if verdict.ok:
        if finals:
            node.log.append(ToolResults(results=[
                ToolResult(tool_use_id=finals[0].id, content=ACCEPTED), *extra]))
        node.output = verdict.value
        node.answer = compact(verdict.value).decode()
        return "done"
    error = verdict.error or ""
    left = output.retries - node.output_tries
    if left <= 0:
        if finals:  # answered, so that the log stays well-formed for a later prompt
            node.log.append(ToolResults(results=[
                ToolResult(tool_use_id=finals[0].id, content=error, is_error=True), *extra]))
        return "failed: output: " + "; ".join(error.splitlines())
    node.output_tries += 1
    text = retry_text(output, error, left, _mode(env, node))
    if finals:
        node.log.append(ToolResults(results=[
            ToolResult(tool_use_id=finals[0].id, content=text, is_error=True), *extra]))
    else:
        node.log.append(Steering(text=text, by="harness"))
    return None


async def settle_resumed(env: "AgentEnv", node: "AgentNode") -> str | None:
    """A typed agent reopened from its log: ``done`` (and ``node.output`` set) when its last
    turn gave an answer that fits — it ends again without a request; None when it goes on. A
    last answer that was not yet judged is judged now, as ``settle`` would have."""
    ctx = node.ctx
    t = ctx.turn(ctx.in_hand) if ctx.in_hand is not None else None
    if t is None or t.role != "assistant" or t.origin != "own" or not t.records:
        return None
    first = t.records[0]
    if not isinstance(first, AssistantMessage):
        return None
    calls = [b for b in first.blocks if isinstance(b, ToolUse)]
    if any(c.name != OUTPUT_TOOL for c in calls):
        return None
    answered: dict[str, ToolResult] = {}
    for rec in t.records[1:]:
        if isinstance(rec, Steering) and rec.by == "harness":
            return None  # judged and refused: the model answers again
        if isinstance(rec, ToolResults):
            answered.update({r.tool_use_id: r for r in rec.results})
    if calls:
        r = answered.get(calls[0].id)
        if r is not None and r.is_error:
            return None
        if r is not None:  # accepted before the interruption
            verdict = await check_answer_off_loop(node.output_type, first.blocks)
            if verdict.ok:
                node.output = verdict.value
                node.answer = compact(verdict.value).decode()
                return "done"
            return None
    if first.stop_reason == "refusal":
        return None
    return await _verdict(env, node, first.blocks, calls)
