"""Whether some value fits a schema of the subset, judged when an output type is made.

An output type no answer can fit makes an agent spend its turns and end ``failed: output``;
one whose ``$ref``s loop without reaching a value makes the validator recurse until Python's
stack runs out. Both are the schema writer's mistake, so they are refused at load, in one line
naming the JSON pointer (``SchemaError``), as keywords outside the subset are (decision 0310):

* a ``$ref``/``anyOf``/``oneOf`` cycle that never descends into a value (``{"$ref": "#"}``,
  ``{"anyOf": [{"$ref": "#/$defs/a"}]}`` with ``a`` itself): validation would never end;
* bounds that contradict each other (``minLength`` above ``maxLength``, ``minimum`` above
  ``maximum``, …), a required property the schema forbids (``properties: {n: false}``, or
  ``additionalProperties: false`` without it), ``minItems`` beyond what ``items: false``
  allows, an ``enum``/``const`` no value of the ``type`` meets;
* a recursion with no way out: a schema every value of which needs a deeper value of itself
  (a required ``next`` of the same type) — found as the least fixed point of "some value fits";
* sizes no answer can hold: ``minItems``/``minProperties`` above ``MAX_ITEMS`` and ``minLength``
  above ``MAX_LENGTH`` (the scripted provider would otherwise try to build them).

What it does not prove: that a ``pattern`` (or a ``format``) can be met together with lengths.
A schema it passes may still have no value; the validator then says so to the model.

Pure: no I/O.
"""

from __future__ import annotations

import math
from typing import Any

from .schema import SchemaError, pointer, resolve

__all__ = ["check_satisfiable", "MAX_ITEMS", "MAX_LENGTH"]

MAX_ITEMS = 10_000  # minItems / minProperties above this: no answer holds that many
MAX_LENGTH = 1_000_000  # minLength above this (characters)


def check_satisfiable(schema: Any) -> None:
    """Refuse (``SchemaError``, naming the pointer) a schema no value fits, as far as the
    checks above can tell."""
    nodes: dict[tuple, Any] = {}
    _collect(schema, (), nodes)
    for at, s in nodes.items():
        _local(s, at)
    _cycles(schema, nodes)
    sat: dict[tuple, bool] = {at: False for at in nodes}
    changed = True
    while changed:  # least fixed point: a node fits some value once its parts do
        changed = False
        for at, s in nodes.items():
            if not sat[at] and _fits(s, at, schema, sat):
                sat[at] = changed = True
    if not sat[()]:
        bad = _deepest_unsat(schema, nodes, sat)
        raise SchemaError(f"{pointer(bad)}: no value fits this schema (its constraints "
                          "contradict each other, or it recurses with no way out)")


def _collect(s: Any, at: tuple, out: dict) -> None:
    out[at] = s
    if not isinstance(s, dict):
        return
    for key in ("properties", "$defs", "definitions"):
        for name, sub in (s.get(key) or {}).items():
            _collect(sub, (*at, key, name), out)
    for key in ("additionalProperties", "items"):
        if key in s:
            _collect(s[key], (*at, key), out)
    for key in ("prefixItems", "anyOf", "oneOf"):
        for i, sub in enumerate(s.get(key) or ()):
            _collect(sub, (*at, key, i), out)


def _at_of(ref: str) -> tuple:
    if ref == "#":
        return ()
    out: list = []
    for raw in ref[1:].split("/")[1:]:
        key = raw.replace("~1", "/").replace("~0", "~")
        out.append(int(key) if key.isdigit() and out and out[-1] in ("prefixItems", "anyOf",
                                                                       "oneOf") else key)
    return tuple(out)


