"""Validate a JSON value against a schema of the subset (``schema``), naming each problem by
its JSON path (``$.cities[2].name``) and a message the model can act on.

A focused validator rather than the ``jsonschema`` package (decision 0280): the core install
stays the engine alone, the subset is exactly what ``schema.check_schema`` admits, and the
messages are written to be sent back to a model. The test suite checks it against
``jsonschema`` on generated schemas and values (tests/providers/typed/).

Numbers follow JSON: ``1`` and ``1.0`` are equal, and an integer is a number whose fractional
part is zero; booleans are never numbers. ``format`` is checked for ``date-time``, ``date``,
``time``, ``uuid``, ``email``, ``ipv4`` and ``ipv6``; other formats are annotations.

Pure: no I/O.
"""

from __future__ import annotations

import ipaddress
import math
import re
from typing import Any, Iterator

from msgspec import Struct

from ...session.runaway import MATCH_TIMEOUT_S, compile_bounded, search
from .schema import resolve

__all__ = ["Problem", "problems", "is_valid", "json_equal", "describe", "path_of"]

MAX_PROBLEMS = 8
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DATE = r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"
_TIME = r"([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)"
_FORMATS = {
    "date-time": re.compile(rf"^{_DATE}[Tt ]{_TIME}$"),
    "date": re.compile(rf"^{_DATE}$"),
    "time": re.compile(rf"^{_TIME}$"),
    "uuid": re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                       r"[0-9a-fA-F]{12}$"),
    "email": re.compile(r"^[^@\s]+@[^@\s]+$"),
}
_PATTERNS: dict[str, Any] = {}


class Problem(Struct, frozen=True):
    """One way a value misses its schema: where (``$``, ``$.a[0]``) and what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def path_of(parts: tuple[str | int, ...]) -> str:
    out = "$"
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif _IDENT.match(p):
            out += f".{p}"
        else:
            out += "[" + _quote(p) + "]"
    return out


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def describe(value: Any, limit: int = 60) -> str:
    """A value as the model wrote it, in JSON, clipped."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        text = _quote(value)
    elif isinstance(value, (int, float)):
        text = repr(value)
    elif isinstance(value, list):
        text = f"an array of {len(value)}"
    elif isinstance(value, dict):
        text = f"an object with {len(value)} field{'s' if len(value) != 1 else ''}"
    else:
        text = type(value).__name__
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _has_type(value: Any, t: str) -> bool:
    if t == "null":
        return value is None
    if t == "boolean":
        return isinstance(value, bool)
    if t == "string":
        return isinstance(value, str)
    if t == "array":
        return isinstance(value, list)
    if t == "object":
        return isinstance(value, dict)
    if isinstance(value, bool):
        return False
    if t == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if t == "number":
        return isinstance(value, (int, float))
    return False


