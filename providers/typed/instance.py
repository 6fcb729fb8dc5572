"""Build a value that fits a schema of the subset: what the scripted provider answers to a
typed request, so that typed runs work offline (the demo, the examples, the tests).

The value is deterministic (the same schema gives the same value) and small: required
properties only (optional ones where ``minProperties`` asks for more), the fewest items an
array allows, the first ``enum`` value, numbers as near 0 as the bounds allow, strings of the
right length and format — and, for a ``pattern``, a string built from the pattern itself. The
result is checked with ``validate``; a schema no value can fit (or none this builder finds)
raises ``NoInstance``, naming where.

Pure: no I/O.
"""

from __future__ import annotations

import contextvars
import math
from typing import Any

# the regular-expression parser of the standard library (``re._parser``, Python 3.11+, which
# the project requires): a pattern's parse tree spells the shortest string that fits it
import re._constants as _src
import re._parser as _sre

from .schema import SchemaError, resolve
from .validate import json_equal, problems
from ...errors import UserError

__all__ = ["NoInstance", "build_instance"]

_DEEP = 6  # below this depth, a recursive schema takes its smallest branch
_FORMAT_VALUES = {"date-time": "2000-01-01T00:00:00Z", "date": "2000-01-01", "time": "00:00:00Z",
                  "uuid": "00000000-0000-4000-8000-000000000000", "email": "scripted@example.com",
                  "ipv4": "192.0.2.1", "ipv6": "2001:db8::1", "hostname": "example.com",
                  "uri": "https://example.com/", "duration": "P1D"}


MAX_PARTS = 200_000  # values built (items, properties, scalars) for one instance
MAX_CHARS = 4_000_000  # characters of strings built for one instance
_SPENT: contextvars.ContextVar[list[int]] = contextvars.ContextVar("spent")


class NoInstance(UserError, ValueError):
    """No value was found that fits the schema (the message names where)."""


def build_instance(schema: Any) -> Any:
    """A value that fits ``schema``, checked; raises ``NoInstance``. The work is bounded
    (``MAX_PARTS`` values, ``MAX_CHARS`` characters): a schema asking for more is refused
    here, and for its own sizes at load (``satisfy``)."""
    token = _SPENT.set([0, 0])
    try:
        value = _build(schema, schema, 0, 0, ())
    finally:
        _SPENT.reset(token)
    found = problems(value, schema)
    if found:
        raise NoInstance(f"no value found that fits the schema: {found[0]}")
    return value


def _fail(at: tuple, why: str) -> NoInstance:
    where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in at)
    return NoInstance(f"{where}: {why}")


def _spend(at: tuple, parts: int = 1, chars: int = 0) -> None:
    spent = _SPENT.get(None)
    if spent is None:
        return
    spent[0] += parts
    spent[1] += chars
    if spent[0] > MAX_PARTS or spent[1] > MAX_CHARS:
        raise _fail(at, f"the value would be larger than the builder makes ({MAX_PARTS} "
                        f"values, {MAX_CHARS} characters)")


def _build(s: Any, root: Any, depth: int, variant: int, at: tuple) -> Any:
    _spend(at)
    if s is True:
        return None
    if s is False:
        raise _fail(at, "the schema allows no value here")
    if depth > 64:
        raise _fail(at, "the schema recurses without a way out")
    if "$ref" in s:
        try:
            target = resolve(s["$ref"], root)
        except SchemaError as e:
            raise _fail(at, str(e)) from None
        rest = {k: v for k, v in s.items() if k != "$ref"}
        if not any(k in rest for k in ("type", "enum", "const", "anyOf", "oneOf")):
            return _build(target, root, depth + 1, variant, at)
        # a $ref beside other keywords: both apply; build from the target, check the rest
        value = _build(target, root, depth + 1, variant, at)
        if not problems(value, rest, root):
            return value
    if "const" in s:
        return s["const"]
    if "enum" in s:
        fits = [e for e in s["enum"] if not problems(e, s, root)]
        if not fits:
            raise _fail(at, "no enum value fits the rest of the schema")
        return fits[variant % len(fits)]
    for key in ("anyOf", "oneOf"):
        if key in s:
            branches = list(s[key])
            if depth >= _DEEP:  # prefer a branch that does not recurse
                branches.sort(key=lambda b: isinstance(b, dict) and "$ref" in b)
            last: NoInstance | None = None
            for b in branches:
                merged = _merge(s, key, b)
                try:
                    value = _build(merged, root, depth + 1, variant, at)
                except NoInstance as e:
                    last = e
                    continue
                if not problems(value, s, root):
                    return value
            raise last or _fail(at, f"no {key} branch could be built")
    t = s.get("type")
    names = t if isinstance(t, list) else [t] if t is not None else [_implied(s)]
    if depth >= _DEEP and "null" in names:
        names = ["null"]
    last = None
    for name in names:
        try:
            value = _typed(name, s, root, depth, variant, at)
        except NoInstance as e:
            last = e
            continue
        if not problems(value, s, root):
            return value
    raise last or _fail(at, f"no value of type {t!r} fits")


