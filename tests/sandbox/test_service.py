"""The sandboxed shell over HTTP (docs/service.md, docs/sandbox.md), on a real service on
loopback, each command under the real bubblewrap: ``"sandbox"`` in ``POST /v1/agents`` only
narrows the service's (a wider ask refused with 422 naming the key, nothing started), the
agent's view and ``GET /v1/run`` show the sandbox, ``kind = "none"`` is shown where it is in
force; and a policy ``ask`` on a command pattern: the approval shows the command, an approval
runs it under bubblewrap, a rejection runs nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from mnemon.orchestrator.policy import parse_policy
from mnemon.orchestrator.sandbox import SandboxSettings
from mnemon.orchestrator.settings import Settings
from mnemon.providers.cache import CacheModel
from mnemon.providers.scripted import ScriptedProvider
from mnemon.session.records import Text, ToolUse

from ..service.util import live_service
from .conftest import needs_bwrap

pytestmark = [pytest.mark.trio, needs_bwrap]
pytest.importorskip("hypercorn")


def by_agent(calls: dict[str, list[tuple[str, str]]]):
    """Agent ``aN`` runs its ``(call id, command)`` list, one shell call a turn, then answers;
    ``seen[agent]`` holds the tool results it was sent."""
    seen: dict[str, list[dict]] = {}

    def policy(request, state):
        agent = request.meta["agent"]
        msg = request.messages[-1] if request.messages else None
        if msg and msg["role"] == "user" and isinstance(msg["content"], list):
            seen.setdefault(agent, []).extend(
                b for b in msg["content"] if b.get("type") == "tool_result")
        i = state["i"] = state.get("i", 0) + 1
        mine = calls.get(agent, [])
        if i <= len(mine):
            cid, command = mine[i - 1]
            return [ToolUse(cid, "shell", {"command": command})], "tool_use"
        return [Text("finished")], "end_turn"

    policy.seen = seen  # type: ignore[attr-defined]
    return policy


def provider(policy) -> ScriptedProvider:
    return ScriptedProvider(policy=policy, cache_model=CacheModel())


def text_of(result: dict) -> str:
    c = result["content"]
    return c if isinstance(c, str) else " ".join(b.get("text", "") for b in c)


async def ended(svc, aid: str) -> dict:
    with trio.fail_after(60):
        while True:
            got = (await svc.client.get(f"/v1/agents/{aid}")).json()
            if got["state"] != "running":
                return got
            await trio.sleep(0.02)


def opening(root: Path, aid: str) -> dict:
    with open(root / "agents" / aid / "record.jsonl") as f:
        return json.loads(f.readline())


def workdir(tmp_path: Path, name: str, *files: str) -> Path:
    d = tmp_path / name
    d.mkdir()
    for f in files:
        (d / f).write_text(f"{f}\n")
    return d


async def test_a_posted_sandbox_only_narrows_the_services_and_is_shown(tmp_path):
    work = workdir(tmp_path, "work")
    model = by_agent({"a1": [("c1", "pwd; echo hi > made.txt; cat made.txt")]})
    async with live_service(tmp_path / "run", provider=provider(model)) as svc:
        run = (await svc.client.get("/v1/run")).json()
        assert run["sandbox"]["kind"] == "bwrap" and run["sandbox"]["network"] is False
        assert run["workspace"] is False

        for ask, key in (({"network": True}, "sandbox.network"),
                         ({"kind": "none"}, "sandbox.kind"),
                         ({"memory_mb": 1 << 20}, "sandbox.memory_mb"),
                         ({"max_timeout_s": 7200}, "sandbox.max_timeout_s"),
                         ({"read_only": ["/opt"]}, "sandbox.read_only"),
                         ({"env": ["HOME_DIR"]}, "sandbox.env"),
                         ({"netwrok": False}, "sandbox.netwrok"),
                         ({"memory_mb": "lots"}, "sandbox.memory_mb")):
            r = await svc.client.post("/v1/agents", json={
                "prompt": "go", "workspace": str(work), "sandbox": ask})
            assert r.status_code == 422, (ask, r.text)
            error = r.json()["error"]
            assert error.startswith(key + " ") and "\n" not in error, error
        r = await svc.client.post("/v1/agents", json={"prompt": "go", "workspace": str(work),
                                                      "sandbox": {"kind": "none"}})
        assert r.json()["error"] == (
            'sandbox.kind "none" is wider than this service\'s sandbox (serve --sandbox) '
            '(kind = "bwrap"): an agent\'s sandbox may only narrow it')
        r = await svc.client.post("/v1/agents", json={"prompt": "go", "sandbox": {}})
        assert r.status_code == 422 and "no workspace" in r.json()["error"]
        r = await svc.client.post("/v1/agents", json={"prompt": "go", "workspace": str(work),
                                                      "sandbox": ["bwrap"]})
        assert r.status_code == 422 and "sandbox" in r.json()["error"]  # not an object
        assert (await svc.client.get("/v1/agents")).json()["agents"] == []  # none started

        r = await svc.client.post("/v1/agents", json={
            "prompt": "go", "workspace": str(work),
            "sandbox": {"memory_mb": 512, "max_timeout_s": 30, "network": False}})
        assert r.status_code == 201, r.text
        aid = r.json()["id"]
        view = await ended(svc, aid)
        assert view["reason"] == "done"
        sb = view["sandbox"]
        assert sb["kind"] == "bwrap" and sb["network"] is False
        assert sb["memory_mb"] == 512 and sb["max_timeout_s"] == 30 and sb["timeout_s"] == 30
        assert opening(svc.root, aid)["sandbox"] == sb  # the view is the opening record's
        listed = (await svc.client.get("/v1/agents")).json()["agents"]
        assert listed[0]["sandbox"] == sb
    out = text_of(model.seen[aid][0])
    # under bubblewrap: the workspace is /workspace inside, the file is in the user's directory
    assert out.startswith("exit 0") and "unsandboxed" not in out, out
    assert "/workspace\nhi" in out
    assert (work / "made.txt").read_text() == "hi\n"


async def test_kind_none_is_shown_and_a_posted_bwrap_narrows_it(tmp_path):
    work, other = workdir(tmp_path, "work"), workdir(tmp_path, "other")
    model = by_agent({"a1": [("c1", "pwd")], "a2": [("d1", "pwd")]})
    settings = Settings(model="scripted", sandbox=SandboxSettings(kind="none"))
    async with live_service(tmp_path / "run", provider=provider(model),
                            settings=settings) as svc:
        run = (await svc.client.get("/v1/run")).json()
        assert run["sandbox"]["kind"] == "none"
        r = await svc.client.post("/v1/agents", json={"prompt": "go", "workspace": str(work),
                                                      "sandbox": {"kind": "none"}})
        assert r.status_code == 201, r.text
        r = await svc.client.post("/v1/agents", json={"prompt": "go", "workspace": str(other),
                                                      "sandbox": {"kind": "bwrap"}})
        assert r.status_code == 201, r.text
        r = await svc.client.post("/v1/agents", json={"prompt": "go", "workspace": str(other),
                                                      "sandbox": {"network": True}})
        assert r.status_code == 422 and r.json()["error"].startswith("sandbox.network true ")
        one, two = await ended(svc, "a1"), await ended(svc, "a2")
    assert one["sandbox"]["kind"] == "none" and two["sandbox"]["kind"] == "bwrap"
    loose, tight = text_of(model.seen["a1"][0]), text_of(model.seen["a2"][0])
    assert "unsandboxed (kind none)" in loose and str(work.resolve()) in loose, loose
    assert "unsandboxed" not in tight and "/workspace" in tight, tight


ASK_RM = {"rule": [{"tool": "shell", "when": {"command": "^rm "}, "action": "ask",
                    "reason": "removes files"}]}


async def wait_listed(svc, n: int) -> list[dict]:
    with trio.fail_after(60):
        while True:
            got = (await svc.client.get("/v1/approvals")).json()["approvals"]
            if len(got) >= n:
                return got
            await trio.sleep(0.02)


async def test_a_policy_ask_on_a_command_pattern_over_http(tmp_path):
    keep = workdir(tmp_path, "keep", "x", "y")
    lose = workdir(tmp_path, "lose", "x", "y")
    model = by_agent({
        "a1": [("c1", "echo unasked > free.txt"), ("c2", "rm -f x && pwd && ls")],
        "a2": [("d1", "rm -f x y")],
    })
    settings = Settings(model="scripted", tool_policy=parse_policy(ASK_RM, "served-policy"))
    async with live_service(tmp_path / "run", provider=provider(model),
                            settings=settings) as svc:
        for work in (lose, keep):
            r = await svc.client.post("/v1/agents", json={"prompt": "clean", "workspace":
                                                          str(work)})
            assert r.status_code == 201, r.text
        listed = await wait_listed(svc, 2)
        assert {(a["agent"], a["call_id"], a["tool"]) for a in listed} == {
            ("a1", "c2", "shell"), ("a2", "d1", "shell")}
        by_call = {a["call_id"]: a for a in listed}
        assert by_call["c2"]["input"] == {"command": "rm -f x && pwd && ls"}
        assert by_call["d1"]["input"] == {"command": "rm -f x y"}
        assert by_call["c2"]["reason"] == "removes files"
        assert by_call["c2"]["rule"] == "served-policy rule 1"
        # the unmatched command ran at once; the asked ones have not run
        assert (lose / "free.txt").read_text() == "unasked\n"
        assert (lose / "x").exists() and (keep / "x").exists() and (keep / "y").exists()

        r = await svc.client.post("/v1/agents/a1/approvals/c2", json={"decision": "approve"})
        assert r.status_code == 200 and r.json()["decision"] == "approve"
        r = await svc.client.post("/v1/agents/a2/approvals/d1",
                                  json={"decision": "reject", "reason": "keep them"})
        assert r.status_code == 200
        await ended(svc, "a1")
        await ended(svc, "a2")
        assert (await svc.client.get("/v1/approvals")).json() == {"approvals": []}
    assert not (lose / "x").exists() and (lose / "y").exists()
    assert (keep / "x").read_text() == "x\n" and (keep / "y").read_text() == "y\n"
    ran = text_of(model.seen["a1"][1])
    assert ran.startswith("exit 0") and "unsandboxed" not in ran
    assert ran.split("\n")[1] == "/workspace" and "free.txt" in ran and "y" in ran
    refused = model.seen["a2"][0]
    assert refused["is_error"] and "keep them" in text_of(refused)
