"""The transcript door: ``index``, ``read`` and ``grep`` over everything a lineage recorded.

Read-only. The door answers the record, not what was sent in its place: a departed turn (under a
residue, withdrawn by a clear or rewind) is read back from the file that holds it — this agent's
log or the ancestor file its Pointer names, confined to the run root and digest-checked before
anything is parsed.

Three rules shape the code:

* **Bounded memory.** A request is resolved into owned ``Want`` tuples ``(turn id, source,
  loci)``; the loci are grouped by source file, sorted by offset and read in one sequential pass
  per file through a fixed-size buffer, one record decoded at a time. Nothing holds a whole file.
* **Lock discipline.** A live agent resolves under ``AgentLog.seam`` (a sync step: copying loci)
  and reads after releasing it, in a worker thread (``trio.to_thread.run_sync``); the ``regex``
  module is called with ``concurrent=True`` so it releases the GIL while it matches.
* **An exact shortcut.** ``grep`` extracts a literal every match must contain. When that
  literal's JSON encoding is its raw bytes (printable ASCII without ``"`` or ``\\``; characters
  some writers escape are also looked for escaped), a line of the file can hold a match only if
  its raw bytes contain the literal, so the door finds it in the raw bytes (natively, in a helper
  thread, while the next window is read) and decodes only the records that can match. Otherwise
  it decodes every record. Either way every searched line is matched with the real pattern, so
  the shortcut never changes an answer (a property test holds the two paths equal).
* **A bulk count.** Once the 100 kept hits are full, a pure literal that is common is counted
  without decoding: each window's records are digest-checked and counted on their raw JSON in C
  (``session.native``), the work split between the caller and the helper thread; a record the
  counter is not certain of is decoded.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import gc
import heapq
import itertools
import operator
import os
import sys
import time
from array import array
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import regex

from .constants import GREP_HITS, GREP_LINE_BYTES, GREP_TIMEOUT_S
from .context import Context, Turn, turn_blocks
from .errors import AncestorUnreadable, LogCorrupt, Refusal, SessionError
from . import native
from .log import digest
from .records import (
    DECODE_ERRORS,
    AssistantMessage,
    Evicted,
    Marked,
    Steering,
    Text,
    Thinking,
    ToolResults,
    ToolUse,
    UserPrompt,
    compact,
    decode,
)

BLOCK_LISTED_BYTES = 2048
"""Blocks at least this large are listed in an index row (``blocks``), for mark-and-sweep."""

CHUNK = 4 << 20
"""The read buffer of a grep pass: memory stays bounded by this plus the longest record."""

__all__ = ["Door", "Want", "index", "read", "grep", "parse_turns", "required_literal",
           "GREP_HITS", "GREP_LINE_BYTES", "GREP_TIMEOUT_S"]


# --------------------------------------------------------------------------- addressing


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


# --------------------------------------------------------------------------- index


def _row(t: Turn) -> dict:
    row: dict[str, Any] = {
        "id": t.id, "role": t.role, "label": t.label, "bytes": t.bytes, "held": t.held,
        "residue": list(t.residue) if t.residue is not None else None,
        "origin": t.origin, "source": t.source,
    }
    if t.records is not None and t.state == "resident" and t.bytes >= BLOCK_LISTED_BYTES:
        big = [{"block": b.address, "bytes": n} for b in turn_blocks(t.id, t.records)
               if b.index not in t.swept and (n := b.length) >= BLOCK_LISTED_BYTES]
        if big:
            row["blocks"] = big
    return row


def index(ctx: Context) -> list[dict]:
    """Every turn of the table, oldest first, as the ``transcript index`` rows of DESIGN.md."""
    return [_row(t) for t in ctx.turns]


# --------------------------------------------------------------------------- pointers and files


def _refuse(tid: int | None, e: SessionError) -> Refusal:
    """A pointer or file problem as one line naming the path."""
    who = f"turn {tid}: " if tid is not None else ""
    if isinstance(e, AncestorUnreadable):
        return Refusal(f"{who}cannot read {e.path}: {e.why}")
    if isinstance(e, LogCorrupt):
        return Refusal(f"{who}cannot read {e.path} at offset {e.offset}: {e.why}")
    return Refusal(f"{who}{e}")


def _open_source(root: Path, source: str):
    from ..lineage.runroot import confine  # lineage builds on session; imported late

    try:
        path = confine(root, source)
    except AncestorUnreadable as e:
        raise _refuse(None, e) from None
    try:
        return open(path, "rb")
    except OSError as e:
        raise Refusal(f"cannot read {source}: {e.strerror or e}") from None


def _by_source(wants: Sequence[Want]) -> list[tuple[str, list[tuple[int, int, str, int, int]]]]:
    """Loci grouped by file, each group sorted by offset, the groups in turn order.

    An entry is ``(offset, length, digest, want index, record index)``.
    """
    groups: dict[str, list[tuple[int, int, str, int, int]]] = {}
    first: dict[str, int] = {}
    for wi, (_, source, loci) in enumerate(wants):
        g = groups.get(source)
        if g is None:
            g = groups[source] = []
            first[source] = wi
        for ri, (off, length, dig) in enumerate(loci):
            g.append((off, length, dig, wi, ri))
    for g in groups.values():
        g.sort()
    return [(s, groups[s]) for s in sorted(groups, key=first.__getitem__)]


def _check(source: str, off: int, length: int, want: str, raw) -> None:
    if len(raw) != length:
        raise Refusal(f"cannot read {source} at offset {off}: the file ends before this record "
                      f"({length} bytes)")
    got = digest(raw)
    if got != want:
        raise Refusal(f"cannot read {source} at offset {off}: digest mismatch (expected {want}, "
                      f"found {got}): the file was edited, rotated or copied over")


def read_wants(root: Path, wants: Sequence[Want]) -> list[dict]:
    """Each wanted turn's records, as objects exactly as in the file (no lock needed)."""
    out: list[list[Any]] = [[None] * len(w[2]) for w in wants]
    for source, entries in _by_source(wants):
        with _open_source(root, source) as f:
            size = os.fstat(f.fileno()).st_size
            for off, length, want, wi, ri in entries:
                f.seek(off)
                raw = f.read(length) if off + length <= size else b""  # a claimed length is not trusted
                _check(source, off, length, want, raw)
                try:
                    out[wi][ri] = msgspec.json.decode(raw)
                except DECODE_ERRORS as e:
                    raise Refusal(f"cannot read {source} at offset {off}: not a record ({e})"
                                  ) from None
    return [{"turn": w[0], "source": w[1], "records": recs} for w, recs in zip(wants, out)]