def _merge(s: dict, key: str, branch: Any) -> Any:
    """The branch with the keywords around the ``anyOf``/``oneOf`` applied too."""
    if not isinstance(branch, dict):
        return branch
    outer = {k: v for k, v in s.items() if k not in (key, "anyOf", "oneOf")}
    return {**outer, **branch} if outer else branch


def _implied(s: dict) -> str:
    if "properties" in s or "required" in s or "additionalProperties" in s:
        return "object"
    if "items" in s or "prefixItems" in s:
        return "array"
    if any(k in s for k in ("minLength", "maxLength", "pattern", "format")):
        return "string"
    if any(k in s for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                            "multipleOf")):
        return "number"
    return "null"


def _typed(name: str, s: dict, root: Any, depth: int, variant: int, at: tuple) -> Any:
    if name == "null":
        return None
    if name == "boolean":
        return variant % 2 == 1
    if name == "string":
        return _string(s, variant, at)
    if name in ("integer", "number"):
        return _number(s, name == "integer", variant, at)
    if name == "array":
        return _array(s, root, depth, variant, at)
    return _object(s, root, depth, variant, at)


def _string(s: dict, variant: int, at: tuple) -> str:
    lo, hi = s.get("minLength", 0), s.get("maxLength")
    if hi is not None and hi < lo:
        raise _fail(at, "maxLength is below minLength")
    if "pattern" in s:
        base = _from_pattern(s["pattern"], variant)
        if base is None:
            raise _fail(at, f"could not build a string for the pattern {s['pattern']!r}")
        return base
    fmt = s.get("format")
    if fmt in _FORMAT_VALUES:
        return _FORMAT_VALUES[fmt]
    text = "scripted" + (str(variant) if variant else "")
    _spend(at, 0, max(lo, len(text)))
    if len(text) < lo:
        text += "x" * (lo - len(text))
    if hi is not None and len(text) > hi:
        text = text[:hi] if variant == 0 or hi < 1 else (text[:hi - 1] + chr(97 + variant % 26))
    return text


def _number(s: dict, integer: bool, variant: int, at: tuple) -> float | int:
    lo, lo_x = s.get("minimum"), False
    if "exclusiveMinimum" in s and (lo is None or s["exclusiveMinimum"] >= lo):
        lo, lo_x = s["exclusiveMinimum"], True
    hi, hi_x = s.get("maximum"), False
    if "exclusiveMaximum" in s and (hi is None or s["exclusiveMaximum"] <= hi):
        hi, hi_x = s["exclusiveMaximum"], True
    step = s.get("multipleOf")
    if integer or step is not None:
        unit = step if step is not None else 1
        if integer and step is not None and not float(step).is_integer():
            unit = step  # multiples of a fraction that are integers: found below by search
        try:
            start = 0 if lo is None else math.ceil(lo / unit)
            if lo is not None and lo_x and start * unit <= lo:
                start += 1
            if lo is None and hi is not None:
                start = min(0, math.floor(hi / unit))
        except (OverflowError, ValueError):  # the quotient is not a finite number
            raise _fail(at, f"multipleOf {unit} is too small for the bounds") from None
        for k in range(start + variant, start + variant + 10_000):
            v = k * unit
            if integer:
                if not float(v).is_integer():
                    continue
                v = int(round(v))
            if hi is not None and (v > hi or (hi_x and v >= hi)):
                break
            if lo is not None and (v < lo or (lo_x and v <= lo)):
                continue
            return v
        raise _fail(at, "no number fits the bounds")
    if lo is None and hi is None:
        return float(variant)
    if lo is not None and hi is not None:
        if lo > hi or (lo == hi and (lo_x or hi_x)):
            raise _fail(at, "the bounds leave no number")
        if not lo_x and variant == 0:
            return lo
        return lo + (hi - lo) / (2 + variant)
    if lo is not None:
        return lo + (1 + variant if lo_x else variant)
    return hi - (1 + variant if hi_x else variant)


