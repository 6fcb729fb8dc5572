"""Typed output checked at load (findings 7, 10, 11; decision 0310): a ``$ref`` cycle without a
way out, constraints nothing satisfies and sizes no answer can hold are refused with one line
naming the schema path — exit 2 on the CLI, 422 on the service, a job refused first — and a
typed ask that did not get its type exits 1 with the reason."""

from __future__ import annotations

import json
import time

import pytest

from mnemon.orchestrator.cli import main
from mnemon.providers.typed import NoInstance, OutputType, SchemaError, build_instance

from ..service.util import live_service


def _obj(props: dict, required=(), **kw) -> dict:
    return {"type": "object", "properties": props, "required": list(required), **kw}


NODE = _obj({"next": {"$ref": "#/$defs/node"}}, ["next"])
BAD = [
    (_obj({"s": {"type": "string", "minLength": 5, "maxLength": 2}}),
     "#/properties/s: minLength 5 is above maxLength 2"),
    (_obj({"n": False}, ["n"]), "#/required: 'n' is required, but its schema is false"),
    (_obj({}, ["n"], additionalProperties=False), "'n' is required, but additionalProperties"),
    ({**_obj({"x": {"$ref": "#/$defs/a"}}), "$defs": {"a": {"$ref": "#/$defs/a"}}},
     "#/$defs/a: $ref '#/$defs/a' loops back"),
    ({**_obj({"x": {"$ref": "#/$defs/a"}}),
      "$defs": {"a": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/a"}]}}}, "loops back"),
    ({**_obj({"x": {"$ref": "#/$defs/node"}}, ["x"]), "$defs": {"node": NODE}},
     "no value fits this schema"),
    (_obj({"xs": {"type": "array", "minItems": 1_000_000_000}}),
     "#/properties/xs/minItems: 1000000000 is more than an answer can hold"),
    (_obj({"s": {"type": "string", "minLength": 10 ** 11}}),
     "#/properties/s/minLength: 100000000000 is more than an answer can hold"),
    (_obj({"n": {"type": "number", "minimum": 10, "multipleOf": 1e-308}}),
     "#/properties/n/multipleOf: 1e-308 is too small"),
    (_obj({"n": {"type": "number", "minimum": 3, "exclusiveMaximum": 3}}),
     "#/properties/n: the bounds leave no number"),
    (_obj({"n": {"type": "integer", "enum": ["a", "b"]}}),
     "#/properties/n/enum: no value of it is of type integer"),
    (_obj({"xs": {"type": "array", "prefixItems": [{}], "items": False, "minItems": 2}}),
     "#/properties/xs/minItems: 2 items, but items is false after 1"),
]


@pytest.mark.parametrize(("schema", "says"), BAD)
def test_a_schema_nothing_fits_is_refused_at_load_naming_the_path(schema, says):
    t = time.perf_counter()
    with pytest.raises(SchemaError, match="^#") as e:
        OutputType(schema)
    assert says in str(e.value) and "\n" not in str(e.value)
    assert time.perf_counter() - t < 1


def test_a_recursive_schema_with_a_way_out_still_loads():
    way_out = {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}
    schema = {**_obj({"x": {"$ref": "#/$defs/node"}}, ["x"]),
              "$defs": {"node": _obj({"next": way_out}, ["next"])}}
    out = OutputType(schema)
    assert build_instance(out.schema)["x"] is not None


@pytest.mark.parametrize(("schema", "says"), BAD)
def test_ask_refuses_it_with_exit_2_and_writes_nothing(tmp_path, capsys, schema, says):
    f = tmp_path / "out.json"
    f.write_text(json.dumps(schema))
    assert main(["ask", "x", "--output", str(f), "--run-root", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and "Traceback" not in err, err
    assert not (tmp_path / "run").exists()


async def test_the_service_refuses_it_with_422(tmp_path):
    async with live_service(tmp_path / "run") as svc:
        for schema, says in BAD:
            r = await svc.client.post("/v1/agents", json={"prompt": "x", "output": schema})
            assert r.status_code == 422, r.text
            assert says in r.json()["error"] and "\n" not in r.json()["error"]
        assert (await svc.client.get("/v1/agents")).json()["agents"] == []


@pytest.mark.parametrize("schema", [{"type": "array", "minItems": 1_000_000_000},
                                    {"type": "string", "minLength": 10 ** 11},
                                    {"type": "array", "minItems": 5000,
                                     "items": {"type": "array", "minItems": 5000}},
                                    {"type": "number", "minimum": 10, "multipleOf": 1e-308}])
def test_the_instance_builder_refuses_what_it_cannot_build_in_bounded_time(schema):
    t = time.perf_counter()
    with pytest.raises(NoInstance):
        build_instance(schema)
    assert time.perf_counter() - t < 2


def test_a_typed_ask_that_never_gave_its_type_exits_1(tmp_path, capsys):
    """Ended by ``max_turns`` while working: no output, so exit 1 with the reason, not ``null``
    and 0."""
    schema = tmp_path / "out.json"
    schema.write_text(json.dumps(_obj({"n": {"type": "integer"}}, ["n"])))
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"blocks": [{"type": "tool_use", "id": "c1",
                                              "name": "transcript_index", "input": {}}],
                                  "stop_reason": "tool_use"}) + "\n")
    code = main(["ask", "x", "--output", str(schema), "--provider", "scripted", "--script",
                 str(script), "--max-turns", "1", "--run-root", str(tmp_path / "run")])
    out, err = capsys.readouterr()
    assert code == 1 and out == "", (out, err)
    assert "max_turns" in err and "output type" in err and err.count("\n") == 1, err


def test_a_type_the_scripted_provider_cannot_build_says_so(tmp_path, capsys):
    """A schema that loads but whose pattern the builder cannot spell (a lookahead): the run
    ends naming that, not with an answer that is "not JSON"."""
    schema = tmp_path / "out.json"
    schema.write_text(json.dumps(_obj({"s": {"type": "string", "pattern": "^(?=b)b$"}}, ["s"])))
    code = main(["ask", "x", "--output", str(schema), "--provider", "scripted",
                 "--run-root", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 1
    assert "cannot build a value of the output type" in err and "not JSON" not in err, err
