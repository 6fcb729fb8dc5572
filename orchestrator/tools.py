"""The model-facing tools: definitions (JSON Schema) and what each call does.

A refusal reaches the model as an error tool result naming the state; an unknown tool gets an
error naming the known ones; a user tool's exception is isolated into an error result. Results
are compact JSON (or a short factual sentence).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import structlog
import trio

from ..providers.base import ToolDef
from ..session.context import Turn
from ..session.errors import Refusal, SessionError
from ..session.records import Marked, Residue, Swept, ToolResult, ToolUse, compact
from ..session.render import residue_message
from ..session.sweep import READ_MULT, WRITE_MULT, candidates, gate

from . import doorcalls
from .usertools import ToolError, ToolInputError

if TYPE_CHECKING:
    from .supervisor import AgentNode, Supervisor

log = structlog.get_logger("mnemon.tools")

EXCLUSIVE = frozenset({"context_evict", "context_mark", "agents_start", "agents_cancel",
                       "agents_synod"})

_TURNS = {"description": "turn ids: a list such as [3, 5] or a string such as \"3,5-9\"",
          "anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "string"}]}
_AGENT = {"type": "string", "description": "a descendant's agent id, to read its transcript "
          "in its own id space (default: your own)"}

BUILTIN: list[ToolDef] = [
    ToolDef("context_survey",
            "Survey your context: the frontier (turns and residues in order, with bytes), used "
            "tokens against the eviction line, what a harness eviction would cut, large blocks, "
            "pending marks with the sweep gate's figures, and blocks proposed for marking.",
            {"type": "object", "properties": {}, "additionalProperties": False}),
    ToolDef("context_evict",
            "Evict a contiguous run of your context, turns [from, to], leaving a residue with an "
            "optional one-line note (at most 240 bytes) for yourself. Nothing is lost: evicted "
            "turns stay readable with transcript_read and transcript_grep. The span may not "
            "split a residue or touch the turn in hand.",
            {"type": "object", "properties": {
                "from": {"type": "integer", "description": "first turn id of the span"},
                "to": {"type": "integer", "description": "last turn id of the span"},
                "note": {"type": "string", "description": "one line, at most 240 bytes"}},
             "required": ["from", "to"], "additionalProperties": False}),
    ToolDef("context_mark",
            "Mark one block dead and write, now while it is in front of you, the shorter text "
            "that will replace it when the harness sweeps (cheap: changes nothing sent until "
            "the sweep). Blocks are addressed \"turn.index\" (e.g. \"41.2\").",
            {"type": "object", "properties": {
                "block": {"description": "\"turn.index\" or [turn, index]",
                          "anyOf": [{"type": "string"},
                                    {"type": "array", "items": {"type": "integer"},
                                     "minItems": 2, "maxItems": 2}]},
                "replacement": {"type": "string", "description": "shorter than the block"}},
             "required": ["block", "replacement"], "additionalProperties": False}),
    ToolDef("transcript_index",
            "Every turn of your transcript, oldest first: id, role, label, bytes, held "
            "(resident / evicted / withdrawn / swept), the residue over it, origin and source.",
            {"type": "object", "properties": {"agent": _AGENT}, "additionalProperties": False}),
    ToolDef("transcript_read",
            "Read turns back verbatim — resident, evicted, withdrawn or inherited from an "
            "ancestor — as the records that were written.",
            {"type": "object", "properties": {"turns": _TURNS, "agent": _AGENT},
             "required": ["turns"], "additionalProperties": False}),
    ToolDef("transcript_grep",
            "Search your whole transcript (your lineage included) with a regular expression, "
            "line by line: at most 100 hits, oldest first, and the total count.",
            {"type": "object", "properties": {
                "pattern": {"type": "string", "description": "a regular expression"},
                "turns": _TURNS, "agent": _AGENT},
             "required": ["pattern"], "additionalProperties": False}),
    ToolDef("agents_start",
            "Start a child agent on a task; returns at once with its id. A \"mnemon\" child "
            "inherits your whole context by reference (it can read all of your transcript); a "
            "\"fresh\" child starts empty. The task is its first prompt, verbatim.",
            {"type": "object", "properties": {
                "task": {"type": "string"},
                "kind": {"type": "string", "enum": ["mnemon", "fresh"], "default": "mnemon"}},
             "required": ["task"], "additionalProperties": False}),
    ToolDef("agents_wait",
            "Wait for children (default: all of yours) to end, or until timeout_s; returns each "
            "one's state, final answer and cost. Read a child's transcript with the transcript "
            "tools and its id.",
            {"type": "object", "properties": {
                "agents": {"type": "array", "items": {"type": "string"}},
                "timeout_s": {"type": "number"}}, "additionalProperties": False}),
    ToolDef("agents_cancel",
            "Cancel a child (and its descendants).",
            {"type": "object", "properties": {"agent": {"type": "string"}},
             "required": ["agent"], "additionalProperties": False}),
    ToolDef("agents_synod",
            "Fork n mnemon children from your context at once, each given the question (and "
            "its stance, if you give stances), and wait for all of them. reduce \"vote\" "
            "returns the majority of their normalised answers (a tie is reported, not broken); "
            "\"merge\" returns every answer for you to merge. Either way you get each child's "
            "id, state and answer, and can read any child's transcript with the transcript "
            "tools.",
            {"type": "object", "properties": {
                "question": {"type": "string", "description": "each child's prompt, verbatim"},
                "n": {"type": "integer", "minimum": 1, "maximum": 32,
                      "description": "how many children"},
                "reduce": {"type": "string", "enum": ["vote", "merge"], "default": "vote"},
                "stances": {"type": "array", "items": {"type": "string"},
                            "description": "optional: one stance per child, in order, added "
                                           "after the question"}},
             "required": ["question", "n"], "additionalProperties": False}),
]


_NO_TOOLS: list[ToolDef] = []


def tool_defs(sup: "Supervisor", node: "AgentNode | None" = None) -> list[ToolDef]:
    """The tools offered to ``node``: the built-ins, the run's, then its lineage's own MCP
    servers' (``Supervisor.tools_for``).

    The same list object while they are the same tools with the same name, description and
    schema, so what is derived from it per request (its encoded size, the opening record's tool
    list) is derived once. A few tool sets are remembered (agents with servers of their own
    have theirs); tuples compare element identity first, so a check costs no deep comparison
    while nothing changed."""
    builtin = BUILTIN if sup.settings.builtin_tools else _NO_TOOLS
    table = sup.tools_for(node)
    key = (builtin, tuple((t, t.name, t.description, t.schema) for t in table.values()))
    slots = sup._tool_defs
    for k, defs in slots:
        if k == key:
            return defs
    defs = builtin + [t.definition for t in table.values()]
    slots.insert(0, (key, defs))
    del slots[8:]
    return defs


def _json(value: Any) -> str:
    return compact(value).decode("utf-8")


def _mults(sup: "Supervisor") -> tuple[float, float]:
    name = (sup.provider_name or "").lower()
    w = 1.0 if name == "openai" else WRITE_MULT.get(sup.settings.cache_ttl, 1.25)
    return w, READ_MULT


def _tpb(node: "AgentNode") -> float:
    return node.tokens_per_byte or 0.25


# --------------------------------------------------------------------------- dispatch


async def call_tool(sup: "Supervisor", node: "AgentNode", call: ToolUse) -> ToolResult:
    fn = _HANDLERS.get(call.name) if sup.settings.builtin_tools else None
    tools = sup.tools_for(node)
    try:
        if fn is not None:
            out = await fn(sup, node, call.input)
        elif call.name in tools:
            out = await tools[call.name](call.input)
        elif sup.tool_fallback is not None:
            return await sup.tool_fallback(node, call)
        else:
            known = ", ".join([t.name for t in tool_defs(sup, node)])
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


def survey(sup: "Supervisor", node: "AgentNode") -> dict:
    from ..session.eviction import due_line, plan_eviction, pressure_line

    ctx = node.ctx
    s = sup.settings_for(node)
    used = ctx.used_tokens(node.tokens_per_byte)
    frontier = []
    for item in ctx.frontier():
        if isinstance(item, Turn):
            frontier.append({"turn": item.id, "role": item.role, "bytes": item.bytes,
                             "label": item.label})
        else:
            frontier.append({"residue": list(item.span), "note": item.note, "by": item.by,
                             "bytes": len(residue_message(ctx, item).encode())})
    from .loop import economy

    plan = plan_eviction(ctx, s.keep, economy(sup, node, used))
    large = []
    for t in ctx.resident():
        if t.records is not None and t.id != ctx.in_hand:
            for b in ctx.blocks(t.id):
                if b.length >= 2048 and b.index not in t.swept:
                    large.append({"block": b.address, "kind": b.kind, "bytes": b.length})
    large.sort(key=lambda x: -x["bytes"])
    w, r = _mults(sup)
    g = gate(ctx, _tpb(node), write_mult=w, read_mult=r)
    out = {
        "window": s.context_window,
        "used_tokens": used,
        "eviction_at": round(due_line(s.context_window)) if s.context_window else None,
        "pressure_at": round(pressure_line(s.context_window)) if s.context_window else None,
        "history_bytes": ctx.history_bytes(),
        "frontier": frontier,
        "plan": ({"span": list(plan.span), "bytes_out": plan.bytes_out,
                  "keep": (plan.figures.keep if plan.figures else
                           round(plan.bytes_kept / max(1, ctx.history_bytes()), 4))}
                 if plan else None),
        "large_blocks": large[:20],
        "marks": [{"block": f"{k[0]}.{k[1]}", "replacement_bytes": len(v.encode())}
                  for k, v in sorted(ctx.marks.items())],
        "sweep_gate": {**g.as_dict(), "horizon_requests": round(sweep_horizon(sup, node), 1),
                       "would_sweep": g.pays(sweep_horizon(sup, node))},
        "candidates": [c.as_dict() for c in candidates(ctx)],
    }
    return out


async def _context_survey(sup, node, inp) -> str:
    return _json(survey(sup, node))


def sweep_pending(node: "AgentNode") -> bool:
    """Apply every pending mark in one Swept record."""
    ctx = node.ctx
    if not ctx.marks:
        return False
    before = ctx.history_bytes()
    node.log.append(Swept(blocks=sorted(ctx.marks)))
    node.sweeps += 1
    node.edited = True
    node.on_edit("sweep", before)
    log.info("sweep", blocks=len(ctx.marks))
    return True


def sweep_horizon(sup: "Supervisor", node: "AgentNode") -> float:
    """The configured horizon, cut to the requests left before the next eviction."""
    from ..session.eviction import due_line
    from ..session.sweep import effective_horizon

    s = sup.settings_for(node)
    due = due_line(s.context_window) if s.context_window else None
    return effective_horizon(s.sweep_horizon, node.ctx.used_tokens(node.tokens_per_byte), due,
                             node.growth.per_request)


def sweep_if_pays(sup: "Supervisor", node: "AgentNode") -> bool:
    ctx = node.ctx
    if not ctx.marks:
        return False
    w, r = _mults(sup)
    g = gate(ctx, _tpb(node), write_mult=w, read_mult=r)
    if g.pays(sweep_horizon(sup, node)):
        return sweep_pending(node)
    return False


async def _context_evict(sup, node, inp) -> str:
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
    sup.on_edit(node, "evict", before)
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


async def _context_mark(sup, node, inp) -> str:
    block = parse_block(_arg(inp, "block", (str, list), tool="context_mark"))
    repl = _arg(inp, "replacement", str, tool="context_mark")
    cap = sup.settings.mark_cap_bytes
    if len(repl.encode()) > cap:
        raise Refusal(f"a replacement is at most {cap} bytes — this one has {len(repl.encode())}")
    node.log.append(Marked(block=block, replacement=repl))
    w, r = _mults(sup)
    g = gate(node.ctx, _tpb(node), write_mult=w, read_mult=r)
    pb = g.payback_requests
    return _json({"marked": f"{block[0]}.{block[1]}", "pending": len(node.ctx.marks),
                  "reclaimed_tokens": round(g.reclaimed_tokens),
                  "payback_requests": None if math.isinf(pb) else round(pb, 1),
                  "sweeps_when_payback_at_most": sup.settings.sweep_horizon})


# --------------------------------------------------------------------------- door tools


def _target(sup: "Supervisor", node: "AgentNode", inp: Any) -> "AgentNode":
    aid = inp.get("agent") if isinstance(inp, dict) else None
    if aid is None or aid == node.id:
        return node
    desc = node.descendants()
    if aid not in desc:
        known = ", ".join(sorted(desc)) or "none"
        raise Refusal(f"{aid!r} is not one of your descendants (yours: {known})")
    return desc[aid]


async def _transcript_index(sup, node, inp) -> str:
    target = _target(sup, node, inp)
    return _json(await doorcalls.index(sup, target))


async def _transcript_read(sup, node, inp) -> str:
    target = _target(sup, node, inp)
    turns = _arg(inp, "turns", (list, str, int), tool="transcript_read")
    return _json(await doorcalls.read(sup, target, turns))


async def _transcript_grep(sup, node, inp) -> str:
    target = _target(sup, node, inp)
    pattern = _arg(inp, "pattern", str, tool="transcript_grep")
    turns = _arg(inp, "turns", (list, str, int), None, tool="transcript_grep")
    return _json(await doorcalls.grep(sup, target, pattern, turns))


# --------------------------------------------------------------------------- agents


async def _agents_start(sup, node, inp) -> str:
    task = _arg(inp, "task", str, tool="agents_start")
    kind = _arg(inp, "kind", str, "mnemon", tool="agents_start")
    if not task.strip():
        raise Refusal("a child's task may not be empty")
    child = sup.new_child(node, task, kind)
    assert node.nursery is not None
    sup.start(child, node.nursery)
    first = child.ctx.turns[-1].id if child.ctx.turns else None
    log.info("child started", child=child.id, kind=kind, first_id=first)
    return _json({"agent": child.id, "kind": kind, "first_id": first})


async def _agents_wait(sup, node, inp) -> str:
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


async def _agents_cancel(sup, node, inp) -> str:
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


async def _agents_synod(sup, node, inp) -> str:
    from .synod import run_synod

    question = _arg(inp, "question", str, tool="agents_synod")
    n = _arg(inp, "n", int, tool="agents_synod")
    reduce = _arg(inp, "reduce", str, "vote", tool="agents_synod")
    stances = _arg(inp, "stances", list, None, tool="agents_synod")
    if stances is not None and not all(isinstance(x, str) for x in stances):
        raise ToolInputError("agents_synod: 'stances' must be a list of strings")
    result = await run_synod(sup, node, question, n=n, reduce=reduce, stances=stances)
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


def candidates_line(sup: "Supervisor", node: "AgentNode") -> str:
    c = candidates(node.ctx, limit=5)
    if not c:
        return ""
    listed = ", ".join(f"{x.block[0]}.{x.block[1]} ({x.bytes} bytes: {x.reason})" for x in c)
    return ("Blocks you could mark with context_mark(block, replacement): " + listed + ".")