def _array(s: dict, root: Any, depth: int, variant: int, at: tuple) -> list:
    prefix = s.get("prefixItems") or []
    items = s.get("items", True)
    n = s.get("minItems", 0)
    if s.get("maxItems") is not None and s["maxItems"] < n:
        raise _fail(at, "maxItems is below minItems")
    out = [_build(p, root, depth + 1, variant, (*at, i)) for i, p in enumerate(prefix)]
    unique = s.get("uniqueItems", False)
    k = 0
    if n > len(prefix) and items is False:
        raise _fail(at, f"minItems {n} but only {len(prefix)} places")
    while len(out) < n:
        if items is False:
            raise _fail(at, f"minItems {n} but only {len(prefix)} places")
        value = _build(items, root, depth + 1, variant + k, (*at, len(out)))
        k += 1
        if unique and any(json_equal(value, o) for o in out):
            if k > n + 64:
                raise _fail(at, "could not find enough distinct items")
            continue
        out.append(value)
    return out


def _object(s: dict, root: Any, depth: int, variant: int, at: tuple) -> dict:
    props = s.get("properties") or {}
    required = list(s.get("required") or ())
    extra = s.get("additionalProperties", True)
    out: dict[str, Any] = {}
    for name in required:
        sub = props.get(name, extra if name not in props else True)
        if sub is False:
            raise _fail((*at, name), "is required but not allowed")
        out[name] = _build(sub, root, depth + 1, variant, (*at, name))
    need = s.get("minProperties", 0)
    for name, sub in props.items():
        if len(out) >= need:
            break
        if name not in out:
            try:
                out[name] = _build(sub, root, depth + 1, variant, (*at, name))
            except NoInstance:
                continue
    k = 0
    while len(out) < need:
        if extra is False:
            raise _fail(at, f"minProperties {need} cannot be met")
        name = f"field{k}"
        k += 1
        if name not in out and name not in props:
            out[name] = _build(extra, root, depth + 1, variant, (*at, name))
    return out


# --------------------------------------------------------------------------- patterns


def _from_pattern(pattern: str, variant: int) -> str | None:
    """The shortest string the pattern's parse tree spells (first branches, fewest repeats),
    for the common patterns of schemas; None when it has constructs this does not follow."""
    try:
        tree = _sre.parse(pattern)
        text = _spell(tree, {})
    except Exception:  # a construct the walk does not follow (or the stdlib's parser refuses)
        return None
    return text


def _spell(tree: Any, groups: dict[int, str]) -> str:
    c = _src
    out = []
    for op, arg in tree:
        if op is c.LITERAL:
            out.append(chr(arg))
        elif op is c.NOT_LITERAL:
            out.append("a" if arg != ord("a") else "b")
        elif op is c.ANY:
            out.append("a")
        elif op is c.IN:
            out.append(_in(arg))
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None)):
            lo, _hi, sub = arg
            out.append(_spell(sub, groups) * lo)
        elif op is c.SUBPATTERN:
            gid, _add, _del, sub = arg
            text = _spell(sub, groups)
            if gid is not None:
                groups[gid] = text
            out.append(text)
        elif op is c.BRANCH:
            out.append(_spell(arg[1][0], groups))
        elif op is c.AT:
            continue
        elif op is c.GROUPREF:
            out.append(groups.get(arg, ""))
        elif op is getattr(c, "ATOMIC_GROUP", None):
            out.append(_spell(arg, groups))
        else:
            raise ValueError(f"not followed: {op}")
    return "".join(out)


def _in(items: list) -> str:
    c = _src
    negate = any(op is c.NEGATE for op, _ in items)
    if negate:
        banned = set()
        for op, arg in items:
            if op is c.LITERAL:
                banned.add(chr(arg))
            elif op is c.RANGE:
                banned.update(chr(x) for x in range(arg[0], min(arg[1], 0x10FFFF) + 1)
                              if x < 0x3000)
        for ch in "aA0 _-xyz":
            if ch not in banned:
                return ch
        raise ValueError("negated class")
    for op, arg in items:
        if op is c.LITERAL:
            return chr(arg)
        if op is c.RANGE:
            return chr(arg[0])
        if op is c.CATEGORY:
            return {c.CATEGORY_DIGIT: "0", c.CATEGORY_WORD: "a", c.CATEGORY_SPACE: " ",
                    c.CATEGORY_NOT_DIGIT: "a", c.CATEGORY_NOT_WORD: " ",
                    c.CATEGORY_NOT_SPACE: "a"}.get(arg, "a")
    raise ValueError("empty class")
