"""Records in, spans out: the one mapping from an agent's log to OpenTelemetry GenAI spans.

Pure: no clock, no file, no OpenTelemetry. ``mnemon trace`` feeds it a finished run's logs,
agent by agent (``runlogs``); a live run feeds it each record as it is appended (``live``). Both
get the same spans with the same ids, since every id and every time comes from the records
(``ids``; times from the records' ``at``).

Per agent:

- ``invoke_agent`` (internal) from ``SessionStarted`` to ``SessionEnded`` — its parent the
  parent agent's ``invoke_agent`` span, so the trace tree is the lineage tree. A resumed agent
  (``SessionResumed``) gets a new span, linked to its first; the one before it ends at its last
  record with a time if no ``SessionEnded`` closed it (a crash).
- ``chat`` (client) per ``ProviderCall``: from the attempt's start (``at − latency_s``) to its
  end; usage, price, attempt, ``error.type``; the response model and finish reason from the
  ``AssistantMessage`` that the successful attempt recorded. A log with no ``ProviderCall`` (a
  foreign one) gets one ``chat`` per ``AssistantMessage`` from its usage, as ``mnemon cost``
  counts it.
- ``execute_tool`` (internal) per tool call: from the end of the request that asked for it to
  the next record with a time after its result (the log times no tool call, and protocol records
  carry no clock: a tool span covers the calls of its turn together).
- events on the agent's span: ``mnemon.eviction`` (span, bytes, by, and the note — the
  model's words, so its length unless ``content``), ``mnemon.mark``,
  ``mnemon.sweep``, ``mnemon.fork`` (a child started), ``mnemon.synod``, ``mnemon.clear``,
  ``mnemon.rewind``, ``mnemon.approval.requested`` and ``mnemon.approval.decided``.

Message content — prompts, answers, tool arguments and results, the system prompt, eviction
notes — is left out
unless ``content`` (``--trace-content``), as the conventions ask; so is every other text a
model or a person chose, cut to its class: a failure's detail (``failed: output``, a provider
call's error as its class), a tool name the agent was not offered, a synod's reduction that is
none of mnemon's, an approval's decider that is none of mnemon's (``_OTHER``).
"""

from __future__ import annotations

import json
from typing import Any

from ...providers.prices import Price, cost_at, price_for
from ...session.records import (ApprovalDecided, ApprovalRequested, AssistantMessage, Cleared,
                                Evicted, Inherited, Marked,
                                ProviderCall, Rewound, SessionEnded, SessionResumed,
                                SessionStarted, Steering, Swept, Text, ToolResults, ToolUse,
                                TurnStarted, Usage, UserPrompt, compact)
from . import ids
from . import semconv as sc
from .spans import Event, Link, Span, time_ns

__all__ = ["TraceBuilder", "HANDLED"]

ERROR_TYPE_MAX = 64

#: the ends mnemon records with no detail after them
END_REASONS = frozenset({"done", "max_turns", "budget", "cancelled"})
#: who decides an approval, as mnemon records it (``ApprovalDecided.by``)
DECIDERS = frozenset({"api", "callback", "chat", "timeout", "on_ask"})
#: the reductions of ``agents_synod``
REDUCTIONS = frozenset({"vote", "merge"})
#: what stands for a value a model or a person chose, without ``content``
OTHER = "_OTHER"


def _word(s: str) -> bool:
    """A class name's shape (an exception's class, ``provider``, ``output``): a letter or
    ``_``, then letters, digits, ``_ . -``; at most ``ERROR_TYPE_MAX`` characters. The text a
    model or a person writes after it never has this shape as a whole."""
    if not s or len(s) > ERROR_TYPE_MAX or not (s[0].isascii() and (s[0].isalpha() or s[0] == "_")):
        return False
    return all(c.isascii() and (c.isalnum() or c in "_.-") for c in s)


def error_type(error: str) -> str:
    """A low-cardinality ``error.type`` from a recorded error (``"RateLimited: 429 …"`` →
    ``RateLimited``): its head when that has a class name's shape, else ``_OTHER``."""
    head = error.split(":", 1)[0].strip()
    return head if _word(head) else OTHER


def failed(reason: str) -> str | None:
    """The ``error.type`` of an agent that ended ``failed[: detail]``; None for any other end."""
    if not reason.startswith("failed"):
        return None
    detail = reason.partition(":")[2].strip()
    return error_type(detail) if detail else "failed"