# --------------------------------------------------------------------------- grep: the pattern

_META = set(".^$*+?{}[]\\|()")
_BOUNDARY_ESCAPES = set("AZzGK")


def required_literal(pattern: str) -> tuple[str, bool]:
    """A literal every match of ``pattern`` contains, and whether the pattern is just it.

    Conservative by construction: any alternation or inline group ``(?…`` gives no literal; the
    scan stops at the first group, class or letter escape; a quantified character leaves the run.
    An empty string means "no literal".
    """
    if "|" in pattern or "(?" in pattern:
        return "", False
    runs: list[str] = []
    cur: list[str] = []
    pure = True
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n:
                return "", False
            d = pattern[i + 1]
            if d.isalnum() or d in "_\n" or not d.isascii():
                pure = False
                break  # \d, \b, \N{…}, \p{…}, \g<…>, \L<…>, backreferences: stop here
            cur.append(d)
            i += 2
            continue
        if c in "*?{":
            pure = False
            if cur:
                cur.pop()  # the quantified character is optional
            runs.append("".join(cur))
            cur = []
            if c == "{":
                j = pattern.find("}", i)
                if j < 0:
                    break
                i = j + 1
            else:
                i += 1
            continue
        if c == "+":
            pure = False
            runs.append("".join(cur))  # the character is required once; the run ends with it
            cur = []
            i += 1
            continue
        if c in "([":
            pure = False
            break
        if c == "\n":  # no line holds a newline: treat it as an opaque element
            pure = False
            runs.append("".join(cur))
            cur = []
            i += 1
            continue
        if c in ".^$)]}":
            pure = False
            runs.append("".join(cur))
            cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    runs.append("".join(cur))
    best = max(runs, key=len)
    return best, pure and bool(best)


