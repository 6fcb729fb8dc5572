"""The raw scan: a literal found in the raw bytes of a file, records decoded only where it is.

Work per turn is a bisection done only where the literal occurs, so a rare literal costs about
one read of the file. Windows are pipelined over two buffers: window w is read while the helper
thread finds the literal's forms in window w-1 natively (``session.native.find_all``, GIL
released). Once the kept hits are full and a pure literal is common, its lines are counted in
bulk on the raw JSON instead (``_Counting``: digests checked and lines counted in C).
"""

from __future__ import annotations

import bisect
import os
import itertools
import operator
from array import array
from collections.abc import Sequence

from .. import native
from .hits import _grep_record, _Hits
from .literal import anchor as _anchor, forms as _forms
from .pattern import _finder, _Matcher
from .read import check as _check
from .turns import Want, _no_gc

CHUNK = 4 << 20
"""The read buffer of a grep pass: memory stays bounded by this plus the longest record."""


def _read_window(f, buf: bytearray, start: int, need: int, pos: int):
    """Read ``need`` bytes at ``start`` into the reusable buffer (grown if it must be), seeking
    only when the previous read did not end there: ``(buf, view, bytes read)``."""
    need = max(0, min(need, os.fstat(f.fileno()).st_size - start))  # a claimed length is not trusted
    if need > len(buf):
        buf = bytearray(max(need, min(CHUNK, 2 * len(buf))))
    if pos != start:
        f.seek(start)
    mv = memoryview(buf)
    return buf, mv, f.readinto(mv[:need])


class _MapBuf:
    """A window of a mapped file, seen as a buffer that starts at the window's first byte
    (what ``_find_window`` searches for line ends)."""

    __slots__ = ("mm", "base")

    def __init__(self, mm, base: int):
        self.mm, self.base = mm, base

    def find(self, sub: bytes, p: int, limit: int) -> int:
        r = self.mm.find(sub, self.base + p, self.base + limit)
        return r - self.base if r >= 0 else -1


class _Mapped:
    """The file mapped read-only, windows as views of the map: no copy of the file is made
    (as ripgrep does), and each window's pages are dropped from the process once it is settled,
    so memory stays bounded by about two windows whatever the file's size."""

    def __init__(self, f):
        import mmap

        self.mmap = mmap
        fd = f.fileno()
        self.size = os.fstat(fd).st_size
        self.mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ) if self.size else None
        self.base = memoryview(self.mm) if self.mm is not None else memoryview(b"")

    def window(self, start: int, need: int):
        got = max(0, min(need, self.size - start))
        return _MapBuf(self.mm, start), self.base[start:start + got], got

    def drop(self, start: int, got: int) -> None:
        if self.mm is None or got <= 0:
            return
        page = self.mmap.PAGESIZE
        a = start - start % page
        try:
            self.mm.madvise(self.mmap.MADV_DONTNEED, a, start + got - a)
        except (OSError, ValueError, AttributeError):
            pass

    def close(self) -> None:
        self.base.release()
        if self.mm is not None:
            try:
                self.mm.close()
            except BufferError:  # a view still held (a refusal mid-window): freed with it
                pass


