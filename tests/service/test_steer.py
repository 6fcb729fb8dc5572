"""Messages to a running agent over HTTP (``POST /v1/agents/{id}/steer``) and the agent view's
delegation fields (its caps beside its tree's spend, the messages it was sent), over real
loopback HTTP on the scripted provider."""

from __future__ import annotations

import json

import trio

from mnemon.providers.scripted import ScriptedProvider
from mnemon.session.records import Text, ToolUse

from .util import live_service


def _texts(request) -> str:
    out = []
    for m in request.messages:
        c = m.get("content")
        if isinstance(c, str):
            out.append(c)
        else:
            out.extend(b.get("text", "") for b in c or () if b.get("type") == "text")
    return "\n".join(out)


async def _until(client, aid, pred, tries=1500):
    for _ in range(tries):
        got = (await client.get(f"/v1/agents/{aid}")).json()
        if pred(got):
            return got
        await trio.sleep(0.02)
    raise AssertionError(got)


async def test_a_message_reaches_a_running_agents_next_request_and_an_ended_one_is_refused(
        tmp_path):
    go = trio.Event()
    seen: list[str] = []

    async def policy(request, state):
        i = state["i"] = state.get("i", 0) + 1
        seen.append(_texts(request))
        if i == 1:
            await go.wait()  # the message is sent while this request is in flight
            return [ToolUse("t1", "context_survey", {})], "tool_use"
        return [Text("turned left")], "end_turn"

    async with live_service(tmp_path / "run", provider=ScriptedProvider(policy=policy)) as svc:
        aid = (await svc.client.post("/v1/agents", json={"prompt": "walk on"})).json()["id"]
        await _until(svc.client, aid, lambda g: g["state"] == "running")
        while not seen:
            await trio.sleep(0.01)
        # bad bodies: 422 (a wrong shape, an empty or blank text, an unknown key), 400 (not JSON)
        for body in ({}, {"text": ""}, {"text": "  \n"}, {"text": "x", "by": "parent"},
                     {"text": 3}):
            r = await svc.client.post(f"/v1/agents/{aid}/steer", json=body)
            assert r.status_code == 422, (body, r.text)
        r = await svc.client.post(f"/v1/agents/{aid}/steer", content=b"{not json",
                                  headers={"content-type": "application/json"})
        assert r.status_code == 400
        r = await svc.client.post(f"/v1/agents/{aid}/steer", json={"text": "é" * 9000})
        assert r.status_code == 422 and "bytes" in r.json()["error"]
        r = await svc.client.post("/v1/agents/a99/steer", json={"text": "hello"})
        assert r.status_code == 404 and "a99" in r.json()["error"]
        r = await svc.client.post(f"/v1/agents/{aid}/steer", json={"text": "turn LEFT-7 now"})
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["agent"] == aid and out["messages"] == 1 and out["delivered"]
        view = (await svc.client.get(f"/v1/agents/{aid}")).json()
        assert view["messages"] == 1 and view["state"] == "running"
        go.set()
        done = await _until(svc.client, aid, lambda g: g["state"] != "running")
        assert done["answer"] == "turned left" and done["messages"] == 1
        # the request after the send carried it; the one in flight did not
        assert "turn LEFT-7 now" not in seen[0] and "turn LEFT-7 now" in seen[1]
        assert "[message from a person]" in seen[1]
        r = await svc.client.post(f"/v1/agents/{aid}/steer", json={"text": "too late"})
        assert r.status_code == 409 and "ended" in r.json()["error"], r.text
        listed = (await svc.client.get("/v1/agents")).json()["agents"]
        assert listed[0]["messages"] == 1
    lines = [json.loads(x) for x in
             (tmp_path / "run" / "agents" / aid / "record.jsonl").read_text().splitlines()]
    steer = [x for x in lines if x["t"] == "Steering"]
    assert [(x["by"], x["text"]) for x in steer] == [
        ("user", "[message from a person] turn LEFT-7 now")]
    assert "too late" not in json.dumps(lines)


