"""The quick no-hit answer: a grep for a literal that no file of an agent's lineage holds,
answered from outside without folding, decoding or importing a decoder.

The door from outside (``view.open_door``) answers a grep from the fold checkpoint beside the
log when it describes the whole log (``session.checkpoint.reopening.open_table``), then looks
for the pattern's required literal in the raw bytes of every file the table's turns lie in,
decoding only the records where one of the literal's forms occurs (docs/door.md, "The shortcut,
and why it is exact"). When the pattern is just that literal and no form of it occurs anywhere
in those files, nothing is decoded and the answer is no hit. This module reaches the same answer
by the same steps, minus what does not change it: the checkpoint's frame and key are checked as
``table.load`` checks them (``session.checkpoint.header``), its ``sources`` confined to the run
root as the door's opener confines them (``session.paths.confine``, in ``os.path`` terms:
``session.door.quick.confined``), and each whole file is
searched for every form (a superset of the records the door would look at). Only the answer
"no hit" is given here; anything else — a pattern that is not a plain literal, a literal the raw
shortcut cannot take, no checkpoint, one that does not describe the whole log (lines appended
since, a torn tail), a source that cannot be confined, a form found anywhere — returns False and
the door answers. So the answer never differs from the door's; it only comes without the
~15–20 ms of importing msgspec and the fold (tests/door/test_nohit.py holds them equal).
"""

from __future__ import annotations

import os

from ..session import native
from ..session.checkpoint.header import SUFFIX, Stale, check_key, read_header
from ..session.door.literal import anchor, forms, raw_literal
from ..session.door.quick import confined
from .outside import locate

TYPE_CHECKING = False  # as typing's, without importing typing
if TYPE_CHECKING:
    from pathlib import Path

NO_HITS = {"hits": [], "total": 0}
"""The door's answer to a grep with no hit."""


def quick_miss(path: Path | str, pattern: str) -> bool:
    """True when a grep of ``pattern`` over the agent directory ``path`` (every turn) is known
    to find nothing, exactly as the door would answer; False when the door must answer."""
    lit, pure = raw_literal(pattern)
    if lit is None or not pure:
        return False
    where = locate(os.fspath(path))  # the run root and the agent, as ``places.agent_of``
    if where is None:
        return False
    root, agent = where
    src = f"agents/{agent}/record.jsonl"  # ``places.agent_source``
    log = os.path.join(root, src)
    try:
        head = read_header(log + SUFFIX)
        first, last, end, _lines = head["key"]
        if head.get("source") != src or os.stat(log).st_size != end:
            return False  # another file's, or appended to (or torn) since: the door catches up
        check_key(log, first, last, end)
        sources = head["state"]["sources"]
        if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
            return False
        real_root = os.path.realpath(root)
        files = []
        for s in dict.fromkeys([src, *sources]):
            file = confined(root, s, real_root)
            if file is None:  # a source ``session.paths.confine`` refuses: the door names it
                return False
            files.append(file)
    except (Stale, OSError, KeyError, TypeError, ValueError):
        return False
    found = forms(lit)
    anchors = [anchor(f) for f in found]
    return not any(_holds(p, found, anchors) for p in files)


CHUNK = 1 << 20
"""Each file is read through one buffer of this many bytes (and a form's length less one carried
over, for a form across two reads) — 1 MiB, which the search then finds still in the CPU's
cache: a 200 MB log on tmpfs read and searched in 48–52 ms against 57–65 ms through 4 MiB. Read,
not mapped — unmapping a 200 MB map costs ~8 ms, and a
map of a log truncated under it (a torn tail cut by its resuming writer) ends the process with
SIGBUS where a read just ends."""

SPLIT = 32 << 20
"""A file at least this long is searched as two halves in two threads, each with its own file
and buffer, where the process may run on two CPUs and the native search (GIL released) is
built: the read of a 200 MB log and the search in it take ~half the wall time (decision 0460).
Each half is read through its own ``CHUNK``; the first runs on past the middle by a form's length less
one, so a form across the middle is found whole."""


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _holds(path: str, found: list[bytes], anchors: list[int]) -> bool:
    """Whether the file at ``path`` holds any of the forms (True when it cannot be read: the
    door then answers, naming what it cannot read)."""
    over = max(map(len, found)) - 1
    try:
        size = os.stat(path).st_size
    except OSError:
        return True
    if size < SPLIT or native.find_all is None or _cpus() < 2:
        return _holds_in(path, found, anchors, 0, None, over, [])
    import threading  # (only here: a short log's miss never loads it)

    half = size // 2
    stop: list[bool] = []  # set by the half that finds a form (or cannot read): the other ends
    other: list[bool] = []
    t = threading.Thread(target=lambda: other.append(
        _holds_in(path, found, anchors, half, size, over, stop)), daemon=True)
    t.start()
    mine = _holds_in(path, found, anchors, 0, min(size, half + over), over, stop)
    t.join()
    return mine or not other or other[0]


def _holds_in(path: str, found: list[bytes], anchors: list[int], at: int, until: int | None,
              over: int, stop: list[bool]) -> bool:
    """Whether bytes ``[at, until)`` of the file (``until`` None: to its end) hold a form
    whole; ``stop`` is shared with the other half: either appends to it on a find."""
    buf = bytearray(CHUNK + over)
    mv = memoryview(buf)
    keep = 0
    pos = at
    try:
        with open(path, "rb", buffering=0) as f:
            f.seek(at)
            while not stop:
                room = len(mv) - keep if until is None else min(len(mv) - keep, until - pos)
                n = f.readinto(mv[keep:keep + room]) if room > 0 else 0
                if not n:
                    return False
                pos += n
                end = keep + n
                if native.find_all is not None:  # memchr on each form's rarest byte
                    got, resume = native.find_all(mv, 0, end, found, anchors, 1)
                    if len(got) or resume >= 0:
                        stop.append(True)
                        return True
                elif any(buf.find(x, 0, end) >= 0 for x in found):
                    return True
                keep = min(over, end)
                buf[:keep] = bytes(mv[end - keep:end])
    except (OSError, ValueError):
        stop.append(True)
        return True
    return False


__all__ = ["NO_HITS", "quick_miss"]
