"""Folding a file through ``Context.step``: resume, verify and the read-only commands.

There is no second fold: this module only feeds lines to ``step`` and names the line a
refusal came from. ``fold_file`` folds a log from its first line, ``fold_more`` goes on from a
table restored from a checkpoint; each leaves the ``Key`` a checkpoint of what it folded would
be keyed by in ``ctx.memo["fold_key"]``. Whether to fold at all, or to reopen from a checkpoint,
is decided in one place above this one: ``session.checkpoint.reopening``.
"""

from __future__ import annotations

import bisect
import gc
import os
import threading
from pathlib import Path

from .checkpoint.layout import Key
from .context import Context
from .errors import LogRefused, Refusal, SessionError
from .link import OPENING, fold_link
from .log import TornTail, find_torn_tail, read_at
from .native import fill
from .records import DECODE_ERRORS, _decoder
from .turn import Loader


def fold_file(path: Path, source: str, *, loader: Loader | None = None,
              display: str | None = None, lazy: bool = False) -> tuple[Context, TornTail | None]:
    """Fold every complete line of a log; a torn tail is reported, not read, never modified.

    ``lazy`` folds the structure only (``Context(lazy=True)``: loci, not contents — no resident
    inherited turn is loaded, no turn keeps its records), which is all the door needs; its
    turns are columns (``session.columns``), the ``Turn`` objects of each block folded back
    into them after the block, so its memory is a few bytes per turn and per record.

    The cyclic garbage collector is paused while folding: a fold allocates many long-lived
    objects and no cycles, so generational collections are pure overhead (a third of the time
    on a 200 MB log) and the table is all still reachable at the end; afterwards the new objects
    go straight to the oldest generation.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _fold(path, source, loader, display, lazy)
    finally:
        # what the fold built is long-lived: move it straight to the oldest generation
        # (freeze then unfreeze), or the first young collection after the fold traverses all of
        # it — a tenth of a resume's time on a 200 MB log
        gc.freeze()
        gc.unfreeze()
        if enabled:
            gc.enable()


BLOCK = 4 << 20
"""Bytes read per block: large enough that per-block work is noise, small enough to stay
cache-friendly, bounded memory (a longer line grows the buffer to hold it)."""


def with_own(log: Path, source: str, loader: Loader | None) -> Loader:
    """A loader for a lazy fold: the log's own turns read from ``log`` itself, an ancestor's
    through ``loader`` (a fold loads a turn only for a mark or a sweep on it)."""

    def load(ptr):
        if ptr.source == source:
            return read_at(log, ptr)
        if loader is None:
            raise Refusal(f"no loader can read {ptr.source}")
        return loader(ptr)

    return load


def fold_more(path: Path, ctx: Context, key: Key, *, display: str | None = None):
    """Go on folding ``ctx`` (restored from a checkpoint whose ``key`` it matches) with the
    lines appended to the log after ``key.end``, through the same ``step`` → ``(ctx, new key)``."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        _fold(path, ctx.source, ctx.loader, display, ctx.lazy, ctx=ctx, start=key.end,
              lineno0=key.lines, first=key.first)
    finally:
        gc.freeze()
        gc.unfreeze()
        if enabled:
            gc.enable()
    got = ctx.memo.pop("fold_key", None)
    return ctx, (got if got is not None else key)


