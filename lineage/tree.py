"""The lineage tree of a run, derived from the logs alone. Read-only: never writes a file.

Each agent's log is folded through ``Context.step`` (its resident inherited turns loaded through
their pointers, confined to the run root and digest-checked). A node's ``state`` is ``open``,
``ended`` (the log has ``SessionEnded``) or ``broken`` (it does not fold); ``turns`` counts the
whole table (withdrawn turns included), ``resident`` the turns held resident or swept, ``evicted``
the turns under a residue. A broken log reports what folded before the refusal, its parent and
kind read from its first line when that line is a ``SessionStarted``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from ..session.context import Context
from ..session.errors import SessionError
from ..session.log import TornTail, digest, find_torn_tail, iter_lines
from ..session.records import DECODE_ERRORS, SessionStarted, Steering, decode

from .runroot import agent_source, list_agents, make_loader


@dataclass
class Node:
    agent: str
    parent: str | None
    kind: str | None
    turns: int
    resident: int
    evicted: int
    state: str  # open | ended | broken
    error: str | None = None  # why a broken log does not fold (path:line: why)
    torn: TornTail | None = None
    children: list["Node"] = field(default_factory=list)
    orphan: bool = False  # its recorded parent is not a log of this run (or a cycle)
    role: str | None = None  # its named role (docs/roles.md), from its SessionStarted
    model: str | None = None
    # the sandbox its shell runs under, from its SessionStarted: an agent with a workspace only
    sandbox: dict[str, Any] | None = None
    # the caps its parent gave it, from its SessionStarted (docs/orchestrator.md, "Delegation")
    budget: dict[str, Any] | None = None
    # the messages it was sent: Steering by its parent (``agents_send``) or a person (``/steer``)
    messages: int = 0

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "agent": self.agent, "parent": self.parent, "kind": self.kind, "turns": self.turns,
            "resident": self.resident, "evicted": self.evicted, "state": self.state}
        if self.role is not None:  # an agent of a named role: its role and model
            out["role"] = self.role
            out["model"] = self.model
        if self.sandbox is not None:  # an agent with a workspace: what its shell runs under
            out["sandbox"] = self.sandbox
        if self.budget is not None:  # a capped agent: what its parent gave it
            out["budget"] = self.budget
        if self.messages:
            out["messages"] = self.messages
        return out


#: how every view names a shell that runs commands on the machine itself (docs/sandbox.md)
UNSANDBOXED = '⚠ unsandboxed shell (sandbox kind = "none")'


def sandbox_label(sandbox: Any) -> str | None:
    """A few words on an agent's shell for a one-line view, from its opening record's
    ``sandbox`` (a dict; read leniently — a view never refuses a log): None for an agent
    without one; ``kind = "none"`` as the warning it is; else the kind and, when on, the
    network (``shell: bwrap``, ``shell: bwrap, network on``). Said on every line, so that an
    unconfined shell is never the quiet case."""
    if not isinstance(sandbox, dict):
        return None
    kind = sandbox.get("kind", "bwrap")
    if kind == "none":
        return UNSANDBOXED
    label = f"shell: {kind if isinstance(kind, str) else '?'}"
    if sandbox.get("network") is True:
        label += ", network on"
    return label


def cap_label(budget: Any) -> str | None:
    """A few words on the caps an agent was given (``cap $0.50, 90000 tokens, 4 turns``),
    from its opening record's ``budget`` (read leniently: a view never refuses a log); None
    for an agent with no cap."""
    if not isinstance(budget, dict):
        return None
    parts = []
    usd, tok, turns = budget.get("usd"), budget.get("tokens"), budget.get("max_turns")
    if isinstance(usd, (int, float)) and not isinstance(usd, bool):
        parts.append(f"${usd:.2f}")
    if isinstance(tok, int) and not isinstance(tok, bool):
        parts.append(f"{tok} tokens")
    if isinstance(turns, int) and not isinstance(turns, bool):
        parts.append(f"{turns} turns")
    return "cap " + ", ".join(parts) if parts else None


def _first_started(path: Path) -> SessionStarted | None:
    try:
        for _, line in iter_lines(path):
            rec = decode(line)
            return rec if isinstance(rec, SessionStarted) else None
    except (*DECODE_ERRORS, OSError):
        return None
    return None


def _counts(ctx: Context) -> tuple[int, int, int]:
    resident = evicted = 0
    for t in ctx.turns:
        if t.state == "resident":
            resident += 1
        elif t.state == "evicted":
            evicted += 1
    return len(ctx.turns), resident, evicted


def node_for(root: Path, agent: str) -> Node:
    """Fold one agent's log (as ``fold_file`` does) and describe it; never raises on a bad log."""
    src = agent_source(agent)
    path = root / src
    ctx = Context(src, loader=make_loader(root))
    error: str | None = None
    lineno = 0
    messages = 0
    try:
        for off, line in iter_lines(path):
            lineno += 1
            if not line:
                raise SessionError("a blank line")
            try:
                rec = decode(line)
            except DECODE_ERRORS as e:
                raise SessionError(f"not a record: {e}") from None
            ctx.step(rec, (off, len(line), digest(line)))
            if isinstance(rec, Steering) and rec.by in ("parent", "user"):
                messages += 1
        if lineno == 0:
            lineno = 1
            raise SessionError("the log is empty — it must open with SessionStarted")
    except (SessionError, OSError, ValueError) as e:
        error = f"{src}:{lineno}: {e}"
    started = ctx.started or _first_started(path)
    turns, resident, evicted = _counts(ctx)
    state = "broken" if error else ("ended" if ctx.ended is not None else "open")
    return Node(agent, started.parent if started else None, started.kind if started else None,
                turns, resident, evicted, state, error, find_torn_tail(path),
                role=started.role if started else None,
                model=started.model if started else None,
                sandbox=started.sandbox if started and isinstance(started.sandbox, dict)
                else None,
                budget=started.budget if started and isinstance(started.budget, dict)
                and started.budget else None,
                messages=messages)


