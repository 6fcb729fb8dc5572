"""One run, two providers: a lead on one OpenAI-compatible server and a researcher on another,
each on its own model, over real sockets on loopback. Each server receives only its role's
requests, with its role's model, system prompt and tools; each agent's ``ProviderCall`` records
its role's model, and ``mnemon cost --by role`` prices each on it."""

from __future__ import annotations

import json
from pathlib import Path

from mnemon.orchestrator import logs
from mnemon.orchestrator.cli import main

from tests.orchestrator.test_loopback import _Server

PATH = "/v1/chat/completions"


def _chunk(delta: dict | None, finish: str | None = None, usage: dict | None = None,
           model: str = "served-model") -> bytes:
    body = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 1764484800,
            "model": model, "choices": [] if delta is None else
            [{"index": 0, "delta": delta, "finish_reason": finish}], "usage": usage}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def _usage(prompt: int, out: int) -> dict:
    return {"prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out,
            "prompt_tokens_details": {"cached_tokens": 0}}


def call(name: str, args: dict) -> bytes:
    return b"".join([
        _chunk({"role": "assistant", "content": None, "tool_calls": [
            {"index": 0, "id": "call_1", "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}]}),
        _chunk({}, "tool_calls"), _chunk(None, usage=_usage(1000, 20)), b"data: [DONE]\n\n"])


def text(t: str) -> bytes:
    return b"".join([_chunk({"role": "assistant", "content": t}), _chunk({}, "stop"),
                     _chunk(None, usage=_usage(1200, 10)), b"data: [DONE]\n\n"])


def test_each_role_on_its_own_server_and_model(tmp_path: Path, capsys, monkeypatch):
    logs.quiet()
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    lead = _Server([call("ask_researcher", {"task": "What is six times seven?"}),
                    text("The researcher says 42.")], PATH)
    research = _Server([text("42")], PATH)
    with lead, research:
        team = tmp_path / "team.toml"
        team.write_text(
            'role = "lead"\n'
            '[roles.lead]\nsystem = "You lead."\nmodel = "gpt-4.1"\n'
            'may_start = ["researcher"]\n'
            '[roles.researcher]\ndescription = "does sums"\nsystem = "You research."\n'
            f'provider = "openai"\nbase_url = "http://127.0.0.1:{research.port}/v1"\n'
            'model = "gpt-4.1-mini"\n')
        root = tmp_path / "run"
        rc = main(["ask", "What is six times seven?", "--provider", "openai", "--base-url",
                   f"http://127.0.0.1:{lead.port}/v1", "--context-window", "100000",
                   "--roles", str(team), "--run-root", str(root), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["answer"] == "The researcher says 42."
    assert len(lead.requests) == 2 and len(research.requests) == 1
    for _, _, body in lead.requests:
        assert body["model"] == "gpt-4.1"
        assert body["messages"][0] == {"role": "system", "content": "You lead."}
        names = [t["function"]["name"] for t in body["tools"]]
        assert "ask_researcher" in names
    (_, _, body), = research.requests
    assert body["model"] == "gpt-4.1-mini"
    assert body["messages"][0] == {"role": "system", "content": "You research."}
    assert not any(t["function"]["name"].startswith("ask_") for t in body["tools"])
    # the lead's second request carries the researcher's answer as the tool's result
    tool_msgs = [m for m in lead.requests[1][2]["messages"] if m["role"] == "tool"]
    assert tool_msgs[0]["content"] == "42"

    def recs(agent):
        return [json.loads(line) for line in
                (root / "agents" / agent / "record.jsonl").read_bytes().split(b"\n") if line]

    a1, a2 = recs("a1"), recs("a2")
    assert (a1[0]["role"], a1[0]["model"], a1[0]["provider"]) == ("lead", "gpt-4.1", "openai")
    assert (a2[0]["role"], a2[0]["model"], a2[0]["provider"]) == ("researcher", "gpt-4.1-mini",
                                                                  "openai")
    assert {r["model"] for r in a1 if r["t"] == "ProviderCall"} == {"gpt-4.1"}
    assert {r["model"] for r in a2 if r["t"] == "ProviderCall"} == {"gpt-4.1-mini"}
    assert main(["cost", str(root), "--by", "role", "--json"]) == 0
    by_role = json.loads(capsys.readouterr().out)
    rows = {r["role"]: r for r in by_role["roles"]}
    assert rows["lead"]["input_tokens"] == 2200 and rows["researcher"]["input_tokens"] == 1200
    # gpt-4.1 costs five times gpt-4.1-mini per token: the researcher's share is priced so
    assert rows["researcher"]["cost_usd"] < rows["lead"]["cost_usd"] / 2
    assert round(rows["lead"]["cost_usd"] + rows["researcher"]["cost_usd"], 6) == \
        by_role["total"]["cost_usd"]
    assert main(["verify", str(root)]) == 0
    for agent in ("a1", "a2"):
        assert "test-key-not-secret" not in (root / "agents" / agent / "record.jsonl").read_text()