def json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON means it: ``1 == 1.0``, but ``true`` is not ``1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` is found in ``text``, bounded (``session.runaway``): raises
    ``TimeoutError`` past ``MATCH_TIMEOUT_S``. The GIL is released while it runs, so a caller
    on the Trio thread validates a schema with patterns in a worker thread (``typed.judge``)."""
    compiled = _PATTERNS.get(pattern)
    if compiled is None:
        if len(_PATTERNS) > 256:
            _PATTERNS.clear()
        compiled = _PATTERNS[pattern] = compile_bounded(pattern)
    return search(compiled, text, MATCH_TIMEOUT_S)


def _format_ok(fmt: str, value: str) -> bool:
    if fmt in ("ipv4", "ipv6"):
        try:
            ip = ipaddress.ip_address(value)
        except ValueError:
            return False
        return ip.version == (4 if fmt == "ipv4" else 6)
    rx = _FORMATS.get(fmt)
    return rx is None or rx.match(value) is not None


def problems(value: Any, schema: Any, root: Any = None) -> list[Problem]:
    """Every problem (at most ``MAX_PROBLEMS``) of ``value`` against ``schema`` (whose
    ``$ref``s resolve in ``root``, default: ``schema``); empty when it is valid."""
    out: list[Problem] = []
    for p in _walk(value, schema, schema if root is None else root, ()):
        out.append(p)
        if len(out) >= MAX_PROBLEMS:
            break
    return out


def is_valid(value: Any, schema: Any, root: Any = None) -> bool:
    for _ in _walk(value, schema, schema if root is None else root, ()):
        return False
    return True


def _walk(v: Any, s: Any, root: Any, at: tuple[str | int, ...]) -> Iterator[Problem]:
    if s is True:
        return
    if s is False:
        yield Problem(path_of(at), "no value is allowed here")
        return
    if "$ref" in s:
        yield from _walk(v, resolve(s["$ref"], root), root, at)
    t = s.get("type")
    if t is not None:
        names = t if isinstance(t, list) else [t]
        if not any(_has_type(v, n) for n in names):
            want = " or ".join(names)
            yield Problem(path_of(at), f"expected {want}, got {_type_of(v)} {describe(v)}"
                          if v is not None and not isinstance(v, (list, dict))
                          else f"expected {want}, got {describe(v)}")
            return
    if "const" in s and not json_equal(v, s["const"]):
        yield Problem(path_of(at), f"must be {describe(s['const'])}, got {describe(v)}")
    if "enum" in s and not any(json_equal(v, e) for e in s["enum"]):
        allowed = ", ".join(describe(e, 30) for e in s["enum"][:12])
        more = ", …" if len(s["enum"]) > 12 else ""
        yield Problem(path_of(at), f"{describe(v)} is not one of {allowed}{more}")
    if isinstance(v, str):
        yield from _string(v, s, at)
    elif isinstance(v, (int, float)) and not isinstance(v, bool):
        yield from _number(v, s, at)
    elif isinstance(v, list):
        yield from _array(v, s, root, at)
    elif isinstance(v, dict):
        yield from _object(v, s, root, at)
    if "anyOf" in s:
        tries = [list(_walk(v, sub, root, at)) for sub in s["anyOf"]]
        if all(tries):
            best = min(tries, key=len)
            yield Problem(path_of(at), "matches none of the allowed shapes (anyOf); closest: "
                          + str(best[0]))
    if "oneOf" in s:
        tries = [list(_walk(v, sub, root, at)) for sub in s["oneOf"]]
        fits = sum(1 for t in tries if not t)
        if fits == 0:
            best = min(tries, key=len)
            yield Problem(path_of(at), "matches none of the allowed shapes (oneOf); closest: "
                          + str(best[0]))
        elif fits > 1:
            yield Problem(path_of(at), f"matches {fits} of the oneOf shapes; it must match "
                          "exactly one")


def _string(v: str, s: dict, at: tuple) -> Iterator[Problem]:
    n = len(v)
    if "minLength" in s and n < s["minLength"]:
        yield Problem(path_of(at), f"must have at least {s['minLength']} characters, has {n}")
    if "maxLength" in s and n > s["maxLength"]:
        yield Problem(path_of(at), f"must have at most {s['maxLength']} characters, has {n}")
    if "pattern" in s:
        try:
            found = _search(s["pattern"], v)
        except TimeoutError:  # fails closed: an answer that cannot be checked is not taken
            yield Problem(path_of(at), f"{describe(v)} could not be checked against the pattern "
                          f"{s['pattern']!r} in {MATCH_TIMEOUT_S:g} s: give a shorter value")
            return
        if not found:
            yield Problem(path_of(at), f"{describe(v)} does not match the pattern "
                          f"{s['pattern']!r}")
    if "format" in s and not _format_ok(s["format"], v):
        yield Problem(path_of(at), f"{describe(v)} is not a valid {s['format']}")


def _number(v: float, s: dict, at: tuple) -> Iterator[Problem]:
    where = path_of(at)
    if "minimum" in s and v < s["minimum"]:
        yield Problem(where, f"must be ≥ {s['minimum']}, got {v!r}")
    if "maximum" in s and v > s["maximum"]:
        yield Problem(where, f"must be ≤ {s['maximum']}, got {v!r}")
    if "exclusiveMinimum" in s and v <= s["exclusiveMinimum"]:
        yield Problem(where, f"must be > {s['exclusiveMinimum']}, got {v!r}")
    if "exclusiveMaximum" in s and v >= s["exclusiveMaximum"]:
        yield Problem(where, f"must be < {s['exclusiveMaximum']}, got {v!r}")
    if "multipleOf" in s and not _multiple(v, s["multipleOf"]):
        yield Problem(where, f"must be a multiple of {s['multipleOf']}, got {v!r}")


def _multiple(v: float, m: float) -> bool:
    if isinstance(m, float) or isinstance(v, float):
        try:
            q = v / m
        except OverflowError:
            return False
        if math.isinf(q):
            return False
        return int(q) == q
    return v % m == 0


def _array(v: list, s: dict, root: Any, at: tuple) -> Iterator[Problem]:
    where = path_of(at)
    if "minItems" in s and len(v) < s["minItems"]:
        yield Problem(where, f"must have at least {s['minItems']} items, has {len(v)}")
    if "maxItems" in s and len(v) > s["maxItems"]:
        yield Problem(where, f"must have at most {s['maxItems']} items, has {len(v)}")
    if s.get("uniqueItems"):
        for i in range(len(v)):
            if any(json_equal(v[i], v[j]) for j in range(i)):
                yield Problem(path_of((*at, i)), "repeats an earlier item (items must be unique)")
                break
    prefix = s.get("prefixItems") or []
    for i, item in enumerate(v[:len(prefix)]):
        yield from _walk(item, prefix[i], root, (*at, i))
    if "items" in s:
        rest = s["items"]
        for i in range(len(prefix), len(v)):
            if rest is False:
                yield Problem(where, f"must have at most {len(prefix)} items, has {len(v)}")
                break
            yield from _walk(v[i], rest, root, (*at, i))


def _object(v: dict, s: dict, root: Any, at: tuple) -> Iterator[Problem]:
    where = path_of(at)
    props = s.get("properties") or {}
    for name in s.get("required") or ():
        if name not in v:
            yield Problem(path_of((*at, name)), "is required but missing")
    if "minProperties" in s and len(v) < s["minProperties"]:
        yield Problem(where, f"must have at least {s['minProperties']} fields, has {len(v)}")
    if "maxProperties" in s and len(v) > s["maxProperties"]:
        yield Problem(where, f"must have at most {s['maxProperties']} fields, has {len(v)}")
    extra = s.get("additionalProperties", True)
    for name, item in v.items():
        if name in props:
            yield from _walk(item, props[name], root, (*at, name))
        elif extra is False:
            known = ", ".join(props) or "none"
            yield Problem(path_of((*at, name)), f"is not an allowed field (allowed: {known})")
        elif extra is not True:
            yield from _walk(item, extra, root, (*at, name))