def _local(s: Any, at: tuple) -> None:
    if not isinstance(s, dict):
        return
    where = pointer(at)
    for lo, hi in (("minLength", "maxLength"), ("minItems", "maxItems"),
                   ("minProperties", "maxProperties")):
        if lo in s and hi in s and s[lo] > s[hi]:
            raise SchemaError(f"{where}: {lo} {s[lo]} is above {hi} {s[hi]}: no value fits")
    for key, limit in (("minItems", MAX_ITEMS), ("minProperties", MAX_ITEMS),
                       ("minLength", MAX_LENGTH)):
        if s.get(key, 0) > limit:
            raise SchemaError(f"{where}/{key}: {s[key]} is more than an answer can hold "
                              f"(at most {limit})")
    lo = max((s[k] for k in ("minimum", "exclusiveMinimum") if k in s), default=None)
    hi = min((s[k] for k in ("maximum", "exclusiveMaximum") if k in s), default=None)
    if lo is not None and hi is not None:
        strict = (s.get("exclusiveMinimum") == lo) or (s.get("exclusiveMaximum") == hi)
        if lo > hi or (lo == hi and strict):
            raise SchemaError(f"{where}: the bounds leave no number (from {lo} to {hi})")
    step = s.get("multipleOf")
    for bound in (lo, hi):
        if step is not None and bound is not None:
            try:
                finite = math.isfinite(bound / step)
            except OverflowError:
                finite = False
            if not finite:
                raise SchemaError(f"{where}/multipleOf: {step} is too small for the bound "
                                  f"{bound} (their quotient is not a finite number)")
    types = _types(s)
    for key in ("const", "enum"):
        if key in s and types is not None:
            values = [s["const"]] if key == "const" else s["enum"]
            if not any(_typed_as(v, types) for v in values):
                raise SchemaError(f"{where}/{key}: no value of it is of type "
                                  f"{' or '.join(types)}")
    props = s.get("properties") or {}
    extra = s.get("additionalProperties", True)
    for name in s.get("required") or ():
        sub = props.get(name, extra)
        if sub is False:
            why = ("its schema is false" if name in props else
                   "additionalProperties is false and it is not among the properties")
            raise SchemaError(f"{pointer((*at, 'required'))}: {name!r} is required, but {why}")
    prefix = s.get("prefixItems") or []
    if s.get("items") is False and s.get("minItems", 0) > len(prefix):
        raise SchemaError(f"{where}/minItems: {s['minItems']} items, but items is false after "
                          f"{len(prefix)}")
    if "maxProperties" in s and len(s.get("required") or ()) > s["maxProperties"]:
        raise SchemaError(f"{where}/required: {len(s['required'])} required properties, but "
                          f"maxProperties is {s['maxProperties']}")


def _cycles(root: Any, nodes: dict) -> None:
    """Refuse a cycle of same-value edges: ``$ref`` to its target, ``anyOf``/``oneOf`` to
    each branch — the validator follows them without descending into the value."""
    state: dict[tuple, int] = {}

    def edges(at: tuple) -> list[tuple]:
        s = nodes.get(at)
        if not isinstance(s, dict):
            return []
        out = []
        if isinstance(s.get("$ref"), str):
            target = _at_of(s["$ref"])
            resolve(s["$ref"], root)  # names something (checked before)
            out.append(target if target in nodes else None)
        for key in ("anyOf", "oneOf"):
            out += [(*at, key, i) for i in range(len(s.get(key) or ()))]
        return [e for e in out if e is not None]

    def visit(at: tuple) -> None:
        state[at] = 1
        for nxt in edges(at):
            if state.get(nxt) == 1:
                raise SchemaError(f"{pointer(at)}: $ref {nodes[at].get('$ref', '')!r} loops "
                                  f"back to {pointer(nxt)} without reaching a value")
            if state.get(nxt) is None:
                visit(nxt)
        state[at] = 2

    for at in list(nodes):
        if at not in state:
            visit(at)


def _types(s: dict) -> list[str] | None:
    t = s.get("type")
    return None if t is None else (t if isinstance(t, list) else [t])


def _fits(s: Any, at: tuple, root: Any, sat: dict) -> bool:
    """Whether some value fits ``s``, given what is known to fit so far (``sat``)."""
    if s is True:
        return True
    if s is False:
        return False
    if isinstance(s.get("$ref"), str):
        target = _at_of(s["$ref"])
        if not sat.get(target, target not in sat):
            return False
    for key in ("anyOf", "oneOf"):
        if key in s and not any(sat[(*at, key, i)] for i in range(len(s[key]))):
            return False
    types = _types(s)
    kinds = set(types) if types else {"null"}  # no type: null fits what is left
    ok = False
    if kinds & {"null", "boolean", "string", "number", "integer"}:
        ok = True
    if not ok and "object" in kinds:
        props = s.get("properties") or {}
        extra = s.get("additionalProperties", True)
        ok = all(sat[(*at, "properties", n)] if n in props else
                 (extra is True or (extra is not False and sat[(*at, "additionalProperties")]))
                 for n in s.get("required") or ())
    if not ok and "array" in kinds:
        n = s.get("minItems", 0)
        prefix = s.get("prefixItems") or []
        ok = all(sat[(*at, "prefixItems", i)] for i in range(min(n, len(prefix))))
        if ok and n > len(prefix) and "items" in s:
            ok = sat[(*at, "items")]
    return ok


def _typed_as(v: Any, types: list[str]) -> bool:
    t = _json_type(v)
    return t in types or (t == "integer" and "number" in types)


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer()):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object"


def _deepest_unsat(root: Any, nodes: dict, sat: dict) -> tuple:
    """The deepest node that fits no value, on the way down from the root: where to look."""
    at = ()
    while True:
        below = [p for p in nodes if len(p) > len(at) and p[:len(at)] == at and not sat[p]
                 and len(p) <= len(at) + 2 and p[len(at)] in ("properties", "items", "prefixItems",
                                                              "additionalProperties", "anyOf",
                                                              "oneOf")]
        if not below:
            return at
        at = below[0]
