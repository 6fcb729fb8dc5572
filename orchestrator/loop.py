"""The agent loop.

weigh eviction → render → request → record the assistant turn → run its tool calls → record the
results (and the pressure reminder when due) → repeat, until a turn ends without tool calls,
MAX_TURNS, cancellation or a budget stop. Every agent writes ``SessionEnded{reason}`` in a
shielded finally; a crash leaves none.

The loop reads the run through the agent environment (``env.AgentEnv``), weighs with
``weighing``, runs calls through the agent's tool table (``tools``: one table per agent and
turn, behind its policy's gate, each tool saying how it may run) and starts an agent's own MCP servers with ``servers``;
it never imports the supervisor, which sits on top and starts loops (``run_agent``).
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import structlog
import trio

from ..lineage.runroot import now_iso
from . import logs
from ..providers.base import Request
from ..providers.prices import cost_usd
from ..providers.errors import ContextTooLong, ProviderError
from ..session.records import (
    ProviderCall,
    SessionEnded,
    Text,
    ToolResult,
    ToolResults,
    ToolUse,
    TurnStarted,
    WorkspaceSnapshot,
    Usage,
    compact,
    size_of,
)
from ..session.render import render, rendered_bytes
from .delegation import told_parent
from .servers import own_servers
from .tools.definitions import tool_defs
from .tools.gate import resume_approvals
from .typed.turn import settle, settle_resumed
from .weighing import pressure, priced_as, weigh

if TYPE_CHECKING:
    from .env import AgentEnv
    from .node import AgentNode

log = structlog.get_logger("mnemon.agent")
_NOTHING = nullcontext()


def state_of(reason: str) -> str:
    """An agent's state from the reason its log ended with."""
    return ("ended" if reason in ("done", "max_turns", "budget") else
            "cancelled" if reason == "cancelled" else "failed")