def _boundary_blind(pattern: str) -> bool:
    """True when a line match is always also a match somewhere in the whole text.

    That holds unless the pattern observes where a string ends: anchors (``^ $ \\A \\Z \\z \\G``),
    lookarounds, ``\\K``, verbs and conditionals. Then searching a whole text first is an exact
    negative filter: no match in the text means no line of it matches.
    """
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 < n and pattern[i + 1] in _BOUNDARY_ESCAPES:
                return False
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            i += 1
            continue
        if c == "[":
            in_class = True
            i += 1
            if i < n and pattern[i] == "^":
                i += 1
            if i < n and pattern[i] == "]":
                i += 1
            continue
        if c in "^$":
            return False
        if c == "(" and pattern.startswith(("(?=", "(?!", "(?<=", "(?<!", "(*", "(?("), i):
            return False
        if c == "(" and pattern.startswith("(?", i):
            # inline flags: (?m), (?w) … change how boundaries are seen — be conservative
            j = i + 2
            while j < n and pattern[j].isalpha():
                j += 1
            if j > i + 2 and pattern[i + 2:j] != "P":
                return False
        i += 1
    return True


# Printable ASCII from the most to the least frequent in agent transcripts (measured on the dev
# trajectories): the raw scan looks for the needle's rarest byte with memchr, as ripgrep does.
_BYTE_RANK = {b: i for i, b in enumerate(
    b' entsoair\\ld_cp".umfhy`=:,g()b/10x2-*\'3w4k5v+T>EIN<6j78{}S9[]ODFUqRA#GBCMPHLzW%?&QYV|!@^KJZX;~$')}


RARE_BYTE_RANK = 40  # from here on (capitals, rarer punctuation) a byte is worth a memchr


def _finder(lit: bytes):
    """``find(buf, start, limit)`` → the next occurrence of ``lit`` or -1, anchored on its rarest
    byte (a one-byte ``find`` is a memchr, many times faster than a substring search). A finder
    serves one window, searched forwards.

    A literal holding a character some writers escape (``/`` as ``\\/``; ``<>&='`` as
    ``\\u00xx``) is also looked for in its escaped forms, so such a record is decoded too.
    """
    forms = _forms(lit)
    if len(forms) == 1:
        return _one_finder(lit)
    finders = [_one_finder(f) for f in forms]
    nxt = [-2] * len(forms)  # each form's next position: valid for one window (one finder each)

    def find(buf, p: int, limit: int) -> int:
        best = -1
        for x, fx in enumerate(finders):
            q = nxt[x]
            if q == -2 or (q != -1 and q < p):  # not looked for yet, or already passed
                q = nxt[x] = fx(buf, p, limit)
            if q >= 0 and (best < 0 or q < best):
                best = q
        return best

    return find


ESCAPED_BY_SOME = {"/": (b"\\/",), **{c: (b"\\u%04x" % ord(c), b"\\u%04X" % ord(c))
                                       for c in "<>&='"}}
"""Printable characters some JSON writers escape (``/`` in PHP; ``<>&='`` in HTML-safe Go and
Gson output). msgspec escapes none of them; a writer escapes such a character everywhere or
nowhere (decision 0206)."""


MAX_FORMS = 27
"""Beyond this many encoded forms (three escape-prone characters) the raw shortcut is dropped."""


