"""Addressing: the ``turns`` argument (``"3,5-9"``, ``[3, "5-9"]``, ``7``) and the turns it selects.

A selection is a list of positions in a table's id-ordered turns; the door resolves positions
into owned ``Want`` tuples for the readers.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
from collections.abc import Sequence
from typing import Any

from ..errors import Refusal


Want = tuple  # (turn id, source, loci): one turn to read, owned by the reader
"""One turn to read, resolved under the agent's lock: ``(turn id, source, loci)``.

A plain tuple, cheap to make for every turn of a long lineage. The loci of a closed turn never
change (only the turn in hand grows), so they are shared; the turn in hand's are copied.
"""


def parse_turns(spec: Any) -> tuple[list[int], list[tuple[int, int]]]:
    """``"3,5-9"``, ``[3, "5-9"]`` or ``7`` → (explicit ids, inclusive ranges)."""
    items: list[Any]
    if isinstance(spec, bool):
        raise Refusal(f"turns takes ids and ranges such as \"3,5-9\" — {spec!r} is not one")
    if isinstance(spec, int):
        items = [spec]
    elif isinstance(spec, str):
        items = [s for s in (p.strip() for p in spec.split(",")) if s]
        if not items:
            raise Refusal("turns names no turn — give ids and ranges such as \"3,5-9\"")
    elif isinstance(spec, (list, tuple)):
        items = list(spec)
    else:
        raise Refusal(f"turns takes ids and ranges such as \"3,5-9\" — {spec!r} is not one")
    ids: list[int] = []
    ranges: list[tuple[int, int]] = []
    for it in items:
        if isinstance(it, bool):
            raise Refusal(f"turns takes ids and ranges such as \"3,5-9\" — {it!r} is not one")
        if isinstance(it, int):
            ids.append(it)
            continue
        if isinstance(it, str):
            s = it.strip()
            if "," in s:
                sub_ids, sub_ranges = parse_turns(s)
                ids += sub_ids
                ranges += sub_ranges
                continue
            a, dash, b = s.partition("-")
            try:
                if dash:
                    lo, hi = int(a), int(b)
                    if lo > hi:
                        raise Refusal(f"the range {s} runs backwards")
                    ranges.append((lo, hi))
                else:
                    ids.append(int(s))
                continue
            except ValueError:
                pass
        raise Refusal(f"turns takes ids and ranges such as \"3,5-9\" — {it!r} is not one")
    return ids, ranges




def select(ids: Sequence[int], turns: Any, hand: int | None, latest: int | None) -> list[int]:
    """Positions (in ``ids``, sorted ascending) of the turns a ``turns`` argument names, in id
    order. ``hand`` is the turn in hand when the caller may not read it (the agent's own door):
    an explicit id of it is refused, ranges skip it. Refusals name the state."""
    n = len(ids)
    if turns is None:
        return [i for i in range(n) if ids[i] != hand]
    want, ranges = parse_turns(turns)
    chosen: set[int] = set()
    for tid in want:
        i = bisect.bisect_left(ids, tid)
        if i >= n or ids[i] != tid:
            what = "no turn is recorded yet" if latest is None else f"the latest is {latest}"
            raise Refusal(f"turn {tid} is not recorded — {what}")
        if tid == hand:
            closed = [x for x in (ids[0], ids[n - 1]) if x != hand]
            if n > 1 and ids[n - 1] == hand:
                closed = [ids[0], ids[n - 2]]
            what = (f"its closed turns ({closed[0]}–{closed[-1]}) are readable" if n > 1
                    else "no closed turn is recorded yet")
            raise Refusal(f"turn {tid} is still being written — {what}")
        chosen.add(i)
    for lo, hi in ranges:
        a = bisect.bisect_left(ids, lo)
        b = bisect.bisect_right(ids, hi)
        chosen.update(i for i in range(a, b) if ids[i] != hand)
    return sorted(chosen)


@contextlib.contextmanager
def _no_gc():
    """Pause the cyclic GC while building many small tuples (they hold no cycles): a collection
    triggered mid-way would traverse the agent's whole table, many times the work itself."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
