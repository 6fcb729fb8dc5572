"""Forking: a child's log that inherits its parent's table by reference.

A **mnemon** child's log opens with ``SessionStarted`` (the parent's configuration, copied), then
one ``Inherited`` record — a row plus a Pointer for every closed turn of the parent's table and
the parent's residues — then the task as the child's first ``UserPrompt``, verbatim. Not a byte
of the parent's material is copied: a row the parent itself inherited keeps its original pointer,
so a grandchild's rows name the grandparent's file directly (the lineage is flattened at each
fork and nothing ever walks it). A **fresh** child opens with an empty context and its task.

What a fork takes (DESIGN.md, "Forks and children"): every turn below the parent's turn in hand
that is not withdrawn, and every residue wholly below it that is not withdrawn (nested ones too).
The turn in hand (the one calling ``agents_start``) is not closed and is not inherited; pending
marks are not carried. Work done earlier in the fork's own turn — an eviction, a sweep, a clear
or a rewind recorded in the turn in hand — does not reach the child either: the link is the table
as it stood when the turn in hand opened. In the common case (the turn in hand holds no such
edit) that is the live table minus the turn in hand, read in one pass; otherwise the parent's own
log is refolded up to the record that opened the turn in hand (the same ``Context.step``).

The child's ``id_floor`` is the parent's next id (its reach + 1), so an id names exactly one thing
along any ancestry path.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import msgspec



from ..session.agentlog import AgentLog
from ..session.context import Context
from ..session.log import Fsync, digest, iter_lines
from ..session.records import (
    DECODE_ERRORS,
    ChainAt,
    Cleared,
    Evicted,
    Inherited,
    Linked,
    Pointer,
    Record,
    Residue,
    Rewound,
    Row,
    SessionStarted,
    Swept,
    UserPrompt,
    decode,
    encode,
)
from ..session.turn import Loader, Turn

from .runroot import (
    RunRootError,
    agent_log,
    agent_source,
    check_loci,
    confine,
    make_loader,
    now_iso,
)

Kind = Literal["mnemon", "fresh"]

# Fields of the parent's SessionStarted a child copies. A mnemon child keeps the parent's system
# prompt, tools, provider and model: changing any of them invalidates the whole cached prefix.
COPIED = ("system", "tools", "provider", "model", "context_window", "tokens_per_byte")
PREFIX_FIELDS = ("system", "tools", "provider", "model")

_EDITS = (Evicted, Swept, Cleared, Rewound)


class ForkError(RunRootError):
    """A fork that cannot be made (bad child id, child log already present, bad override)."""


def _now() -> str:
    return now_iso()  # the same text as datetime's ``%Y-%m-%dT%H:%M:%S.%fZ``, a fifth the cost


# --------------------------------------------------------------------------- the link


def _in_hand_edits(ctx: Context) -> bool:
    """Whether the turn in hand changed the table below it (evicted, swept, cleared, rewound)."""
    if ctx.in_hand is None:
        return False
    t = ctx.turn(ctx.in_hand)
    if t is None:
        return False
    if t.records is None:  # withdrawn by a clear or rewind recorded in the turn in hand itself
        return True
    return any(isinstance(r, _EDITS) for r in t.records)


def _table_at_opening(ctx: Context, log_path: Path) -> Context:
    """The parent's table as it stood just before its turn in hand opened: its own log refolded
    through ``Context.step`` up to the record that opened that turn."""
    t = ctx.turn(ctx.in_hand)  # type: ignore[arg-type]
    assert t is not None
    stop = t.loci[0][0]
    prefix = Context(ctx.source, loader=ctx.loader)
    for off, line in iter_lines(log_path):
        if off >= stop:
            break
        prefix.step(decode(line), (off, len(line), digest(line)))
    return prefix


def _rows(ctx: Context, below: int | None) -> tuple[list[Linked], list[Residue]]:
    turns: list[Linked] = []
    for t in ctx.turns:
        if below is not None and t.id >= below:
            break
        if t.state == "withdrawn":
            continue
        held = t.held
        swept = sorted(t.swept.items()) if held == "swept" else None
        row = Row(id=t.id, role=t.role, label=t.label, bytes=t.bytes,  # type: ignore[arg-type]
                  held=held, swept=swept)  # type: ignore[arg-type]
        turns.append(Linked(row=row, at=Pointer(t.source, list(t.loci))))
    residues = [r.as_record() for r in ctx.residues
                if not r.withdrawn and (below is None or r.last < below)]
    return turns, residues


def link_for(parent_ctx: Context, *, log_path: Path | None = None) -> Inherited:
    """The ``Inherited`` record a mnemon child of ``parent_ctx`` opens with.

    Rows: every non-withdrawn turn below the turn in hand (all turns when there is none), each
    with the pointer to the file that first recorded it. Residues: every non-withdrawn residue
    wholly below the turn in hand, nested ones included. ``id_floor``: the parent's reach + 1.

    When the turn in hand itself recorded an edit (an eviction, a sweep, a clear or a rewind),
    that edit does not reach the child; the table is then refolded from the parent's own log up
    to the opening of the turn in hand, which needs ``log_path`` (``fork`` passes it).
    """
    floor = parent_ctx.next_id()
    if _in_hand_edits(parent_ctx):
        if log_path is None:
            raise ValueError(f"turn {parent_ctx.in_hand} (the turn in hand) edited the table; "
                             "the fork takes the table as it was when that turn opened, which "
                             "needs the parent's log_path")
        turns, residues = _rows(_table_at_opening(parent_ctx, log_path), None)
    else:
        turns, residues = _rows(parent_ctx, parent_ctx.in_hand)
    return Inherited(turns=turns, residues=residues, id_floor=floor)


# --------------------------------------------------------------------------- loading


def opening_loader(root: Path) -> Loader:
    """A loader for folding one ``Inherited`` record: ``make_loader``'s reads, with each source
    confined once (``confine`` resolves the path through every symlink — most of the cost of
    loading thousands of rows), every locus still digest-checked before it is parsed.

    Meant for one fold: the cache of confined paths is not re-checked, so ``fork`` and
    ``resume_child`` put ``make_loader(root)`` back on the table once the opening is folded.
    """
    from ..session.errors import AncestorUnreadable
    from ..session.log import read_span

    root = Path(root)
    confined: dict[str, Path] = {}

    def load(ptr: Pointer) -> list[Record]:
        path = confined.get(ptr.source)
        if path is None:
            path = confined[ptr.source] = confine(root, ptr.source)
        check_loci(ptr.source, ptr.loci)
        out: list[Record] = []
        for raw, locus in zip(read_span(path, ptr.source, ptr.loci), ptr.loci):
            try:
                out.append(decode(raw))
            except DECODE_ERRORS as e:
                raise AncestorUnreadable(ptr.source, f"offset {locus[0]}: not a record ({e})") \
                    from None
        return out

    return load


def sharing_loader(parent_ctx: Context, root: Path) -> Loader:
    """``opening_loader`` for a fork from a live parent: a row whose pointer names exactly the
    loci of a turn the parent holds in memory takes the parent's records (it wrote them, or
    read them digest-checked, and a locus's digest pins its bytes) instead of reading and
    decoding them again; any other row is read as ``opening_loader`` reads it. A fork of a
    parent with a few resident documents cost ~0.3 ms, most of it re-reading them."""
    fallback: Loader | None = None  # made when a row is not the parent's (rarely)
    held: dict[tuple[str, int], Turn] | None = None

    def load(ptr: Pointer) -> list[Record]:
        nonlocal held, fallback
        if held is None:
            held = {}
            turns = parent_ctx.turns
            if type(turns) is list:  # a table restored as columns holds no records to share
                for turn in turns:
                    if turn.records is not None and turn.loci:
                        held[(turn.source, turn.loci[0][0])] = turn
        t = held.get((ptr.source, ptr.loci[0][0])) if ptr.loci else None
        if t is not None and t.records is not None and \
                len(t.loci) == len(ptr.loci) == len(t.records) and \
                (t.loci == ptr.loci or list(map(tuple, t.loci)) == list(map(tuple, ptr.loci))):
            return list(t.records)
        if fallback is None:
            fallback = opening_loader(root)
        return fallback(ptr)

    return load


# --------------------------------------------------------------------------- the fork


def child_started(parent: SessionStarted, child_id: str, kind: Kind, *, at: str | None = None,
                  **started_extra: Any) -> SessionStarted:
    """The child's ``SessionStarted``: the parent's configuration copied, never a secret."""
    fields: dict[str, Any] = {f: getattr(parent, f) for f in COPIED}
    fields["depth"] = (parent.depth or 0) + 1
    for key, value in started_extra.items():
        if value is None:  # nothing to say: keep what was copied
            continue
        if key in ("agent", "parent", "kind", "t"):
            raise ForkError(f"{key!r} of a child's SessionStarted is set by the fork")
        if key not in SessionStarted.__struct_fields__:
            raise ForkError(f"SessionStarted has no field {key!r}")
        if kind == "mnemon" and key in PREFIX_FIELDS and value != fields.get(key):
            raise ForkError(f"a mnemon child keeps its parent's {key} (changing it invalidates "
                            "the whole cached prefix); fork a fresh child instead")
        fields[key] = value
    return SessionStarted(agent=child_id, parent=parent.agent, kind=kind, at=at or _now(),
                          **fields)


def fork(root: Path, parent: AgentLog, child_id: str, *, kind: Kind = "mnemon", task: str,
         at: str | None = None, fsync: Fsync = "none", **started_extra: Any) -> AgentLog:
    """Write ``agents/<child_id>/record.jsonl`` and return the child's live log.

    The child's log: ``SessionStarted`` (copied from the parent's, with ``parent``, ``kind`` and
    ``depth``), then for a mnemon child the ``Inherited`` link (its resident rows are loaded
    through their pointers, digest-checked, by the run root's loader as the record is folded),
    then ``task`` as the child's first ``UserPrompt``, verbatim. A fresh child has no link.

    ``started_extra`` sets further ``SessionStarted`` fields (``depth``, ``context_window``,
    ``tokens_per_byte``…; a ``None`` keeps the copied value); a mnemon child may not change the parent's system, tools, provider or
    model. Synchronous, so within Trio no other task appends to the parent while it runs.
    """
    if kind not in ("mnemon", "fresh"):
        raise ForkError(f"a child's kind is 'mnemon' or 'fresh', not {kind!r}")
    root = Path(root)
    started = parent.ctx.started
    if started is None:
        raise ForkError(f"{parent.source} has no SessionStarted to fork from")
    path = agent_log(root, child_id)
    if child_id == started.agent:
        raise ForkError(f"a child may not reuse its parent's id {child_id!r}")
    if os.path.exists(path):
        raise ForkError(f"agent {child_id!r} already has a log at {agent_source(child_id)}")
    opening = child_started(started, child_id, kind, at=at, **started_extra)
    link = link_for(parent.ctx, log_path=parent.path) if kind == "mnemon" else None
    head = parent.log.head() if link is not None else None
    if link is not None and head is not None:  # ties the parent's chain to this child's
        link = msgspec.structs.replace(link, parent_head=ChainAt(parent.source, *head))
    src = agent_source(child_id)
    child = AgentLog.create(path, src, opening, loader=sharing_loader(parent.ctx, root),
                            fsync=fsync)
    try:
        if link is not None:
            child.append(link)
        child.ctx.loader = make_loader(root)
        if link is not None:  # its first render takes the turns its parent rendered, as made
            child.ctx.memo["render_from"] = parent.ctx  # (session.render: decision 0473)
        child.append(UserPrompt(turn=child.next_id(), text=task))
        child.log.sync()
    except BaseException:
        child.close()
        raise
    return child


def resume_child(root: Path, child_id: str, *, fsync: Fsync = "none") -> AgentLog:
    """Reopen a child's log like a root's: torn tail aside, refold (loading through the link),
    record ``SessionResumed``."""
    src = agent_source(child_id)
    log, _ = AgentLog.resume(Path(root) / src, src, loader=opening_loader(root), fsync=fsync)
    log.ctx.loader = make_loader(Path(root))
    return log


def link_bytes(link: Inherited) -> int:
    """The size of the ``Inherited`` line as written (without its newline)."""
    return len(encode(link))


__all__ = ["link_for", "fork", "opening_loader", "sharing_loader", "resume_child", "child_started", "link_bytes", "ForkError", "Kind"]
