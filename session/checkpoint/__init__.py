"""The fold checkpoint: a structural fold of one log, saved beside it, derived data only.

``record.jsonl.fold`` (docs/format.md, "The fold checkpoint") holds what a lazy fold
(``Context(lazy=True)``: loci, not contents) of the log's first ``end`` bytes built, in columns:
per turn its id, weight, role/state/origin, source, residue, label and where its loci lie; per
record its locus; the residues, marks, pending calls and the fold's scalars; the big blocks of
resident turns (for the index's ``blocks``). It is never a source of truth: it is keyed by the
log's first record and the last record it covers, checked against the log on every load, and
anything that does not match is thrown away and the log refolded; ``mnemon verify`` never reads
it.

One job per module, lowest first (each imports only those above it in this list):

* ``header`` — the file's frame read without a decoder: where it lies, the magic line, the
  header's bytes and digest, the key's check against the log, ``Stale``;
* ``layout`` — the typed key and header, the block size;
* ``table`` — reading: ``load`` (verified against the log) and the mapped ``Table`` the door
  reads from outside a run;
* ``printed`` — the printed index rows stored in the file;
* ``writing`` — a table streamed to the file column by column (``write``, ``save``);
* ``restoring`` — the ``Context`` a checkpoint saved, caught up with the lines appended since
  (``restore``, ``caught_up``);
* ``reopening`` — ``reopen``, the one place that decides between the checkpoint and a fresh
  fold, for ``AgentLog.resume``, the door from outside (``open_table``) and ``mnemon context``.

Names load on first use, so the fold (``session.resume``, which keys what it folds by a
``layout.Key``) can import ``layout`` without loading the rest. (No module is named after a
function this face exports: an imported submodule is an attribute of its package, and would
stand where ``checkpoint.write`` or ``checkpoint.restore`` is the function.)
"""

from __future__ import annotations

TYPE_CHECKING = False  # as typing's, without importing typing (~2 ms of every start)

from ..._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    "Key": ".layout",
    "Stale": ".layout",
    "SUFFIX": ".layout",
    "path_for": ".layout",
    "Table": ".table",
    "load": ".table",
    "write": ".writing",
    "save": ".writing",
    "big_blocks": ".writing",
    "restore": ".restoring",
    "caught_up": ".restoring",
    "reopen": ".reopening",
    "open_table": ".reopening",
    "with_own": "..resume",
})

if TYPE_CHECKING:
    from ..resume import with_own
    from .layout import SUFFIX, Key, Stale, path_for
    from .reopening import open_table, reopen
    from .restoring import caught_up, restore
    from .table import Table, load
    from .writing import big_blocks, save, write