def ended(reason: str, content: bool) -> tuple[str, str | None]:
    """``(mnemon.agent.end_reason, error.type or None)`` of an agent's recorded end. A
    failure's detail can quote the model (``failed: output: $.code: "…"``) or a provider's
    message (``failed: provider: …``): without ``content`` the reason is cut to its class
    (``failed: output``), which is also the span's status message."""
    kind = failed(reason)
    if content:
        return reason, kind
    if kind is not None:
        return (f"failed: {kind}" if reason.partition(":")[2].strip() else "failed"), kind
    return (reason if reason in END_REASONS else error_type(reason)), None


def call_error(error: str, content: bool) -> tuple[str, str]:
    """``(error.type, status message)`` of a failed provider call: the recorded error quotes
    the provider's own message, so without ``content`` the message is its class alone."""
    kind = error_type(error)
    return kind, (error if content else kind)


def offered(started: SessionStarted | None) -> frozenset[str] | None:
    """The names of the tools an agent was offered, as its ``SessionStarted`` lists them; None
    when it lists none (a foreign log, or the agent not met from its opening record)."""
    tools = started.tools if started is not None else None
    if tools is None:
        return None
    names = set()
    for t in tools:
        name = t.get("name") if isinstance(t, dict) else getattr(t, "name", None)
        if isinstance(name, str):
            names.add(name)
    return frozenset(names)


def tool_name(name: Any, table: frozenset[str] | None, content: bool) -> str:
    """A called tool's name as the trace shows it. The model writes the name of the tool it
    calls, and can write any: a name the agent was not offered is the model's text, so it is
    ``_OTHER`` without ``content``. With no table recorded, a name in the shape the providers
    allow a tool's (``_word``) is shown."""
    if not isinstance(name, str):
        return OTHER
    if content or (name in table if table is not None else _word(name)):
        return name
    return OTHER


# The attributes of the events on an agent's span, one function per record kind: the Python
# builder's and the C one's (``native_build``), so that both say the same.

def eviction_attrs(rec: Evicted, weight: int, content: bool) -> dict[str, Any]:
    """``mnemon.eviction``: the span evicted, its recorded weight, who evicted it; the model's
    note by its length, and its words only with ``content``."""
    r = rec.residue
    lo, hi = r.span
    attrs: dict[str, Any] = {"mnemon.residue.from": lo, "mnemon.residue.to": hi,
                             "mnemon.residue.bytes": weight, "mnemon.residue.by": r.by}
    if r.note is not None:  # the model's words: content
        attrs["mnemon.residue.note_bytes"] = len(r.note.encode("utf-8"))
        if content:
            attrs["mnemon.residue.note"] = r.note
    return attrs


def mark_attrs(rec: Marked) -> dict[str, Any]:
    return {"mnemon.block": f"{rec.block[0]}.{rec.block[1]}",
            "mnemon.replacement.bytes": len(rec.replacement.encode("utf-8"))}


def sweep_attrs(rec: Swept) -> dict[str, Any]:
    return {"mnemon.blocks": [f"{t}.{b}" for t, b in rec.blocks]}


def asked_attrs(rec: ApprovalRequested, table: frozenset[str] | None,
                content: bool) -> dict[str, Any]:
    """``mnemon.approval.requested``: the call, its tool (``tool_name``), the policy's rule
    and reason (configuration, not content); never the call's arguments."""
    attrs: dict[str, Any] = {"mnemon.call.id": rec.call_id,
                             sc.TOOL_NAME: tool_name(rec.tool, table, content)}
    if rec.rule is not None:
        attrs["mnemon.approval.rule"] = rec.rule
    if rec.reason is not None:  # the policy's words, not the model's
        attrs["mnemon.approval.reason"] = rec.reason
    return attrs


def decided_attrs(rec: ApprovalDecided, content: bool) -> dict[str, Any]:
    attrs: dict[str, Any] = {"mnemon.call.id": rec.call_id,
                             "mnemon.approval.decision": rec.decision,
                             "mnemon.approval.edited": rec.input is not None}
    if rec.by is not None:  # mnemon's names for who decided; another is a person's text
        attrs["mnemon.approval.by"] = rec.by if content or rec.by in DECIDERS else OTHER
    if rec.reason is not None and content:  # a person's words: content
        attrs["mnemon.approval.reason"] = rec.reason
    return attrs


