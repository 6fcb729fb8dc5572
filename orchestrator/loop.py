"""The agent loop.

weigh eviction → render → request → record the assistant turn → run its tool calls → record the
results (and the pressure reminder when due) → repeat, until a turn ends without tool calls,
MAX_TURNS, cancellation or a budget stop. Every agent writes ``SessionEnded{reason}`` in a
shielded finally; a crash leaves none.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, nullcontext
from typing import TYPE_CHECKING

import structlog
import trio

from ..lineage.runroot import now_iso
from . import logs
from ..providers.base import Request
from ..providers.prices import cost_usd, price_for
from ..providers.errors import ContextTooLong, ProviderError
from ..session.eviction import AUTO, due_line, eviction_due, plan_eviction, pressure_reminder
from ..session.keep import Economy
from ..session.constants import EVICT_THRESHOLD_BYTES
from ..session.records import (
    Evicted,
    ProviderCall,
    Residue,
    SessionEnded,
    Steering,
    Text,
    ToolResult,
    ToolResults,
    ToolUse,
    TurnStarted,
    Usage,
    compact,
)
from ..session.render import render, rendered_bytes
from .tools import (EXCLUSIVE, _mults, call_tool, candidates_line, sweep_if_pays, sweep_pending,
                    tool_defs)

if TYPE_CHECKING:
    from .supervisor import AgentNode, Supervisor

log = structlog.get_logger("mnemon.agent")
_NOTHING = nullcontext()


def priced_model(sup: "Supervisor", response_model: str | None,
                 node: "AgentNode | None" = None) -> str | None:
    """The model a usage is priced (and recorded) as: the same for the live total and for
    ``mnemon cost`` reading the log afterwards."""
    s = sup.settings_for(node)
    return s.price_model or s.model or response_model


def _price(sup: "Supervisor", node: "AgentNode", usage: Usage, model: str | None) -> float:
    return cost_usd(usage, priced_model(sup, model, node), sup.settings_for(node).cache_ttl)


def state_of(reason: str) -> str:
    """An agent's state from the reason its log ended with."""
    return ("ended" if reason in ("done", "max_turns", "budget") else
            "cancelled" if reason == "cancelled" else "failed")


