"""The model-facing tools: what each call does (their definitions are ``tooldefs``).

A refusal reaches the model as an error tool result naming the state; an unknown tool gets an
error naming the known ones; a user tool's exception is isolated into an error result. Results
are compact JSON (or a short factual sentence).

Every handler takes ``(env, node, input)``: the agent environment (``env.AgentEnv``) and the
calling agent. The figures the context tools quote come from ``weighing``, the module the loop
weighs with; the agents tools create children through ``env.spawner`` alone.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import structlog
import trio

from ..session.context import Turn
from ..session.errors import Refusal, SessionError
from ..session.eviction import due_line, plan_eviction, pressure_line
from ..session.records import Marked, Residue, ToolResult, ToolUse, compact
from ..session.render import residue_message
from ..session.sweep import candidates

from . import doorcalls
from .synod import run_synod
from .tooldefs import BUILTIN, tool_defs
from .usertools import ToolError, ToolInputError
from .weighing import economy, sweep_gate, sweep_horizon, sweep_pending, used_tokens

if TYPE_CHECKING:
    from .env import AgentEnv
    from .node import AgentNode

__all__ = ["BUILTIN", "EXCLUSIVE", "call_tool", "parse_block", "survey", "tool_defs"]

log = structlog.get_logger("mnemon.tools")

EXCLUSIVE = frozenset({"context_evict", "context_mark", "agents_start", "agents_cancel",
                       "agents_synod"})


def _json(value: Any) -> str:
    return compact(value).decode("utf-8")


# --------------------------------------------------------------------------- dispatch


async def call_tool(env: "AgentEnv", node: "AgentNode", call: ToolUse,
                    tools: dict[str, Any] | None = None, *,
                    builtin: bool | None = None) -> ToolResult:
    """Answer one call: a built-in (unless ``builtin`` — default: the agent's settings — is
    off), a tool of the agent's table (``tools``, default ``env.tools_for(node)``), the env's
    fallback, or an error naming the known tools."""
    if builtin is None:
        builtin = env.settings_for(node).builtin_tools
    fn = _HANDLERS.get(call.name) if builtin else None
    if tools is None:
        tools = env.tools_for(node)
    try:
        if fn is not None:
            out = await fn(env, node, call.input)
        elif call.name in tools:
            t = tools[call.name]
            out = await (t.call(env, node, call.input) if getattr(t, "needs_agent", False)
                         else t(call.input))  # ask_<role> needs the caller (roles.book)
        elif env.tool_fallback is not None:
            return await env.tool_fallback(node, call)
        else:
            known = ", ".join([t.name for t in tool_defs(env, node, tools)])
            return ToolResult(tool_use_id=call.id, content=f"unknown tool {call.name!r}; the "
                              f"known tools are: {known}", is_error=True)
        return ToolResult(tool_use_id=call.id, content=out, is_error=False)
    except (Refusal, ToolInputError, ToolError) as e:
        return ToolResult(tool_use_id=call.id, content=str(e), is_error=True)
    except SessionError as e:
        return ToolResult(tool_use_id=call.id, content=str(e), is_error=True)
    except Exception as e:  # a user tool's crash never reaches the loop
        log.warning("tool failed", tool=call.name, error=repr(e))
        return ToolResult(tool_use_id=call.id, content=f"tool {call.name} failed: "
                          f"{type(e).__name__}: {e}", is_error=True)


def _arg(inp: Any, name: str, typ: type | tuple, default: Any = ..., *, tool: str) -> Any:
    if not isinstance(inp, dict):
        raise ToolInputError(f"{tool} takes a JSON object")
    if name not in inp or inp[name] is None:
        if default is ...:
            raise ToolInputError(f"{tool} needs {name!r}")
        return default
    v = inp[name]
    if typ is int and isinstance(v, bool) or not isinstance(v, typ):
        raise ToolInputError(f"{tool}: {name!r} must be {getattr(typ, '__name__', typ)}")
    return v


# --------------------------------------------------------------------------- context tools


def survey(env: "AgentEnv", node: "AgentNode") -> dict:
    """What ``context_survey`` answers (and ``mnemon chat``'s ``/context`` shows): the table
    every surface shows (``session/survey.py``) with the live agent's figures on top."""
    from ..session.survey import survey as survey_table

    ctx = node.ctx
    s = env.settings_for(node)
    used = used_tokens(node)
    table = survey_table(ctx, node.tokens_per_byte)  # what the log says, as every surface shows it
    plan = plan_eviction(ctx, s.keep, economy(env, node, used))
    large = []
    for t in ctx.resident():
        if t.records is not None and t.id != ctx.in_hand:
            for b in ctx.blocks(t.id):
                if b.length >= 2048 and b.index not in t.swept:
                    large.append({"block": b.address, "kind": b.kind, "bytes": b.length})
    large.sort(key=lambda x: -x["bytes"])
    g = sweep_gate(env, node)
    horizon = sweep_horizon(env, node)
    out = {
        "context_window": s.context_window,
        "used_tokens": used,
        "eviction_at": round(due_line(s.context_window)) if s.context_window else None,
        "pressure_at": round(pressure_line(s.context_window)) if s.context_window else None,
        "history_bytes": table["history_bytes"],
        "frontier": table["frontier"],
        "plan": ({"span": list(plan.span), "bytes_out": plan.bytes_out,
                  "keep": (plan.figures.keep if plan.figures else
                           round(plan.bytes_kept / max(1, ctx.history_bytes()), 4))}
                 if plan else None),
        "large_blocks": large[:20],
        "marks": table["marks"],
        "sweep_gate": {**g.as_dict(), "horizon_requests": round(horizon, 1),
                       "would_sweep": g.pays(horizon)},
        "candidates": [c.as_dict() for c in candidates(ctx)],
    }
    return out


async def _context_survey(env, node, inp) -> str:
    return _json(survey(env, node))


async def _context_evict(env, node, inp) -> str:
    from ..session.context import check_note
    from ..session.records import Evicted

    a = _arg(inp, "from", int, tool="context_evict")
    b = _arg(inp, "to", int, tool="context_evict")
    note = _arg(inp, "note", str, None, tool="context_evict")
    if note == "":
        note = None
    ctx = node.ctx
    check_note(note)
    ctx.check_span((a, b))
    sweep_pending(node)  # the region is rewritten anyway
    before = ctx.history_bytes()
    node.log.append(Evicted(residue=Residue(span=(a, b), note=note, by="model")))
    node.edited = True
    env.on_edit(node, "evict", before)
    left = before - ctx.history_bytes()
    return (f"turns {a}-{b} left the context ({left} bytes fewer in it); they stay readable "
            f"with transcript_read(turns=\"{a}-{b}\")")


def parse_block(value: Any) -> tuple[int, int]:
    if isinstance(value, str):
        parts = value.strip().split(".")
        if len(parts) == 2 and all(p.strip().isdigit() for p in parts):
            return int(parts[0]), int(parts[1])
    elif isinstance(value, list) and len(value) == 2 and all(
            isinstance(x, int) and not isinstance(x, bool) for x in value):
        return value[0], value[1]
    raise ToolInputError(f"a block is \"turn.index\" such as \"41.2\", not {value!r}")


async def _context_mark(env, node, inp) -> str:
    block = parse_block(_arg(inp, "block", (str, list), tool="context_mark"))
    repl = _arg(inp, "replacement", str, tool="context_mark")
    s = env.settings_for(node)
    cap = s.mark_cap_bytes
    if len(repl.encode()) > cap:
        raise Refusal(f"a replacement is at most {cap} bytes — this one has {len(repl.encode())}")
    node.log.append(Marked(block=block, replacement=repl))
    g = sweep_gate(env, node)
    pb = g.payback_requests
    return _json({"marked": f"{block[0]}.{block[1]}", "pending": len(node.ctx.marks),
                  "reclaimed_tokens": round(g.reclaimed_tokens),
                  "payback_requests": None if math.isinf(pb) else round(pb, 1),
                  "sweeps_when_payback_at_most": s.sweep_horizon})


# --------------------------------------------------------------------------- door tools


def _target(node: "AgentNode", inp: Any) -> "AgentNode":
    aid = inp.get("agent") if isinstance(inp, dict) else None
    if aid is None or aid == node.id:
        return node
    desc = node.descendants()
    if aid not in desc:
        known = ", ".join(sorted(desc)) or "none"
        raise Refusal(f"{aid!r} is not one of your descendants (yours: {known})")
    return desc[aid]


async def _transcript_index(env, node, inp) -> str:
    return _json(await doorcalls.index(env, _target(node, inp)))


async def _transcript_read(env, node, inp) -> str:
    target = _target(node, inp)
    turns = _arg(inp, "turns", (list, str, int), tool="transcript_read")
    return _json(await doorcalls.read(env, target, turns))


async def _transcript_grep(env, node, inp) -> str:
    target = _target(node, inp)
    pattern = _arg(inp, "pattern", str, tool="transcript_grep")
    turns = _arg(inp, "turns", (list, str, int), None, tool="transcript_grep")
    return _json(await doorcalls.grep(env, target, pattern, turns,
                                      timeout_s=env.settings_for(node).grep_timeout_s))


# --------------------------------------------------------------------------- agents


async def _agents_start(env, node, inp) -> str:
    task = _arg(inp, "task", str, tool="agents_start")
    role = _arg(inp, "role", str, None, tool="agents_start")
    kind = _arg(inp, "kind", str, None, tool="agents_start")
    if not task.strip():
        raise Refusal("a child's task may not be empty")
    if role is not None:  # a role's kind is the role's (docs/roles.md)
        if env.roles is None:
            raise Refusal("this run has no roles; start a child without one")
        own = env.roles.get(role)
        if own is not None and kind is not None and kind != own.kind:
            raise Refusal(f"the {role} role is a {own.kind} agent, not {kind}")
        kind = own.kind if own is not None else (kind or "mnemon")
        child = env.spawner.new_child(node, task, kind, role=role)
    else:
        kind = kind or "mnemon"
        child = env.spawner.new_child(node, task, kind)
    assert node.nursery is not None
    env.spawner.start(child, node.nursery)
    first = child.ctx.turns[-1].id if child.ctx.turns else None
    log.info("child started", child=child.id, kind=kind, first_id=first, role=role)
    out = {"agent": child.id, "kind": kind, "first_id": first}
    if child.role is not None:
        out["role"] = child.role
    return _json(out)


async def _agents_wait(env, node, inp) -> str:
    ids = _arg(inp, "agents", list, None, tool="agents_wait")
    timeout = _arg(inp, "timeout_s", (int, float), None, tool="agents_wait")
    desc = node.descendants()
    if ids is None:
        targets = list(node.children.values())
    else:
        missing = [a for a in ids if a not in desc]
        if missing:
            raise Refusal(f"{', '.join(map(repr, missing))} not among your descendants "
                          f"(yours: {', '.join(sorted(desc)) or 'none'})")
        targets = [desc[a] for a in ids]
    with trio.move_on_after(timeout if timeout is not None else math.inf):
        for t in targets:
            await t.done.wait()
    return _json([t.outcome() for t in targets])


async def _agents_cancel(env, node, inp) -> str:
    aid = _arg(inp, "agent", str, tool="agents_cancel")
    desc = node.descendants()
    if aid not in desc:
        raise Refusal(f"{aid!r} is not one of your descendants "
                      f"(yours: {', '.join(sorted(desc)) or 'none'})")
    target = desc[aid]
    target.scope.cancel()
    with trio.move_on_after(10):
        await target.done.wait()
    return _json(target.outcome())


async def _agents_synod(env, node, inp) -> str:
    question = _arg(inp, "question", str, tool="agents_synod")
    n = _arg(inp, "n", int, tool="agents_synod")
    reduce = _arg(inp, "reduce", str, "vote", tool="agents_synod")
    stances = _arg(inp, "stances", list, None, tool="agents_synod")
    if stances is not None and not all(isinstance(x, str) for x in stances):
        raise ToolInputError("agents_synod: 'stances' must be a list of strings")
    result = await run_synod(env, node, question, n=n, reduce=reduce, stances=stances)
    log.info("synod", n=n, reduce=reduce, children=[c["agent"] for c in result.children])
    return _json(result.as_dict())


_HANDLERS = {
    "context_survey": _context_survey,
    "context_evict": _context_evict,
    "context_mark": _context_mark,
    "transcript_index": _transcript_index,
    "transcript_read": _transcript_read,
    "transcript_grep": _transcript_grep,
    "agents_start": _agents_start,
    "agents_wait": _agents_wait,
    "agents_cancel": _agents_cancel,
    "agents_synod": _agents_synod,
}
