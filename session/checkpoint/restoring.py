"""Restoring a checkpoint: the ``Context`` it saved, for a fold that must go on.

``restore`` rebuilds the lazy table (loci, not contents) a structural fold of the log's first
``key.end`` bytes built: its turns are columns copied out of the map (``session.columns.Turns``:
a few C-level copies whatever the number of turns, a ``Turn`` made only for a row something
touches, decision 0217). ``caught_up`` goes on from there with ``Context.step`` — the lines
appended since the checkpoint folded by ``fold_more``, the one fold — and, for a whole table,
loads every resident turn's records through its loci, giving the table a full fold would.

What decides between this and a fresh fold is ``session.checkpoint.reopening``.
"""

from __future__ import annotations

import gc
from pathlib import Path

from ..columns import Positions, Turns
from ..context import Context
from ..errors import LogCorrupt, Refusal
from ..log import read_span
from ..records import DECODE_ERRORS, decode
from ..resume import fold_more, with_own
from ..turn import ResidueEntry
from .layout import Key, Stale
from .table import Table


def restore(table: Table, *, loader=None) -> "Context":
    """See ``_restore``; the cyclic GC is paused meanwhile (as for a fold: many long-lived
    objects, no cycles) and what was built goes straight to the oldest generation."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _restore(table, loader)
    finally:
        gc.freeze()
        gc.unfreeze()
        if enabled:
            gc.enable()


def _restore(table: Table, loader) -> "Context":
    """A lazy ``Context`` (loci, not contents) equal to the fold the checkpoint saved; the
    fold goes on from it with ``Context.step``. Its turns are columns copied out of the map
    (``session.columns.Turns``: a few C-level copies, whatever the number of turns); a ``Turn``
    is made only for a row something touches. The turn in hand is made now: it may grow."""
    st = table.state
    ctx = Context(table.source, loader=loader, lazy=True)
    entries = [ResidueEntry((r[0], r[1]), r[2], r[3], r[4], r[5], tuple(r[6])) for r in
               st["residues"]]
    for e, r in zip(entries, st["residues"]):
        p = r[7]
        if not -1 <= p < len(entries):
            raise Stale("a damaged residue")
        e.parent = entries[p] if p >= 0 else None
        e._msg_len = r[8]
    ctx.residues = entries
    cols = Turns(entries, table.sources)
    for name in ("ids", "weights", "meta", "srcs", "under", "label_off", "labels", "lstart",
                 "loff", "llen", "ldig"):
        col = getattr(cols, name)
        del col[:]
        table.copy(name, col)
    table.need(*table._todo)
    if max(cols.meta, default=0) >= 16 or any(m & 6 == 6 for m in set(cols.meta)):
        raise Stale("a damaged meta column")
    if cols.under and not -1 <= min(cols.under) <= max(cols.under) < len(entries):
        raise Stale("a damaged under column")
    if cols.srcs and not 0 <= min(cols.srcs) <= max(cols.srcs) < len(table.sources):
        raise Stale("a damaged srcs column")
    cols.swept = {i: dict(items) for i, items in table._swept.items()}
    cols.base = table  # what a later save may copy from (its printed rows, its spans)
    ctx.turns = cols  # type: ignore[assignment]
    ctx._by_id = Positions(cols.ids)  # type: ignore[assignment]
    in_hand = st["in_hand"]
    if in_hand is not None:  # the turn in hand grows: made now, its loci a list
        k = ctx._by_id.get(in_hand)
        if k is None:
            raise Stale("a damaged turn in hand")
        t = cols[k]
        for j in range(k + 1, len(cols)):  # rows after it (none in a log we wrote): made too
            cols[j]
        for j in range(k, len(cols)):
            cols.made[j].loci = cols.loci_of(j)
        r = cols.lstart[k]
        del cols.lstart[k + 1:], cols.loff[r:], cols.llen[r:], cols.ldig[8 * r:]
        assert t.loci is cols.made[k].loci
    ctx.marks = {(k[0], k[1]): k[2] for k in st["marks"]}
    ctx.pending = dict(st["pending"])
    ctx.approvals = {}
    for entry in st.get("approvals", ()):  # absent in a checkpoint of an older writer
        recs = [decode(x.encode("utf-8")) for x in entry]
        ctx.approvals[recs[0].call_id] = [recs[0], recs[1] if len(recs) > 1 else None]
    ctx.reach = st["reach"]
    ctx.id_floor = st["id_floor"]
    ctx.in_hand = in_hand
    started = st["started"]
    ctx.started = decode(started.encode("utf-8")) if started is not None else None
    ws = st.get("workspace")  # absent in a checkpoint of an older writer
    ctx.workspace = decode(ws.encode("utf-8")) if ws is not None else None  # type: ignore[assignment]
    ctx.ended = st["ended"]
    ctx.protocol_seen = st["protocol_seen"]
    ctx.last_input_tokens = st["last_input_tokens"]
    ctx.history_at_response = st["history_at_response"]
    ctx.records_folded = st["records_folded"]
    ctx._hist = st["hist"]
    return ctx


def _load_own(log: Path, source: str, turns: list) -> None:
    """Load the records of the log's own ``turns`` in one pass over one open file (in locus
    order, each record digest-checked before it is parsed), not one open per turn."""
    raws = read_span(log, source, [x for t in turns for x in t.loci])
    for t in turns:
        recs = []
        for locus in t.loci:
            raw = next(raws)
            try:
                recs.append(decode(raw))
            except DECODE_ERRORS as e:
                raise LogCorrupt(source, locus[0], f"not a record ({e})") from None
        t.records = recs



def caught_up(table: Table, log: Path, *, loader=None, lazy: bool = False,
              display: str | None = None) -> tuple[Context, Key]:
    """The table restored from the checkpoint of ``log`` and the lines appended since folded
    through ``step`` (own turns a mark or a sweep needs read from the log itself, ancestors'
    through ``loader``) → ``(ctx, key of what is now folded)``.

    ``lazy``: the structural table, loci only (what the door reads). Otherwise, for an agent
    reopened to append or a render, every resident turn is made and its records loaded through
    its loci (own turns from the log itself, inherited ones through ``loader``) — the table a
    full fold would give; the departed turns stay columns until something touches them."""
    ctx = restore(table, loader=with_own(log, table.source, loader))
    ctx, key = fold_more(log, ctx, table.key, display=display)
    if lazy:
        return ctx, key
    turns = ctx.turns
    where = turns.positions("resident") if hasattr(turns, "positions") else range(len(turns))
    resident = [t for t in (turns[i] for i in where)
                if t.state == "resident" and t.records is None]
    _load_own(log, ctx.source, [t for t in resident if t.source == ctx.source])
    for t in resident:  # inherited: through the loader (digest-checked, confined)
        if t.records is None:
            if loader is None:
                raise Refusal(f"inherited row {t.id} is resident but no loader can read "
                              f"{t.source}")
            t.records = loader(t.pointer)
    ctx.edits += 1  # records loaded into turns already in the table (``Context.edits``)
    ctx.lazy = False
    ctx.loader = loader
    return ctx, key


__all__ = ["restore", "caught_up"]
