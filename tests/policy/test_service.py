"""Approvals over HTTP on a real service (loopback): listed, approved (the tool — a real stdio
MCP server counting its calls — runs once, with the edited input where one was given),
rejected (never runs; the model reads the reason); 400 / 404 / 409; the SSE events; the
OpenAPI document."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import trio

from mnemon.orchestrator.mcp.config import McpServerSpec
from mnemon.orchestrator.policy import parse_policy
from mnemon.orchestrator.settings import Settings

from ..service.util import live_service, sse_events
from .conftest import caller, provider, records, verify

HERE = Path(__file__).resolve().parent
pytest.importorskip("mcp")
pytest.importorskip("hypercorn")

ASK_SHOUT = {"rule": [{"tool": "tools__shout", "action": "ask", "reason": "shouting is loud"}]}


def tool_server(calls: Path) -> McpServerSpec:
    return McpServerSpec(name="tools", transport="stdio", command=sys.executable,
                         args=(str(HERE.parent / "mcp" / "toolserver.py"),),
                         env={"TOOLSERVER_CALLS": str(calls)}, tool_timeout_s=10.0,
                         startup_timeout_s=60.0)


def served_settings(calls: Path) -> Settings:
    return Settings(model="scripted", mcp_servers=(tool_server(calls),),
                    tool_policy=parse_policy(ASK_SHOUT, "served-policy"))


def shouts(calls: Path) -> list[dict]:
    if not calls.exists():
        return []
    return [json.loads(l) for l in calls.read_text().splitlines() if '"shout"' in l]


async def wait_listed(svc, n: int) -> list[dict]:
    with trio.fail_after(30):
        while True:
            r = await svc.client.get("/v1/approvals")
            assert r.status_code == 200
            got = r.json()["approvals"]
            if len(got) >= n:
                return got
            await trio.sleep(0.02)


async def wait_state(svc, aid: str, state: str = "ended") -> dict:
    with trio.fail_after(30):
        while True:
            view = (await svc.client.get(f"/v1/agents/{aid}")).json()
            if view["state"] == state:
                return view
            await trio.sleep(0.02)


async def test_approve_reject_and_edit_over_http(tmp_path):
    calls = tmp_path / "calls.jsonl"
    models = {"a1": caller(("c1", "tools__shout", {"text": "hello"}), answer="one"),
              "a2": caller(("d1", "tools__shout", {"text": "secret"}), answer="two"),
              "a3": caller(("e1", "tools__shout", {"text": "draft"}), answer="three")}

    def model(request, state):
        return models[request.meta["agent"]](request, state)

    root = tmp_path / "run"
    async with live_service(root, provider=provider(model),
                            settings=served_settings(calls)) as svc:
        for prompt in ("approve me", "reject me", "edit me"):
            r = await svc.client.post("/v1/agents", json={"prompt": prompt})
            assert r.status_code == 201
        listed = await wait_listed(svc, 3)
        assert {(a["agent"], a["call_id"], a["tool"]) for a in listed} == {
            ("a1", "c1", "tools__shout"), ("a2", "d1", "tools__shout"),
            ("a3", "e1", "tools__shout")}
        one = next(a for a in listed if a["agent"] == "a1")
        assert one["input"] == {"text": "hello"} and one["reason"] == "shouting is loud"
        assert one["requested_at"] and one["rule"] == "served-policy rule 1"
        assert shouts(calls) == []  # nothing runs before a decision

        # hostile and wrong requests: nothing is decided by them
        r = await svc.client.post("/v1/agents/a1/approvals/c1", json={"decision": "maybe"})
        assert r.status_code == 400 and "approve or reject" in r.json()["error"]
        r = await svc.client.post("/v1/agents/a1/approvals/c1", content=b"{not json")
        assert r.status_code == 400
        r = await svc.client.post("/v1/agents/a1/approvals/nope", json={"decision": "approve"})
        assert r.status_code == 404
        r = await svc.client.post("/v1/agents/a9/approvals/c1", json={"decision": "approve"})
        assert r.status_code == 404
        r = await svc.client.post("/v1/agents/a2/approvals/c1", json={"decision": "approve"})
        assert r.status_code == 404  # a1's call, named under another agent
        r = await svc.client.post("/v1/agents/a1/approvals/c1",
                                  json={"decision": "reject", "input": {"text": "x"}})
        assert r.status_code == 400
        assert len((await svc.client.get("/v1/approvals")).json()["approvals"]) == 3

        r = await svc.client.post("/v1/agents/a1/approvals/c1", json={"decision": "approve"})
        assert r.status_code == 200
        assert r.json()["decision"] == "approve" and r.json()["by"] == "api"
        r = await svc.client.post("/v1/agents/a1/approvals/c1", json={"decision": "approve"})
        assert r.status_code == 409
        r = await svc.client.post("/v1/agents/a2/approvals/d1",
                                  json={"decision": "reject", "reason": "not in public"})
        assert r.status_code == 200 and r.json()["reason"] == "not in public"
        r = await svc.client.post("/v1/agents/a3/approvals/e1",
                                  json={"decision": "approve", "input": {"text": "final"}})
        assert r.status_code == 200 and r.json()["input"] == {"text": "final"}
        for aid in ("a1", "a2", "a3"):
            await wait_state(svc, aid)
        assert (await svc.client.get("/v1/approvals")).json() == {"approvals": []}
        r = await svc.client.post("/v1/agents/a3/approvals/e1", json={"decision": "reject"})
        assert r.status_code == 409  # decided, and the agent has ended

        events = [d for _, d in await sse_events(svc.client, "/v1/agents/a1/events?follow=0")]
        kinds = [e["type"] for e in events]
        assert kinds.index("approval_requested") < kinds.index("approval_decided") < \
            kinds.index("tool_results")
        req = next(e for e in events if e["type"] == "approval_requested")
        assert req["tool"] == "tools__shout" and req["input"] == {"text": "hello"}

        doc = (await svc.client.get("/v1/openapi.json")).json()
        post = doc["paths"]["/v1/agents/{id}/approvals/{call_id}"]["post"]
        assert {"200", "400", "404", "409"} <= set(post["responses"])
        assert "/v1/approvals" in doc["paths"] and "/v1/agents/{id}/resume" in doc["paths"]

    assert [c["arguments"] for c in shouts(calls)] == [{"text": "hello"}, {"text": "final"}]
    seen = {aid: m.seen[0] for aid, m in models.items()}
    assert not seen["a1"]["is_error"] and "HELLO" in str(seen["a1"]["content"])
    assert seen["a2"]["is_error"] and "not in public" in str(seen["a2"]["content"])
    assert "FINAL" in str(seen["a3"]["content"])
    verify(root)


async def test_the_openapi_document_validates(tmp_path):
    from openapi_spec_validator import validate

    async with live_service(tmp_path / "run", settings=Settings(model="scripted")) as svc:
        validate((await svc.client.get("/v1/openapi.json")).json())


async def test_a_served_jobs_asks_wait_for_a_decision_over_http(tmp_path):
    """A job run by the service with ``on_ask = "wait"``: its agents' waiting calls are listed
    with the job's id and decided at ``/v1/jobs/{id}/approvals/{agent}/{call_id}``."""
    import sys as _sys

    from ..orchestrator.jobs.kit import write_job

    _sys.modules.pop("job_policy", None)
    job = write_job(tmp_path / "j", '[provider]\nname = "scripted"\npolicy = "job_policy:steps"\n'
                    '[agent]\ntools = ["job_policy:note"]\n[policy]\non_ask = "wait"\n'
                    '[[policy.rule]]\ntool = "note"\naction = "ask"\nreason = "a note"\n',
                    tasks=1)
    async with live_service(tmp_path / "run", settings=Settings(model="scripted")) as svc:
        r = await svc.client.post("/v1/jobs", json={"path": str(job),
                                                    "run_root": str(tmp_path / "jobrun")})
        assert r.status_code == 202, r.text
        decided = 0
        with trio.fail_after(60):
            while (await svc.client.get("/v1/jobs/j1")).json()["state"] == "running":
                for a in (await svc.client.get("/v1/approvals")).json()["approvals"]:
                    assert a["job"] == "j1" and a["tool"] == "note"
                    bad = await svc.client.post(f"/v1/agents/{a['agent']}/approvals/"
                                                f"{a['call_id']}", json={"decision": "approve"})
                    assert bad.status_code == 404  # not an agent of the served run
                    r = await svc.client.post(f"/v1/jobs/j1/approvals/{a['agent']}/"
                                              f"{a['call_id']}", json={"decision": "approve"})
                    assert r.status_code == 200, r.text
                    decided += 1
                await trio.sleep(0.02)
        out = (await svc.client.get("/v1/jobs/j1")).json()
        r = await svc.client.post("/v1/jobs/j9/approvals/k1/c1", json={"decision": "approve"})
        assert r.status_code == 404
    _sys.modules.pop("job_policy", None)
    assert out["done"] == 1 and decided >= 1
    recs = [json.loads(l) for p in (tmp_path / "jobrun" / "agents").glob("*/record.jsonl")
            for l in p.read_text().splitlines()]
    res = [x for rec in recs if rec["t"] == "ToolResults" for x in rec["results"]]
    assert len(res) == decided and all(not x["is_error"] for x in res)