async def run_agent(sup: "Supervisor", node: "AgentNode",
                    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """Run one agent inside its own cancel scope and nursery (its children live there).

    An agent with MCP servers of its own starts them first, inside its cancel scope and around
    its nursery, then opens its log (``SessionStarted`` lists their tools): so they stop when it
    ends, after its children, which may call them. ``task_status.started()`` is called once the
    log is open, or once the agent has ended without one (``Supervisor.spawn`` then says why).
    """
    reason = "failed: unknown"
    reported = False
    structlog.contextvars.bind_contextvars(agent=node.id)
    try:
        with node.scope:
            # no servers of its own and its log open: nothing to start (two context
            # managers per agent are measurable in a job of many short tasks)
            async with (_own_servers(sup, node) if node.mcp_servers or node.log is None
                        else _NOTHING):
                async with trio.open_nursery() as nursery:
                    node.nursery = nursery
                    node.started = True
                    task_status.started()
                    reported = True
                    for child in list(node.children.values()):  # resumed children go on inside
                        if not child.started and child.state == "running":
                            sup.start(child, nursery)
                    reason = await _loop(sup, node)
                    nursery.cancel_scope.cancel()  # children it did not wait for
        if node.scope.cancelled_caught:
            reason = "cancelled"
    except trio.Cancelled:
        reason = "cancelled"
        raise
    except BaseExceptionGroup as eg:  # an error escaping a tool task or a child's nursery
        cancelled, rest = eg.split(trio.Cancelled)
        if rest is None:
            reason = "cancelled"
            raise
        first = rest.exceptions[0]
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        reason = f"failed: {type(first).__name__}: {first}"
        log.error("agent failed", error=reason)
        if cancelled is not None:
            raise cancelled from None
    except Exception as e:
        reason = f"failed: {type(e).__name__}: {e}"
        log.error("agent failed", error=reason)
    finally:  # nothing here awaits, so a cancel cannot cut it short (no shield needed)
        if node.log is None:  # ended before its log opened: nothing to record it in
            log.warning("agent ended before its log opened", reason=reason)
        else:
            try:
                node.log.append(SessionEnded(reason=reason, at=now_iso()))
            except Exception as e:  # a closed or broken log must not hide the outcome
                log.error("could not record SessionEnded", error=str(e))
        # after the record: a reader in another thread that sees the agent no longer
        # running finds its end in the log (the service's views)
        node.reason = reason
        node.state = state_of(reason)
        node.done.set()
        if not reported:
            task_status.started()
        log.info("agent ended", reason=reason, turns=node.turns_taken,
                 cost_usd=round(node.cost_usd, 6))


@asynccontextmanager
async def serving(sup: "Supervisor", node: "AgentNode") -> AsyncIterator[None]:
    """The agent's own MCP servers, running for the block in a nursery of the caller's, their
    tools in ``node.own_tools`` (none configured: nothing started). Leaving stops the servers;
    the tools stay in the table (a call then answers that the server is not running), so a
    descendant still running elsewhere keeps the tool list it recorded."""
    from .supervisor import open_servers
    from .tools import BUILTIN

    async with open_servers(node.mcp_servers, sup.root / "mcp" / node.id) as tools:
        if node.mcp_servers:
            taken = set(sup.tools_for(node.parent)) | {t.name for t in BUILTIN}
            node.own_tools = {}
            for t in tools:
                if t.name in taken or t.name in node.own_tools:
                    log.warning("mcp tool name taken", tool=t.name)
                    continue
                node.own_tools[t.name] = t
        yield


@asynccontextmanager
async def _own_servers(sup: "Supervisor", node: "AgentNode") -> AsyncIterator[None]:
    """The agent's own MCP servers, started inside its cancel scope (``serving``); then its
    log opened (``node.birth``) — so its ``SessionStarted`` lists their tools."""
    async with serving(sup, node):
        if node.log is None:
            birth, node.birth = node.birth, None
            assert birth is not None, "an agent without a log has a birth"
            node.log = birth()
        yield


def finished_turn(node: "AgentNode") -> str | None:
    """The answer of a resumed agent whose last recorded turn already ended it (an assistant
    turn with no tool call), or None: such a turn is never requested again."""
    ctx = node.ctx
    t = ctx.turn(ctx.in_hand) if ctx.in_hand is not None else None
    if t is None or t.role != "assistant" or t.origin != "own" or not t.records:
        return None
    blocks = getattr(t.records[0], "blocks", None) or []
    if any(isinstance(b, ToolUse) for b in blocks):
        return None
    return "\n".join(b.text for b in blocks if isinstance(b, Text) and b.text)


async def _loop(sup: "Supervisor", node: "AgentNode") -> str:
    s = sup.settings_for(node)
    ctx = node.ctx
    if node.resumed:
        node.resumed = False
        answer = finished_turn(node)
        if answer is not None:
            node.answer = answer or node.answer
            return "done"
    while True:
        if node.turns_taken >= s.max_turns:
            return "max_turns"
        if (why := sup.over_budget(node)) is not None:
            log.info("budget stop", why=why)
            return "budget"
        node.log.log.turn_boundary()  # fsync "turn": everything before this boundary is durable
        try:
            await sup.policy.before_request(sup, node)
        except AgentDone:
            return "done"
        request = sup.policy.shape_request(sup, node, build_request(sup, node))
        tid = ctx.next_id()
        node.log.append(TurnStarted(turn=tid, at=now_iso()))
        try:
            response = await _complete(sup, node, request)
        except ContextTooLong:
            return "failed: context"
        except ProviderError as e:
            return f"failed: provider: {e}"
        node.log.assistant(response.blocks, response.stop_reason, response.model or s.model,
                           response.usage, response.recorded_usage)
        node.turns_taken += 1
        _account(sup, node, request, response.usage, response.model)
        calls = [b for b in response.blocks if isinstance(b, ToolUse)]
        text = "\n".join(b.text for b in response.blocks if isinstance(b, Text) and b.text)
        if text:
            node.answer = text
        if logs.DEBUG:
            log.debug("turn", turn=tid, stop_reason=response.stop_reason, calls=len(calls),
                      input_tokens=response.usage.total_input,
                      output_tokens=response.usage.output_tokens,
                      history_bytes=ctx.history_bytes())
        if not calls:
            if await sup.policy.on_idle(sup, node):
                continue  # more work for the same agent (the next recorded prompt, in replay)
            return "done"
        await run_calls(sup, node, calls)
        sup.policy.after_tools(sup, node)


def request_bytes(request: Request, node: "AgentNode | None" = None) -> int:
    """The request's size in compact JSON (messages, system, tools): what its input tokens are
    measured against. The messages' size comes from the renderer when they are what it last
    rendered for ``node``; the system's and tools' from a memo, since they rarely change."""
    n = rendered_bytes(node.ctx, request.messages) if node is not None else None
    if n is None:
        n = len(compact(request.messages))
    if request.system:
        n += _size_of(request.system)
    if request.tools:
        n += _size_of(request.tools)
    return n


_SIZES: dict[int, tuple[object, int]] = {}


def _size_of(value: str | list) -> int:
    """Encoded size of a system prompt or a tools list, remembered by identity (the object is
    held, so its id is not reused while remembered)."""
    hit = _SIZES.get(id(value))
    if hit is not None and hit[0] is value:
        return hit[1]
    n = len(value.encode("utf-8")) if isinstance(value, str) else len(compact(value))
    if len(_SIZES) >= 64:
        _SIZES.clear()
    _SIZES[id(value)] = (value, n)
    return n


def _account(sup: "Supervisor", node: "AgentNode", request: Request, usage: Usage,
             model: str | None) -> None:
    node.usage = node.usage + usage
    sup.usage = sup.usage + usage
    cost = _price(sup, node, usage, model or sup.settings_for(node).model)
    node.cost_usd += cost
    sup.cost_usd += cost
    total = usage.total_input
    if total:
        node.tokens_per_byte = total / max(1, request_bytes(request, node))
    node.growth.observe(total, node.edited)
    node.edited = False


def build_request(sup: "Supervisor", node: "AgentNode") -> Request:
    s = sup.settings_for(node)
    return Request(system=s.system, messages=render(node.ctx), tools=tool_defs(sup, node),
                   max_tokens=s.max_tokens, model=s.model,
                   meta={"agent": node.id, "kind": node.kind, "depth": node.depth,
                         "parent": node.parent.id if node.parent else None})


async def _complete(sup: "Supervisor", node: "AgentNode", request: Request):
    def on_attempt(attempt: int, latency_s: float, usage: Usage | None, error: str | None) -> None:
        sup.provider_calls += 1
        node.log.append(ProviderCall(attempt=attempt, latency_s=round(latency_s, 6), usage=usage,
                                     error=error, model=priced_model(sup, None, node), at=now_iso()))
        if error is None:
            if logs.DEBUG:
                log.debug("provider call", attempt=attempt, latency_s=round(latency_s, 4))
        else:
            log.warning("provider call failed", attempt=attempt, latency_s=round(latency_s, 4),
                        error=error)

    kw: dict = {}
    if sup.text_listeners and getattr(sup.provider, "streams_text", False):
        def on_text(text: str) -> None:
            for listen in sup.text_listeners:
                listen(node.id, text)
        kw["on_text"] = on_text
    try:  # a free slot is taken without a checkpoint: the turn goes on to its request in
        # the same step (a yield here makes every task woken together send its request only
        # after all of them have rendered theirs, so waves of tasks stay in lockstep)
        sup.limiter.acquire_nowait()
    except trio.WouldBlock:
        await sup.limiter.acquire()
    try:
        return await sup.provider.complete(request, on_attempt=on_attempt, **kw)  # type: ignore[call-arg]
    finally:
        sup.limiter.release()


def used_tokens(node: "AgentNode") -> int:
    return node.ctx.used_tokens(node.tokens_per_byte)


def weigh(sup: "Supervisor", node: "AgentNode") -> None:
    """At a turn boundary: harness eviction when due (no provider call), pending marks swept
    first since that region is rewritten anyway; otherwise a sweep when the gate says it pays."""
    ctx = node.ctx
    s = sup.settings_for(node)
    used = used_tokens(node)
    if eviction_due(used, s.context_window, ctx.history_bytes()):
        plan = plan_eviction(ctx, s.keep, economy(sup, node, used))
        if plan is not None:
            sweep_pending(node)
            before = ctx.history_bytes()
            node.log.append(Evicted(residue=Residue(span=plan.span, note=None, by="harness"),
                                    plan=plan.figures))
            node.evictions += 1
            node.edited = True
            sup.on_edit(node, "evict", before)
            log.info("harness eviction", span=list(plan.span), bytes_out=plan.bytes_out,
                     used_tokens=used, keep=plan.figures.keep if plan.figures else s.keep)
            return
    sweep_if_pays(sup, node)


def economy(sup: "Supervisor", node: "AgentNode", used: int) -> Economy | None:
    """The figures the plan weighs under ``keep = "auto"``: cache multipliers and the output
    price from the provider and the price table, growth from the growth meter (or the mean growth
    so far), the eviction line, and the verbatim floor (decision 0220). None for a fixed keep."""
    s = sup.settings_for(node)
    if s.keep != AUTO:
        return None
    ctx = node.ctx
    tpb = node.tokens_per_byte or 0.25
    w, r = _mults(sup)
    price = price_for(priced_model(sup, None))
    fixed = max(0.0, used - ctx.history_bytes() * tpb)
    due = (due_line(s.context_window) if s.context_window else
           EVICT_THRESHOLD_BYTES * tpb + fixed)
    growth = node.growth.per_request or used / max(1, node.turns_taken)
    return Economy(tokens_per_byte=tpb, write_mult=w, read_mult=r,
                   output_mult=price.output / price.input if price.input else 5.0,
                   growth_tokens=growth, due_tokens=due, fixed_tokens=fixed,
                   floor_tokens=s.keep_floor_tokens)


class AgentDone(Exception):
    """Raised by a policy's ``before_request`` when there is nothing left to request (a
    replayed trajectory has no assistant turn left): the agent ends ``done``."""


class HarnessPolicy:
    """What the loop does around each request: ours. Replay swaps in a peer's model.

    ``before_request`` weighs eviction at the turn boundary; ``after_tools`` sends the pressure
    reminder; ``on_idle`` decides whether a turn with no tool call ends the agent (it does);
    ``shape_request`` may rewrite the request before it is sent (it does not).
    """

    async def before_request(self, sup: "Supervisor", node: "AgentNode") -> None:
        weigh(sup, node)

    def after_tools(self, sup: "Supervisor", node: "AgentNode") -> None:
        pressure(sup, node)

    async def on_idle(self, sup: "Supervisor", node: "AgentNode") -> bool:
        return False

    def shape_request(self, sup: "Supervisor", node: "AgentNode", request: Request) -> Request:
        return request


def pressure(sup: "Supervisor", node: "AgentNode") -> None:
    """At a tool boundary: one reminder per excursion above the pressure line."""
    s = sup.settings_for(node)
    used = used_tokens(node)
    if node.latch.update(used, s.context_window, node.ctx.history_bytes()):
        text = pressure_reminder(node.ctx, used, s.context_window, s.keep,
                                 economy(sup, node, used))
        extra = candidates_line(sup, node)
        node.log.append(Steering(text=text + (" " + extra if extra else ""), by="harness"))


CUT_OFF = ("this call was cut off by max_tokens: its input is not valid JSON, so it was not run")


async def run_calls(sup: "Supervisor", node: "AgentNode", calls: list[ToolUse]) -> None:
    """Run tool calls in call order: evict, mark and agents_start one at a time, door reads and
    user tools concurrently; record every result in call order in one ToolResults."""
    results: list[ToolResult | None] = [None] * len(calls)
    tools = sup.tools_for(node)

    async def run_one(i: int, call: ToolUse) -> None:
        results[i] = await call_tool(sup, node, call)

    if len(calls) == 1:  # nothing to run beside it: no nursery to open and close
        call = calls[0]
        if not isinstance(call.input, dict) and not (
                sup.tool_fallback is not None and call.name not in tools and (
                    not sup.settings.builtin_tools or call.name not in EXCLUSIVE)):
            results[0] = ToolResult(tool_use_id=call.id, content=CUT_OFF, is_error=True)
        else:
            await run_one(0, call)
        node.log.append(ToolResults(results=[r for r in results if r is not None]))
        return
    async with trio.open_nursery() as nursery:
        for i, call in enumerate(calls):
            if sup.tool_fallback is not None and call.name not in tools and (
                    not sup.settings.builtin_tools or call.name not in EXCLUSIVE):
                nursery.start_soon(run_one, i, call)  # answered by the fallback, as recorded
            elif not isinstance(call.input, dict):
                results[i] = ToolResult(tool_use_id=call.id, content=CUT_OFF, is_error=True)
            elif call.name in EXCLUSIVE:
                await run_one(i, call)
            else:
                nursery.start_soon(run_one, i, call)
    node.log.append(ToolResults(results=[r for r in results if r is not None]))