def rewind_attrs(rec: Rewound) -> dict[str, Any]:
    return {"mnemon.rewind.to": rec.to}


def synod_attrs(input: dict[str, Any], content: bool) -> dict[str, Any]:
    """``mnemon.synod``: a synod asked for (``agents_synod``'s input, which the model
    writes: a reduction that is not one of ``REDUCTIONS`` is ``_OTHER`` without ``content``)."""
    reduce = input.get("reduce", "vote")
    return {"mnemon.synod.n": _int(input.get("n")),
            "mnemon.synod.reduce": (str(reduce) if content or (isinstance(reduce, str)
                                                        and reduce in REDUCTIONS) else OTHER)}


class _Agent:
    __slots__ = ("id", "parent", "kind", "depth", "provider", "model", "max_tokens", "system",
                 "root", "trace", "segments", "open", "last_ns", "turn", "chat", "calls",
                 "tools", "ended_tools", "in_hand", "bytes", "withdrawn", "static", "ids",
                 "names", "offered")

    def __init__(self, agent: str, started: SessionStarted | None, run: str):
        self.id = agent
        self.ids = ids.AgentIds(run, agent)
        self.parent = started.parent if started is not None else None
        self.kind = (started.kind if started is not None else None) or "root"
        self.depth = started.depth if started is not None else None
        self.provider = started.provider if started is not None else None
        self.model = started.model if started is not None else None
        self.system = started.system if started is not None else None
        self.offered = offered(started)  # the tool names it was offered, or None
        self.root = agent
        self.trace = ""
        self.segments: list[Span] = []  # every invoke_agent span of this agent, oldest first
        self.open: Span | None = None  # the one in progress
        self.last_ns: int | None = None  # the last time a record of this agent carried
        self.turn: int | None = None  # the turn the next request opens (TurnStarted)
        self.chat: Span | None = None  # a successful attempt waiting for its AssistantMessage
        self.calls = 0  # ProviderCall records seen
        self.tools: dict[str, Span] = {}  # calls asked for, not yet answered
        self.ended_tools: list[Span] = []  # answered, waiting for the next time to end at
        self.in_hand: int | None = None  # the turn records extend
        self.bytes: dict[int, int] = {}  # turn → its weight as recorded (line lengths)
        self.withdrawn: set[int] = set()
        self.static: dict[tuple, tuple] = {}  # the attributes its spans of one kind share
        self.names: dict[Any, str] = {}  # its spans' names: by request model, by ("tool", name)


