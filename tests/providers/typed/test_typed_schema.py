"""The output-type subset: the check, the validator (against the reference ``jsonschema``), the
scripted provider's instances, OpenAI's strict rewrite and the way back (``loosen``)."""

from __future__ import annotations

import jsonschema
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mnemon.providers.typed import (NoInstance, OutputType, SchemaError, StrictError,
                                    build_instance, check_schema, is_valid, loosen, problems,
                                    strict_schema)

from .schemas import OUTPUT_SCHEMAS, VALUES, strict_safe

REFERENCE = jsonschema.Draft202012Validator
SLOW = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def _no_format(schema):
    """The reference checks ``format`` only when asked; we check some: compare without them."""
    if isinstance(schema, dict):
        return {k: _no_format(v) for k, v in schema.items() if k != "format"}
    if isinstance(schema, list):
        return [_no_format(v) for v in schema]
    return schema


def _instance(schema):
    try:
        return build_instance(schema)
    except NoInstance:
        return None


@SLOW
@given(OUTPUT_SCHEMAS)
def test_a_generated_schema_is_in_the_subset_and_its_instance_validates(schema):
    check_schema(schema)
    REFERENCE.check_schema(schema)
    try:
        value = build_instance(schema)
    except NoInstance as e:  # a schema no value fits: the reference agrees nothing we built fits
        assert "$" in str(e)
        return
    assert problems(value, schema) == []
    assert REFERENCE(schema, format_checker=REFERENCE.FORMAT_CHECKER).is_valid(value), value
    assert msgspec.json.decode(msgspec.json.encode(value)) == value


@SLOW
@given(OUTPUT_SCHEMAS, VALUES)
def test_the_validator_agrees_with_the_reference(schema, value):
    plain = _no_format(schema)
    assert is_valid(value, plain) == REFERENCE(plain).is_valid(value), (plain, value)


@SLOW
@given(OUTPUT_SCHEMAS, st.data())
def test_the_validator_agrees_on_near_misses(schema, data):
    value = _instance(schema)
    if not isinstance(value, dict) or not value:
        return
    key = data.draw(st.sampled_from(sorted(value)))
    broken = dict(value)
    broken[key] = data.draw(VALUES)
    plain = _no_format(schema)
    assert is_valid(broken, plain) == REFERENCE(plain).is_valid(broken), (plain, broken)
    if not is_valid(broken, plain):
        assert all(p.path.startswith("$") for p in problems(broken, plain))


@SLOW
@given(OUTPUT_SCHEMAS)
def test_strict_mode_rewrites_what_it_can_and_loosen_returns_to_the_original(schema):
    if not strict_safe(schema):
        with pytest.raises(StrictError):
            strict_schema(schema)
        return
    strict = strict_schema(schema)
    REFERENCE.check_schema(strict)
    _every_object_is_closed(strict)
    value = _instance(strict)
    if value is None:
        return
    assert REFERENCE(strict).is_valid(value)
    back = loosen(value, schema)
    # once the stand-in nulls are gone, the answer fits the original schema but for what
    # strict mode leaves out (lengths, uniqueness: the validator still checks those, and the
    # model is sent back to fix them)
    assert is_valid(back, _dropped(schema)), (schema, strict, value, back)


def _every_object_is_closed(s):
    if isinstance(s, dict):
        if s.get("type") == "object" or s.get("type") == ["object", "null"]:
            assert s["additionalProperties"] is False
            assert sorted(s["required"]) == sorted(s["properties"])
        for v in s.values():
            _every_object_is_closed(v)
    elif isinstance(s, list):
        for v in s:
            _every_object_is_closed(v)


def _dropped(schema):
    if isinstance(schema, dict):
        return {k: _dropped(v) for k, v in schema.items()
                if k not in ("minLength", "maxLength", "uniqueItems")}
    if isinstance(schema, list):
        return [_dropped(v) for v in schema]
    return schema


# ---------------------------------------------------------------- by example

NESTED = {
    "title": "Report",
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1},
        "kind": {"enum": ["capital", "port"]},
        "where": {"type": "object", "properties": {"lat": {"type": "number"},
                                                   "lon": {"type": "number"}},
                  "required": ["lat", "lon"]},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "note": {"type": "string"},
    },
    "required": ["city", "kind", "where"],
}


def test_the_strict_rewrite_of_a_nested_schema():
    strict = strict_schema(NESTED)
    assert strict == {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "kind": {"enum": ["capital", "port"]},
            "where": {"type": "object", "properties": {"lat": {"type": "number"},
                                                       "lon": {"type": "number"}},
                      "required": ["lat", "lon"], "additionalProperties": False},
            "tags": {"type": ["array", "null"], "items": {"type": "string"}},
            "note": {"type": ["string", "null"]},
        },
        "required": ["city", "kind", "where", "tags", "note"],
        "additionalProperties": False,
    }
    answer = {"city": "Lima", "kind": "capital", "where": {"lat": -12.0, "lon": -77.0},
              "tags": None, "note": None}
    assert loosen(answer, NESTED) == {"city": "Lima", "kind": "capital",
                                      "where": {"lat": -12.0, "lon": -77.0}}


@pytest.mark.parametrize(("schema", "what"), [
    ({"type": "object", "properties": {"m": {"type": "object",
                                             "additionalProperties": {"type": "string"}}}},
     "free keys (a map) at #/properties/m"),
    ({"type": "object", "properties": {"any": {}}}, "any type at #/properties/any"),
    ({"type": "object"}, "free keys (a map) at #"),
])
def test_strict_mode_refuses_what_it_cannot_express(schema, what):
    with pytest.raises(StrictError, match=what.replace("(", r"\(").replace(")", r"\)")):
        strict_schema(schema)


@pytest.mark.parametrize(("schema", "why"), [
    ({"type": "object", "allOf": []}, "keyword 'allOf' is not supported"),
    ({"type": "object", "properties": {"a": {"type": "text"}}}, "#/properties/a/type"),
    ({"type": "object", "properties": {"a": {"$ref": "#/$defs/Nope"}}}, "names nothing"),
    ({"type": "object", "required": "a"}, "#/required"),
    ({"type": "object", "properties": {"a": {"pattern": "("}}}, "not a valid regex"),
    ({"type": "array"}, "root must be an object"),
    (["not", "a", "schema"], "a schema is a JSON object"),
])
def test_a_schema_outside_the_subset_is_refused_naming_where(schema, why):
    with pytest.raises(SchemaError, match=why.replace("(", r"\(")):
        OutputType(schema)


def test_problems_name_the_json_path():
    found = problems({"city": 3, "kind": "river", "where": {"lat": 1}, "tags": ["a", "a"]},
                     NESTED)
    assert [str(p) for p in found] == [
        "$.city: expected string, got integer 3",
        '$.kind: "river" is not one of "capital", "port"',
        "$.where.lon: is required but missing",
        "$.tags[1]: repeats an earlier item (items must be unique)",
    ]


class Place(msgspec.Struct):
    name: str
    near: "list[Place]" = []


def test_a_msgspec_struct_schema_with_refs_is_accepted_and_built():
    schema = msgspec.json.schema(Place)
    out = OutputType(schema, name="Place")
    value = build_instance(schema)
    assert value == {"name": "scripted"} and is_valid(value, schema)
    strict = out.strict()
    assert strict["properties"]["near"] == {"type": ["array", "null"],
                                            "items": {"$ref": "#/$defs/Place"}}
    assert set(strict["$defs"]) == {"Place"}