def _forms(lit: bytes) -> list[bytes]:
    """The literal as writers may have encoded it: each escape-prone character raw or escaped
    in each way writers do, independently (a writer escapes one character everywhere or
    nowhere, but writers differ in which characters they escape)."""
    forms = [lit]
    for c in dict.fromkeys(lit.decode("ascii")):
        if c in ESCAPED_BY_SOME:
            raw = c.encode()
            forms = [f.replace(raw, alt) for f in forms for alt in (raw, *ESCAPED_BY_SOME[c])]
    return sorted(set(forms))


def _one_finder(lit: bytes):
    r = max(range(len(lit)), key=lambda i: _BYTE_RANK.get(lit[i], 0))
    if len(lit) == 1 or _BYTE_RANK.get(lit[r], 0) < RARE_BYTE_RANK:
        # every byte is common: memchr would stop too often; a substring search is faster
        return lambda buf, p, limit: buf.find(lit, p, limit)
    rare = lit[r:r + 1]

    def find(buf, p: int, limit: int) -> int:
        bfind, starts = buf.find, buf.startswith
        q = bfind(rare, p + r, limit)
        while q >= 0:
            s = q - r
            if starts(lit, s, limit):
                return s
            q = bfind(rare, q + 1, limit)
        return -1

    return find


def _raw_safe(lit: str) -> bool:
    """The literal's JSON encoding is its raw bytes (writers escape only ``"``, ``\\``, controls)."""
    return bool(lit) and all(0x20 <= ord(c) < 0x7F and c not in '"\\' for c in lit)


def _clip(line: str) -> str:
    head = line[:GREP_LINE_BYTES]
    raw = head.encode("utf-8")
    if len(raw) <= GREP_LINE_BYTES:
        return head
    return raw[:GREP_LINE_BYTES].decode("utf-8", "ignore")


def _texts(rec: Any) -> list[str]:
    """The searchable text of one record, in record order."""
    if isinstance(rec, AssistantMessage):
        out = []
        for b in rec.blocks:
            if isinstance(b, (Text, Thinking)):
                out.append(b.text)
            elif isinstance(b, ToolUse):
                out.append(compact(b.input).decode("utf-8"))
        return out
    if isinstance(rec, ToolResults):
        return [r.content for r in rec.results]
    if isinstance(rec, (UserPrompt, Steering)):
        return [rec.text]
    if isinstance(rec, Evicted):
        return [rec.residue.note] if rec.residue.note is not None else []
    if isinstance(rec, Marked):
        return [rec.replacement]
    return []


