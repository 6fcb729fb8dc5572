"""What a grep pattern needs: its compiled matcher, a literal every match must hold, the forms
that literal takes in raw JSON, and the searchable text of a record.

Every searched line is matched with the real pattern; the literal and its raw forms only decide
what need not be looked at (docs/door.md, "The shortcut, and why it is exact").
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from ..constants import GREP_LINE_BYTES
from ..errors import Refusal
from .literal import (
    MAX_FORMS,
    _BYTE_RANK,
    RARE_BYTE_RANK,
    forms,
    raw_safe,
    required_literal,
    required_literals,
)
from ..records import (
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
)

_META = set(".^$*+?{}[]\\|()")
_BOUNDARY_ESCAPES = set("AZzGK")


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


def _finder(lit: bytes):
    """``find(buf, start, limit)`` → the next occurrence of ``lit`` or -1, anchored on its rarest
    byte (a one-byte ``find`` is a memchr, many times faster than a substring search). A finder
    serves one window, searched forwards.

    A literal holding a character some writers escape (``/`` as ``\\/``; ``<>&='`` as
    ``\\u00xx``) is also looked for in its escaped forms, so such a record is decoded too.
    """
    return _forms_finder(forms(lit))


def _forms_finder(found: list[bytes]):
    """``_finder`` over the given forms: the next occurrence of any of them."""
    if len(found) == 1:
        return _one_finder(found[0])
    finders = [_one_finder(f) for f in found]
    nxt = [-2] * len(found)  # each form's next position: valid for one window (one finder each)

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


_FINDERS: dict[bytes, Any] = {}
"""``_one_finder``'s finders by literal (a finder is a pure function of it; a grep makes one per
form per window): at most 256, of literals up to 256 bytes."""


def _one_finder(lit: bytes):
    got = _FINDERS.get(lit)
    if got is None:
        got = _make_finder(lit)
        if len(lit) <= 256:
            if len(_FINDERS) >= 256:
                _FINDERS.clear()
            _FINDERS[lit] = got
    return got


def _make_finder(lit: bytes):
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


_PREPARED: dict[tuple[str, bool], tuple] = {}
"""What a ``_Matcher`` makes of a pattern — the compiled regex, the literals and their raw
forms — by ``(pattern, shortcut)``: the same for every call (a compiled pattern is immutable
and shared safely between threads), ~35 µs to make, so the thousand children of a swarm that
grep alike make it once. A refused pattern is never kept; at most 256, then all are let go."""


class _Matcher:
    """A compiled pattern with a budget of regex time; finds matching lines in a text. Only
    ``left`` and ``ran_out`` (the call's own budget) differ between two of the same pattern."""

    _rx: Any  # a regex.Pattern, compiled on first use (None until then)
    lits: tuple[str, ...]
    raw_forms: list[bytes] | None

    def __init__(self, pattern: str, timeout_s: float, shortcut: bool):
        if not isinstance(pattern, str):
            raise Refusal("the pattern must be a string")
        self.timeout_s = timeout_s
        self.left = timeout_s
        self.ran_out = False  # set when the regex time is spent (the refusal that follows)
        made = _PREPARED.get((pattern, shortcut))
        if made is not None:  # the same pattern again (a swarm's children grep alike)
            (self.pattern, self._rx, self.shortcut, self.lit, self.pure, self.blind, self.raw,
             self.lits, self.raw_forms) = made
            return
        self.pattern = pattern
        self._rx = None
        lit, pure = required_literal(pattern) if shortcut else ("", False)
        if not pure:  # a pure literal is a valid pattern matching itself: no engine needed
            self._compile()
        self.shortcut = shortcut
        self.lit = lit or None
        self.pure = pure
        self.blind = shortcut and _boundary_blind(pattern)
        self.raw = lit.encode("ascii") if shortcut and raw_safe(lit) else None
        if self.raw is not None and len(forms(self.raw)) > MAX_FORMS:
            self.raw = None  # too many ways to write it: decode every record instead
        # a top-level alternation of branches that each hold a literal (``Error|FAILED``): a
        # text holding none of them cannot match, nor a record whose raw bytes hold none of
        # their forms (``raw_forms``, searched by the record-by-record pass)
        self.lits = ()
        self.raw_forms = [*forms(self.raw)] if self.raw is not None else None
        if shortcut and lit == "" and "|" in pattern:
            self.lits = required_literals(pattern)
            if self.lits and all(raw_safe(x) for x in self.lits):
                found = sorted({f for x in self.lits for f in forms(x.encode("ascii"))})
                self.raw_forms = found if len(found) <= MAX_FORMS else None
        if len(_PREPARED) >= 256:
            _PREPARED.clear()
        _PREPARED[(pattern, shortcut)] = (
            pattern, self._rx, shortcut, self.lit, self.pure, self.blind, self.raw, self.lits,
            self.raw_forms)

    def _compile(self):
        import regex  # ~50 ms to import: a grep for a plain literal never pays it

        try:
            self._rx = regex.compile(self.pattern)
        except regex.error as e:
            raise Refusal(f"the pattern is not a valid regex: {e}") from None
        except (ValueError, TypeError, OverflowError, RecursionError) as e:
            raise Refusal(f"the pattern is not a valid regex: {e}") from None
        return self._rx

    @property
    def rx(self):
        return self._rx if self._rx is not None else self._compile()

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
        self.ran_out = True
        raise Refusal(f"the pattern ran longer than {self.timeout_s:g} s — narrow it")

    def lines(self, text: str) -> Sequence[str]:
        """The lines of ``text`` (split on ``\\n`` only) that the pattern matches, in order."""
        lit = self.lit
        if lit is not None:
            if lit not in text:
                return ()
            if self.pure:
                return self._literal_lines(text, lit, check=False)
        elif self.lits and not any(x in text for x in self.lits):
            return ()
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