async def test_the_view_shows_a_childs_caps_beside_its_trees_spend(tmp_path):
    def policy(request, state):
        agent = request.meta["agent"]
        i = state["i"] = state.get("i", 0) + 1
        if agent == "a1" and i == 1:
            return [ToolUse("s1", "agents_start", {"task": "kid: look", "kind": "fresh",
                                                    "budget_usd": 0.5, "budget_tokens": 90_000,
                                                    "max_turns": 4})], "tool_use"
        if agent == "a1" and i == 2:
            return [ToolUse("w1", "agents_wait", {})], "tool_use"
        if agent == "a2" and i == 1:  # the capped child starts a grandchild of its own
            return [ToolUse("c1", "agents_start", {"task": "grandkid", "kind": "fresh"})], \
                "tool_use"
        if agent == "a2" and i == 2:
            return [ToolUse("c2", "agents_wait", {})], "tool_use"
        if agent == "a3" and i == 1:
            return [ToolUse("c3", "context_survey", {})], "tool_use"
        return [Text(f"{agent} done")], "end_turn"

    async with live_service(tmp_path / "run", provider=ScriptedProvider(policy=policy)) as svc:
        aid = (await svc.client.post("/v1/agents", json={"prompt": "delegate"})).json()["id"]
        await _until(svc.client, aid, lambda g: g["state"] != "running")
        root = (await svc.client.get(f"/v1/agents/{aid}")).json()
        kid = (await svc.client.get(f"/v1/agents/{root['children'][0]}")).json()
        grand = (await svc.client.get(f"/v1/agents/{kid['children'][0]}")).json()
        listed = {a["id"]: a for a in (await svc.client.get("/v1/agents")).json()["agents"]}
        paged = (await svc.client.get("/v1/agents", params={"after": aid, "limit": 1})).json()
    assert listed[kid["id"]]["budget"] == kid["budget"] == paged["agents"][0]["budget"]
    assert root["budget"] is None and root["messages"] == 0
    b = kid["budget"]
    assert b["usd"] == 0.5 and b["tokens"] == 90_000 and b["max_turns"] == 4
    # its tree's spend: its own and its grandchild's (whose own view has no cap)
    assert grand["budget"] is None and grand["cost_usd"] > 0
    assert abs(b["spent_usd"] - (kid["cost_usd"] + grand["cost_usd"])) < 2e-6
    assert b["spent_tokens"] == sum(kid["usage"].values()) + sum(grand["usage"].values())


async def test_a_read_only_service_and_an_agent_not_running_here_refuse_a_message(tmp_path):
    async with live_service(tmp_path / "run") as svc:
        aid = (await svc.client.post("/v1/agents", json={"prompt": "hi"})).json()["id"]
        await _until(svc.client, aid, lambda g: g["state"] != "running")
    # a new service over the same run root: the agent ran in another process
    async with live_service(tmp_path / "run") as svc:
        r = await svc.client.post(f"/v1/agents/{aid}/steer", json={"text": "hello"})
        assert r.status_code == 409 and "not running (ended (done))" in r.json()["error"]
    async with live_service(tmp_path / "run", read_only=True) as svc:
        r = await svc.client.post(f"/v1/agents/{aid}/steer", json={"text": "hello"})
        assert r.status_code == 409 and "read-only" in r.json()["error"]
    lines = (tmp_path / "run" / "agents" / aid / "record.jsonl").read_text()
    assert "Steering" not in lines


async def test_the_openapi_document_has_the_steer_route(tmp_path):
    async with live_service(tmp_path / "run") as svc:
        doc = (await svc.client.get("/v1/openapi.json")).json()
    op = doc["paths"]["/v1/agents/{id}/steer"]["post"]
    assert {"200", "404", "409", "422"} <= set(op["responses"])
    body = doc["components"]["schemas"]["SteerIn"]
    assert body["required"] == ["text"]
    agent = doc["components"]["schemas"]["AgentOut"]["properties"]
    assert {"budget", "messages", "in_tools", "approvals"} <= set(agent)
