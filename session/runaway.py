"""Regexes a person wrote, matched against text a model chose: refused at load when they can run
away, bounded when they run.

A policy's ``when`` patterns and an output type's ``pattern`` are written by whoever wrote the
policy or the schema — often copied or generated — and searched in arguments and answers a model
produced. A backtracking engine (the ``regex`` module, the one dialect of the door) can spend
exponential or high-polynomial time on a pattern with *ambiguous repetition*: ``(x+x+)+y``,
``^(\\w+\\s?)*$``, ``^(.*?,){11}P``, ``(ab|abab)+$``. So (decision 0309):

* at load, ``compile_bounded`` refuses a pattern that is too long, or whose parse tree holds a
  repetition with an inner repetition that can consume what may follow it (the next round of the
  outer one included: that is where the choices multiply), or that runs out of time on a probe
  built from the pattern itself — each repeated part spelled out dozens of times, then a
  character that breaks the match (this is what catches alternations whose branches overlap);
* at a match, ``search`` is bounded by the ``regex`` module's ``timeout`` and runs with
  ``concurrent=True`` — the module then releases the GIL, so the match may run in a worker thread
  while the Trio thread goes on (measured: a 10 ms ticker keeps its period during a 1 s match;
  without the release it stops for the whole second). A match that runs out of time raises
  ``TimeoutError``; the callers fail closed, naming the rule or the schema path.

The probe cannot prove a pattern safe; the bound at each match is the guarantee.

Pure: no I/O.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

# the standard library's parser (Python 3.11+): the parse tree the static check reads. The
# ``regex`` dialect is a superset; a pattern the stdlib cannot parse is judged by probes alone.
import re._constants as _c
import re._parser as _sre

import regex

from ..errors import UserError

__all__ = ["RunawayPattern", "compile_bounded", "search", "PATTERN_MAX_CHARS", "PROBE_TIMEOUT_S",
           "MATCH_TIMEOUT_S"]

PATTERN_MAX_CHARS = 1000  # a longer pattern is refused at load
PROBE_TIMEOUT_S = 0.05  # a probe taking longer means the pattern can run away: refused
PROBE_RUN = 48  # runs of this many repeated characters expose exponential backtracking
PROBE_PUMP_CHARS = 64  # a repeated part is spelled out to about this many characters
MATCH_TIMEOUT_S = 0.25  # the bound on one match of model text


class RunawayPattern(UserError, ValueError):
    """A pattern refused at load: the message says why (the caller adds where)."""


def search(rx: Any, text: str, timeout: float = MATCH_TIMEOUT_S) -> bool:
    """Whether ``rx`` (compiled by ``compile_bounded``) is found in ``text``; ``TimeoutError``
    when the search runs past ``timeout`` seconds. The GIL is released while it runs."""
    return rx.search(text, timeout=timeout, concurrent=True) is not None


def compile_bounded(pattern: str) -> Any:
    """The compiled pattern, or ``RunawayPattern`` naming why it cannot be used."""
    if len(pattern) > PATTERN_MAX_CHARS:
        raise RunawayPattern(f"a pattern is at most {PATTERN_MAX_CHARS} characters")
    try:
        rx = regex.compile(pattern)
    except regex.error as e:
        raise RunawayPattern(f"not a valid regex ({e})") from None
    try:
        tree = _sre.parse(pattern)
    except Exception:  # the regex module's own syntax (\p{…}, fuzzy, …): probes alone
        tree = None
    if tree is not None:
        alpha = _Alphabet(tree, tree.state.flags)
        if _ambiguous(tree, 0, False, alpha, tree.state.flags):
            raise RunawayPattern(
                f"the pattern {pattern!r} can run away: a repetition inside a repetition can "
                "take what follows it, so the ways to split a text multiply — "
                "make the inner part unable to take what follows it (e.g. [^,]* for .*?,), or "
                "make it possessive (x++) or atomic ((?>…))")
    for probe in _probes(pattern, tree):
        try:
            rx.search(probe, timeout=PROBE_TIMEOUT_S, concurrent=True)
        except TimeoutError:
            raise RunawayPattern(f"the pattern {pattern!r} can run away (it ran longer than "
                                 f"{PROBE_TIMEOUT_S:g} s on {len(probe)} characters) — write "
                                 "it without repetition whose rounds can match the same "
                                 "text") from None
    return rx


# --------------------------------------------------------------------------- the static check
# Character sets are bit masks over a small alphabet: ASCII, a few characters beyond it, and
# every character the pattern names. Enough to tell whether two parts can take the same input.

_EXTRA = "é ß Ж 中 \u00a0 \u2028 \u0660 😀".split(" ") + [" "]
_CATEGORY = {getattr(_c, name): re.compile(rx) for name, rx in (
    ("CATEGORY_DIGIT", r"\d"), ("CATEGORY_NOT_DIGIT", r"\D"), ("CATEGORY_SPACE", r"\s"),
    ("CATEGORY_NOT_SPACE", r"\S"), ("CATEGORY_WORD", r"\w"), ("CATEGORY_NOT_WORD", r"\W"))}
_REPEATS = (_c.MAX_REPEAT, _c.MIN_REPEAT)
_POSSESSIVE = getattr(_c, "POSSESSIVE_REPEAT", None)
_ATOMIC = getattr(_c, "ATOMIC_GROUP", None)


class _Alphabet:
    def __init__(self, tree: Any, flags: int):
        chars = {chr(i) for i in range(128)} | set(_EXTRA)
        _named(tree, chars)
        self.chars = sorted(chars)
        self.all = (1 << len(self.chars)) - 1
        self.index = {ch: i for i, ch in enumerate(self.chars)}

    def of(self, pred) -> int:
        return sum(1 << i for i, ch in enumerate(self.chars) if pred(ch))


def _named(tree: Any, out: set) -> None:
    for op, av in tree:
        if op in (_c.LITERAL, _c.NOT_LITERAL):
            out.add(chr(av))
        elif op is _c.IN:
            for iop, iav in av:
                if iop is _c.LITERAL:
                    out.add(chr(iav))
                elif iop is _c.RANGE:
                    out.update((chr(iav[0]), chr(iav[1])))
        else:
            for sub in _children(op, av):
                _named(sub, out)


def _children(op: Any, av: Any) -> list:
    if op in _REPEATS or op is _POSSESSIVE:
        return [av[2]]
    if op is _c.SUBPATTERN:
        return [av[3]]
    if op is _c.BRANCH:
        return list(av[1])
    if op is _ATOMIC:
        return [av]
    if op in (_c.ASSERT, _c.ASSERT_NOT):
        return [av[1]]
    return []


def _leaf(op: Any, av: Any, alpha: _Alphabet, flags: int) -> int | None:
    """The characters one leaf takes (a mask), None for a node that is not a leaf."""
    if op is _c.LITERAL:
        mask = 1 << alpha.index[chr(av)]
    elif op is _c.NOT_LITERAL:
        mask = alpha.all & ~(1 << alpha.index[chr(av)])
    elif op is _c.ANY:
        mask = alpha.all
    elif op is _c.IN:
        mask = alpha.of(lambda ch: _in(av, ch))
    else:
        return None
    if flags & _c.SRE_FLAG_IGNORECASE:
        mask |= alpha.of(lambda ch: any(mask >> alpha.index[v] & 1 for v in
                                        (ch.lower(), ch.upper(), ch.swapcase())
                                        if v in alpha.index))
    return mask


def _in(items: list, ch: str) -> bool:
    negate, hit = False, False
    for op, av in items:
        if op is _c.NEGATE:
            negate = True
        elif op is _c.LITERAL:
            hit = hit or ch == chr(av)
        elif op is _c.RANGE:
            hit = hit or av[0] <= ord(ch) <= av[1]
        elif op is _c.CATEGORY:
            rx = _CATEGORY.get(av)
            hit = hit or rx is None or rx.match(ch) is not None
        else:  # a construct not followed: it may take anything
            hit = True
    return hit != negate


def _info(seq: Any, alpha: _Alphabet, flags: int) -> tuple[int, int, bool]:
    """``(first, chars, nullable)`` of a sequence: the characters a match may start with, every
    character it may take, and whether it may match the empty string."""
    first, chars, nullable = 0, 0, True
    for op, av in seq:
        f, c, n = _item(op, av, alpha, flags)
        if nullable:
            first |= f
        chars |= c
        nullable = nullable and n
    return first, chars, nullable


def _item(op: Any, av: Any, alpha: _Alphabet, flags: int) -> tuple[int, int, bool]:
    mask = _leaf(op, av, alpha, flags)
    if mask is not None:
        return mask, mask, False
    if op in _REPEATS or op is _POSSESSIVE:
        f, c, n = _info(av[2], alpha, flags)
        return f, c, n or av[0] == 0
    if op is _c.SUBPATTERN:
        return _info(av[3], alpha, (flags | av[1]) & ~av[2])
    if op is _ATOMIC:
        return _info(av, alpha, flags)
    if op is _c.BRANCH:
        parts = [_info(alt, alpha, flags) for alt in av[1]]
        return (_union(p[0] for p in parts), _union(p[1] for p in parts),
                any(p[2] for p in parts))
    if op in (_c.AT, _c.ASSERT, _c.ASSERT_NOT):
        return 0, 0, True
    return alpha.all, alpha.all, True  # a back reference, a conditional: anything


def _union(masks) -> int:
    out = 0
    for m in masks:
        out |= m
    return out


def _ambiguous(seq: Any, follow: int, inside: bool, alpha: _Alphabet, flags: int) -> bool:
    """Whether a repetition nested in another (``inside``) can take a character which may
    follow it (``follow``: what may come after ``seq``)."""
    items = list(seq)
    after = [0] * len(items)
    f = follow
    for i in range(len(items) - 1, -1, -1):
        after[i] = f
        fi, _ci, ni = _item(*items[i], alpha, flags)
        f = fi | (f if ni else 0)
    for (op, av), fol in zip(items, after):
        if op in _REPEATS:
            lo, hi, body = av
            first, chars, _n = _info(body, alpha, flags)
            if hi > 1:
                if inside and chars & fol:
                    return True
                found = _ambiguous(body, first | fol, True, alpha, flags)
            else:
                found = _ambiguous(body, fol, inside, alpha, flags)
        elif op is _POSSESSIVE or op is _ATOMIC:  # never given back: rounds do not multiply
            body = av[2] if op is _POSSESSIVE else av
            found = _ambiguous(body, 0, False, alpha, flags)
        elif op is _c.SUBPATTERN:
            found = _ambiguous(av[3], fol, inside, alpha, (flags | av[1]) & ~av[2])
        elif op is _c.BRANCH:
            found = any(_ambiguous(alt, fol, inside, alpha, flags) for alt in av[1])
        else:
            found = False
        if found:
            return True
    return False


# --------------------------------------------------------------------------- probes


def _probes(pattern: str, tree: Any) -> list[str]:
    """Runs of each character the pattern names and of a few common ones, then each repeated
    part of the pattern spelled out (after the text that leads to it), each followed by a
    character that breaks the match, or by nothing."""
    chars = [c for c in dict.fromkeys(pattern) if c.isalnum() or c in "/_-. ,"][:12]
    runs = [c * PROBE_RUN for c in (*chars, "a", "0", " ", "/")]
    pumps: list[str] = []
    if tree is not None:
        try:
            _pumps(tree, "", pumps)
        except Exception:  # a construct the spelling does not follow
            pass
    out = []
    for body in (*runs, *dict.fromkeys(pumps[:64])):
        for tail in ("!", "\x00", ""):
            out.append(body + tail)
    return out


def _pumps(seq: Any, before: str, out: list[str]) -> None:
    for op, av in seq:
        if op in _REPEATS or op is _POSSESSIVE:
            lo, hi, body = av
            if hi > 1:
                for unit in itertools.islice(_spell(body), 8):
                    if unit:
                        k = max(8, PROBE_PUMP_CHARS // len(unit))
                        if hi != _c.MAXREPEAT:
                            k = min(k, hi + 1)
                        out.extend((unit * k, before + unit * k))
            _pumps(body, before, out)
        else:
            for sub in _children(op, av):
                _pumps(sub, before, out)
        before += next(iter(_spell([(op, av)])), "")


def _spell(seq: Any) -> list[str]:
    """Up to 8 short texts the sequence matches (each branch of an alternation tried)."""
    outs = [""]
    for op, av in seq:
        outs = [a + b for a in outs for b in _spell_item(op, av)][:8]
    return outs


def _spell_item(op: Any, av: Any) -> list[str]:
    if op is _c.LITERAL:
        return [chr(av)]
    if op is _c.NOT_LITERAL:
        return ["a" if av != ord("a") else "b"]
    if op is _c.ANY:
        return ["a"]
    if op is _c.IN:
        return [next((ch for ch in "a0 ,/_-.xA!" if _in(av, ch)), "a")]
    if op in _REPEATS or op is _POSSESSIVE:
        lo, _hi, body = av
        return [s * max(lo, 1) for s in _spell(body)]
    if op is _c.SUBPATTERN:
        return _spell(av[3])
    if op is _ATOMIC:
        return _spell(av)
    if op is _c.BRANCH:
        return [s for alt in av[1] for s in _spell(alt)][:8]
    return [""]
