"""Glob patterns a model chose, matched without a regex: time bounded by the lengths alone.

``fs_list {glob}`` takes a pattern from the model, which is hostile text (a pattern such as
``*a*a*a*a*a*b`` translated to a backtracking regex takes exponential time). This matcher walks
the pattern and the path together once, keeping the set of pattern positions alive — at most
``len(pattern) × len(path)`` steps, whatever the pattern.

The syntax is the one shells and ``.gitignore`` users know: ``*`` any run within one path
component, ``**`` any run across components (``**/`` also none), ``?`` one character but
``/``, ``[abc]``/``[a-z]``/``[!x]`` one of a set; everything else literal. A pattern without
``/`` matches the file's name in any directory (``*.py``), as ``.gitignore`` does.
"""

from __future__ import annotations

__all__ = ["GlobError", "compile_glob", "matches", "MAX_GLOB"]

MAX_GLOB = 512


class GlobError(ValueError):
    pass


Token = tuple[str, object]  # ("lit", ch) | ("any1", None) | ("star", None) | ("dstar", None) | ("set", (neg, ranges))


def compile_glob(pattern: str) -> list[Token]:
    if len(pattern) > MAX_GLOB:
        raise GlobError(f"a glob of at most {MAX_GLOB} characters")
    if not pattern.startswith("/") and "/" not in pattern.rstrip("/"):
        pattern = "**/" + pattern
    pattern = pattern.lstrip("/")
    out: list[Token] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if i + 1 < n and pattern[i + 1] == "*":
                j = i
                while j < n and pattern[j] == "*":
                    j += 1
                if j < n and pattern[j] == "/":
                    out.append(("dstar_slash", None))  # ``**/``: any directories, or none
                    i = j + 1
                else:
                    out.append(("dstar", None))
                    i = j
                continue
            out.append(("star", None))
        elif c == "?":
            out.append(("any1", None))
        elif c == "[":
            j = i + 1
            neg = j < n and pattern[j] in "!^"
            if neg:
                j += 1
            start = j
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                out.append(("lit", "["))
                i += 1
                continue
            body = pattern[start:j]
            ranges: list[tuple[str, str]] = []
            k = 0
            while k < len(body):
                if k + 2 < len(body) and body[k + 1] == "-":
                    ranges.append((body[k], body[k + 2]))
                    k += 3
                else:
                    ranges.append((body[k], body[k]))
                    k += 1
            out.append(("set", (neg, tuple(ranges))))
            i = j + 1
            continue
        else:
            out.append(("lit", c))
        i += 1
    return out


def _closure(tokens: list[Token], states: set[int]) -> set[int]:
    """Positions reachable without consuming a character (stars may match nothing). A
    negative state ``-(s + 1)`` is "inside the directories of the ``**/`` at s": it may leave
    only by consuming a ``/``, so it is never skipped here."""
    stack = [s for s in states if s >= 0]
    seen = set(states)
    while stack:
        s = stack.pop()
        if s < len(tokens) and tokens[s][0] in ("star", "dstar", "dstar_slash"):
            if s + 1 not in seen:
                seen.add(s + 1)
                stack.append(s + 1)
    return seen


def matches(tokens: list[Token], path: str) -> bool:
    """Whether ``path`` (``a/b/c.py``) matches the compiled glob."""
    states = _closure(tokens, {0})
    n = len(tokens)
    for ch in path:
        nxt: set[int] = set()
        for s in states:
            if s < 0:  # inside a ``**/``'s directories
                nxt.add(s)
                if ch == "/":
                    nxt.add(-s)  # -(k+1) -> k+1: past the ``**/``
                continue
            if s >= n:
                continue
            kind, arg = tokens[s]
            if kind == "lit":
                if arg == ch:
                    nxt.add(s + 1)
            elif kind == "any1":
                if ch != "/":
                    nxt.add(s + 1)
            elif kind == "star":
                if ch != "/":
                    nxt.add(s)
            elif kind == "dstar":
                nxt.add(s)
            elif kind == "dstar_slash":
                nxt.add(-(s + 1))
                if ch == "/":
                    nxt.add(s + 1)
            elif kind == "set":
                neg_: bool = arg[0]  # type: ignore[index]
                ranges_: tuple[tuple[str, str], ...] = arg[1]  # type: ignore[index]
                hit = any(lo <= ch <= hi for lo, hi in ranges_)
                if hit != neg_ and ch != "/":
                    nxt.add(s + 1)
        if not nxt:
            return False
        states = _closure(tokens, nxt)
    return n in states
