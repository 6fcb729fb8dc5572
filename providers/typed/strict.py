"""OpenAI strict mode: the schema sent as ``response_format.json_schema.schema`` with
``"strict": true``, and the way back from what strict mode lets a model write.

Strict mode accepts a subset of JSON Schema, under rules of its own: the root is an object;
every object lists every property in ``required`` and says ``additionalProperties: false``;
only some keywords and formats are understood. ``strict_schema`` rewrites an output type's
schema into that shape:

* an optional property becomes required and nullable (``null`` then means "absent":
  ``loosen`` removes it again before the answer is validated);
* an object without ``additionalProperties`` gets ``false`` (an answer that fits the strict
  schema still fits the original);
* ``oneOf`` is sent as ``anyOf`` and a tuple's ``prefixItems`` as ``items`` over the union of
  its places; ``minLength``, ``maxLength``, ``minProperties``, ``maxProperties``,
  ``uniqueItems``, unknown formats and every annotation but ``description`` are left out.
  Each of these only loosens what is sent: the answer is still validated against the whole
  original schema, and a model that misses what was left out is told so and tries again;
* what strict mode cannot express at all — an object with free keys (a map), a value of any
  type, a root that is not an object, more nesting or properties than strict mode allows — is
  refused with ``StrictError``, naming where and what, before anything runs (decision 0281).

Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from .schema import SchemaError, pointer, resolve, root_object
from .validate import is_valid

__all__ = ["StrictError", "strict_schema", "loosen", "STRICT_FORMATS", "MAX_DEPTH",
           "MAX_PROPERTIES", "MAX_ENUM"]

STRICT_FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname",
                            "ipv4", "ipv6", "uuid"})
MAX_DEPTH = 10  # object nesting strict mode allows
MAX_PROPERTIES = 5000
MAX_ENUM = 1000  # enum values across the schema
_KEPT = ("type", "enum", "const", "description", "pattern", "minimum", "maximum",
         "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems")


class StrictError(SchemaError):
    """A schema OpenAI's strict mode cannot express: the message names where and what."""


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The strict-mode rewrite of an output type's schema (see the module's docstring)."""
    try:
        root = root_object(schema)
    except SchemaError as e:
        raise StrictError(f"strict mode: {e}") from None
    defs: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        defs.update(schema.get(key) or {})
    counts = {"properties": 0, "enum": 0}
    out = _convert(root, schema, ("",), 1, counts)
    if defs:
        converted = {name: _convert(sub, schema, ("$defs", name), 1, counts)
                     for name, sub in defs.items()}
        used = _reached(out, converted)
        if used:
            out["$defs"] = {name: converted[name] for name in converted if name in used}
    if counts["properties"] > MAX_PROPERTIES:
        raise StrictError(f"strict mode allows at most {MAX_PROPERTIES} properties; this "
                          f"schema has {counts['properties']}")
    if counts["enum"] > MAX_ENUM:
        raise StrictError(f"strict mode allows at most {MAX_ENUM} enum values; this schema "
                          f"has {counts['enum']}")
    return out


def _where(at: tuple) -> str:
    return pointer(at[1:]) if at and at[0] == "" else pointer(at)


def _convert(s: Any, root: Any, at: tuple, depth: int, counts: dict[str, int]) -> dict:
    where = _where(at)
    if s is True or (isinstance(s, dict) and not _constrains(s)):
        raise StrictError(f"strict mode cannot express a value of any type at {where}: give "
                          "it a type")
    if s is False:
        raise StrictError(f"strict mode cannot express a schema that allows nothing at {where}")
    if depth > MAX_DEPTH:
        raise StrictError(f"strict mode allows {MAX_DEPTH} levels of nested objects; {where} "
                          "is deeper")
    out: dict[str, Any] = {}
    if "$ref" in s:
        ref = s["$ref"].replace("#/definitions/", "#/$defs/")
        if ref == "#" or ref.startswith("#/$defs/") and ref.count("/") == 2:
            out["$ref"] = ref
        else:
            raise StrictError(f"strict mode: $ref {s['$ref']!r} at {where} must name the root "
                              "or one of $defs")
        if len([k for k in s if k not in ("$ref", "description", "title", "default")]):
            raise StrictError(f"strict mode cannot express a $ref with other keywords beside "
                              f"it at {where}")
        return out
    for key in _KEPT:
        if key in s:
            out[key] = s[key]
    if "enum" in s:
        counts["enum"] += len(s["enum"])
    if s.get("format") in STRICT_FORMATS:
        out["format"] = s["format"]
    for key in ("anyOf", "oneOf"):
        if key in s:
            out["anyOf"] = out.get("anyOf", []) + [
                _convert(sub, root, (*at, key, i), depth, counts)
                for i, sub in enumerate(s[key])]
    t = s.get("type")
    names = t if isinstance(t, list) else [t] if t is not None else []
    is_object = "object" in names or ("properties" in s and t is None)
    if is_object:
        props = s.get("properties") or {}
        extra = s.get("additionalProperties")
        if extra not in (None, False) or (not props and extra is None):
            raise StrictError(f"strict mode cannot express an object with free keys (a map) "
                              f"at {where}: name its properties, or set "
                              "additionalProperties to false")
        required = set(s.get("required") or ())
        counts["properties"] += len(props)
        conv: dict[str, Any] = {}
        for name, sub in props.items():
            c = _convert(sub, root, (*at, "properties", name), depth + 1, counts)
            conv[name] = c if name in required or _accepts_null(sub, root) else _nullable(c)
        if "object" not in names:
            out["type"] = "object"
        out["properties"] = conv
        out["required"] = list(props)
        out["additionalProperties"] = False
    if "array" in names or ("items" in s or "prefixItems" in s) and t is None:
        prefix = s.get("prefixItems") or []
        items = s.get("items", True if not prefix else False)
        places = [_convert(sub, root, (*at, "prefixItems", i), depth, counts)
                  for i, sub in enumerate(prefix)]
        if items is not False:
            places.append(_convert(items, root, (*at, "items"), depth, counts))
        unique = []
        for p in places:
            if p not in unique:
                unique.append(p)
        out["items"] = unique[0] if len(unique) == 1 else {"anyOf": unique}
        if prefix and items is False:
            out.setdefault("maxItems", len(prefix))
    return out


def _reached(start: dict, defs: dict[str, Any]) -> set[str]:
    """The names of ``defs`` a ``$ref`` reaches from ``start``, through one another."""
    seen: set[str] = set()
    todo: list[Any] = [start]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                name = ref[len("#/$defs/"):]
                if name not in seen and name in defs:
                    seen.add(name)
                    todo.append(defs[name])
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    return seen


def _constrains(s: dict) -> bool:
    return any(k in s for k in ("type", "enum", "const", "$ref", "anyOf", "oneOf",
                                "properties", "items", "prefixItems"))


def _accepts_null(s: Any, root: Any) -> bool:
    """Whether the original schema already takes ``null`` (then it stays as it is)."""
    try:
        return is_valid(None, s, root)
    except SchemaError:
        return False


def _nullable(c: dict) -> dict:
    """``c`` also taking ``null``: in its own ``type`` (and ``enum``) where it can, else as an
    ``anyOf`` branch."""
    if "$ref" in c or "const" in c:
        return {"anyOf": [c, {"type": "null"}]}
    if "anyOf" in c and "type" not in c:
        return {**c, "anyOf": [*c["anyOf"], {"type": "null"}]}
    out = dict(c)
    t = c.get("type")
    if t is None:
        return {"anyOf": [c, {"type": "null"}]}
    out["type"] = [*(t if isinstance(t, list) else [t]), "null"]
    if "enum" in c and None not in c["enum"]:
        out["enum"] = [*c["enum"], None]
    return out


def loosen(value: Any, schema: Any, root: Any = None) -> Any:
    """The value with every ``null`` that strict mode made stand for an absent optional
    property removed (where the original property does not itself take ``null``), so it can
    be validated against the original schema. Anything else is returned as it was."""
    return _loosen(value, schema, schema if root is None else root, 0)


def _loosen(v: Any, s: Any, root: Any, depth: int) -> Any:
    if not isinstance(s, dict) or depth > 64 or not isinstance(v, (dict, list)):
        return v
    if "$ref" in s:
        try:
            v = _loosen(v, resolve(s["$ref"], root), root, depth + 1)
        except SchemaError:
            return v
    for key in ("anyOf", "oneOf"):
        if key in s:
            for sub in s[key]:
                cand = _loosen(v, sub, root, depth + 1)
                if is_valid(cand, sub, root):
                    v = cand
                    break
    if isinstance(v, dict):
        props = s.get("properties") or {}
        required = set(s.get("required") or ())
        out = {}
        for name, item in v.items():
            sub = props.get(name)
            if sub is None:
                extra = s.get("additionalProperties")
                out[name] = _loosen(item, extra, root, depth + 1) if isinstance(extra, dict) \
                    else item
                continue
            if item is None and name not in required and not _accepts_null(sub, root):
                continue
            out[name] = _loosen(item, sub, root, depth + 1)
        return out
    prefix = s.get("prefixItems") or []
    rest = s.get("items")
    return [_loosen(item, prefix[i] if i < len(prefix) else rest, root, depth + 1)
            for i, item in enumerate(v)]