def _scan_file(f, source: str, idxs: Sequence[int], spans, wants: Sequence[Want], m: _Matcher,
               hits: _Hits, flat: "_Flat | None" = None) -> None:
    """The raw-literal pass: find the literal in a fixed buffer; decode only records holding it.

    Work per turn is a bisection done only where the literal occurs, so a rare literal costs
    about one read of the file. Once the kept hits are full and the literal is common, a pure
    literal is counted in bulk instead (``_Counting``). Windows are pipelined over two buffers:
    window w is read while the helper works on window w-1, which is then settled in order.
    """
    starts, ends = spans
    n = len(idxs)
    lit = m.raw
    assert lit is not None
    L = len(lit)
    forms = _forms(lit)
    anchors = [_anchor(x) for x in forms]
    mapped = _mapped(f) if native.find_all is not None else None
    bufs = [bytearray(CHUNK), bytearray(CHUNK)] if mapped is None else [None, None]
    slot = 0
    seq = 0
    pos = -1
    i = 0
    bulk = flat is not None and m.pure and native.count_literal is not None
    dense = True  # was the last window's literal common enough to count in bulk
    prev: _Counting | _Finding | None = None  # the window read before, not yet settled
    try:
        while i < n:
            slot ^= 1  # this buffer's last window was settled an iteration ago
            buf = bufs[slot]
            start = starts[i]
            k = bisect.bisect_right(ends, start + CHUNK, i + 1, n) if i + 1 < n else n
            k = max(k, i + 1)
            need = ends[k - 1] - start
            if mapped is not None:
                buf, mv, got = mapped.window(start, need)
            else:
                buf, mv, got = _read_window(f, buf, start, need, pos)
                bufs[slot] = buf
            pos = start + got
            cur: _Counting | _Finding
            if bulk and dense and got == need and hits.worst is not None and \
                    (idxs[i], 0) > hits.worst[:2]:
                assert flat is not None
                cur = _Counting(mv, start, i, k, flat, source, wants, idxs, m, hits)
            else:
                cur = _Finding(buf, mv, start, got, need, pos, i, k, forms, anchors)
            i = k
            if prev is not None:
                done, prev = prev, None
                seq, dense = _settle(done, dense, lit, L, starts, ends, source, idxs, wants, m,
                                     hits, seq, flat)
                if mapped is not None:
                    mapped.drop(done.start, done.need)
            prev = cur
        if prev is not None:
            done, prev = prev, None
            _settle(done, dense, lit, L, starts, ends, source, idxs, wants, m, hits, seq, flat)
    finally:
        if prev is not None:  # refused: wait for the helper, it must not outlive the buffer
            prev.abandon()
        if mapped is not None:
            mapped.close()


def _mapped(f) -> "_Mapped | None":
    try:
        return _Mapped(f)
    except (OSError, ValueError, AttributeError):  # not a mappable file: read it instead
        return None


def _settle(w: "_Counting | _Finding", dense: bool, lit: bytes, L: int, starts, ends,
            source: str, idxs: Sequence[int], wants: Sequence[Want], m: _Matcher, hits: _Hits,
            seq: int, flat: "_Flat | None") -> tuple[int, bool]:
    """Finish a window, in window order: add its count or match its candidates."""
    if isinstance(w, _Counting):
        return seq, w.finish()
    seq, found = w.process(lit, L, starts, ends, source, idxs, wants, m, hits, seq)
    if flat is not None and hits.worst is not None:
        dense = found * DENSE >= flat.records(w.i, w.k)
    return seq, dense


class _Finding:
    """One window searched for the literal's forms: found natively in the helper thread (while
    the next window is read), or with ``_finder`` when the extension is not built."""

    def __init__(self, buf, mv, start: int, got: int, need: int, pos: int, i: int, k: int,
                 forms: list[bytes], anchors: list[int]):
        self.buf, self.mv, self.start, self.got, self.need, self.pos = buf, mv, start, got, need, pos
        self.i, self.k = i, k
        self.job = None
        if native.find_all is not None:
            # both cores: the helper searches the second half while the caller searches the
            # first (each call releases the GIL; the first half's matches start before ``mid``)
            mid = got // 2
            longest = max(map(len, forms))
            self.job = _helper().submit(_positions, mv, got, forms, anchors, mid)
            try:
                head = _positions(mv, min(got, mid + longest - 1), forms, anchors, 0)
            except BaseException:
                self.job.exception()
                raise
            cut = bisect.bisect_left(head, mid)
            self.head = head[:cut] if cut < len(head) else head

    def process(self, lit: bytes, L: int, starts, ends, source: str, idxs: Sequence[int],
                wants: Sequence[Want], m: _Matcher, hits: _Hits, seq: int) -> tuple[int, int]:
        try:
            if self.job is not None:
                at = self.head + self.job.result()
                count = len(at)

                def find(buf, q: int, limit: int) -> int:
                    x = bisect.bisect_left(at, q)
                    return at[x] if x < count else -1
            else:
                find = _finder(lit)
            return _find_window(self.buf, self.mv, self.start, self.got, self.need, self.pos,
                                self.i, self.k, find, L, starts, ends, source, idxs, wants, m,
                                hits, seq)
        finally:
            self.mv.release()

    def abandon(self) -> None:
        if self.job is not None:
            self.job.exception()
        self.mv.release()


