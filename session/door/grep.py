"""``transcript grep``: a regex over the transcript's text, per line, in one sequential pass per
file; the raw scan (``scan``) when the pattern holds a literal whose raw bytes can be searched,
else every wanted record decoded in locus order."""

from __future__ import annotations

import bisect
import collections
import heapq
import itertools
import operator
from array import array
from collections.abc import Iterable, Iterator, Sequence

from ..constants import GREP_TIMEOUT_S
from . import scan
from .hits import _grep_record, _Hits
from .pattern import _forms_finder, _Matcher
from .read import Opener, check as _check, open_source
from .scan import _Flat, _read_window, _scan_file
from .turns import Want, _no_gc


def grep_wants(sources: Opener, wants: Sequence[Want], pattern: str, *,
               timeout_s: float = GREP_TIMEOUT_S, shortcut: bool = True,
               _matcher: _Matcher | None = None, _memo: dict | None = None) -> dict:
    """Grep the wanted turns' records (no lock needed); see ``Door.grep``.

    ``_memo`` (``_cache(ctx)``) keeps the byte spans of inherited sources between calls.
    """
    m = _matcher or _Matcher(pattern, timeout_s, shortcut)
    hits = _Hits()
    groups = wants.groups() if hasattr(wants, "groups") else _groups(wants)
    for source, idxs in groups:  # sources in order of their first turn
        with open_source(sources, source) as f:
            spans = None
            if m.raw is not None:
                key = None
                if _memo is not None and source != _memo["own"] and len(idxs) and \
                        len(idxs) == _memo["per_source"].get(source):
                    # every inherited turn of this source (a narrowed selection is not kept:
                    # two selections may share their ends and size)
                    key = (source, len(idxs))
                    spans = _memo["spans"].get(key)
                if spans is None:
                    spans = wants.spans(idxs) if hasattr(wants, "spans") else _spans(wants, idxs)
                    if key is not None and spans is not None:
                        _memo["spans"][key] = spans
            if spans is not None:
                flat = _Flat(wants, idxs, _memo["flat"] if key is not None else None, key)
                _scan_file(f, source, idxs, spans, wants, m, hits, flat)
            else:
                _grep_file(f, source, _in_locus_order(wants, idxs), wants, m, hits)
    return hits.answer()


def _cache(ctx) -> dict:
    """Per-table memo of what never changes: the inherited turns' owned tuples and byte spans.

    A link's rows and pointers are fixed once ``Inherited`` is folded (states may change, loci
    never), so a lineage of 350 000 inherited turns is resolved once, not on every grep.
    """
    c = ctx.memo.get("door")
    if c is None:
        n = 0
        turns = ctx.turns
        columns = type(turns) is not list  # kept as columns: read them, make no Turn
        for i in range(len(turns)):
            if (turns.origin_of(i) if columns else turns[i].origin) != "inherited":
                break
            n += 1
        with _no_gc():
            prefix = [turns.want(i) for i in range(n)] if columns else \
                [(t.id, t.source, t.loci) for t in turns[:n]]
        per_source = collections.Counter(t[1] for t in prefix)
        c = ctx.memo["door"] = {"n": n, "prefix": prefix, "spans": {}, "flat": {},
                                "own": ctx.source, "per_source": per_source}
    return c




def _groups(wants: Sequence[Want]) -> list[tuple[str, Sequence[int]]]:
    """The wanted turns' indices by source file. A lineage's files hold contiguous id ranges, so
    each group is usually one ``range``; a file whose turns interleave with another's is still
    read in one pass (its indices gathered into one list)."""
    runs: list[tuple[str, range]] = []
    lo = 0
    for source, grp in itertools.groupby(wants, key=operator.itemgetter(1)):
        n = sum(1 for _ in grp)
        runs.append((source, range(lo, lo + n)))
        lo += n
    if len({s for s, _ in runs}) == len(runs):
        return runs  # type: ignore[return-value]
    merged: dict[str, list[int]] = {}
    for source, r in runs:
        merged.setdefault(source, []).extend(r)
    return list(merged.items())


