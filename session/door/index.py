"""``transcript index``: one row per turn, oldest first, as DESIGN.md pins them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..constants import BLOCK_LISTED_BYTES


def row(t: Any, records: Callable[[Any], list | None] | None = None) -> dict:
    """The index row of one turn (a ``Turn`` or anything with its fields).

    A resident turn of at least BLOCK_LISTED_BYTES also lists its big blocks; its records are
    the ones it holds, or — when the table keeps loci only — ``records(t)`` loads them.
    """
    out: dict[str, Any] = {
        "id": t.id, "role": t.role, "label": t.label, "bytes": t.bytes, "held": t.held,
        "residue": list(t.residue) if t.residue is not None else None,
        "origin": t.origin, "source": t.source,
    }
    if t.state == "resident" and t.bytes >= BLOCK_LISTED_BYTES:
        big = getattr(t, "big", False)
        if big is not False:  # a checkpointed table lists them already
            if big:
                out["blocks"] = [{"block": a, "bytes": n} for a, n in big]
            return out
        recs = t.records
        if recs is None and records is not None:
            recs = records(t)
        if recs is not None:
            # (here: the blocks' module costs a class or two to import, and the door from
            # outside reads rows that list their blocks already)
            from ..blocks import turn_blocks

            big = [{"block": b.address, "bytes": n} for b in turn_blocks(t.id, recs)
                   if b.index not in t.swept and (n := b.length) >= BLOCK_LISTED_BYTES]
            if big:
                out["blocks"] = big
    return out


def rows(turns: Iterable[Any], records: Callable[[Any], list | None] | None = None) -> list[dict]:
    return [row(t, records) for t in turns]


def index(ctx) -> list[dict]:
    """Every turn of a ``Context``, oldest first, as the ``transcript index`` rows of DESIGN.md."""
    return rows(ctx.turns)
