"""The words a table row is written in: a turn's role, state and origin, packed in one byte.

``ROLES``, ``STATES`` and ``ORIGINS`` name every value a turn's ``role``, ``state`` and
``origin`` take (``held`` adds ``swept``). A table kept as columns (``session.columns``) and the
checkpoint file (``session.checkpoint``) store the three in one byte, the ``meta`` column:
role in bit 0, state in bits 1–2, origin in bit 3 (docs/format.md). That byte is part of the
checkpoint's format, so the order of each tuple is fixed.

Also here: what makes a view of loci read from columns (``columns.Loci``,
``checkpoint.table.Loci``) equal to a list of them.

The bottom of the table's layers, shared by the turn, the columns and the checkpoint's reader;
it imports nothing, so the door from outside pays for no class of the fold to read a row.
"""

from __future__ import annotations

from typing import Any

ROLES = ("user", "assistant")
STATES = ("resident", "evicted", "withdrawn")
ORIGINS = ("own", "inherited")

META_ROLE = {r: i for i, r in enumerate(ROLES)}
META_STATE = {s: i << 1 for i, s in enumerate(STATES)}
META_ORIGIN = {o: i << 3 for i, o in enumerate(ORIGINS)}
ROLE_OF = [ROLES[m & 1] for m in range(16)]
"""A meta byte's role, state and origin, by the byte's value (a list: one index, no arithmetic)."""
STATE_OF = [(*STATES, "?")[(m >> 1) & 3] for m in range(16)]
ORIGIN_OF = [ORIGINS[(m >> 3) & 1] for m in range(16)]


def meta_of(t: Any) -> int:
    """A turn's role, state and origin packed in one byte (the ``meta`` column)."""
    return META_ROLE[t.role] | META_STATE[t.state] | META_ORIGIN[t.origin]


def loci_equal(a, other: object):
    """A view of loci read from columns (``columns.Loci``, ``checkpoint.table.Loci``) equals a
    list, a tuple or a view of its own kind holding the same ``(offset, length, digest)``
    triples."""
    if isinstance(other, (list, tuple, type(a))):
        return len(a) == len(other) and all(tuple(x) == tuple(y) for x, y in zip(a, other))
    return NotImplemented


__all__ = ["ROLES", "STATES", "ORIGINS", "META_ROLE", "META_STATE", "META_ORIGIN", "ROLE_OF",
           "STATE_OF", "ORIGIN_OF", "meta_of", "loci_equal"]