def _positions(mv, limit: int, forms: list[bytes], anchors: list[int], at: int = 0) -> array:
    """Every start of any form in ``mv[at:limit]``, sorted."""
    out = array("q")
    while True:
        got, resume = native.find_all(mv, at, limit, forms, anchors, 1 << 16)
        out += got
        if resume < 0:
            return out
        at = resume


def _find_window(buf, mv, start: int, got: int, need: int, pos: int, i: int, k: int, find,
                 L: int, starts, ends, source: str, idxs: Sequence[int], wants: Sequence[Want],
                 m: _Matcher, hits: _Hits, seq: int) -> tuple[int, int]:
    """One window by finding the literal: only the records holding it are checked and decoded.
    Answers the hit sequence number and how many records held the literal."""
    limit = got
    found = 0
    p = find(buf, 0, limit)
    while p >= 0:
        at = start + p
        j = bisect.bisect_right(starts, at, i, k) - 1
        nxt = -1
        if j >= i and at < ends[j]:
            wi = idxs[j]
            for ri, (off, length, want) in enumerate(wants[wi][2]):
                if off <= at < off + length:
                    if at + L <= off + length:
                        if off + length > pos:
                            _check(source, off, length, want, b"")  # the file ends early
                        raw = mv[off - start:off - start + length]
                        _check(source, off, length, want, raw)
                        seq = _grep_record(raw, source, off, wi, ri, seq, wants, m, hits)
                        found += 1
                    nxt = off + length - start
                    break
        if nxt < 0:  # not inside a wanted record: skip this line
            nl = buf.find(b"\n", p, limit)
            if nl < 0:
                break
            nxt = nl + 1
        p = find(buf, nxt, limit)
    if got < need:
        for j in range(i, k):
            wi = idxs[j]
            for off, length, want in wants[wi][2]:
                if off + length > pos:
                    _check(source, off, length, want, b"")
    return seq, found


_HELPER: list = []


def _helper():
    """One worker thread for the door's native calls that run beside the caller's."""
    if not _HELPER:
        _HELPER.append(_Worker())
    return _HELPER[0]


class _Job:
    """The outcome of one call handed to the worker."""

    __slots__ = ("done", "value", "error")

    def __init__(self) -> None:
        import threading

        self.done = threading.Event()
        self.value = self.error = None

    def result(self):
        self.done.wait()
        if self.error is not None:
            raise self.error
        return self.value

    def exception(self):
        self.done.wait()
        return self.error


class _Worker:
    """One daemon thread running submitted calls in order (``concurrent.futures`` costs a CLI
    call ~40 ms to import, for one thread)."""

    def __init__(self) -> None:
        import queue
        import threading

        self.q: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._run, name="mnemon-door", daemon=True).start()

    def _run(self) -> None:
        while True:
            job, fn, args = self.q.get()
            try:
                job.value = fn(*args)
            except BaseException as e:  # handed to whoever waits for the job
                job.error = e
            job.done.set()

    def submit(self, fn, *args) -> _Job:
        job = _Job()
        self.q.put((job, fn, args))
        return job


DENSE = 8
"""Count a window in bulk when at least one record in DENSE holds the literal: below that,
finding the few records that do is cheaper than scanning every record."""


