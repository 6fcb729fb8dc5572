"""The run a service serves: its run root, its supervisor (none when read-only), and what can be
done to its agents. Views of agents come from their logs — the only source of truth — scanned
incrementally, with the live supervisor's word on state where the agent runs here."""

from __future__ import annotations

from bisect import bisect_right
from pathlib import Path
from typing import Any, Callable

import msgspec
import trio

from ...lineage.runroot import agent_source, list_agents, now_iso
from ...providers.prices import cost_usd
from ...session.errors import Refusal
from ...session.log import iter_lines
from ...session.records import Cleared, Rewound, SessionResumed, Usage
from ..loop import state_of
from ..settings import Settings
from ..typed.load import check_for, from_python
from ..sandbox.spec import SandboxConfigError, parse_narrowing
from ..workspace.life import rewind as ws_rewind
from ..workspace.spec import spec_from
from .schema import AgentCreate, AgentOut, UsageOut
from ...errors import UserError


class NotFound(UserError):
    """An unknown agent (404)."""


class Conflict(UserError):
    """The request does not fit the state (409): read-only, not running, already running."""


class _Probe(msgspec.Struct):
    """What a view needs of a record; everything else in the line is skipped undecoded."""
    t: str
    usage: Usage | None = None
    model: str | None = None
    reason: str | None = None
    parent: str | None = None
    kind: str | None = None
    depth: int | None = None
    output: Any = None
    role: str | None = None
    sandbox: Any = None
    budget: Any = None
    by: Any = None


_probe = msgspec.json.Decoder(_Probe)
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)


class _Scan:
    """One agent's log read so far: the view's figures, advanced by the new complete lines."""

    __slots__ = ("offset", "parent", "kind", "depth", "model", "ended", "reason", "usage",
                 "cost", "calls", "last_assistant", "output", "role", "sandbox", "budget",
                 "messages")

    def __init__(self) -> None:
        self.offset = 0
        self.parent = self.kind = self.model = self.reason = self.role = None
        self.depth = None
        self.ended = False
        self.usage = Usage()
        self.cost = 0.0
        self.calls = 0
        self.last_assistant: int | None = None
        self.output: Any = None  # a typed agent's accepted answer (``SessionEnded.output``)
        self.sandbox: dict[str, Any] | None = None  # its shell's, from its opening record
        self.budget: dict[str, Any] | None = None  # the caps its parent gave it (0450)
        self.messages = 0  # Steering by its parent or a person

    def advance(self, path: Path, ttl: str) -> None:
        for off, line in iter_lines(path, start=self.offset):
            self.offset = off + len(line) + 1
            try:
                rec = _probe.decode(line)
            except _DECODE_ERRORS:
                continue  # a line the fold would refuse: `verify` names it; a view skips it
            t = rec.t
            if t == "SessionStarted":
                self.parent, self.kind, self.depth, self.model, self.role = (
                    rec.parent, rec.kind, rec.depth, rec.model, rec.role)
                self.sandbox = rec.sandbox if isinstance(rec.sandbox, dict) else None
                self.budget = rec.budget if isinstance(rec.budget, dict) else None
            elif t == "Steering" and rec.by in ("parent", "user"):
                self.messages += 1
            elif t == "ProviderCall" and rec.usage is not None:
                self.usage = self.usage + rec.usage
                self.cost += cost_usd(rec.usage, rec.model or self.model, ttl)
                self.calls += 1
            elif t == "AssistantMessage":
                self.last_assistant = off
            elif t == "SessionEnded":
                self.ended, self.reason, self.output = True, rec.reason, rec.output
            elif t == "SessionResumed":
                self.ended, self.reason, self.output = False, None, None


def _restore_files(node, to: int) -> None:
    """After a ``Rewound``: the agent's files as they stood after turn ``to``, and the record
    that says so (none when they stand there already)."""
    ws = node.workspace
    if ws is None:
        return
    ws.claim()  # held for the restore (an agent between runs holds no directory)
    try:
        rec = ws_rewind(ws, node.log.path, to)
        if rec is not None:
            node.log.append(rec)
    finally:
        ws.release()


def _answer(path: Path, offset: int | None) -> str | None:
    if offset is None:
        return None
    from ...session.records import AssistantMessage, Text, decode

    for _off, line in iter_lines(path, start=offset):
        rec = decode(line)
        if isinstance(rec, AssistantMessage):
            texts = [b.text for b in rec.blocks if isinstance(b, Text)]
            return "\n".join(texts) if texts else None
        return None
    return None


