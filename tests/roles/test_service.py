"""Roles in the service: a served run with roles starts its agents as the root's role, and the
agent views and the event stream name each agent's role and model."""

from __future__ import annotations

import trio

from mnemon.orchestrator.roles.load import as_roles
from mnemon.orchestrator.settings import Settings
from mnemon.providers.scripted import ScriptedProvider

from tests.service.util import live_service, sse_events

TEAM = {"lead": {"system": "You lead.", "model": "claude-sonnet-4-5", "may_start": ["helper"]},
        "helper": {"description": "helps", "system": "You help.", "model": "claude-haiku-4-5"}}


def model(request, state):
    n = state["n"] = state.get("n", 0) + 1
    if request.system == "You lead." and n == 1:
        return [{"type": "tool_use", "id": "c1", "name": "ask_helper",
                 "input": {"task": "help me"}}], "tool_use"
    return [{"type": "text", "text": f"{request.meta.get('role')} done"}], "end_turn"


async def test_agent_views_name_roles_and_models(tmp_path):
    settings = Settings(model="scripted", roles=as_roles(TEAM, root="lead"))
    async with live_service(tmp_path / "run", provider=ScriptedProvider(policy=model),
                            settings=settings) as svc:
        r = await svc.client.post("/v1/agents", json={"prompt": "go"})
        assert r.status_code == 201
        for _ in range(1000):
            got = (await svc.client.get("/v1/agents/a1")).json()
            if got["state"] != "running":
                break
            await trio.sleep(0.02)
        assert got["answer"] == "lead done"
        agents = {a["id"]: a for a in (await svc.client.get("/v1/agents")).json()["agents"]}
        assert (agents["a1"]["role"], agents["a1"]["model"]) == ("lead", "claude-sonnet-4-5")
        assert (agents["a2"]["role"], agents["a2"]["model"]) == ("helper", "claude-haiku-4-5")
        assert agents["a2"]["parent"] == "a1" and agents["a2"]["answer"] == "helper done"
        events = await sse_events(svc.client, "/v1/agents/a2/events",
                                  until=lambda d: d.get("type") == "ended")
        started = [d for _, d in events if d.get("type") == "started"]
        assert started[0]["role"] == "helper" and started[0]["model"] == "claude-haiku-4-5"


async def test_an_agent_of_a_named_role_and_an_unknown_role(tmp_path):
    settings = Settings(model="scripted", roles=as_roles(TEAM, root="lead"))
    async with live_service(tmp_path / "run", provider=ScriptedProvider(policy=model),
                            settings=settings) as svc:
        r = await svc.client.post("/v1/agents", json={"prompt": "go", "role": "helper"})
        assert r.status_code == 201 and r.json()["role"] == "helper"
        bad = await svc.client.post("/v1/agents", json={"prompt": "go", "role": "boss"})
        assert bad.status_code == 409
        assert bad.json()["error"] == "there is no role 'boss' in this run (roles: helper, lead)"
        assert [a["id"] for a in (await svc.client.get("/v1/agents")).json()["agents"]] == ["a1"]
        again = await svc.client.post("/v1/agents", json={"prompt": "go"})
        assert again.json()["id"] == "a2" and again.json()["role"] == "lead"  # no id spent