class _Flat:
    """One source's wanted records as flat arrays — offsets, lengths, digests, and where each
    turn's records begin — for the native bulk count. Built on first use; an inherited source's
    (which never changes) is kept in the table's memo between greps."""

    def __init__(self, wants: Sequence[Want], idxs: Sequence[int], memo: dict | None, key):
        self.wants, self.idxs, self.memo, self.key = wants, idxs, memo, key
        self._arrays: tuple | None = None

    def arrays(self) -> tuple | None:
        if self._arrays is None:
            got = self.memo.get(self.key) if self.memo is not None else None
            if got is None:
                got = self._build()
                if self.memo is not None:
                    self.memo[self.key] = got
            self._arrays = got
        return self._arrays or None

    def _build(self) -> tuple:
        idxs, wants = self.idxs, self.wants
        if hasattr(wants, "flat"):  # a checkpointed table holds these arrays already
            return wants.flat(idxs)
        sel = wants[idxs.start:idxs.stop] if isinstance(idxs, range) else [wants[i] for i in idxs]
        with _no_gc():
            loci = list(itertools.chain.from_iterable(w[2] for w in sel))
            offs = array("q", [lo[0] for lo in loci])
            lens = array("q", [lo[1] for lo in loci])
            digs = [lo[2] for lo in loci]
            first = array("q", itertools.accumulate((len(w[2]) for w in sel), initial=0))
        # every record after the previous one ends: then each lies inside its turn's span
        if not all(map(operator.le, map(operator.add, offs[:-1], lens[:-1]), offs[1:])):
            return ()  # records out of order (a foreign file): no bulk count
        return offs, lens, digs, first

    def records(self, i: int, k: int) -> int:
        a = self.arrays()
        return 1 if a is None else int(a[3][k] - a[3][i])


HEAD_SHARE = 0.45
"""The share of a bulk window's bytes the caller counts itself; the helper thread checks every
digest (the cheaper pass) and counts the rest, so both cores finish together."""


class _Counting:
    """A pure literal counted over one window's records in bulk, all past the kept hits.

    Every record is digest-checked and counted on its raw bytes in C (``session.native``), the
    GIL released: the caller counts the head of the window while the helper thread checks the
    digests and counts the tail. ``finish`` waits for the helper, adds the counts, decodes any
    record the counter was not certain of, and refuses a record whose digest does not match.
    """

    def __init__(self, mv, start: int, i: int, k: int, flat: _Flat, source: str,
                 wants: Sequence[Want], idxs: Sequence[int], m: _Matcher, hits: _Hits):
        self.start, self.need = start, len(mv)
        a = flat.arrays()
        assert a is not None
        offs, lens, digs, first = a
        r0, r1 = first[i], first[k]
        rel = array("q", [o - start for o in offs[r0:r1]])
        ln = lens[r0:r1]
        cut = bisect.bisect_left(rel, int(rel[-1] * HEAD_SHARE)) if rel else 0
        self.args = (mv, start, i, k, r0, rel, ln, digs, first, source, wants, idxs, m, hits)
        self.tail = _helper().submit(_check_and_count, mv, rel, ln, digs[r0:r1], cut, m.raw)
        try:
            self.head = native.count_literal(mv, rel[:cut], ln[:cut], m.raw)
        except BaseException:
            self.tail.result()
            mv.release()
            raise

    def finish(self) -> bool:
        """Answers whether the literal was common in this window (stay in bulk). Once only:
        a second call (cleaning up after a refusal) does nothing."""
        if self.args is None:
            return True
        mv, start, i, k, r0, rel, ln, digs, first, source, wants, idxs, m, hits = self.args
        self.args = None
        try:
            bad, tail = self.tail.result()
            if bad >= 0:
                o = rel[bad]
                _check(source, o + start, ln[bad], digs[r0 + bad], mv[o:o + ln[bad]])
            counts = self.head + tail
            unsure = counts.count(-1)
            hits.total += sum(counts) + unsure
            if unsure:
                for x in range(len(counts)):
                    if counts[x] < 0:
                        r = r0 + x
                        j = bisect.bisect_right(first, r, i, k + 1) - 1
                        o = rel[x]
                        _grep_record(mv[o:o + ln[x]], source, o + start, idxs[j], r - first[j],
                                     0, wants, m, hits)
            return (len(counts) - counts.count(0)) * DENSE >= len(counts)
        finally:
            mv.release()

    def abandon(self) -> None:
        """Wait for the helper and drop the window (the grep is already refused)."""
        if self.args is not None:
            self.tail.exception()
            self.args[0].release()
            self.args = None


def _check_and_count(mv, rel, ln, digs, cut: int, lit: bytes) -> tuple[int, array]:
    """The helper's part of a bulk window: every digest, then the tail's counts."""
    bad = native.verify_many(mv, rel, ln, digs)
    if bad >= 0:
        return bad, array("q")
    return -1, native.count_literal(mv, rel[cut:], ln[cut:], lit)


