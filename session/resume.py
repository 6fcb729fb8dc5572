"""Folding a file through ``Context.step``: resume, verify and the read-only commands.

There is no second fold: this module only feeds lines to ``step`` and names the line a
refusal came from.
"""

from __future__ import annotations

import bisect
import gc
from pathlib import Path

import msgspec

from .context import Context, Loader
from .errors import LogRefused, SessionError
from .log import TornTail, find_torn_tail
from .native import digest_many, split_lines
from .records import _decoder


def fold_file(path: Path, source: str, *, loader: Loader | None = None,
              display: str | None = None) -> tuple[Context, TornTail | None]:
    """Fold every complete line of a log; a torn tail is reported, not read, never modified.

    The cyclic garbage collector is paused while folding: a fold allocates many long-lived
    objects and no cycles, so generational collections are pure overhead (a third of the time
    on a 200 MB log) and the table is all still reachable at the end; afterwards the new objects
    go straight to the oldest generation.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _fold(path, source, loader, display)
    finally:
        # what the fold built is long-lived: move it straight to the oldest generation
        # (freeze then unfreeze), or the first young collection after the fold traverses all of
        # it — a tenth of a resume's time on a 200 MB log
        gc.freeze()
        gc.unfreeze()
        if enabled:
            gc.enable()


BLOCK = 4 << 20
"""Bytes read per block: large enough that per-block work (split, digest) is noise, small enough
to stay in cache-friendly, bounded memory (a longer line grows the buffer to hold it)."""


def _fold(path: Path, source: str, loader: Loader | None,
          display: str | None) -> tuple[Context, TornTail | None]:
    """Read the file block by block; each block's complete lines are split and digested in one
    native call each (``session.native``), then decoded and stepped one at a time."""
    ctx = Context(source, loader=loader)
    shown = display or source or str(path)
    torn = find_torn_tail(path)
    step = ctx.step
    dec = _decoder.decode
    lineno = 0  # lines folded before the current block
    base = 0  # file offset of buf[0]
    buf = bytearray(BLOCK)
    filled = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            if filled == len(buf):  # one line longer than the buffer: make room for it
                buf.extend(bytes(len(buf)))
            with memoryview(buf) as mv:
                got = f.readinto(mv[filled:])
            if not got:
                break
            filled += got
            offs, lens = split_lines(buf, 0, filled)
            if not offs:
                continue
            digs = digest_many(buf, offs, lens)
            o = n = -1
            with memoryview(buf) as mv:
                try:
                    for o, n, d in zip(offs, lens, digs):
                        step(dec(mv[o:o + n]), (base + o, n, d))
                except msgspec.DecodeError as e:
                    at = lineno + bisect.bisect_left(offs, o) + 1
                    why = "a blank line" if n == 0 else f"not a record: {e}"
                    raise LogRefused(shown, at, why, base + o) from None
                except SessionError as e:
                    at = lineno + bisect.bisect_left(offs, o) + 1
                    raise LogRefused(shown, at, str(e), base + o) from None
            lineno += len(offs)
            end = offs[-1] + lens[-1] + 1
            buf[:filled - end] = buf[end:filled]
            filled -= end
            base += end
    if lineno == 0:
        raise LogRefused(shown, 1, "the log is empty — it must open with SessionStarted", 0)
    return ctx, torn
