"""The JSON Schema subset an output type may use, and the check that a schema is in it.

mnemon validates every typed answer itself (``validate``), so a schema is accepted only when
every keyword in it is one the validator enforces or an annotation it may ignore; anything
else — ``allOf``, ``not``, ``if``/``then``, ``patternProperties``, a remote ``$ref`` — is
refused up front, naming where it is, rather than silently not checked (decision 0280).

The subset (draft 2020-12 meanings): ``type`` (one or a list), ``enum``, ``const``;
``properties``, ``required``, ``additionalProperties`` (a boolean or a schema),
``minProperties``, ``maxProperties``; ``items``, ``prefixItems``, ``minItems``, ``maxItems``,
``uniqueItems``; ``minLength``, ``maxLength``, ``pattern`` (the ``regex`` module's dialect, a
search, as JSON Schema's ``pattern`` is unanchored), ``format``; ``minimum``, ``maximum``,
``exclusiveMinimum``, ``exclusiveMaximum`` (numbers), ``multipleOf``; ``anyOf``, ``oneOf``;
``$ref`` to ``#`` or ``#/$defs/NAME`` (or ``#/definitions/NAME``), and ``$defs``. Annotations:
``title``, ``description``, ``default``, ``examples``, ``$schema``, ``$id``, ``$comment``,
``deprecated``, ``readOnly``, ``writeOnly``, ``contentEncoding``, ``contentMediaType`` and
OpenAPI's ``discriminator`` (msgspec writes it for tagged unions).

Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from ...session.runaway import RunawayPattern, compile_bounded
from ...errors import ConfigError

__all__ = ["SchemaError", "TYPES", "KEYWORDS", "ANNOTATIONS", "check_schema", "resolve",
           "root_object", "pointer"]

TYPES = ("string", "number", "integer", "boolean", "null", "object", "array")
ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$schema", "$id",
                         "$comment", "deprecated", "readOnly", "writeOnly", "contentEncoding",
                         "contentMediaType", "discriminator"})
KEYWORDS = frozenset({"type", "enum", "const", "properties", "required", "additionalProperties",
                      "minProperties", "maxProperties", "items", "prefixItems", "minItems",
                      "maxItems", "uniqueItems", "minLength", "maxLength", "pattern", "format",
                      "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                      "multipleOf", "anyOf", "oneOf", "$ref", "$defs", "definitions"})
_COUNTS = ("minProperties", "maxProperties", "minItems", "maxItems", "minLength", "maxLength")
_NUMBERS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


class SchemaError(ConfigError, ValueError):
    """A schema outside the subset, or not a JSON Schema at all: the message names where
    (a JSON pointer into the schema, ``#/properties/capital``) and why."""


def pointer(parts: tuple[str | int, ...]) -> str:
    """``#/properties/a/items`` for the path ``("properties", "a", "items")``."""
    return "#" + "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def resolve(ref: str, root: Any) -> Any:
    """The schema a local ``$ref`` names: ``#`` (the root), ``#/$defs/NAME`` or
    ``#/definitions/NAME`` (any local JSON pointer, in fact). Raises ``SchemaError``."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        raise SchemaError(f"$ref {ref!r} is not a local reference (only '#…' is supported)")
    node = root
    for raw in ref[1:].split("/")[1:] if ref != "#" else ():
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            raise SchemaError(f"$ref {ref!r} names nothing in the schema")
    return node


def check_schema(schema: Any) -> None:
    """Refuse (``SchemaError``) a schema outside the subset: an unknown keyword, a keyword's
    value of the wrong shape, a pattern that does not compile, a ``$ref`` that names nothing."""
    if not isinstance(schema, (dict, bool)):
        raise SchemaError(f"a schema is a JSON object or a boolean, not {type(schema).__name__}")
    _check(schema, schema, ())


def _check(s: Any, root: Any, at: tuple[str | int, ...]) -> None:
    where = pointer(at)
    if isinstance(s, bool):
        return
    if not isinstance(s, dict):
        raise SchemaError(f"{where}: a schema is a JSON object or a boolean, not "
                          f"{type(s).__name__}")
    for key in s:
        if not isinstance(key, str) or (key not in KEYWORDS and key not in ANNOTATIONS):
            raise SchemaError(f"{where}: keyword {key!r} is not supported (an output type uses "
                              "the subset listed in docs/orchestrator.md, 'Typed answers')")
    t = s.get("type")
    if t is not None:
        names = t if isinstance(t, list) else [t]
        if not names or any(n not in TYPES for n in names) or len(set(names)) != len(names):
            raise SchemaError(f"{where}/type: {t!r} is not a type (one of {', '.join(TYPES)}, "
                              "or a list of them)")
    if "enum" in s and (not isinstance(s["enum"], list) or not s["enum"]):
        raise SchemaError(f"{where}/enum: must be a non-empty list")
    if "required" in s:
        req = s["required"]
        if not isinstance(req, list) or not all(isinstance(r, str) for r in req) \
                or len(set(req)) != len(req):
            raise SchemaError(f"{where}/required: must be a list of distinct property names")
    for key in _COUNTS:
        if key in s and (not isinstance(s[key], int) or isinstance(s[key], bool) or s[key] < 0):
            raise SchemaError(f"{where}/{key}: must be a non-negative integer")
    for key in _NUMBERS:
        if key in s and not _is_number(s[key]):
            raise SchemaError(f"{where}/{key}: must be a number")
    if "multipleOf" in s and (not _is_number(s["multipleOf"]) or s["multipleOf"] <= 0):
        raise SchemaError(f"{where}/multipleOf: must be a number greater than 0")
    if "uniqueItems" in s and not isinstance(s["uniqueItems"], bool):
        raise SchemaError(f"{where}/uniqueItems: must be true or false")
    if "pattern" in s:
        if not isinstance(s["pattern"], str):
            raise SchemaError(f"{where}/pattern: must be a string")
        try:
            compile_bounded(s["pattern"])  # refused when it can run away (decision 0309)
        except RunawayPattern as e:
            raise SchemaError(f"{where}/pattern: {e}") from None
    if "format" in s and not isinstance(s["format"], str):
        raise SchemaError(f"{where}/format: must be a string")
    if "properties" in s:
        props = s["properties"]
        if not isinstance(props, dict):
            raise SchemaError(f"{where}/properties: must be an object of schemas")
        for name, sub in props.items():
            _check(sub, root, (*at, "properties", name))
    for key in ("$defs", "definitions"):
        if key in s:
            if not isinstance(s[key], dict):
                raise SchemaError(f"{where}/{key}: must be an object of schemas")
            for name, sub in s[key].items():
                _check(sub, root, (*at, key, name))
    for key in ("additionalProperties", "items"):
        if key in s:
            _check(s[key], root, (*at, key))
    for key in ("prefixItems", "anyOf", "oneOf"):
        if key in s:
            if not isinstance(s[key], list) or not s[key]:
                raise SchemaError(f"{where}/{key}: must be a non-empty list of schemas")
            for i, sub in enumerate(s[key]):
                _check(sub, root, (*at, key, i))
    if "$ref" in s:
        try:
            target = resolve(s["$ref"], root)
        except SchemaError as e:
            raise SchemaError(f"{where}: {e}") from None
        if not isinstance(target, (dict, bool)):
            raise SchemaError(f"{where}: $ref {s['$ref']!r} does not name a schema")


def root_object(schema: Any) -> dict[str, Any]:
    """The root schema with a root ``$ref`` followed (msgspec writes ``{"$ref": …, "$defs":
    …}``); refused unless it is an object schema — an answer is one JSON object, so that
    tool inputs and strict mode (both need an object at the root) can carry it, and its
    top-level fields are the results' columns."""
    node, seen = schema, set()
    while isinstance(node, dict) and "$ref" in node and "type" not in node:
        if node["$ref"] in seen:
            break
        seen.add(node["$ref"])
        node = resolve(node["$ref"], schema)
    t = node.get("type") if isinstance(node, dict) else None
    if t != "object" and t != ["object"]:
        raise SchemaError("the output type's root must be an object schema (\"type\": "
                          f"\"object\"), not {_shape(node)}: an answer is one JSON object")
    return node


def _shape(node: Any) -> str:
    if isinstance(node, bool):
        return f"the boolean schema {str(node).lower()}"
    t = node.get("type")
    if t is not None:
        return f"type {t!r}"
    for key in ("anyOf", "oneOf", "enum", "const"):
        if key in node:
            return f"an {key}"
    return "a schema with no type"
