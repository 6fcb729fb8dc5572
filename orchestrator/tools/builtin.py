"""The built-in tools: each one's definition (what the model is told, JSON Schema) beside the
handler that reads it, and how it may run (``base.Mode``).

Three families: the context tools (``context_survey``, ``context_evict``, ``context_mark``), the
transcript door (``transcript_index``, ``transcript_read``, ``transcript_grep``), and the agents
tools (``agents_start``, ``agents_wait``, ``agents_cancel``, ``agents_synod``, ``agents_status``,
``agents_send``, ``approvals_decide``). A handler reads
the calling agent through its ``ToolContext`` alone. A refusal reaches the model as an error
result naming the state; results are compact JSON or a short factual sentence.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import structlog
import trio

from ...providers.base import ToolDef
from ...session.errors import Refusal
from ...session.records import compact
from ..caps import Caps, caps_record
from .base import Mode, ToolBase, ToolInputError
from .context import ToolContext

__all__ = ["BUILTIN", "BUILTINS", "BY_NAME", "Builtin", "CAPS_SCHEMA", "arg", "caps_of", "parse_block"]

log = structlog.get_logger("mnemon.tools")

Handler = Callable[[ToolContext, Any], Awaitable[str]]


class Builtin(ToolBase):
    """One built-in: a fixed definition, a mode, and its handler."""

    def __init__(self, name: str, mode: Mode, description: str, schema: dict[str, Any],
                 handler: Handler, starts: Callable[[Any], dict[str, Any] | None] | None = None):
        self.name = name
        self.mode = mode
        self.description = description
        self.schema = schema
        self.handler = handler
        self.definition_ = ToolDef(name, description, schema)
        self._starts = starts

    @property
    def definition(self) -> ToolDef:
        return self.definition_

    async def call(self, ctx: ToolContext, input: dict[str, Any]) -> str:
        return await self.handler(ctx, input)

    def starts(self, input: dict[str, Any]) -> dict[str, Any] | None:
        return self._starts(input) if self._starts is not None else None

    def __repr__(self) -> str:
        return f"<built-in tool {self.name}>"



def _json(value: Any) -> str:
    return compact(value).decode("utf-8")


def arg(inp: Any, name: str, typ: type | tuple, default: Any = ..., *, tool: str) -> Any:
    """Argument ``name`` of a call's input, of type ``typ`` (``default`` when absent or null;
    none: it is required) — a ``ToolInputError`` naming the tool and the argument otherwise.
    Shared by every built-in tool (and the file tools), so each refusal reads the same."""
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


def parse_block(value: Any) -> tuple[int, int]:
    """A block address: ``"turn.index"`` or ``[turn, index]``."""
    if isinstance(value, str):
        parts = value.strip().split(".")
        if len(parts) == 2 and all(p.strip().isdigit() for p in parts):
            return int(parts[0]), int(parts[1])
    elif isinstance(value, list) and len(value) == 2 and all(
            isinstance(x, int) and not isinstance(x, bool) for x in value):
        return value[0], value[1]
    raise ToolInputError(f"a block is \"turn.index\" such as \"41.2\", not {value!r}")


_TURNS = {"description": "turn ids: a list such as [3, 5] or a string such as \"3,5-9\"",
          "anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "string"}]}
_AGENT = {"type": "string", "description": "a descendant's agent id, to read its transcript "
          "in its own id space (default: your own)"}


# --------------------------------------------------------------------------- context tools


async def _context_survey(ctx: ToolContext, inp: Any) -> str:
    return _json(ctx.survey())


async def _context_evict(ctx: ToolContext, inp: Any) -> str:
    a = arg(inp, "from", int, tool="context_evict")
    b = arg(inp, "to", int, tool="context_evict")
    note = arg(inp, "note", str, None, tool="context_evict")
    left = ctx.evict(a, b, note or None)
    return (f"turns {a}-{b} left the context ({left} bytes fewer in it); they stay readable "
            f"with transcript_read(turns=\"{a}-{b}\")")


async def _context_mark(ctx: ToolContext, inp: Any) -> str:
    block = parse_block(arg(inp, "block", (str, list), tool="context_mark"))
    repl = arg(inp, "replacement", str, tool="context_mark")
    return _json(ctx.mark(block, repl))


CONTEXT_SURVEY = Builtin(
    "context_survey", "shared",
    "Survey your context: the frontier (turns and residues in order, with bytes), used "
    "tokens against the eviction line, what a harness eviction would cut, large blocks, "
    "pending marks with the sweep gate's figures, and blocks proposed for marking.",
    {"type": "object", "properties": {}, "additionalProperties": False},
    _context_survey)

CONTEXT_EVICT = Builtin(
    "context_evict", "exclusive",
    "Evict a contiguous run of your context, turns [from, to], leaving a residue with an "
    "optional one-line note (at most 240 bytes) for yourself. Nothing is lost: evicted "
    "turns stay readable with transcript_read and transcript_grep. The span may not "
    "split a residue or touch the turn in hand.",
    {"type": "object", "properties": {
        "from": {"type": "integer", "description": "first turn id of the span"},
        "to": {"type": "integer", "description": "last turn id of the span"},
        "note": {"type": "string", "description": "one line, at most 240 bytes"}},
     "required": ["from", "to"], "additionalProperties": False},
    _context_evict)

CONTEXT_MARK = Builtin(
    "context_mark", "exclusive",
    "Mark one block dead and write, now while it is in front of you, the shorter text "
    "that will replace it when the harness sweeps (cheap: changes nothing sent until "
    "the sweep). Blocks are addressed \"turn.index\" (e.g. \"41.2\").",
    {"type": "object", "properties": {
        "block": {"description": "\"turn.index\" or [turn, index]",
                  "anyOf": [{"type": "string"},
                            {"type": "array", "items": {"type": "integer"},
                             "minItems": 2, "maxItems": 2}]},
        "replacement": {"type": "string", "description": "shorter than the block"}},
     "required": ["block", "replacement"], "additionalProperties": False},
    _context_mark)


# --------------------------------------------------------------------------- door tools


async def _transcript_index(ctx: ToolContext, inp: Any) -> str:
    return _json(await ctx.door(_agent(inp)).aindex())


async def _transcript_read(ctx: ToolContext, inp: Any) -> str:
    door = ctx.door(_agent(inp))
    turns = arg(inp, "turns", (list, str, int), tool="transcript_read")
    return _json(await door.aread(turns))


async def _transcript_grep(ctx: ToolContext, inp: Any) -> str:
    door = ctx.door(_agent(inp))
    pattern = arg(inp, "pattern", str, tool="transcript_grep")
    turns = arg(inp, "turns", (list, str, int), None, tool="transcript_grep")
    # the calling agent's bound, whichever agent's transcript it reads
    return _json(await door.agrep(pattern, turns, timeout_s=ctx.settings.grep_timeout_s))


def _agent(inp: Any) -> str | None:
    return inp.get("agent") if isinstance(inp, dict) else None


TRANSCRIPT_INDEX = Builtin(
    "transcript_index", "shared",
    "Every turn of your transcript, oldest first: id, role, label, bytes, held "
    "(resident / evicted / withdrawn / swept), the residue over it, origin and source.",
    {"type": "object", "properties": {"agent": _AGENT}, "additionalProperties": False},
    _transcript_index)

TRANSCRIPT_READ = Builtin(
    "transcript_read", "shared",
    "Read turns back verbatim — resident, evicted, withdrawn or inherited from an "
    "ancestor — as the records that were written.",
    {"type": "object", "properties": {"turns": _TURNS, "agent": _AGENT},
     "required": ["turns"], "additionalProperties": False},
    _transcript_read)

TRANSCRIPT_GREP = Builtin(
    "transcript_grep", "shared",
    "Search your whole transcript (your lineage included) with a regular expression, "
    "line by line: at most 100 hits, oldest first, and the total count.",
    {"type": "object", "properties": {
        "pattern": {"type": "string", "description": "a regular expression"},
        "turns": _TURNS, "agent": _AGENT},
     "required": ["pattern"], "additionalProperties": False},
    _transcript_grep)


# --------------------------------------------------------------------------- agents


def caps_of(inp: Any, tool: str) -> Caps:
    """The caps a call gives the children it starts: ``budget_usd``, ``budget_tokens``,
    ``max_turns`` (docs/orchestrator.md, "Delegation")."""
    usd = arg(inp, "budget_usd", (int, float), None, tool=tool)
    return Caps(float(usd) if usd is not None else None,
                arg(inp, "budget_tokens", int, None, tool=tool),
                arg(inp, "max_turns", int, None, tool=tool))


async def _agents_start(ctx: ToolContext, inp: Any) -> str:
    task = arg(inp, "task", str, tool="agents_start")
    role = arg(inp, "role", str, None, tool="agents_start")
    kind = arg(inp, "kind", str, None, tool="agents_start")
    caps = caps_of(inp, "agents_start")
    if not task.strip():
        raise Refusal("a child's task may not be empty")
    if role is not None:  # a role's kind is the role's (docs/roles.md)
        if not ctx.has_roles:
            raise Refusal("this run has no roles; start a child without one")
        own = ctx.role_kind(role)
        if own is not None and kind is not None and kind != own:
            raise Refusal(f"the {role} role is a {own} agent, not {kind}")
        kind = own if own is not None else (kind or "mnemon")
        child = ctx.start_child(task, kind, role=role, caps=caps)
    else:
        kind = kind or "mnemon"
        child = ctx.start_child(task, kind, caps=caps)
    first = child.ctx.turns[-1].id if child.log is not None and child.ctx.turns else None
    log.info("child started", child=child.id, kind=kind, first_id=first, role=role)
    out: dict[str, Any] = {"agent": child.id, "kind": kind, "first_id": first}
    if child.role is not None:
        out["role"] = child.role
    projected = ctx.project(child)
    if projected:
        out["projected_usd"] = projected.pop("usd")
        out["projected"] = projected
    given = caps_record(child)
    if given is not None:
        out["budget"] = given
    return _json(out)


async def _agents_wait(ctx: ToolContext, inp: Any) -> str:
    ids = arg(inp, "agents", list, None, tool="agents_wait")
    timeout = arg(inp, "timeout_s", (int, float), None, tool="agents_wait")
    if ids is None:
        targets = ctx.children()
    else:
        desc = ctx.descendants()
        missing = [a for a in ids if a not in desc]
        if missing:
            raise Refusal(f"{', '.join(map(repr, missing))} not among your descendants "
                          f"(yours: {', '.join(sorted(desc)) or 'none'})")
        targets = [desc[a] for a in ids]
    await ctx.wait(targets, timeout)
    outcomes = [t.outcome() for t in targets]
    asked = ctx.asked()
    if asked:  # woken to decide: the children wait on this agent (docs/policy.md, ask_parent)
        return _json({"agents": outcomes, "approvals": asked,
                      "note": "calls below you wait for your decision: approvals_decide"})
    return _json(outcomes)


async def _agents_status(ctx: ToolContext, inp: Any) -> str:
    ids = arg(inp, "agents", list, None, tool="agents_status")
    if ids is not None and not all(isinstance(a, str) for a in ids):
        raise ToolInputError("agents_status: 'agents' must be a list of agent ids")
    out: dict[str, Any] = {"agents": ctx.status(ids)}
    asked = ctx.asked()
    if asked:
        out["approvals"] = asked
    return _json(out)


async def _agents_send(ctx: ToolContext, inp: Any) -> str:
    aid = arg(inp, "agent", str, tool="agents_send")
    text = arg(inp, "text", str, tool="agents_send")
    return _json(ctx.send(aid, text))


async def _approvals_decide(ctx: ToolContext, inp: Any) -> str:
    aid = arg(inp, "agent", str, tool="approvals_decide")
    call_id = arg(inp, "call_id", str, tool="approvals_decide")
    decision = arg(inp, "decision", str, tool="approvals_decide")
    reason = arg(inp, "reason", str, None, tool="approvals_decide")
    return _json(await ctx.decide(aid, call_id, decision, reason))


async def _agents_cancel(ctx: ToolContext, inp: Any) -> str:
    aid = arg(inp, "agent", str, tool="agents_cancel")
    desc = ctx.descendants()
    if aid not in desc:
        raise Refusal(f"{aid!r} is not one of your descendants "
                      f"(yours: {', '.join(sorted(desc)) or 'none'})")
    target = desc[aid]
    target.scope.cancel()
    with trio.move_on_after(10):
        await target.done.wait()
    return _json(target.outcome())


async def _agents_synod(ctx: ToolContext, inp: Any) -> str:
    question = arg(inp, "question", str, tool="agents_synod")
    n = arg(inp, "n", int, tool="agents_synod")
    reduce = arg(inp, "reduce", str, "vote", tool="agents_synod")
    stances = arg(inp, "stances", list, None, tool="agents_synod")
    if stances is not None and not all(isinstance(x, str) for x in stances):
        raise ToolInputError("agents_synod: 'stances' must be a list of strings")
    caps = caps_of(inp, "agents_synod")
    result = await ctx.synod(question, n=n, reduce=reduce, stances=stances, caps=caps)
    log.info("synod", n=n, reduce=reduce, children=[c["agent"] for c in result.children])
    return _json(result.as_dict())


def _synod_starts(inp: Any) -> dict[str, Any]:
    """A synod starts ``n`` mnemon children on its question: judged as that ``agents_start``
    too (decision 0307). Absent arguments are left out, so a ``when`` on them does not match."""
    inp = inp if isinstance(inp, dict) else {}
    out = {"task": inp.get("question"), "kind": "mnemon", "n": inp.get("n")}
    return {k: v for k, v in out.items() if v is not None}


CAPS_SCHEMA = {
    "budget_usd": {"type": "number", "description": "optional: dollars it (with its children) "
                   "may spend, set aside from what you have left"},
    "budget_tokens": {"type": "integer", "description": "optional: tokens it may spend, the "
                      "same way"},
    "max_turns": {"type": "integer", "description": "optional: turns it may take"}}

AGENTS_START = Builtin(
    "agents_start", "exclusive",
    "Start a child agent on a task; returns at once with its id and the projected cost of "
    "its first request. A \"mnemon\" child inherits your whole context by reference (it can "
    "read all of your transcript); a \"fresh\" child starts empty. The task is its first "
    "prompt, verbatim. A child that reaches its budget ends \"budget\"; you are told.",
    {"type": "object", "properties": {
        "task": {"type": "string"},
        "kind": {"type": "string", "enum": ["mnemon", "fresh"], "default": "mnemon"},
        **CAPS_SCHEMA},
     "required": ["task"], "additionalProperties": False},
    _agents_start)

AGENTS_STATUS = Builtin(
    "agents_status", "shared",
    "The state of your children (or the descendants named) now: turns, tokens, cost, "
    "budget and spend, the tools they are in, approvals they wait on, the last line each "
    "wrote. Cheap: call it whenever you like.",
    {"type": "object", "properties": {
        "agents": {"type": "array", "items": {"type": "string"}}},
     "additionalProperties": False},
    _agents_status)

AGENTS_SEND = Builtin(
    "agents_send", "exclusive",
    "Send a message to a running descendant: its next request carries it (steer it, "
    "correct it, give it what it lacks).",
    {"type": "object", "properties": {
        "agent": {"type": "string"}, "text": {"type": "string"}},
     "required": ["agent", "text"], "additionalProperties": False},
    _agents_send)

APPROVALS_DECIDE = Builtin(
    "approvals_decide", "exclusive",
    "Decide a call below you that waits for your approval (its policy said ask_parent). "
    "You may approve only a call you could make yourself; otherwise it goes on to a person.",
    {"type": "object", "properties": {
        "agent": {"type": "string"}, "call_id": {"type": "string"},
        "decision": {"type": "string", "enum": ["approve", "reject"]},
        "reason": {"type": "string"}},
     "required": ["agent", "call_id", "decision"], "additionalProperties": False},
    _approvals_decide)

AGENTS_WAIT = Builtin(
    "agents_wait", "shared",
    "Wait for children (default: all of yours) to end, or until timeout_s; returns each "
    "one's state, final answer and cost. Read a child's transcript with the transcript "
    "tools and its id.",
    {"type": "object", "properties": {
        "agents": {"type": "array", "items": {"type": "string"}},
        "timeout_s": {"type": "number"}}, "additionalProperties": False},
    _agents_wait)

AGENTS_CANCEL = Builtin(
    "agents_cancel", "exclusive",
    "Cancel a child (and its descendants).",
    {"type": "object", "properties": {"agent": {"type": "string"}},
     "required": ["agent"], "additionalProperties": False},
    _agents_cancel)

AGENTS_SYNOD = Builtin(
    "agents_synod", "exclusive",
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
                                   "after the question"},
        **CAPS_SCHEMA},
     "required": ["question", "n"], "additionalProperties": False},
    _agents_synod, starts=_synod_starts)


#: the built-ins in the order the model is offered them
BUILTINS: tuple[Builtin, ...] = (
    CONTEXT_SURVEY, CONTEXT_EVICT, CONTEXT_MARK,
    TRANSCRIPT_INDEX, TRANSCRIPT_READ, TRANSCRIPT_GREP,
    AGENTS_START, AGENTS_WAIT, AGENTS_CANCEL, AGENTS_SYNOD,
    AGENTS_STATUS, AGENTS_SEND, APPROVALS_DECIDE,
)
BY_NAME: dict[str, Builtin] = {t.name: t for t in BUILTINS}
#: their definitions, as offered (``mnemon.orchestrator.tools.BUILTIN``): every one but
#: ``approvals_decide``, which is offered only in a run whose policy can say ``ask_parent``
#: (``definitions.decides``)
BUILTIN: list[ToolDef] = [t.definition for t in BUILTINS if t is not APPROVALS_DECIDE]
