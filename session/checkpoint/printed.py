"""The printed index: every index row as ``transcript index --json`` prints it, in the checkpoint.

The writer stores the rows already encoded (compact JSON, each followed by a comma) with the
offset after each, so an outside ``transcript index`` copies bytes instead of building 300 000
objects (``Table.index_json``). A table restored from a checkpoint copies the printed rows of the
turns that did not change since (decision 0219), rewriting in place the residue span of those
whose outermost residue was swallowed by a newer one; only the other rows are encoded.
"""

from __future__ import annotations

import bisect
from array import array
from typing import TYPE_CHECKING, Any

import msgspec

from ..vocab import ORIGIN_OF, ROLE_OF, STATE_OF
from .layout import Stale

if TYPE_CHECKING:
    from .table import Table


def printed_rows(cols, spans: list, big: dict[int, list], base: "Table | None" = None,
                chunk: int = 1 << 20):
    """The index rows as the CLI prints them (compact JSON, each followed by a comma) in
    chunks of about ``chunk`` bytes, then the array of the offset after each row — so an
    outside ``transcript index`` copies bytes instead of building 300 000 objects.

    A table restored from the checkpoint ``base`` copies the printed rows of the turns that did
    not change since (``_reusable``), rewriting in place the residue span of those whose
    outermost residue was swallowed by a newer one; only the other rows are encoded."""
    enc = msgspec.json.Encoder()
    ids, weights, meta, srcs, under, swept = cols.ids, cols.weights, cols.meta, cols.srcs, \
        cols.under, cols.swept
    sources, loff = cols.sources, cols.label_off
    blob = cols.labels
    text = blob.decode("utf-8", "surrogatepass")
    ascii_ = len(text) == len(blob)
    n = len(ids)
    plan = _reusable(cols, spans, big, base) if base is not None else None
    n0, dirty, old, old_off, reps = plan if plan is not None else (0, b"", b"", (), {})
    grow = {u: len(new) - len(was) for u, (was, new) in reps.items()}
    offs = array("q", [0])
    buf = bytearray()
    done = 0
    i = 0
    while i < n:
        if i < n0 and not dirty[i]:  # a run of unchanged rows: their printed bytes
            j = dirty.find(1, i, n0)
            j = n0 if j < 0 else j
            # at most about ``chunk`` bytes at a time (rows whole), never the run in one copy
            j = max(i + 1, min(j, bisect.bisect_right(old_off, old_off[i] + chunk, i, j + 1) - 1))
            seg = old[old_off[i]:old_off[j]]
            at = done + len(buf)
            if reps:
                seg = bytes(seg)
                for was, new in reps.values():
                    seg = seg.replace(was, new)
                for x in range(i, j):
                    at += old_off[x + 1] - old_off[x] + grow.get(under[x], 0)
                    offs.append(at)
            else:
                shift = at - old_off[i]
                offs.extend([old_off[x] + shift for x in range(i + 1, j + 1)])
            if buf:
                done += len(buf)
                yield bytes(buf)
                buf.clear()
            done += len(seg)
            yield seg
            if base is not None:  # written: its mapped pages may go (see ``_let_go``)
                base.let_go("index", old_off[i], old_off[j])
            i = j
            continue
        else:
            m = meta[i]
            st = STATE_OF[m]
            u = under[i]
            label = text[loff[i]:loff[i + 1]] if ascii_ else \
                blob[loff[i]:loff[i + 1]].decode("utf-8", "surrogatepass")
            row: dict[str, Any] = {
                "id": ids[i], "role": ROLE_OF[m], "label": label, "bytes": weights[i],
                "held": "swept" if st == "resident" and swept.get(i) else st,
                "residue": spans[u] if u >= 0 else None, "origin": ORIGIN_OF[m],
                "source": sources[srcs[i]]}
            if st == "resident" and i in big:
                row["blocks"] = [{"block": a, "bytes": b} for a, b in big[i]]
            enc.encode_into(row, buf, -1)
            buf += b","
            offs.append(done + len(buf))
            i += 1
        if len(buf) >= chunk:
            done += len(buf)
            yield bytes(buf)
            buf.clear()
    yield bytes(buf)
    yield offs


def _reusable(cols, spans: list, big: dict, base: "Table"):
    """What of ``base``'s printed index still holds: ``(n0, dirty, rows, offsets, reps)`` —
    rows ``[0, n0)`` came from it, ``dirty[i]`` marks one whose weight, state, residue, sweeps
    or listed blocks changed (or its turn in hand, which may have grown), ``reps`` the printed
    residue spans to rewrite (residue position → (old text, new text)). None when the printed
    index does not check out or the rows are not the checkpoint's."""
    try:
        old = base._col("index", "B")
        # checked block by block, each dropped once checked: read again run by run
        base._check_blocks("index", sorted(base._todo["index"]), drop=True)
        old_off = base._col("index_off", "q", True)
        base.need("ids", "weights", "meta", "under", "big")
    except (Stale, KeyError):
        return None
    n0 = min(base.n, len(cols.ids))
    if len(old_off) != base.n + 1 or \
            memoryview(cols.ids).cast("B")[:8 * n0] != base._raw["ids"][:8 * n0]:
        return None
    dirty = bytearray(n0)
    step = 512
    for name, size in (("weights", 8), ("meta", 1), ("under", 4)):
        new, was = memoryview(getattr(cols, name)).cast("B"), base._raw[name]
        for a in range(0, n0, step):
            b = min(n0, a + step)
            if new[a * size:b * size] != was[a * size:b * size]:
                for x in range(a, b):
                    if new[x * size:(x + 1) * size] != was[x * size:(x + 1) * size]:
                        dirty[x] = 1
    if base._big is None:
        base._big = {int(k): v for k, v in msgspec.msgpack.decode(base._big_raw).items()}
    for i in set(cols.swept) | set(base._swept):
        if i < n0 and cols.swept.get(i) != base._swept.get(i):
            dirty[i] = 1
    for i in set(big) | set(base._big):
        if i < n0 and big.get(i) != base._big.get(i):
            dirty[i] = 1
    if base.in_hand is not None and n0:
        dirty[n0 - 1] = 1
    reps = {}
    for u, was in enumerate(base._outer):
        if u < len(spans) and tuple(spans[u]) != tuple(was):
            reps[u] = (b'"residue":[%d,%d]' % tuple(was), b'"residue":[%d,%d]' % tuple(spans[u]))
    return n0, dirty, old, old_off, reps



__all__ = ["printed_rows"]