def _natural(agent: str) -> list[int | str]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", agent)]


def build_tree(root: Path) -> list[Node]:
    """The run's roots, each with its descendants, children in natural id order (a2 < a10).

    An agent whose recorded parent has no log in this run (or that sits on a parent cycle) is
    shown as a root and flagged ``orphan``.
    """
    root = Path(root)
    nodes = {a: node_for(root, a) for a in list_agents(root)}
    order = sorted(nodes, key=_natural)
    for a in order:
        n = nodes[a]
        if n.parent is not None and n.parent in nodes and n.parent != a:
            nodes[n.parent].children.append(n)
    roots = [nodes[a] for a in order if nodes[a].parent is None or nodes[a].parent not in nodes
             or nodes[a].parent == a]
    for n in roots:
        n.orphan = n.parent is not None
    seen: set[str] = set()

    def mark(n: Node) -> None:
        seen.add(n.agent)
        for c in n.children:
            if c.agent not in seen:
                mark(c)

    for n in roots:
        mark(n)
    for a in order:  # parent cycles: nobody on them is reachable from a root
        if a not in seen:
            n = nodes[a]
            n.orphan = True
            n.children = [c for c in n.children if c.agent not in seen]
            roots.append(n)
            mark(n)
    return roots


def walk(roots: list[Node]) -> list[tuple[Node, str]]:
    """Depth-first, each node with its drawing prefix (ASCII)."""
    out: list[tuple[Node, str]] = []
    seen: set[str] = set()

    def go(n: Node, lead: str, branch: str) -> None:
        if n.agent in seen:
            return
        seen.add(n.agent)
        out.append((n, lead + branch))
        kids = [c for c in n.children if c.agent not in seen]
        child_lead = lead + ("" if not branch else ("|   " if branch == "|-- " else "    "))
        for i, c in enumerate(kids):
            go(c, child_lead, "`-- " if i == len(kids) - 1 else "|-- ")

    for r in roots:
        go(r, "", "")
    return out


def tree_json(root: Path) -> list[dict[str, Any]]:
    """``mnemon tree --json``: ``[{agent, parent, kind, turns, resident, evicted, state}]`` in
    depth-first tree order (an agent of a named role adds ``role`` and ``model``; an agent
    with a workspace, ``sandbox``: its opening record's; a capped agent, ``budget``: its caps;
    one that was sent messages, ``messages``: how many)."""
    return [n.as_json() for n, _ in walk(build_tree(root))]


def format_node(n: Node, prefix: str) -> str:
    """One line of the drawing: ``prefix agent [kind] T turns: R resident, E evicted - state``;
    an agent of a named role: ``[kind, role on model]``; an agent with a workspace ends with
    its shell's sandbox (``· shell: bwrap``, ``· ⚠ unsandboxed shell …``); a capped agent
    with its caps (``· cap $0.50, 4 turns``); one that was sent messages, how many
    (``· 2 messages received``)."""
    kind = n.kind or "root"
    if n.role is not None:
        kind += f", {n.role}" + (f" on {n.model}" if n.model else "")
    if n.orphan and n.parent:
        kind += f", parent {n.parent} missing"
    line = (f"{prefix}{n.agent} [{kind}] {n.turns} turns: {n.resident} resident, "
            f"{n.evicted} evicted - {n.state}")
    label = sandbox_label(n.sandbox)
    if label is not None:
        line += f" · {label}"
    cap = cap_label(n.budget)
    if cap is not None:
        line += f" · {cap}"
    if n.messages:
        line += f" · {n.messages} message{'s' if n.messages != 1 else ''} received"
    if n.error:
        line += f"  ({n.error})"
    return line


def tree_text(root: Path) -> list[str]:
    """The indented ASCII drawing, one line per agent."""
    return [format_node(n, prefix) for n, prefix in walk(build_tree(root))]


__all__ = ["Node", "node_for", "build_tree", "walk", "tree_json", "tree_text", "format_node",
           "sandbox_label", "cap_label", "UNSANDBOXED"]