class _Matcher:
    """A compiled pattern with a budget of regex time; finds matching lines in a text."""

    def __init__(self, pattern: str, timeout_s: float, shortcut: bool):
        if not isinstance(pattern, str):
            raise Refusal("the pattern must be a string")
        try:
            self.rx = regex.compile(pattern)
        except regex.error as e:
            raise Refusal(f"the pattern is not a valid regex: {e}") from None
        except (ValueError, TypeError, OverflowError, RecursionError) as e:
            raise Refusal(f"the pattern is not a valid regex: {e}") from None
        self.timeout_s = timeout_s
        self.left = timeout_s
        self.shortcut = shortcut
        lit, pure = required_literal(pattern) if shortcut else ("", False)
        self.lit = lit or None
        self.pure = pure
        self.blind = shortcut and _boundary_blind(pattern)
        self.raw = lit.encode("ascii") if shortcut and _raw_safe(lit) else None
        if self.raw is not None and len(_forms(self.raw)) > MAX_FORMS:
            self.raw = None  # too many ways to write it: decode every record instead

    def _search(self, s: str) -> bool:
        if self.left <= 0:
            self._timeout()
        t0 = time.perf_counter()
        try:
            m = self.rx.search(s, concurrent=True, timeout=self.left)
        except TimeoutError:
            self._timeout()
        self.left -= time.perf_counter() - t0
        return m is not None

    def _timeout(self):
        raise Refusal(f"the pattern ran longer than {self.timeout_s:g} s — narrow it")

    def lines(self, text: str) -> Iterable[str]:
        """The lines of ``text`` (split on ``\\n`` only) that the pattern matches, in order."""
        lit = self.lit
        if lit is not None:
            if lit not in text:
                return ()
            if self.pure:
                return self._literal_lines(text, lit, check=False)
        if self.blind:
            return self._blind_lines(text)
        if lit is not None and len(text) > 256:
            return self._literal_lines(text, lit, check=True)
        return [ln for ln in text.split("\n") if self._search(ln)]

    def _blind_lines(self, text: str) -> list[str]:
        """Lines matching a boundary-blind pattern, jumping from one whole-text match to the next.

        A line that matches on its own matches at the same place in the whole text, so no line
        before the leftmost whole-text match can match: only the line holding it is checked, then
        the search resumes after that line (with ``pos``, which a pattern without anchors or
        lookarounds sees exactly as a fresh string: the ``\n`` before it is a non-word character,
        like a string's start).
        """
        out = []
        n = len(text)
        pos = 0
        rx = self.rx
        while pos <= n:
            if self.left <= 0:
                self._timeout()
            t0 = time.perf_counter()
            try:
                m = rx.search(text, pos, concurrent=True, timeout=self.left)
            except TimeoutError:
                self._timeout()
            self.left -= time.perf_counter() - t0
            if m is None:
                break
            s = m.start()
            ls = text.rfind("\n", 0, s) + 1 if s > pos else pos
            le = text.find("\n", s)
            if le < 0:
                le = n
            line = text[ls:le]
            if self._search(line):
                out.append(line)
            pos = le + 1
        return out

    def count(self, text: str) -> int:
        """How many lines of ``text`` match (no line is cut out when the pattern is a literal)."""
        lit = self.lit
        if lit is not None and self.pure:
            if lit not in text:
                return 0
            find = text.find
            n = 0
            p = find(lit)
            while p >= 0:
                n += 1
                e = find("\n", p)
                if e < 0:
                    break
                p = find(lit, e + 1)
            return n
        return len(self.lines(text))

    def _literal_lines(self, text: str, lit: str, check: bool) -> list[str]:
        out = []
        find, rfind = text.find, text.rfind
        p = find(lit)
        while p >= 0:
            ls = rfind("\n", 0, p) + 1
            le = find("\n", p)
            if le < 0:
                le = len(text)
            line = text[ls:le]
            if not check or self._search(line):
                out.append(line)
            p = find(lit, le + 1)
        return out


class _Hits:
    """The first GREP_HITS hits by (turn, record, line) and the total, in bounded memory."""

    def __init__(self) -> None:
        self.kept: list[tuple[tuple[int, int, int], int, str]] = []
        self.total = 0
        self.worst: tuple[int, int, int] | None = None

    def add(self, key: tuple[int, int, int], tid: int, line: str) -> None:
        self.total += 1
        if self.worst is not None and key > self.worst:
            return
        self.kept.append((key, tid, _clip(line)))
        if len(self.kept) >= 2 * GREP_HITS:
            self._trim()

    def _trim(self) -> None:
        self.kept.sort(key=lambda h: h[0])
        del self.kept[GREP_HITS:]
        if len(self.kept) == GREP_HITS:
            self.worst = self.kept[-1][0]

    def answer(self) -> dict:
        self._trim()
        return {"hits": [{"turn": tid, "line": line} for _, tid, line in self.kept],
                "total": self.total}


