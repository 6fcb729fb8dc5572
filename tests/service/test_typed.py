"""The service and typed answers: ``"output"`` in ``POST /v1/agents`` (a JSON Schema), the agent
view's ``output``, a schema that cannot be used refused with 422 before any agent exists, and
the OpenAPI document describing both."""

from __future__ import annotations

import trio

from .util import live_service

SCHEMA = {"title": "Verdict", "type": "object",
          "properties": {"ok": {"type": "boolean"}, "score": {"type": "integer", "minimum": 3},
                         "why": {"type": "string"}},
          "required": ["ok", "score"], "additionalProperties": False}


async def _ended(svc, aid: str) -> dict:
    for _ in range(1000):
        got = (await svc.client.get(f"/v1/agents/{aid}")).json()
        if got["state"] != "running":
            return got
        await trio.sleep(0.02)
    raise AssertionError("the agent did not end")


async def test_a_typed_agent_over_the_service(tmp_path):
    async with live_service(tmp_path / "run") as svc:
        r = await svc.client.post("/v1/agents", json={"prompt": "judge it", "output": SCHEMA,
                                                      "output_retries": 1})
        assert r.status_code == 201, r.text
        aid = r.json()["id"]
        assert r.json()["output"] is None
        got = await _ended(svc, aid)
        assert (got["state"], got["reason"]) == ("ended", "done")
        assert got["output"] == {"ok": False, "score": 3}  # the scripted provider's instance
        listed = (await svc.client.get("/v1/agents")).json()["agents"]
        assert [a["output"] for a in listed] == [{"ok": False, "score": 3}]
        read = (await svc.client.get(f"/v1/agents/{aid}/read", params={"turns": "1"})).json()
        assert read["rows"][0]["turn"] == 1
        # a new prompt: the agent answers in its type again, and its view shows the new output
        r = await svc.client.post(f"/v1/agents/{aid}/prompt", json={"prompt": "again"})
        assert r.status_code == 202, r.text
        again = await _ended(svc, aid)
        assert again["reason"] == "done" and again["output"] == {"ok": False, "score": 3}


async def test_an_output_that_cannot_be_used_is_refused_with_422(tmp_path):
    async with live_service(tmp_path / "run") as svc:
        for bad, says in (({"type": "object", "if": {}}, "keyword 'if' is not supported"),
                          ({"type": "string"}, "root must be an object"),
                          ({"type": "object", "properties": {"a": {"type": "object",
                                                                   "required": 3}}},
                           "#/properties/a/required")):
            r = await svc.client.post("/v1/agents", json={"prompt": "x", "output": bad})
            assert r.status_code == 422, r.text
            assert says in r.json()["error"] and "\n" not in r.json()["error"]
        assert (await svc.client.get("/v1/agents")).json()["agents"] == []


async def test_the_openapi_document_describes_output(tmp_path):
    from openapi_spec_validator import validate

    async with live_service(tmp_path / "run") as svc:
        doc = (await svc.client.get("/v1/openapi.json")).json()
    validate(doc)
    schemas = doc["components"]["schemas"]
    create = schemas["AgentCreate"]["properties"]
    assert "JSON Schema" in str(create["output"]) and "output_retries" in create
    assert "output" in schemas["AgentOut"]["properties"]