def _fold(path: Path, source: str, loader: Loader | None,
          display: str | None, lazy: bool = False, *, ctx: Context | None = None,
          start: int = 0, lineno0: int = 0, first=None) -> tuple[Context, TornTail | None]:
    """Fold the file block by block over two buffers: while one block is decoded and stepped,
    the helper thread reads, splits and digests the next (``native.fill``, GIL released).

    A block is decoded in one call when every line is one ``{…}`` object (``framed``), so that
    the JSON-lines decoder cannot pair values with lines any other way; otherwise, and to name
    the line a refusal comes from, line by line.
    """
    fresh = ctx is None  # folded from the log's start: a long link may be read in pieces
    if ctx is None:
        ctx = Context(source, loader=loader, lazy=lazy)
        if lazy:  # a structural fold keeps its turns as columns, spilled block by block
            ctx.use_columns()
    spill = ctx.spill if ctx.lazy else None
    shown = display or source or str(path)
    torn = find_torn_tail(path)
    stop = torn.offset if torn is not None else None  # never read into a torn tail: it may be huge
    step = ctx.step
    dec = _decoder.decode
    dec_lines = _decoder.decode_lines
    lineno = lineno0  # lines folded before the current block
    bufs = [bytearray(BLOCK), bytearray(BLOCK)]
    cur = 0
    base = start  # file offset of the current block
    job = None
    last = None
    with open(path, "rb", buffering=0) as f:
        fd = f.fileno()
        if start:
            f.seek(start)
        try:
            filled, end, loci, whole = fill(fd, bufs[cur], None, 0, 0, base)
            while True:
                buf = bufs[cur]
                # a short read is the end of the file; past a torn tail's start nothing is whole
                more = filled == len(buf) and (stop is None or base + filled < stop)
                if not loci:
                    if not more:
                        break  # what is left, if anything, is a torn tail
                    if fresh and buf.startswith(OPENING):  # a long link: its rows in pieces
                        fresh = False  # (one try: declined, it is decoded whole below)
                        locus = fold_link(ctx, fd, base, stop)
                        if locus is not None:
                            lineno += 1
                            if spill is not None:
                                spill()
                            if first is None:
                                first = locus
                            last = locus
                            base = locus[0] + locus[1] + 1
                            os.lseek(fd, base, os.SEEK_SET)
                            filled, end, loci, whole = fill(fd, buf, None, 0, 0, base)
                            continue
                    bigger = bytearray(2 * len(buf))  # one line longer than the buffer
                    filled, end, loci, whole = fill(fd, bigger, buf, 0, filled, base)
                    bufs[cur] = bigger
                    continue
                nbase = base + end
                carry = filled - end
                room = max(BLOCK, 2 * carry)
                other = len(bufs[cur ^ 1])
                if other < carry or other > 2 * room:  # fit the carry; drop a grown buffer
                    bufs[cur ^ 1] = bytearray(room)
                job = _beside(fill, fd, bufs[cur ^ 1], buf, end, filled, nbase) if more else None
                with memoryview(buf) as mv:
                    recs = None
                    if whole:
                        try:
                            recs = dec_lines(mv[:end])
                        except DECODE_ERRORS:
                            recs = None
                        if recs is not None and len(recs) != len(loci):
                            recs = None
                    locus = (base, -1, "")
                    try:
                        if recs is not None:
                            for rec, locus in zip(recs, loci):
                                step(rec, locus)
                        else:
                            for locus in loci:
                                o = locus[0] - base
                                step(dec(mv[o:o + locus[1]]), locus)
                    except DECODE_ERRORS as e:
                        at = lineno + bisect.bisect_left(loci, locus) + 1
                        why = "a blank line" if locus[1] == 0 else f"not a record: {e}"
                        raise LogRefused(shown, at, why, locus[0]) from None
                    except SessionError as e:
                        at = lineno + bisect.bisect_left(loci, locus) + 1
                        raise LogRefused(shown, at, str(e), locus[0]) from None
                lineno += len(loci)
                if spill is not None:
                    spill()
                if first is None:
                    first = loci[0]
                last = loci[-1]
                if job is None:
                    break
                filled, end, loci, whole = job.result()
                job = None
                cur ^= 1
                base = nbase
        finally:
            if job is not None:  # refused mid-way: the helper must finish before the file closes
                job.exception()
    if lineno == 0:
        raise LogRefused(shown, 1, "the log is empty — it must open with SessionStarted", 0)
    if last is not None:  # what a checkpoint of this fold is keyed by
        ctx.memo["fold_key"] = Key((first[0], first[1], first[2]), (last[0], last[1], last[2]),
                                   last[0] + last[1] + 1, lineno)
    return ctx, torn


_HELPER: list = []


def _helper():
    if not _HELPER:
        from concurrent.futures import ThreadPoolExecutor

        _HELPER.append(ThreadPoolExecutor(1, thread_name_prefix="mnemon-fold"))
    return _HELPER[0]


def _beside(fn, *args):
    """Run ``fn`` in the helper thread and return once it has begun: the decoder holds the GIL
    for a whole block, so a helper that had not yet entered its GIL-free native call would wait
    for the block to be decoded instead of running beside it."""
    begun = threading.Event()

    def job():
        begun.set()
        return fn(*args)

    fut = _helper().submit(job)
    begun.wait()
    return fut
