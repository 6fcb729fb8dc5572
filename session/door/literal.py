"""A grep pattern's required literal and the forms it takes in raw JSON: the pure part of the
door's shortcut (docs/door.md, "The shortcut, and why it is exact").

Kept apart from ``pattern`` (the compiled matcher and a record's texts) so that what needs only
the literal — the quick no-hit answer from outside (``lineage.nohit``) — loads no decoder: this
module imports nothing beyond the standard library.
"""

from __future__ import annotations


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


# Printable ASCII from the most to the least frequent in agent transcripts (measured on the dev
# trajectories): the raw scan looks for the needle's rarest byte with memchr, as ripgrep does.
_BYTE_RANK = {b: i for i, b in enumerate(
    b' entsoair\\ld_cp".umfhy`=:,g()b/10x2-*\'3w4k5v+T>EIN<6j78{}S9[]ODFUqRA#GBCMPHLzW%?&QYV|!@^KJZX;~$')}


RARE_BYTE_RANK = 40  # from here on (capitals, rarer punctuation) a byte is worth a memchr


ESCAPED_BY_SOME = {"/": (b"\\/",), **{c: (b"\\u%04x" % ord(c), b"\\u%04X" % ord(c))
                                       for c in "<>&='"}}
"""Printable characters some JSON writers escape (``/`` in PHP; ``<>&='`` in HTML-safe Go and
Gson output). msgspec escapes none of them; a writer escapes such a character everywhere or
nowhere (decision 0206)."""


MAX_FORMS = 27
"""Beyond this many encoded forms (three escape-prone characters) the raw shortcut is dropped."""


def forms(lit: bytes) -> list[bytes]:
    """The literal as writers may have encoded it: each escape-prone character raw or escaped
    in each way writers do, independently (a writer escapes one character everywhere or
    nowhere, but writers differ in which characters they escape)."""
    forms = [lit]
    for c in dict.fromkeys(lit.decode("ascii")):
        if c in ESCAPED_BY_SOME:
            raw = c.encode()
            forms = [f.replace(raw, alt) for f in forms for alt in (raw, *ESCAPED_BY_SOME[c])]
    return sorted(set(forms))


def required_literals(pattern: str) -> tuple[str, ...]:
    """Literals of which every match of ``pattern`` contains at least one: the required literal
    of each branch of a top-level alternation (``Error|FAILED`` → ``("Error", "FAILED")``), or
    the pattern's one required literal; ``()`` when some branch has none (then any text may
    hold a match). A match of ``a|b`` is a match of ``a`` or of ``b``, so it holds that branch's
    literal. Inline flags anywhere (``(?i)`` applies to every branch) give none, as in
    ``required_literal``."""
    if "(?" in pattern:
        return ()
    branches = _top_level_branches(pattern)
    if len(branches) == 1:
        lit, _ = required_literal(pattern)
        return (lit,) if lit else ()
    lits = []
    for b in branches:
        lit, _ = required_literal(b)
        if not lit:
            return ()
        lits.append(lit)
    return tuple(dict.fromkeys(lits))


def _top_level_branches(pattern: str) -> list[str]:
    """``pattern`` cut at each ``|`` outside groups and classes, not escaped."""
    out: list[str] = []
    depth, start, i, n = 0, 0, 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":  # a class: up to its closing ']' (one first, or after '^', is literal)
            i += 1
            if i < n and pattern[i] == "^":
                i += 1
            if i < n and pattern[i] == "]":
                i += 1
            while i < n and pattern[i] != "]":
                if pattern[i] == "\\":
                    i += 2
                elif pattern.startswith("[:", i) and (e := pattern.find(":]", i + 2)) >= 0:
                    i = e + 2  # a POSIX class, [:alpha:]: its ']' does not close the class
                else:
                    i += 1
            i += 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth = max(0, depth - 1)
        elif c == "|" and depth == 0:
            out.append(pattern[start:i])
            start = i + 1
        i += 1
    out.append(pattern[start:])
    return out


def raw_safe(lit: str) -> bool:
    """The literal's JSON encoding is its raw bytes (writers escape only ``"``, ``\\``, controls)."""
    return bool(lit) and all(0x20 <= ord(c) < 0x7F and c not in '"\\' for c in lit)


def anchor(lit: bytes) -> int:
    """The index of the literal's rarest byte (by its rank in JSON-encoded English and code)."""
    return max(range(len(lit)), key=lambda i: _BYTE_RANK.get(lit[i], 0))


def raw_literal(pattern: str) -> tuple[bytes | None, bool]:
    """``(literal, pure)``: the pattern's required literal as raw bytes when the raw shortcut
    applies to it (printable ASCII without ``"`` or ``\\``, at most ``MAX_FORMS`` forms), else
    None; ``pure`` when the pattern is just that literal."""
    lit, pure = required_literal(pattern)
    if not raw_safe(lit):
        return None, pure
    raw = lit.encode("ascii")
    if len(forms(raw)) > MAX_FORMS:
        return None, pure
    return raw, pure


__all__ = ["required_literal", "required_literals", "raw_safe", "raw_literal", "forms", "anchor", "ESCAPED_BY_SOME",
           "MAX_FORMS", "RARE_BYTE_RANK"]