class TraceBuilder:
    """Spans of one run. ``feed(agent, record, length)`` answers the spans that record
    finished; ``finish()`` ends and answers what is still open (a run read while it runs, or a
    live run's end).

    ``hold_agents``: keep every ``invoke_agent`` span until ``finish`` (reading logs agent by
    agent, a child's log may be read before its parent's spans are complete); else each is
    answered when its segment ends (live). ``content``: record message content.
    ``latest_only``: the latest GenAI names alone (``semconv.latest_only``).
    """

    def __init__(self, run: str, *, content: bool = False, latest_only: bool = False,
                 hold_agents: bool = False):
        self.run = run
        self.content = content
        self.latest_only = latest_only
        self.hold = hold_agents
        self.agents: dict[str, _Agent] = {}
        self._prices: dict[str | None, Price] = {}  # each model's, found once
        self._now: int | None = None  # the time of the record being fed

    # ------------------------------------------------------------------ agents

    def meet(self, agent: str, started: SessionStarted | None) -> None:
        """Know ``agent`` before its records come (its opening record, read ahead): the
        reader of a run's logs tells every agent first, so that a child's trace is its root's
        whichever log is read first; live, an agent is met at its first record."""
        if agent in self.agents:
            return
        a = _Agent(agent, started, self.run)
        self.agents[agent] = a
        self._place(a)

    def _place(self, a: _Agent) -> None:
        root, seen = a, {a.id}
        while root.parent is not None and root.parent in self.agents and root.parent not in seen:
            root = self.agents[root.parent]
            seen.add(root.id)
        a.root = root.id if root.parent is None or root.parent in seen else root.parent
        a.trace = ids.trace_id(self.run, a.root)

    def _provider_attrs(self, a: _Agent, attrs: dict[str, Any]) -> None:
        name = sc.provider_name(a.provider)
        attrs[sc.PROVIDER] = name
        if not self.latest_only:
            attrs[sc.SYSTEM_OLD] = name

    # ------------------------------------------------------------------ feeding

    def feed(self, agent: str, record: Any, length: int = 0,
             out: list[Span] | None = None) -> list[Span]:
        """Take one record of ``agent``'s log (``length``: its line's bytes, for the weights
        an eviction event reports); answer the spans it finished — appended to ``out`` when
        given (a live tracer collects a batch's spans in one list)."""
        a = self.agents.get(agent)
        if a is None:
            self.meet(agent, record if isinstance(record, SessionStarted) else None)
            a = self.agents[agent]
        if out is None:
            out = []
        kind = type(record)
        before = a.last_ns
        at = getattr(record, "at", None)
        now = self._now = time_ns(at) if at is not None else None
        if now is not None:
            begin = now
            if isinstance(record, ProviderCall):
                begin = now - int(record.latency_s * 1e9)
            if a.ended_tools:
                self._end_tools(a, begin if before is None else max(begin, before), out)
            a.last_ns = now if before is None else max(before, now)
        if a.chat is not None and not isinstance(record, AssistantMessage):
            out.append(a.chat)  # a success whose message never came (a crash between them)
            a.chat = None
        handle = _HANDLERS.get(kind)
        if handle is None:
            handle = _handler_of(kind)
        if handle is not None:
            handle(self, a, record, length, before, out)
        return out

    # one method per kind of record the trace reads (``_HANDLERS``): a dictionary of types
    # rather than a ``match`` over a dozen classes, since most records are of the last kinds

    def _on_started(self, a: _Agent, rec: SessionStarted, length: int, before: int | None,
                    out: list[Span]) -> None:
        self._open(a, rec.at, before, out, first=True)

    def _on_resumed(self, a: _Agent, rec: SessionResumed, length: int, before: int | None,
                    out: list[Span]) -> None:
        self._open(a, rec.at, before, out, first=False)

    def _on_ended(self, a: _Agent, rec: SessionEnded, length: int, before: int | None,
                  out: list[Span]) -> None:
        self._close(a, rec.reason, out)

    def _on_turn(self, a: _Agent, rec: TurnStarted, length: int, before: int | None,
                 out: list[Span]) -> None:
        a.turn = rec.turn

    def _on_prompt(self, a: _Agent, rec: UserPrompt, length: int, before: int | None,
                   out: list[Span]) -> None:
        a.in_hand = rec.turn
        a.bytes[rec.turn] = length
        seg = self._segment(a)
        if self.content and seg is not None and sc.INPUT_MESSAGES not in seg.attributes:
            seg.attributes[sc.INPUT_MESSAGES] = json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": rec.text}]}])

    def _on_inherited(self, a: _Agent, rec: Inherited, length: int, before: int | None,
                      out: list[Span]) -> None:
        for link in rec.turns:
            a.bytes[link.row.id] = link.row.bytes

    def _on_evicted(self, a: _Agent, rec: Evicted, length: int, before: int | None,
                    out: list[Span]) -> None:
        self._grow(a, length)
        lo, hi = rec.residue.span
        weight = sum(b for t, b in a.bytes.items() if lo <= t <= hi and t not in a.withdrawn)
        self._event(a, "mnemon.eviction", eviction_attrs(rec, weight, self.content))

    def _on_marked(self, a: _Agent, rec: Marked, length: int, before: int | None,
                   out: list[Span]) -> None:
        self._grow(a, length)
        self._event(a, "mnemon.mark", mark_attrs(rec))

    def _on_swept(self, a: _Agent, rec: Swept, length: int, before: int | None,
                  out: list[Span]) -> None:
        self._grow(a, length)
        self._event(a, "mnemon.sweep", sweep_attrs(rec))

    def _on_steering(self, a: _Agent, rec: Steering, length: int, before: int | None,
                     out: list[Span]) -> None:
        self._grow(a, length)

    def _on_asked(self, a: _Agent, rec: ApprovalRequested, length: int, before: int | None,
                  out: list[Span]) -> None:
        self._event(a, "mnemon.approval.requested", asked_attrs(rec, a.offered, self.content))

    def _on_decided(self, a: _Agent, rec: ApprovalDecided, length: int, before: int | None,
                    out: list[Span]) -> None:
        self._event(a, "mnemon.approval.decided", decided_attrs(rec, self.content))

    def _on_cleared(self, a: _Agent, rec: Cleared, length: int, before: int | None,
                    out: list[Span]) -> None:
        a.withdrawn.update(a.bytes)
        self._event(a, "mnemon.clear", {})

    def _on_rewound(self, a: _Agent, rec: Rewound, length: int, before: int | None,
                    out: list[Span]) -> None:
        a.withdrawn.update(t for t in a.bytes if t > rec.to)
        self._event(a, "mnemon.rewind", rewind_attrs(rec))

    def finish(self) -> list[Span]:
        """End what is still open at each agent's last time (``mnemon.agent.state`` =
        ``open``) and answer it, with every held ``invoke_agent`` span."""
        out: list[Span] = []
        for a in self.agents.values():
            if a.chat is not None:
                out.append(a.chat)
                a.chat = None
            if a.open is not None:
                a.open.attributes["mnemon.agent.state"] = "open"
                self._close(a, None, out)
            else:
                self._end_tools(a, a.last_ns or 0, out)
        if self.hold:
            for a in self.agents.values():
                for seg in a.segments:
                    self._parent(a, seg)
                    out.append(seg)
        return out

    # ------------------------------------------------------------------ agent spans

    def _segment(self, a: _Agent) -> Span | None:
        return a.open if a.open is not None else (a.segments[-1] if a.segments else None)

    def _segment_at(self, a: _Agent, t: int) -> Span | None:
        """The span of ``a`` that was open at time ``t``: its last to start at or before it."""
        found = a.segments[0] if a.segments else None
        for seg in a.segments:
            if seg.start_ns <= t:
                found = seg
        return found

    def _parent(self, a: _Agent, seg: Span) -> None:
        p = self.agents.get(a.parent) if a.parent is not None else None
        if p is not None:
            ps = self._segment_at(p, seg.start_ns)
            seg.parent_id = ps.span_id if ps is not None else None

    def _open(self, a: _Agent, at: str | None, before: int | None, out: list[Span], *,
              first: bool) -> None:
        if a.open is not None:  # resumed without an end: the process stopped (a crash)
            a.open.attributes["mnemon.agent.state"] = "interrupted"
            self._close(a, None, out, end=before)
        start = a.last_ns or 0
        key = ("start" if first else f"resumed@{at}" if at is not None else
               f"resumed#{len(a.segments)}")
        span_id = ids.agent_span_id(self.run, a.id, key)
        attrs: dict[str, Any] = {sc.OPERATION: "invoke_agent", sc.AGENT_ID: a.id,
                                 sc.AGENT_NAME: a.id, "mnemon.agent.kind": a.kind}
        self._provider_attrs(a, attrs)
        if a.model:
            attrs[sc.REQUEST_MODEL] = a.model
        if a.depth is not None:
            attrs["mnemon.agent.depth"] = a.depth
        if a.parent is not None:
            attrs["mnemon.agent.parent"] = a.parent
        if self.content and a.system:
            attrs[sc.SYSTEM_INSTRUCTIONS] = json.dumps([{"type": "text", "content": a.system}])
        seg = Span(a.trace, span_id, None, f"invoke_agent {a.id}", sc.INTERNAL, start, attrs)
        if not first:
            attrs["mnemon.agent.resumed"] = True
            seg.links.append(Link(a.trace, ids.agent_span_id(self.run, a.id, "start"),
                                  {"mnemon.link": "resumed"}))
        a.segments.append(seg)
        a.open = seg
        if not self.hold:
            self._parent(a, seg)
        p = self.agents.get(a.parent) if a.parent is not None else None
        if first and p is not None:  # a fork: told on the parent's span
            ps = self._segment_at(p, start)
            if ps is not None:
                ps.events.append(Event("mnemon.fork", start, {
                    "mnemon.child": a.id, "mnemon.child.kind": a.kind}))

    def _close(self, a: _Agent, reason: str | None, out: list[Span],
                end: int | None = None) -> None:
        seg = a.open
        if seg is None:
            return
        end = end if end is not None else (a.last_ns or seg.start_ns)
        self._end_tools(a, end, out)
        for call in a.tools.values():  # asked for, never answered
            call.end_ns = max(call.start_ns, end)
            call.fail("interrupted", "the agent's log holds no result for this call")
            out.append(call)
        a.tools.clear()
        seg.end_ns = max(end, seg.start_ns)
        if reason is not None:
            shown, failure = ended(reason, self.content)
            seg.attributes["mnemon.agent.end_reason"] = shown
            if failure is not None:
                seg.fail(failure, shown)
        a.open = None
        if not self.hold:
            out.append(seg)

    def _event(self, a: _Agent, name: str, attrs: dict[str, Any]) -> None:
        seg = self._segment(a)
        if seg is not None:
            seg.events.append(Event(name, a.last_ns or seg.start_ns, attrs))

    def _grow(self, a: _Agent, length: int) -> None:
        if a.in_hand is not None:
            a.bytes[a.in_hand] = a.bytes.get(a.in_hand, 0) + length

    # ------------------------------------------------------------------ chat

    def _chat(self, a: _Agent, span_id: str, start: int, end: int, attempt: int,
              usage: Usage | None, model: str | None) -> Span:
        seg = self._segment(a)
        request_model = a.model or model
        static = a.static.get(("chat", request_model))
        if static is None:
            first: dict[str, Any] = {sc.OPERATION: "chat", sc.AGENT_ID: a.id}
            self._provider_attrs(a, first)
            if request_model:
                first[sc.REQUEST_MODEL] = request_model
            static = a.static[("chat", request_model)] = tuple(first.items())
        attrs = dict(static)
        attrs["mnemon.attempt"] = attempt
        if usage is not None:
            attrs[sc.INPUT_TOKENS] = usage.total_input
            attrs[sc.OUTPUT_TOKENS] = usage.output_tokens
            attrs[sc.CACHE_READ] = usage.cache_read_tokens
            attrs[sc.CACHE_WRITE] = usage.cache_write_tokens
            reasoning = usage.reasoning_tokens
            if isinstance(reasoning, int):  # unset unless the provider reported it apart
                attrs[sc.REASONING] = reasoning
            priced = model or a.model
            price = self._prices.get(priced)
            if price is None:
                price = self._prices[priced] = price_for(priced)
            attrs["mnemon.cost_usd"] = round(cost_at(price, usage, "5m"), 9)
        name = a.names.get(request_model)
        if name is None:
            name = a.names[request_model] = f"chat {request_model}" if request_model else "chat"
        span = Span(a.trace, span_id, seg.span_id if seg is not None else None, name, sc.CLIENT,
                    start, attrs)
        span.static = static
        span.end_ns = max(end, start)
        return span

    def _on_call(self, a: _Agent, rec: ProviderCall, length: int, before: int | None,
                 out: list[Span]) -> None:
        a.calls += 1
        end = self._now or a.last_ns or 0  # the record's time, read by ``feed``
        start = end - int(rec.latency_s * 1e9)
        turn = None if rec.purpose is not None else a.turn
        span = self._chat(a, a.ids.chat(turn, rec.attempt, rec.at),
                          start, end, rec.attempt, rec.usage, rec.model)
        if rec.purpose is not None:
            span.attributes["mnemon.purpose"] = rec.purpose
        if rec.error is not None:
            span.fail(*call_error(rec.error, self.content))
            out.append(span)
        elif turn is None:
            out.append(span)
        else:
            a.chat = span

    def _on_message(self, a: _Agent, rec: AssistantMessage, length: int, before: int | None,
                    out: list[Span]) -> None:
        a.in_hand = rec.turn
        a.bytes[rec.turn] = length
        span = a.chat
        a.chat = None
        if span is None and a.calls == 0:  # a log with no ProviderCall: the message's usage
            t = a.last_ns or 0
            span = self._chat(a, a.ids.chat(rec.turn, 0, None), t, t, 0,
                              rec.usage, rec.model)
        if span is not None:
            if rec.model:
                span.attributes[sc.RESPONSE_MODEL] = rec.model
            if rec.stop_reason:
                span.attributes[sc.FINISH_REASONS] = [rec.stop_reason]
            span.attributes["mnemon.turn"] = rec.turn
            if self.content:
                span.attributes[sc.OUTPUT_MESSAGES] = json.dumps([{
                    "role": "assistant", "finish_reason": rec.stop_reason or "",
                    "parts": [_part(b) for b in rec.blocks]}])
            out.append(span)
        seg = self._segment(a)
        start = a.last_ns or 0
        for b in rec.blocks:
            if not isinstance(b, ToolUse):
                continue
            static = a.static.get(("tool", b.name))
            if static is None:
                shown = tool_name(b.name, a.offered, self.content)
                static = a.static[("tool", b.name)] = (
                    (sc.OPERATION, "execute_tool"), (sc.TOOL_NAME, shown),
                    (sc.TOOL_TYPE, "function"), (sc.AGENT_ID, a.id))
                a.names[("tool", b.name)] = f"execute_tool {shown}"
            attrs = dict(static)
            attrs[sc.TOOL_CALL_ID] = b.id
            attrs["mnemon.turn"] = rec.turn
            if self.content:
                attrs[sc.TOOL_ARGUMENTS] = (b.input if isinstance(b.input, str)
                                            else compact(b.input).decode("utf-8"))
            tool = a.tools[b.id] = Span(a.trace, a.ids.tool(rec.turn, b.id),
                                        seg.span_id if seg is not None else None,
                                        a.names[("tool", b.name)], sc.INTERNAL, start, attrs)
            tool.static = static
            if b.name == "agents_synod" and isinstance(b.input, dict) and seg is not None:
                seg.events.append(Event("mnemon.synod", start,
                                        synod_attrs(b.input, self.content)))

    def _on_results(self, a: _Agent, rec: ToolResults, length: int, before: int | None,
                    out: list[Span]) -> None:
        self._grow(a, length)
        for r in rec.results:
            span = a.tools.pop(r.tool_use_id, None)
            if span is None:
                continue
            if r.is_error:
                span.fail("tool_error", "the tool answered an error")
            if self.content:
                span.attributes[sc.TOOL_RESULT] = r.content
            a.ended_tools.append(span)

    def _end_tools(self, a: _Agent, end: int, out: list[Span]) -> None:
        if a.ended_tools:
            for span in a.ended_tools:
                span.end_ns = max(span.start_ns, end)
                out.append(span)
            a.ended_tools.clear()


