"""Delegation across a SIGKILL of ``mnemon serve``: the parent's next request after the resume
carries what happened to its children; a pending ``ask_parent`` survives, is addressed to the
parent again, and — the parent's own policy not letting it make the call — goes to a person,
who approves it over HTTP; the tool runs once and every log verifies. The model is an
OpenAI-compatible server on loopback, answering by the task each request carries."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ..policy.test_crash import Model, Service, text, tool_call, verify

pytest.importorskip("hypercorn")

HERE = Path(__file__).resolve().parent


class Plays(Model):
    """Answers by (task, step): the task is the request's first user text, the step how many
    assistant messages it carries; ``hold`` (task, step) pairs are answered only once
    ``release`` is set — a request in flight when the service is killed. ``requests`` holds
    ``(task, step, the messages as JSON)``."""

    def __init__(self, plays: dict[str, list[bytes]], hold: set[tuple[str, int]] = frozenset()):
        self.plays = plays
        self.held_at = set(hold)
        super().__init__([])

    def pick(self, body: dict) -> tuple:
        msgs = body["messages"]
        first = next(m for m in msgs if m["role"] == "user")
        task = first["content"] if isinstance(first["content"], str) else \
            " ".join(b.get("text", "") for b in first["content"])
        key = next(k for k in self.plays if task.startswith(k))
        step = sum(1 for m in msgs if m["role"] == "assistant")
        play = self.plays[key]
        return ((key, step, json.dumps(msgs)), (key, step) in self.held_at,
                play[min(step, len(play) - 1)])


def _state(svc, aid):
    r = svc.client.get(f"/v1/agents/{aid}")
    return r.json().get("state") if r.status_code == 200 else None


def test_after_sigkill_the_parents_next_request_says_what_became_of_its_children(tmp_path):
    model = Plays({
        "lead": [b"".join([tool_call("c1", "agents_start",
                                     {"task": "kid one: quick", "kind": "fresh"})]),
                 tool_call("c2", "agents_start", {"task": "kid two: slow", "kind": "fresh"}),
                 tool_call("c3", "agents_wait", {}), text("lead done")],
        "kid one": [text("one done")],
        "kid two": [text("two done")]}, hold={("kid two", 0)})
    root = tmp_path / "run"
    try:
        svc = Service(root, model)
        svc.client.post("/v1/agents", json={"prompt": "lead the kids"})
        svc.wait(lambda: _state(svc, "a2") == "ended" and model.held.is_set(),
                 "kid one to end and kid two's request to be in flight")
        svc.wait(lambda: any(k == "lead" and s == 3 for k, s, _ in model.requests)
                 or (root / "agents" / "a1" / "record.jsonl").read_text().count("agents_wait"),
                 "the lead to wait")
        svc.kill()
        model.release.set()
        before = len(model.requests)
        svc = Service(root, model)
        svc.wait(lambda: _state(svc, "a1") == "ended", "the lead to end", timeout=90)
        assert svc.stop() == 0
    finally:
        model.close()
    after = [body for key, step, body in model.requests[before:] if key == "lead"]
    assert after, "the lead made a request after the resume"
    first = after[0]
    assert "[resumed]" in first and "a2 ended done" in first
    assert "a3 was resumed and goes on" in first
    verify(root)


def test_a_pending_ask_parent_survives_sigkill_and_goes_to_a_person_over_http(tmp_path):
    pytest.importorskip("mcp")
    calls = tmp_path / "calls.jsonl"
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"tools": {
        "command": sys.executable, "args": [str(HERE.parent / "mcp" / "toolserver.py")],
        "env": {"TOOLSERVER_CALLS": str(calls)}}}}))
    (tmp_path / "policy.toml").write_text(
        '[[rule]]\ntool = "tools__shout"\naction = "ask_parent"\nreason = "loud"\n')
    opts = ("--mcp", str(tmp_path / "mcp.json"), "--policy", str(tmp_path / "policy.toml"))

    model = Plays({
        "lead": [tool_call("c1", "agents_start", {"task": "kid: shout", "kind": "fresh"}),
                 tool_call("c2", "agents_wait", {}),
                 tool_call("c3", "approvals_decide", {"agent": "a2", "call_id": "s1",
                                                      "decision": "approve"}),
                 tool_call("c4", "agents_wait", {}), text("lead done")],
        "kid": [tool_call("s1", "tools__shout", {"text": "hi"}), text("shouted")]},
        hold={("lead", 2)})
    root = tmp_path / "run"
    try:
        svc = Service(root, model, *opts)
        svc.client.post("/v1/agents", json={"prompt": "lead the kid"})
        (p,) = svc.wait(lambda: svc.client.get("/v1/approvals").json()["approvals"],
                        "the request")
        assert p["to"] == "a1" and p["tool"] == "tools__shout"
        svc.wait(lambda: model.held.is_set(), "the lead's request carrying it")
        svc.kill()
        assert not calls.exists()
        model.release.set()
        svc = Service(root, model, *opts)
        # addressed to the lead again; the lead's approval cannot stand (its own policy says
        # ask_parent and it has no parent): it goes to a person
        (p,) = svc.wait(lambda: [a for a in svc.client.get("/v1/approvals").json()["approvals"]
                                 if "to" not in a], "the request, escalated to a person")
        assert (p["agent"], p["call_id"]) == ("a2", "s1")
        r = svc.client.post("/v1/agents/a2/approvals/s1", json={"decision": "approve"})
        assert r.status_code == 200, r.text
        svc.wait(lambda: _state(svc, "a1") == "ended", "the lead to end", timeout=90)
        assert svc.stop() == 0
    finally:
        model.close()
    assert [json.loads(x)["name"] for x in calls.read_text().splitlines()] == ["shout"]
    lead_bodies = [b for k, s, b in model.requests if k == "lead"]
    assert sum("[approval asked] your child a2" in b for b in lead_bodies[-1:]) == 1
    told = [json.loads(r["content"]) for x in (root / "agents" / "a1" / "record.jsonl")
            .read_text().splitlines() if (rec := json.loads(x))["t"] == "ToolResults"
            for r in rec["results"] if "escalated" in r["content"]]
    assert told and told[0]["escalated"] == "a person", "the lead was told it went to a person"
    verify(root)