class Previews:
    """One event stream's text previews not yet sent, bounded: a client too slow to take them
    loses the oldest previews, never a recorded event."""

    LIMIT = 4096

    def __init__(self, agent: str | None):
        self.agent = agent
        self.items: list[tuple[str, str]] = []

    def add(self, agent: str, text: str) -> None:
        if self.agent is None or agent == self.agent:
            self.items.append((agent, text))
            if len(self.items) > self.LIMIT:
                del self.items[: len(self.items) - self.LIMIT]

    def drain(self) -> list[tuple[str, str]]:
        out, self.items = self.items, []
        return out


class Run:
    """A run root served over HTTP; ``sup`` is set while the service runs, unless read-only."""

    def __init__(self, root: Path, *, read_only: bool, settings: Settings | None = None,
                 provider_name: str | None = None):
        self.root = Path(root)
        self.read_only = read_only
        self.settings = settings or Settings()
        self.provider_name = provider_name
        self.sup = None  # the Supervisor, when writable and running
        self._scans: dict[str, _Scan] = {}
        self.changed = trio.Event()  # set (and renewed) whenever the service appends
        self.closing = False  # the service is shutting down: event streams end
        self.previews: set["Previews"] = set()  # each open event stream's streamed text
        from .events import Hub
        from .jobs import Jobs

        self.hub = Hub(self.root, self.settings.cache_ttl)  # reads the logs for every stream
        self.jobs = Jobs()  # job files run by this service, each in its own run root

    def on_text(self, agent: str, text: str) -> None:
        """The supervisor's text listener: streamed answer text, fanned out to every stream."""
        for p in self.previews:
            p.add(agent, text)
        self._poke()

    # ------------------------------------------------------------------ views

    def agent_ids(self) -> list[str]:
        return list_agents(self.root)

    def _scan(self, aid: str, known: set[str] | None = None) -> _Scan:
        # ``known``: the run's ids, listed once by a caller scanning many agents (listing them
        # again per agent made a view of every agent quadratic in their number)
        if aid not in (known if known is not None else self.agent_ids()):
            raise NotFound(f"no agent {aid!r} in this run")
        scan = self._scans.get(aid)
        if scan is None:
            scan = self._scans[aid] = _Scan()
        scan.advance(self.root / agent_source(aid), self.settings.cache_ttl)
        return scan

    def live(self) -> dict[str, dict[str, Any]]:
        """The running agents' status off the supervisor's tables (``Supervisor.status``: the
        tools each is in, the approvals it waits on). Read on the event loop's thread, where
        those tables change, and handed to ``view`` in a worker thread."""
        if self.sup is None:
            return {}
        return {a: self.sup.status(a) for a, n in list(self.sup.agents.items())
                if n.state == "running"}

    def view(self, aid: str, children: list[str] | None = None,
             known: set[str] | None = None,
             live: dict[str, dict[str, Any]] | None = None,
             kids: dict[str, list[str]] | None = None) -> AgentOut:
        # (a worker thread) the live state first, the log after: an agent's loop records its
        # ``SessionEnded`` before it stops being "running", so a log read after a state that
        # is not "running" holds the end — never a finished agent seen as "open"
        node = self.sup.agents.get(aid) if self.sup is not None else None
        running = node is not None and node.state == "running"
        scan = self._scan(aid, known)
        if children is None:
            children = [a for a in self.agent_ids() if self._scan(a).parent == aid]
        if running:
            state, reason = "running", None
        elif scan.ended:
            reason = scan.reason
            state = state_of(reason)
        else:
            state, reason = "open", None  # a log with no end recorded, not running here
        u = scan.usage
        now: dict[str, Any] = {}
        if running and self.sup is not None:  # the supervisor's tables: what it is in now,
            st = live.get(aid) if live is not None else self.sup.status(aid)  # what it waits on
            if st is not None:
                now = {"in_tools": st.get("in_tools", []), "approvals": st.get("approvals", [])}
        return AgentOut(id=aid, state=state, reason=reason, kind=scan.kind or "root",
                        role=scan.role, model=scan.model, parent=scan.parent, children=children, depth=scan.depth,
                        usage=UsageOut(input_tokens=u.input_tokens,
                                       cache_read_tokens=u.cache_read_tokens,
                                       cache_write_tokens=u.cache_write_tokens,
                                       output_tokens=u.output_tokens),
                        cost_usd=round(scan.cost, 6),
                        answer=_answer(self.root / agent_source(aid), scan.last_assistant),
                        output=scan.output if not running else None, live=node is not None,
                        sandbox=scan.sandbox, budget=self._budget(aid, scan, known, kids),
                        messages=scan.messages, **now)

    def _budget(self, aid: str, scan: _Scan, known: set[str] | None,
                kids: dict[str, list[str]] | None) -> dict[str, Any] | None:
        """An agent's caps (its ``SessionStarted.budget``) beside what its tree spent, read off
        the logs as every view is (``caps.status``'s shape): the same figures whether the
        agent runs here, ended, or ran in another process (decision 0451). Walks its
        descendants only when it has a cap, so an uncapped run pays nothing. ``kids``: each
        agent's children, from scans made just now (``views`` makes it once for a page);
        without it the run is scanned here."""
        from ..caps import Caps

        caps = Caps.from_record(scan.budget)
        if not caps:
            return None
        if kids is None:
            kids = {}
            for a in (self.agent_ids() if known is None else sorted(known)):
                p = self._scan(a, known).parent
                if p is not None:
                    kids.setdefault(p, []).append(a)
        used, usd, todo, seen = 0, 0.0, [aid], set()
        while todo:
            a = todo.pop()
            if a in seen:
                continue
            seen.add(a)
            s = self._scans.get(a) or self._scan(a, known)  # (scanned just now, by the caller)
            u = s.usage
            used += (u.input_tokens + u.output_tokens + u.cache_read_tokens
                     + u.cache_write_tokens)
            usd += s.cost
            todo.extend(kids.get(a, ()))
        out: dict[str, Any] = {}
        if caps.usd is not None:
            out.update(usd=caps.usd, spent_usd=round(usd, 6))
        if caps.tokens is not None:
            out.update(tokens=caps.tokens, spent_tokens=used)
        if caps.turns is not None:
            out["max_turns"] = caps.turns
            node = self.sup.agents.get(aid) if self.sup is not None else None
            if node is not None:
                out["turns"] = node.turns_taken
        return out

    def views(self, after: str | None = None, limit: int | None = None,
              live: dict[str, dict[str, Any]] | None = None
              ) -> tuple[list[AgentOut], str | None]:
        """The agents in id order after ``after`` (exclusive), at most ``limit`` of them, and
        the id to page on from (None at the end). Every log is scanned for its parent (each
        scan goes on from where the last stopped, so a second call reads only what was
        appended); only the page's agents are viewed."""
        ids = self.agent_ids()
        known = set(ids)
        parents = {a: self._scan(a, known).parent for a in ids}
        kids: dict[str, list[str]] = {a: [] for a in ids}
        for a, p in parents.items():
            if p in kids:
                kids[p].append(a)
        start = bisect_right(ids, after) if after is not None else 0
        page = ids[start:start + limit] if limit is not None else ids[start:]
        more = start + len(page) < len(ids)
        return ([self.view(a, kids[a], known, live, kids) for a in page],
                page[-1] if more and page else None)

    # ------------------------------------------------------------------ actions

    def _writable(self):
        if self.read_only or self.sup is None:
            raise Conflict("this run root is served read-only")
        return self.sup

    def _node(self, aid: str):
        """The live node of an agent; one recorded before this service started is reopened
        (``SessionResumed``) and left not running."""
        sup = self._writable()
        if aid not in self.agent_ids():
            raise NotFound(f"no agent {aid!r} in this run")
        node = sup.agents.get(aid)
        if node is None:
            node = sup.resume_agent(aid)
            node.state = "ended"
            node.done.set()
            if node.workspace is not None:  # only a running agent holds its directory
                node.workspace.release()
        return node

    def _edit(self, aid: str, record, then: Callable[[Any], None] | None = None) -> None:
        """Record an edit (``Cleared``, ``Rewound``), and ``then(node)`` what follows from it (a
        rewind's files). A refused edit writes nothing: a live log judges it before writing; a
        log recorded before this service started is judged on a read-only fold first, then
        reopened, edited and — if it had ended — ended again."""
        sup = self._writable()
        if aid not in self.agent_ids():
            raise NotFound(f"no agent {aid!r} in this run")
        node = sup.agents.get(aid)
        if node is not None:
            node.log.append(record)
            if then is not None:
                then(node)
            return
        from ...lineage.runroot import agent_dir
        from ...lineage.view import open_agent
        from ...session.records import SessionEnded

        _root, _agent, ctx, _torn = open_agent(agent_dir(self.root, aid))
        ctx.check(record)
        scan = self._scan(aid)
        ended, reason = scan.ended, scan.reason
        node = self._node(aid)
        node.log.append(record)
        try:
            if then is not None:
                then(node)
        finally:
            if ended:
                node.log.append(SessionEnded(reason=reason or "done", at=now_iso()))

    def _poke(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    def start_root(self, body: AgentCreate) -> AgentOut:
        sup = self._writable()
        over = {k: getattr(body, k) for k in ("system", "model", "context_window", "keep",
                                              "max_turns") if getattr(body, k) is not None}
        if body.workspace is not None:  # a string: the directory itself, worked in place
            over["workspace"] = spec_from(body.workspace, in_place=True)
        if body.sandbox is not None:  # only narrows the service's, or 422 naming the key (0386)
            if over.get("workspace", sup.settings.workspace) is None:
                raise SandboxConfigError(
                    "sandbox: this agent has no workspace, so no shell to sandbox; give "
                    "\"workspace\" too (or serve --workspace)", key="sandbox")
            over["sandbox"] = parse_narrowing(sup.settings.sandbox, body.sandbox,
                                              over="this service's sandbox (serve --sandbox)")
        settings = msgspec.structs.replace(sup.settings, **over) if over else None
        output = None
        if body.output is not None:  # checked before the agent is created (422 otherwise)
            output = from_python(body.output, where="output",
                                 retries=2 if body.output_retries is None else body.output_retries)
            check_for(output, self.provider_name, where="output")
        node = sup.new_root(body.prompt, settings=settings, output=output, role=body.role)
        sup.start(node)
        self._poke()
        return self.view(node.id, [])

    def prompt(self, aid: str, text: str) -> AgentOut:
        """A new prompt to an agent that has ended: it reopens and runs again."""
        was_live = aid in self._writable().agents
        node = self._node(aid)  # reopening a log recorded before this service records the resume
        if node.state == "running":
            raise Conflict(f"agent {aid} is running: wait for it to end, or cancel it")
        parent = node.parent
        if parent is not None and parent.state == "running" and parent.nursery is not None:
            nursery = parent.nursery
        else:
            nursery = None
        if node.workspace is not None:  # its directory again, before anything is recorded:
            node.workspace.claim()        # another agent may work in it now (409)
        if was_live:
            node.log.append(SessionResumed(at=now_iso()))
        node.log.prompt(text)
        node.state, node.reason, node.answer = "running", None, None
        node.output, node.output_tries = None, 0  # a typed agent answers in its type again
        node.done = trio.Event()
        node.scope = trio.CancelScope()
        node.turns_taken = 0
        self._writable().start(node, nursery)
        self._poke()
        return self.view(aid)

    def clear(self, aid: str) -> AgentOut:
        self._edit(aid, Cleared())
        node = self._writable().agents.get(aid)
        for child in (node.children.values() if node is not None else ()):
            child.scope.cancel()
        self._poke()
        return self.view(aid)

    def rewind(self, aid: str, to: int) -> AgentOut:
        """``/rewind``: the turns after ``to`` withdrawn and, for an agent with a workspace, its
        files as they stood after turn ``to`` (``workspace.life.rewind``, as
        ``Supervisor.rewind``). An agent with files is rewound only between its runs (decision
        0376): its directory is held for the restore, and a running agent's tools use it."""
        sup = self._writable()
        live = sup.agents.get(aid)
        ws = live.workspace if live is not None else None
        if ws is not None:
            if live.state == "running":
                raise Conflict(f"agent {aid} is running and its tools use its files: cancel it "
                               "or wait for it to end, then rewind")
            ws.claim()  # another agent working in its directory now: 409, nothing written
        try:
            # a rewind into a residue is refused, nothing written
            self._edit(aid, Rewound(to=to), then=lambda node: _restore_files(node, to))
        finally:
            if ws is not None:
                ws.release()
        self._poke()
        return self.view(aid)

    def steer(self, aid: str, text: str) -> dict[str, Any]:
        """A person's message to a running agent (``POST /v1/agents/{id}/steer``): recorded
        at once as ``Steering`` by ``user``, carried by its next request
        (``Supervisor.steer``). An agent that is not running here is a conflict naming its
        state; nothing is written."""
        sup = self._writable()
        if aid not in self.agent_ids():
            raise NotFound(f"no agent {aid!r} in this run")
        node = sup.agents.get(aid)
        if node is None:
            scan = self._scan(aid)
            state = state_of(scan.reason) if scan.ended else "open"
            why = f" ({scan.reason})" if scan.ended and scan.reason else ""
            raise Conflict(f"agent {aid} is not running ({state}{why}): a message reaches only "
                           "a running agent; send it a prompt instead")
        out = sup.steer(aid, text, by="user")
        self._poke()
        return out

    def cancel(self, aid: str) -> AgentOut:
        node = self._node(aid)
        if node.state != "running":
            raise Conflict(f"agent {aid} is not running ({node.state})")
        node.scope.cancel()
        return self.view(aid)

    def fork(self, aid: str, task: str, kind: str) -> AgentOut:
        node = self._node(aid)
        if node.state != "running" or node.nursery is None:
            raise Conflict(f"agent {aid} is not running ({node.state}): a child lives inside "
                           "its running parent; send the agent a prompt first")
        child = self._writable().new_child(node, task, kind)
        self._writable().start(child, node.nursery)
        self._poke()
        return self.view(child.id, [])

    def running(self) -> list[Any]:
        if self.sup is None:
            return []
        return [n for n in self.sup.agents.values() if n.state == "running"]


__all__ = ["Run", "NotFound", "Conflict", "Refusal"]
