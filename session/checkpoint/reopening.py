"""Reopening a log's table: from its checkpoint while it still describes the log, else refolded.

The one place that decides, for every reader of a log other than the live agent writing it:

* ``AgentLog.resume`` — an agent reopened to append: the whole table, every resident turn's
  records loaded;
* ``open_table`` — the door from outside (``mnemon transcript``, ``mnemon.open_agent``): the
  checkpoint itself when it covers the whole log, else the structural table (loci, not
  contents), saved as the new checkpoint;
* ``lineage.view.open_agent`` — ``mnemon context``: the whole table, nothing written.

The checkpoint never changes an answer. It is used only when it describes the log
(``table.load``: keyed by the first and the last record it covers, both read back and
digest-checked); a log appended behind its back is caught up through ``Context.step``
(``restore.caught_up``); and any trouble on that path — a column found damaged, a refused line,
an ancestor that cannot be read — leaves the answer, or the refusal with its line, to a fresh
fold of the log. ``mnemon verify`` never comes here: it refolds every log.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import SessionError
from ..log import TornTail, find_torn_tail
from . import layout
from .layout import Stale
from .table import Table, load

if TYPE_CHECKING:
    from ..context import Context
    from .layout import Key


def reopen(log: Path, source: str, *, loader=None, lazy: bool = False, as_is: bool = False,
           rebuild: bool = False, display: str | None = None
           ) -> tuple[Table | Context, Key | None, TornTail | None]:
    """The table of ``log`` (``source``: its path relative to the run root): from its
    checkpoint when one describes the log — caught up with the lines appended since — else the
    fold of every complete line. Never writes. Returns ``(table, key, torn)``: the table (a
    ``Table`` only when ``as_is`` asks for one), what a checkpoint of it is keyed by (None:
    nothing was folded), and the torn tail left in place, if any.

    ``lazy``: the structural table (what the door reads), else the whole table (every resident
    turn's records loaded, inherited ones through ``loader``). ``as_is``: a checkpoint that
    covers the whole log is answered as it is, the mapped ``Table``. ``rebuild``: the checkpoint
    is not read (a column of it was found damaged in use). ``display`` names the log in a
    refusal. Logs under ``layout.MIN_BYTES`` have no checkpoint: they are folded.

    Refusals of the fold (``LogRefused``) propagate, as from ``fold_file``."""
    torn = find_torn_tail(log)
    size = torn.offset if torn is not None else log.stat().st_size
    table = None
    if size >= layout.MIN_BYTES and not rebuild:
        try:
            table = load(log, source)
        except Stale:
            table = None
    if table is not None and as_is and size == table.key.end:
        return table, table.key, torn
    # the table must be caught up or folded: only now are the fold's modules imported (for
    # their import cost: an outside read the checkpoint answers never loads them)
    from ..resume import fold_file, with_own
    from .restoring import caught_up

    if table is not None:
        try:
            ctx, key = caught_up(table, log, loader=loader, lazy=lazy, display=display)
            return ctx, key, torn
        except (SessionError, Stale):
            pass  # the fold below answers, or refuses naming the line
    ctx, _ = fold_file(log, source, loader=with_own(log, source, loader) if lazy else loader,
                       display=display, lazy=lazy)
    return ctx, ctx.memo.pop("fold_key", None), torn


def open_table(log: Path, source: str, *, loader=None, sources=None,
               display: str | None = None, save: bool = True,
               rebuild: bool = False) -> tuple[Table | Context, TornTail | None]:
    """The door's table of a log from outside a run: its checkpoint when it describes the log;
    caught up by folding the lines appended since; else a full lazy fold. A new or caught-up
    fold is saved as the checkpoint (``save``; ``sources`` reads the big blocks of resident
    turns) and answered from it.

    Returns a ``Table``, or the lazy ``Context`` itself when the checkpoint cannot be written
    or the log is too short to get one. Refusals of the fold (``LogRefused``) propagate.
    """
    table, key, torn = reopen(log, source, loader=loader, lazy=True, as_is=True,
                              rebuild=rebuild, display=display)
    if isinstance(table, Table) or not save or key is None or key.end < layout.MIN_BYTES:
        return table, torn
    from .writing import save as write  # (import cost, as above: only after a fold)

    if write(table, log, key, sources) is None:
        return table, torn
    try:
        return load(log, source), torn
    except Stale:
        return table, torn


__all__ = ["reopen", "open_table"]
