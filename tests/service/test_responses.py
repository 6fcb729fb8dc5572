"""The service on the OpenAI Responses API (``openai-responses``) against a loopback server: an
agent started over HTTP runs a tool turn and answers, its reasoning item sent back on the second
request byte for byte, and its usage (reasoning tokens apart) in the service's cost."""

from __future__ import annotations

import json

import trio

from mnemon.orchestrator.settings import Settings
from mnemon.providers.select import make_provider

from ..orchestrator.test_responses_loopback import KEY, Server, say, stream
from .util import live_service


async def test_an_agent_served_on_the_responses_api(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    reasoning = {"id": "rs_T1", "type": "reasoning", "summary": [],
                 "encrypted_content": "gAAAA-T1-opaque"}
    call = {"id": "fc_T1", "type": "function_call", "status": "completed",
            "call_id": "call_T1", "name": "context_survey", "arguments": "{}"}
    with Server([stream("resp_T1", [reasoning, call]), say("resp_T2", "the survey is in")]) \
            as server:
        provider = make_provider("openai-responses", base_url=server.url)
        async with live_service(tmp_path / "run", provider=provider,
                                provider_name="openai-responses",
                                settings=Settings(model="gpt-5.1")) as svc:
            r = await svc.client.post("/v1/agents", json={"prompt": "survey your context"})
            assert r.status_code == 201, r.text
            aid = r.json()["id"]
            for _ in range(1000):
                got = (await svc.client.get(f"/v1/agents/{aid}")).json()
                if got["state"] != "running":
                    break
                await trio.sleep(0.02)
            assert got["state"] == "ended" and got["reason"] == "done", got
            assert got["answer"] == "the survey is in"
            cost = (await svc.client.get("/v1/cost")).json()
        first, second = server.bodies_sent
        assert first["store"] is False and first["include"] == ["reasoning.encrypted_content"]
        assert reasoning in second["input"], "the reasoning item goes back"
        at = second["input"].index(reasoning)
        assert second["input"][at + 1]["type"] == "function_call"  # in its place, in order
        assert json.dumps(reasoning, separators=(",", ":")).encode() in server.raw[1]
        assert cost["total"]["output_tokens"] == 20  # two responses of 10 output tokens each