async def run_agent(env: "AgentEnv", node: "AgentNode",
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
            async with (own_servers(env, node) if node.mcp_servers or node.log is None
                        else _NOTHING):
                async with trio.open_nursery() as nursery:
                    node.nursery = nursery
                    node.started = True
                    if node.workspace is not None:  # its directory, again its own (a re-run)
                        node.workspace.claim()
                    task_status.started()
                    reported = True
                    for child in list(node.children.values()):  # resumed children go on inside
                        if not child.started and child.state == "running":
                            nursery.start_soon(run_agent, env, child, name=f"agent {child.id}")
                    reason = await _loop(env, node)
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
                node.log.append(SessionEnded(reason=reason, at=now_iso(), output=node.output))
            except Exception as e:  # a closed or broken log must not hide the outcome
                log.error("could not record SessionEnded", error=str(e))
        # after the record: a reader in another thread that sees the agent no longer
        # running finds its end in the log (the service's views)
        if node.workspace is not None:
            node.workspace.release()  # its directory is free for another agent
        node.reason = reason
        node.state = state_of(reason)
        node.done.set()
        if reason in ("budget", "max_turns") and node.parent is not None:
            told_parent(node, reason)
        if not reported:
            task_status.started()
        log.info("agent ended", reason=reason, turns=node.turns_taken,
                 cost_usd=round(node.cost_usd, 6))


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


async def _loop(env: "AgentEnv", node: "AgentNode") -> str:
    # what stays the same for the whole of this agent's loop, looked up once: its settings
    # (frozen, and its own for as long as it runs), its log, the run's spend meter
    s = env.settings_for(node)
    priced = priced_as(s)
    ctx = node.ctx
    alog = node.log
    spend = env.spend
    if node.resumed:
        node.resumed = False
        if node.workspace is not None:  # its files as its log last names them (0356)
            await reconcile_workspace(node)
        await resume_approvals(env, node)  # calls its log shows asked about, answered first
        if node.output_type is not None and (end := await settle_resumed(env, node)) is not None:
            return end  # a typed agent's last answer already judged (typed.turn)
        answer = finished_turn(node) if node.output_type is None else None
        if answer is not None:
            node.answer = answer or node.answer
            return "done"
    max_turns = s.max_turns if node.cap_turns is None else min(s.max_turns, node.cap_turns)
    while True:
        if node.turns_taken >= max_turns:
            return "max_turns"
        if (why := spend.over_budget(node)) is not None:
            log.info("budget stop", why=why)
            return "budget"
        alog.log.turn_boundary()  # fsync "turn": everything before this boundary is durable
        policy = env.policy  # read each turn: a host may swap it while agents run
        try:
            await policy.before_request(env, node)
        except AgentDone:
            return "done"
        table = env.table_for(node)  # the agent's tools, once for the whole turn
        seen = node.steered  # steering written into it from outside, up to this request
        request = node.last_request = policy.shape_request(env, node,
                                                           build_request(env, node, table))
        tid = ctx.next_id()
        alog.append(TurnStarted(turn=tid, at=now_iso()))
        try:
            response = await _complete(env, node, request, priced)
        except ContextTooLong:
            return "failed: context"
        except ProviderError as e:
            return f"failed: provider: {e}"
        alog.assistant(response.blocks, response.stop_reason, response.model or s.model,
                       response.usage, response.recorded_usage)
        node.turns_taken += 1
        account(env, node, request, response.usage, response.model)
        calls: list[ToolUse] = []
        texts: list[str] = []
        for b in response.blocks:
            if isinstance(b, ToolUse):
                calls.append(b)
            elif isinstance(b, Text) and b.text:
                texts.append(b.text)
        if texts:
            node.answer = "\n".join(texts)
        if logs.DEBUG:
            log.debug("turn", turn=tid, stop_reason=response.stop_reason, calls=len(calls),
                      input_tokens=response.usage.total_input,
                      output_tokens=response.usage.output_tokens,
                      history_bytes=ctx.history_bytes())
        if node.output_type is not None:  # a typed agent: is this its answer? (typed.turn)
            end, calls = await settle(env, node, response, calls)
            if end is not None:
                return end
            if not calls:
                continue  # the answer did not fit: the model is told why and tries again
        node.steered_seen = seen
        if not calls:
            if await policy.on_idle(env, node):
                continue  # more work for the same agent (the next recorded prompt, in replay)
            if node.steered > seen:  # a message came while it answered: it reads it first
                continue
            return "done"
        await run_calls(env, node, calls, table, stop_reason=response.stop_reason)
        ws = node.workspace
        if ws is not None and ws.changed:  # the files this turn's tools left (docs/workspace.md)
            snap = await ws.turn_snapshot()
            if snap is not None:
                alog.append(WorkspaceSnapshot(snapshot=snap, turn=tid, at=now_iso()))
        policy.after_tools(env, node)


def request_bytes(request: Request, node: "AgentNode | None" = None) -> int:
    """The request's size in compact JSON (messages, system, tools): what its input tokens are
    measured against. The messages' size comes from the renderer when they are what it last
    rendered for ``node``; the system's and tools' from a memo, since they rarely change."""
    n = rendered_bytes(node.ctx, request.messages) if node is not None else None
    if n is None:
        n = len(compact(request.messages))
    if request.system:
        n += size_of(request.system)
    if request.tools:
        n += size_of(request.tools)
    return n


def account(env: "AgentEnv", node: "AgentNode", request: Request, usage: Usage,
            model: str | None) -> None:
    """Add one request's usage and cost to the agent and to the run's spend meter, priced with
    the agent's own settings (``weighing.priced_as``, its cache TTL), measure the tokens per
    byte on it, and feed the growth meter. The loop calls it after every turn's response;
    replay after a summarisation request, which opens no turn."""
    s = env.settings_for(node)
    node.usage = node.usage + usage
    cost = cost_usd(usage, priced_as(s, model), s.cache_ttl)
    node.cost_usd += cost
    env.spend.add(usage, cost)
    total = usage.total_input
    if total:
        node.tokens_per_byte = total / max(1, request_bytes(request, node))
    node.growth.observe(total, node.edited)
    node.edited = False


def build_request(env: "AgentEnv", node: "AgentNode", table: Any = None) -> Request:
    """The request for the agent's next turn: its system prompt, its rendered context, the
    tools it is offered (``table``: its tool table, default ``env.table_for(node)``'s) and
    ``meta``."""
    s = env.settings_for(node)
    parent = node.parent
    meta = {"agent": node.id, "kind": node.kind, "depth": node.depth,
            "parent": parent.id if parent is not None else None, "lineage": node.lineage()}
    if node.role is not None:  # an agent of a named role (docs/roles.md)
        meta["role"] = node.role
    if node.requests:  # answers recorded before this request (a resumed agent's included)
        meta["requests"] = node.requests
    return Request(system=s.system, messages=render(node.ctx),
                   tools=table.definitions() if table is not None else tool_defs(env, node),
                   max_tokens=s.max_tokens, model=s.model,
                   output=node.output_type, meta=meta)


async def _complete(env: "AgentEnv", node: "AgentNode", request: Request,
                    priced: str | None):
    """Send the request under the run's limiter; each attempt is recorded as a
    ``ProviderCall`` whose model is ``priced`` (``weighing.priced_as``)."""
    spend = env.spend

    def on_attempt(attempt: int, latency_s: float, usage: Usage | None, error: str | None) -> None:
        spend.provider_calls += 1
        node.log.append(ProviderCall(attempt=attempt, latency_s=round(latency_s, 6), usage=usage,
                                     error=error, model=priced, at=now_iso()))
        if error is None:
            if usage is not None:
                node.requests += 1
            if logs.DEBUG:
                log.debug("provider call", attempt=attempt, latency_s=round(latency_s, 4))
        else:
            log.warning("provider call failed", attempt=attempt, latency_s=round(latency_s, 4),
                        error=error)

    kw: dict = {}
    provider = env.provider_for(node)  # its role's, in a run with roles
    listeners = env.text_listeners
    if listeners and getattr(provider, "streams_text", False):
        def on_text(text: str) -> None:
            for listen in listeners:
                listen(node.id, text)
        kw["on_text"] = on_text
    limiter = env.limiter
    try:  # a free slot is taken without a checkpoint: the turn goes on to its request in
        # the same step (a yield here makes every task woken together send its request only
        # after all of them have rendered theirs, so waves of tasks stay in lockstep)
        limiter.acquire_nowait()
    except trio.WouldBlock:
        await limiter.acquire()
    try:
        return await provider.complete(request, on_attempt=on_attempt, **kw)  # type: ignore[call-arg]
    finally:
        limiter.release()


class AgentDone(Exception):
    """Raised by a policy's ``before_request`` when there is nothing left to request (a
    replayed trajectory has no assistant turn left): the agent ends ``done``."""


class HarnessPolicy:
    """What the loop does around each request: ours. Replay swaps in a peer's model.

    Each hook is called with the agent environment and the agent (``env.AgentEnv``,
    ``node.AgentNode``; before the env existed they were given the supervisor):
    ``before_request`` weighs eviction at the turn boundary; ``after_tools`` sends the pressure
    reminder; ``on_idle`` decides whether a turn with no tool call ends the agent (it does);
    ``shape_request`` may rewrite the request before it is sent (it does not).
    """

    async def before_request(self, env: "AgentEnv", node: "AgentNode") -> None:
        weigh(env, node)

    def after_tools(self, env: "AgentEnv", node: "AgentNode") -> None:
        pressure(env, node)

    async def on_idle(self, env: "AgentEnv", node: "AgentNode") -> bool:
        return False

    def shape_request(self, env: "AgentEnv", node: "AgentNode", request: Request) -> Request:
        return request


CUT_OFF = ("this call was cut off by max_tokens: its input is not valid JSON, so it was not run")
_JSON_KINDS = {list: "an array", str: "a string", int: "a number", float: "a number",
               bool: "a boolean", type(None): "null"}


def not_run(call: ToolUse, stop_reason: str | None) -> str:
    """What a call whose input is not a JSON object is answered: cut off by the output limit
    when its response was (``CUT_OFF``), else the real cause — arguments that are not valid
    JSON, with the parser's complaint and a bounded, escaped excerpt where it stopped, or JSON
    that is not an object. Parsing is linear in the arguments (nesting too deep stops early)."""
    if stop_reason == "max_tokens":
        return CUT_OFF
    raw = call.input
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as e:
            near = json.dumps(e.doc[max(0, e.pos - 24):e.pos + 24])  # escapes control characters
            return (f"this call was not run: its arguments are not valid JSON ({e.msg} at "
                    f"line {e.lineno} column {e.colno}, near {near}); send them as one JSON "
                    "object")
        except RecursionError:
            return "this call was not run: its arguments nest too deeply to parse as JSON"
    kind = _JSON_KINDS.get(type(raw), "not an object")
    return f"this call was not run: its arguments are {kind}, not a JSON object"


async def reconcile_workspace(node: "AgentNode") -> None:
    """A reopened agent's workspace brought back to the snapshot its log names last; what its
    directory held beyond it (a crashed turn's writes) is kept in the store and named in the
    record (``aside``), never silently lost or kept (docs/workspace.md, "Resume")."""
    ws = node.workspace
    aside = await ws.reconcile()
    if aside is not None:
        node.log.append(WorkspaceSnapshot(snapshot=ws.recorded, why="resume", aside=aside,
                                          at=now_iso()))
        log.warning("workspace changes after the last snapshot kept aside", agent=node.id,
                    aside=aside, restored=ws.recorded)


async def _in_tool(node: "AgentNode", table: Any, call: ToolUse) -> ToolResult:
    """One call, with the agent marked as in it meanwhile (the status's ``in_tools``)."""
    tools = node.in_tools
    if tools is None:
        tools = node.in_tools = {}
    tools[call.id] = call.name
    try:
        return await table.call(call)
    finally:
        tools.pop(call.id, None)


async def run_calls(env: "AgentEnv", node: "AgentNode", calls: list[ToolUse],
                    table: Any = None, *, stop_reason: str | None = None) -> None:
    """Run one response's tool calls and record every result in call order in one
    ``ToolResults``. ``table``: the agent's tool table for the turn (``tools.ToolTable``, or
    its gate ``tools.gate.Gated``; default ``env.table_for(node)``), which answers each call and
    says how it may run (``tools.base``, decision 0328): ``shared`` calls run beside the
    others, ``serial`` ones one at a time in call order, an ``exclusive`` one after the serial
    calls before it and before any call after it starts. A call no tool claims is the run's
    fallback's, as recorded (replay). ``stop_reason``: the response's, which tells a call cut
    off by max_tokens from one whose arguments are not JSON (``not_run``)."""
    if table is None:
        table = env.table_for(node)
    results: list[ToolResult | None] = [None] * len(calls)

    def refused(call: ToolUse, mode: str | None) -> ToolResult | None:
        """A call a tool claims whose input is not a JSON object is answered, not run (the
        fallback answers what no tool claims as recorded, whatever its input)."""
        if mode is None or isinstance(call.input, dict):
            return None
        return ToolResult(tool_use_id=call.id, content=not_run(call, stop_reason),
                          is_error=True)

    if len(calls) == 1:  # nothing to run beside it: no nursery to open and close
        call = calls[0]
        results[0] = refused(call, table.mode(call)) or await _in_tool(node, table, call)
        node.log.append(ToolResults(results=[r for r in results if r is not None]))
        return

    async def one(i: int, call: ToolUse) -> None:
        results[i] = await _in_tool(node, table, call)

    async def one_serial(i: int, call: ToolUse, after: trio.Event | None,
                         done: trio.Event) -> None:
        try:
            if after is not None:
                await after.wait()
            results[i] = await _in_tool(node, table, call)
        finally:
            done.set()

    tail: trio.Event | None = None  # the end of the last serial call started
    async with trio.open_nursery() as nursery:
        for i, call in enumerate(calls):
            mode = table.mode(call)
            if (no := refused(call, mode)) is not None:
                results[i] = no
            elif mode == "exclusive":
                if tail is not None:
                    await tail.wait()
                await one(i, call)
            elif mode == "serial":
                done = trio.Event()
                nursery.start_soon(one_serial, i, call, tail, done)
                tail = done
            else:  # shared, or the fallback's (as recorded)
                nursery.start_soon(one, i, call)
    node.log.append(ToolResults(results=[r for r in results if r is not None]))