def grep_wants(root: Path, wants: Sequence[Want], pattern: str, *,
               timeout_s: float = GREP_TIMEOUT_S, shortcut: bool = True,
               _matcher: _Matcher | None = None, _memo: dict | None = None) -> dict:
    """Grep the wanted turns' records (no lock needed); see ``Door.grep``.

    ``_memo`` (``_cache(ctx)``) keeps the byte spans of inherited sources between calls.
    """
    m = _matcher or _Matcher(pattern, timeout_s, shortcut)
    hits = _Hits()
    for source, idxs in _groups(wants):  # sources in order of their first turn
        with _open_source(root, source) as f:
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
                    spans = _spans(wants, idxs)
                    if key is not None and spans is not None:
                        _memo["spans"][key] = spans
            if spans is not None:
                flat = _Flat(wants, idxs, _memo["flat"] if key is not None else None, key)
                _scan_file(f, source, idxs, spans, wants, m, hits, flat)
            else:
                _grep_file(f, source, _in_locus_order(wants, idxs), wants, m, hits)
    return hits.answer()


def _cache(ctx: Context) -> dict:
    """Per-table memo of what never changes: the inherited turns' owned tuples and byte spans.

    A link's rows and pointers are fixed once ``Inherited`` is folded (states may change, loci
    never), so a lineage of 350 000 inherited turns is resolved once, not on every grep.
    """
    c = ctx.memo.get("door")
    if c is None:
        n = 0
        for t in ctx.turns:
            if t.origin != "inherited":
                break
            n += 1
        with _no_gc():
            prefix = [(t.id, t.source, t.loci) for t in ctx.turns[:n]]
        per_source = collections.Counter(t[1] for t in prefix)
        c = ctx.memo["door"] = {"n": n, "prefix": prefix, "spans": {}, "flat": {},
                                "own": ctx.source, "per_source": per_source}
    return c


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


def _read_window(f, buf: bytearray, start: int, need: int, pos: int):
    """Read ``need`` bytes at ``start`` into the reusable buffer (grown if it must be), seeking
    only when the previous read did not end there: ``(buf, view, bytes read)``."""
    need = max(0, min(need, os.fstat(f.fileno()).st_size - start))  # a claimed length is not trusted
    if need > len(buf):
        buf = bytearray(need)
    if pos != start:
        f.seek(start)
    mv = memoryview(buf)
    return buf, mv, f.readinto(mv[:need])


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
    bufs = [bytearray(CHUNK), bytearray(CHUNK)]  # one is read while the other is searched
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
            k = bisect.bisect_right(ends, start + len(buf), i + 1, n) if i + 1 < n else n
            k = max(k, i + 1)
            need = ends[k - 1] - start
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
            prev = cur
        if prev is not None:
            done, prev = prev, None
            _settle(done, dense, lit, L, starts, ends, source, idxs, wants, m, hits, seq, flat)
    finally:
        if prev is not None:  # refused: wait for the helper, it must not outlive the buffer
            prev.abandon()


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


def _anchor(lit: bytes) -> int:
    """The index of the literal's rarest byte (by its rank in JSON-encoded English and code)."""
    return max(range(len(lit)), key=lambda i: _BYTE_RANK.get(lit[i], 0))


class _Finding:
    """One window searched for the literal's forms: found natively in the helper thread (while
    the next window is read), or with ``_finder`` when the extension is not built."""

    def __init__(self, buf, mv, start: int, got: int, need: int, pos: int, i: int, k: int,
                 forms: list[bytes], anchors: list[int]):
        self.buf, self.mv, self.start, self.got, self.need, self.pos = buf, mv, start, got, need, pos
        self.i, self.k = i, k
        self.job = _helper().submit(_positions, mv, got, forms, anchors) \
            if native.find_all is not None else None

    def process(self, lit: bytes, L: int, starts, ends, source: str, idxs: Sequence[int],
                wants: Sequence[Want], m: _Matcher, hits: _Hits, seq: int) -> tuple[int, int]:
        try:
            if self.job is not None:
                at = self.job.result()
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


def _positions(mv, limit: int, forms: list[bytes], anchors: list[int]) -> array:
    """Every start of any form in ``mv[:limit]``, sorted (the helper thread's part)."""
    out = array("q")
    at = 0
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
        from concurrent.futures import ThreadPoolExecutor

        _HELPER.append(ThreadPoolExecutor(1, thread_name_prefix="mnemon-door"))
    return _HELPER[0]


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