def _spans(wants: Sequence[Want], idxs: Sequence[int]):
    """Each wanted turn's byte span ``[start, end)`` in its file, when the turns lie in order.

    Returns ``(starts, ends)`` as compact arrays, or None when some turn's records are not in
    offset order or two turns overlap (a file written by another tool): then the general pass.
    """
    sel = wants[idxs.start:idxs.stop] if isinstance(idxs, range) else [wants[i] for i in idxs]
    try:
        starts = array("q", [w[2][0][0] for w in sel])
        ends = array("q", [lo[-1][0] + lo[-1][1] for _, _, lo in sel])
    except IndexError:  # a turn with no records: malformed, let the general pass refuse it
        return None
    if not all(map(operator.lt, ends[:-1], starts[1:])) or \
            not all(map(operator.lt, starts, ends)):
        return None
    return starts, ends


def _in_locus_order(wants: Sequence[Want], idxs: Sequence[int]) -> Iterator[tuple]:
    """``(offset, length, digest, want index, record index)`` lazily, sorted by offset.

    Turns are appended in id order, so their loci usually are already sorted: then this is a
    plain chain; otherwise a lazy merge. Either way nothing per locus is materialised.
    """
    def one(wi: int) -> Iterator[tuple]:
        loci = wants[wi][2]
        if any(loci[x][0] >= loci[x + 1][0] for x in range(len(loci) - 1)):
            items = sorted((lo, ri) for ri, lo in enumerate(loci))
        else:
            items = ((lo, ri) for ri, lo in enumerate(loci))
        for (off, length, dig), ri in items:
            yield off, length, dig, wi, ri

    last = -1
    for wi in idxs:
        for off, _, _ in wants[wi][2]:
            if off <= last:
                return heapq.merge(*(one(wi) for wi in idxs))
            last = off
    return itertools.chain.from_iterable(one(wi) for wi in idxs)


def _grep_file(f, source: str, entries: Iterator[tuple], wants: Sequence[Want], m: _Matcher,
               hits: _Hits) -> None:
    """One sequential pass over one file through a fixed buffer, one record decoded at a time."""
    buf = bytearray()  # grown to the windows read (at most CHUNK or the longest record): a
    # grep over a few small turns must not zero a whole CHUNK per file
    raw_forms = m.raw_forms
    seq = 0
    pos = -1  # the file position after the last read
    pending = next(entries, None)
    while pending is not None:
        # a window: the next entries whose span from the first fits the buffer (at least one)
        start = pending[0]
        window = [pending]
        last_end = start + pending[1]
        pending = next(entries, None)
        while pending is not None and pending[0] + pending[1] - start <= scan.CHUNK:
            window.append(pending)
            last_end = pending[0] + pending[1]
            pending = next(entries, None)
        need = last_end - start
        buf, mv, got = _read_window(f, buf, start, need, pos)
        pos = start + got
        if got < need:
            for e in window:
                if e[0] + e[1] > pos:
                    _check(source, e[0], e[1], e[2], b"")  # the file ends before this record
        if raw_forms is None:
            cands: Iterable[tuple] = window
        else:
            cands = _candidates(buf, start, need, raw_forms, window)
        for off, length, want, wi, ri in cands:
            raw = mv[off - start:off - start + length]
            _check(source, off, length, want, raw)
            seq = _grep_record(raw, source, off, wi, ri, seq, wants, m, hits)
        mv.release()


def _candidates(buf: bytearray, start: int, limit: int, found: list[bytes], window: list[tuple]
                ) -> list[tuple]:
    """Entries of the window whose raw bytes contain one of the ``found`` forms (the literal's,
    or every branch literal's of an alternation: ``_Matcher.raw_forms``). An occurrence that
    runs past its record's end does not make it a candidate; measured with the shortest form,
    so a later, shorter one inside the record is never passed over."""
    out: list[tuple] = []
    lf = _forms_finder(found)
    p = lf(buf, 0, limit)
    if p < 0:
        return out
    offs = [e[0] - start for e in window]
    L = min(map(len, found))
    while p >= 0:
        j = bisect.bisect_right(offs, p) - 1
        if j >= 0:
            e = window[j]
            eend = offs[j] + e[1]
            if p < eend:
                if p + L <= eend:
                    out.append(e)
                p = lf(buf, eend, limit)  # the rest of this record cannot add a candidate
                continue
        # between wanted records (a forensic record, another turn's line): skip that line
        nl = buf.find(b"\n", p, limit)
        if nl < 0:
            break
        p = lf(buf, nl + 1, limit)
    return out