_HANDLERS: dict[type, Any] = {
    SessionStarted: TraceBuilder._on_started, SessionResumed: TraceBuilder._on_resumed,
    SessionEnded: TraceBuilder._on_ended, TurnStarted: TraceBuilder._on_turn,
    ProviderCall: TraceBuilder._on_call, AssistantMessage: TraceBuilder._on_message,
    ToolResults: TraceBuilder._on_results, UserPrompt: TraceBuilder._on_prompt,
    Inherited: TraceBuilder._on_inherited, Evicted: TraceBuilder._on_evicted,
    Marked: TraceBuilder._on_marked, Swept: TraceBuilder._on_swept,
    Steering: TraceBuilder._on_steering, ApprovalRequested: TraceBuilder._on_asked,
    ApprovalDecided: TraceBuilder._on_decided, Cleared: TraceBuilder._on_cleared,
    Rewound: TraceBuilder._on_rewound,
}


#: the kinds of record the trace reads, in the order the C builder numbers them
#: (``native/otlp_build.c``, ``K_STARTED`` = 1 …)
HANDLED: tuple[type, ...] = (SessionStarted, SessionResumed, SessionEnded, TurnStarted,
                             ProviderCall, AssistantMessage, ToolResults, UserPrompt, Inherited,
                             Evicted, Marked, Swept, Steering, ApprovalRequested,
                             ApprovalDecided, Cleared, Rewound)


def _handler_of(kind: type) -> Any:
    """The handler of a subclass of a record kind (its nearest kind's), or None: a record the
    trace does not read."""
    for base in kind.__mro__[1:]:
        if base in _HANDLERS:
            _HANDLERS[kind] = _HANDLERS[base]
            return _HANDLERS[kind]
    return None


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _part(b: Any) -> dict[str, Any]:
    """A block as a part of ``gen_ai.output.messages`` (the conventions' message shape)."""
    if isinstance(b, Text):
        return {"type": "text", "content": b.text}
    if isinstance(b, ToolUse):
        return {"type": "tool_call", "id": b.id, "name": b.name, "arguments": b.input}
    text = getattr(b, "text", None)
    if text is not None:
        return {"type": "reasoning", "content": text}
    return {"type": "opaque"}