def _grep_record(raw, source: str, off: int, wi: int, ri: int, seq: int,
                 wants: Sequence[Want], m: _Matcher, hits: _Hits) -> int:
    try:
        rec = decode(raw)
    except DECODE_ERRORS as e:
        raise Refusal(f"cannot read {source} at offset {off}: not a record ({e})") from None
    tid = wants[wi][0]
    if hits.worst is not None and (wi, ri) > hits.worst[:2]:
        hits.total += sum(m.count(text) for text in _texts(rec))  # past the kept hits: count
        return seq
    for text in _texts(rec):
        for line in m.lines(text):
            hits.add((wi, ri, seq), tid, line)
            seq += 1
    return seq


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
    buf = bytearray(CHUNK)
    raw_lit = m.raw
    seq = 0
    pos = -1  # the file position after the last read
    pending = next(entries, None)
    while pending is not None:
        # a window: the next entries whose span from the first fits the buffer (at least one)
        start = pending[0]
        window = [pending]
        last_end = start + pending[1]
        pending = next(entries, None)
        while pending is not None and pending[0] + pending[1] - start <= CHUNK:
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
        if raw_lit is None:
            cands: Iterable[tuple] = window
        else:
            cands = _candidates(buf, start, need, raw_lit, window)
        for off, length, want, wi, ri in cands:
            raw = mv[off - start:off - start + length]
            _check(source, off, length, want, raw)
            seq = _grep_record(raw, source, off, wi, ri, seq, wants, m, hits)
        mv.release()


def _candidates(buf: bytearray, start: int, limit: int, lit: bytes, window: list[tuple]
                ) -> list[tuple]:
    """Entries of the window whose raw bytes contain the literal (in any of its forms)."""
    out: list[tuple] = []
    lf = _finder(lit)
    p = lf(buf, 0, limit)
    if p < 0:
        return out
    offs = [e[0] - start for e in window]
    L = len(lit)
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


# --------------------------------------------------------------------------- the door


class Door:
    """The door onto one agent's transcript.

    ``own=True`` is the agent's own (model-facing) door: it refuses the turn in hand, which is
    still being written, and grep skips it. From outside (the CLI) every recorded turn reads.
    ``seam`` is the agent's lock; the ``a*`` entry points resolve under it and read after it is
    released, in a worker thread.
    """

    def __init__(self, root: Path, ctx: Context, *, own: bool = False, seam=None):
        self.root = Path(root)
        self.ctx = ctx
        self.own = own
        self.seam = seam
        self.torn = None  # from outside: the torn tail left by a crash mid-append, if any

    @classmethod
    def of_agent(cls, root: Path, agent, *, own: bool = True) -> "Door":
        """The door of a live ``AgentLog`` (its own, model-facing door by default)."""
        return cls(root, agent.ctx, own=own, seam=agent.seam)

    @classmethod
    def open(cls, path: Path):
        """From outside: fold an agent directory read-only → ``(door, torn tail or None)``."""
        from ..lineage.view import open_agent

        root, _agent, ctx, torn = open_agent(Path(path))
        return cls(root, ctx), torn

    # ------------------------------------------------------------------ resolving (under the lock)

    def _in_hand(self) -> int | None:
        return self.ctx.in_hand if self.own else None

    def _latest(self) -> str:
        latest = self.ctx.latest
        return "no turn is recorded yet" if latest is None else f"the latest is {latest}"

    def select(self, turns: Any = None) -> list[Turn]:
        """The turns a ``turns`` argument names, in id order (refusals name the state)."""
        ctx = self.ctx
        hand = self._in_hand()
        if turns is None:
            return [t for t in ctx.turns if t.id != hand]
        ids, ranges = parse_turns(turns)
        chosen: dict[int, Turn] = {}
        for tid in ids:
            t = ctx.turn(tid)
            if t is None:
                raise Refusal(f"turn {tid} is not recorded — {self._latest()}")
            if tid == hand:
                closed = [x.id for x in ctx.turns if x.id != hand]
                what = (f"its closed turns ({closed[0]}–{closed[-1]}) are readable" if closed
                        else "no closed turn is recorded yet")
                raise Refusal(f"turn {tid} is still being written — {what}")
            chosen[tid] = t
        if ranges:
            keys = [t.id for t in ctx.turns]
            for lo, hi in ranges:
                a = bisect.bisect_left(keys, lo)
                b = bisect.bisect_right(keys, hi)
                for t in ctx.turns[a:b]:
                    if t.id != hand:
                        chosen[t.id] = t
        return [chosen[k] for k in sorted(chosen)]

    def resolve(self, turns: Any = None) -> list[Want]:
        """Owned ``(turn, source, loci)`` for the turns named; the only step under the lock."""
        hand = self.ctx.in_hand
        if turns is None:  # the whole transcript: the inherited part is resolved once
            memo = _cache(self.ctx)
            own = self.ctx.turns[memo["n"]:]
            if self.own:
                own = [t for t in own if t.id != hand]
            with _no_gc():
                return memo["prefix"] + [
                    (t.id, t.source, t.loci if t.id != hand else tuple(t.loci)) for t in own]
        sel = self.select(turns)
        with _no_gc():  # a tuple per turn: without this, cyclic GC walks the whole table
            return [(t.id, t.source, t.loci if t.id != hand else tuple(t.loci)) for t in sel]

    # ------------------------------------------------------------------ sync calls

    def index(self) -> list[dict]:
        return index(self.ctx)

    def read(self, turns: Any) -> list[dict]:
        """Each named turn's own protocol records, objects exactly as in the file."""
        if turns is None:
            raise Refusal("name the turns to read, such as \"3,5-9\"")
        return read_wants(self.root, self.resolve(turns))

    def grep(self, pattern: str, turns: Any = None, *, timeout_s: float = GREP_TIMEOUT_S,
             shortcut: bool = True) -> dict:
        """``{"hits": [{"turn", "line"}], "total"}`` — at most GREP_HITS hits, oldest first."""
        matcher = _Matcher(pattern, timeout_s, shortcut)  # a bad pattern is refused first
        return grep_wants(self.root, self.resolve(turns), pattern, _matcher=matcher,
                          _memo=_cache(self.ctx))

    # ------------------------------------------------------------------ model-facing (async)

    async def _resolve_locked(self, turns: Any) -> list[Want]:
        if self.seam is None:
            return self.resolve(turns)
        async with self.seam:
            return self.resolve(turns)

    async def aindex(self) -> list[dict]:
        if self.seam is None:
            return self.index()
        async with self.seam:
            return self.index()

    async def aread(self, turns: Any) -> list[dict]:
        import trio

        if turns is None:
            raise Refusal("name the turns to read, such as \"3,5-9\"")
        wants = await self._resolve_locked(turns)
        return await trio.to_thread.run_sync(read_wants, self.root, wants,
                                             abandon_on_cancel=True)

    async def agrep(self, pattern: str, turns: Any = None, *,
                    timeout_s: float = GREP_TIMEOUT_S) -> dict:
        import trio

        matcher = _Matcher(pattern, timeout_s, True)
        wants = await self._resolve_locked(turns)
        memo = _cache(self.ctx)
        return await trio.to_thread.run_sync(
            lambda: grep_wants(self.root, wants, pattern, _matcher=matcher, _memo=memo),
            abandon_on_cancel=True)


# --------------------------------------------------------------------------- module-level calls


def read(root: Path, ctx: Context, turns: Any, *, own: bool = False) -> list[dict]:
    return Door(root, ctx, own=own).read(turns)


def grep(root: Path, ctx: Context, pattern: str, turns: Any = None, *, own: bool = False,
         timeout_s: float = GREP_TIMEOUT_S) -> dict:
    return Door(root, ctx, own=own).grep(pattern, turns, timeout_s=timeout_s)
