"""The workspace over HTTP (docs/service.md, docs/workspace.md): a real service on loopback, a
scripted model whose file tools write real files into the run's store — an agent started with
``"workspace"``, its files at each turn, one file's bytes, the diff between turns, the changes
per turn, refusals as one-line 4xx answers, and a rewind that brings the files back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from mnemon.orchestrator.service.app import ROUTES, doc_path
from mnemon.providers.cache import CacheModel
from mnemon.providers.scripted import ScriptedProvider
from mnemon.session.records import Text, ToolUse

from ..service.util import live_service
from .helpers import provider, records, snapshots

pytestmark = pytest.mark.trio

SCRIPT = [
    [("fs_write", {"path": "notes/plan.md", "content": "# plan\nstep one\n"})],
    [("fs_edit", {"path": "notes/plan.md", "old": "step one", "new": "step one\nstep two"}),
     ("fs_write", {"path": "evil.html", "content": "<script>alert(1)</script>\n"})],
]


async def _ended(svc, aid: str) -> dict:
    for _ in range(1500):
        got = (await svc.client.get(f"/v1/agents/{aid}")).json()
        if got["state"] != "running":
            return got
        await trio.sleep(0.02)
    raise AssertionError(f"agent {aid} still running")


def _source(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "README").write_text("hello\n")
    (src / "blob.bin").write_bytes(b"\x00\xff\xfe binary")
    return src


def _turn_of(root: Path, aid: str, n: int) -> int:
    """The turn after which the ``n``-th change (1-based) was recorded."""
    return [s for s in snapshots(root, aid) if s.get("why") is None][n - 1]["turn"]


async def test_an_agents_files_at_each_turn_its_diff_and_its_changes(tmp_path):
    src = _source(tmp_path)
    async with live_service(tmp_path / "run", provider=provider(SCRIPT)) as svc:
        r = await svc.client.post("/v1/agents", json={
            "prompt": "write the plan", "workspace": {"source": str(src), "inherit": "empty"}})
        assert r.status_code == 201, r.text
        aid = r.json()["id"]
        got = await _ended(svc, aid)
        assert got["reason"] == "done", got
        root = svc.root
        t1, t2 = _turn_of(root, aid, 1), _turn_of(root, aid, 2)
        assert t1 < t2

        latest = (await svc.client.get(f"/v1/agents/{aid}/workspace")).json()
        assert latest["agent"] == aid and latest["turn"] is None
        assert len(latest["snapshot"]) == 40
        assert {f["path"]: f["size"] for f in latest["files"]} == {
            "README": 6, "blob.bin": 10, "evil.html": 26, "notes/plan.md": 25}
        assert {f["kind"] for f in latest["files"]} == {"file"}
        assert [t["why"] for t in latest["turns"]] == ["start", "tools", "tools"]
        assert latest["turns"][0]["source"] == f"copy:{src.resolve()}"
        assert latest["snapshot"] == latest["turns"][-1]["snapshot"]

        first = (await svc.client.get(f"/v1/agents/{aid}/workspace", params={"turn": t1})).json()
        assert first["turn"] == t1
        assert sorted(f["path"] for f in first["files"]) == ["README", "blob.bin", "notes/plan.md"]
        before = (await svc.client.get(f"/v1/agents/{aid}/workspace", params={"turn": 0})).json()
        assert sorted(f["path"] for f in before["files"]) == ["README", "blob.bin"]

        # one file's bytes: text as text/plain, the rest as opaque bytes
        f = await svc.client.get(f"/v1/agents/{aid}/workspace/files/notes/plan.md")
        assert f.status_code == 200 and f.headers["content-type"] == "text/plain; charset=utf-8"
        assert f.text == "# plan\nstep one\nstep two\n"
        assert f.headers["x-content-type-options"] == "nosniff"
        old = await svc.client.get(f"/v1/agents/{aid}/workspace/files/notes/plan.md",
                                   params={"turn": t1})
        assert old.text == "# plan\nstep one\n"
        b = await svc.client.get(f"/v1/agents/{aid}/workspace/files/blob.bin")
        assert b.headers["content-type"] == "application/octet-stream"
        assert b.content == b"\x00\xff\xfe binary"
        # absent (at that turn, or at all): 404 with the one-line message
        gone = await svc.client.get(f"/v1/agents/{aid}/workspace/files/evil.html",
                                    params={"turn": t1})
        assert gone.status_code == 404 and "evil.html is not in the workspace" in gone.json()["error"]
        assert (await svc.client.get(f"/v1/agents/{aid}/workspace/files/nope")).status_code == 404
        assert (await svc.client.get(f"/v1/agents/{aid}/workspace/files/notes")).status_code == 404
        # confined: a climb, .git, an absolute path (encoded so no client folds it away) → 400
        for bad in ("..%2F..%2Fetc%2Fpasswd", "notes/%2E%2E/%2E%2E/x", ".git/config",
                    "%2Fetc%2Fpasswd", "a%00b"):
            r = await svc.client.get(f"/v1/agents/{aid}/workspace/files/{bad}")
            assert r.status_code == 400, (bad, r.status_code, r.text)
            assert "\n" not in r.json()["error"]
        for bad in ("x", "-1", "1.5", "9" * 13):
            r = await svc.client.get(f"/v1/agents/{aid}/workspace", params={"turn": bad})
            assert r.status_code == 400 and r.json()["error"] == "turn is a turn id, a whole number"

        # the diff between two turns, unified, as text/x-diff
        d = await svc.client.get(f"/v1/agents/{aid}/workspace/diff",
                                 params={"from": t1, "to": t2})
        assert d.status_code == 200 and d.headers["content-type"].startswith("text/x-diff")
        assert "+step two" in d.text and "+<script>alert(1)</script>" in d.text
        assert "+# plan" not in d.text  # turn 1's own change is before `from`
        whole = (await svc.client.get(f"/v1/agents/{aid}/workspace/diff")).text
        assert "+# plan" in whole and "+step two" in whole and "README" not in whole
        # the changes per turn, and a diff between the snapshots they name
        ch = (await svc.client.get(f"/v1/agents/{aid}/workspace/changes")).json()
        assert ch["agent"] == aid
        assert [(c["turn"], c["why"]) for c in ch["changes"]] == [(t1, "tools"), (t2, "tools")]
        assert ch["changes"][0]["files"] == [{"status": "A", "path": "notes/plan.md"}]
        assert sorted((x["status"], x["path"]) for x in ch["changes"][1]["files"]) == [
            ("A", "evil.html"), ("M", "notes/plan.md")]
        c2 = ch["changes"][1]
        same = await svc.client.get(f"/v1/agents/{aid}/workspace/diff",
                                    params={"from": c2["from"], "to": c2["to"]})
        assert same.text == d.text
        # a snapshot this agent's log does not name is not read (the store holds every agent's)
        stray = await svc.client.get(f"/v1/agents/{aid}/workspace/diff",
                                     params={"from": "4b825dc642cb6eb9a060e54bf8d69288fbee4904"})
        assert stray.status_code == 404 and "names no snapshot" in stray.json()["error"]

        # an agent without a workspace: 404 with a message on every workspace route
        plain = (await svc.client.post("/v1/agents", json={"prompt": "no files"})).json()["id"]
        await _ended(svc, plain)
        for path in ("workspace", "workspace/files/a", "workspace/diff", "workspace/changes"):
            r = await svc.client.get(f"/v1/agents/{plain}/{path}")
            assert r.status_code == 404, (path, r.text)
            assert r.json()["error"] == f"agent {plain} has no workspace (it was started without one)"
        assert (await svc.client.get("/v1/agents/a99/workspace")).status_code == 404
    # read-only, the same answers from the logs and the store alone
    async with live_service(tmp_path / "run", read_only=True) as ro:
        again = (await ro.client.get(f"/v1/agents/{aid}/workspace/diff",
                                     params={"from": t1, "to": t2})).text
        assert again == d.text
        f = await ro.client.get(f"/v1/agents/{aid}/workspace/files/notes/plan.md",
                                params={"turn": t1})
        assert f.text == "# plan\nstep one\n"


async def test_the_workspace_routes_need_the_token(tmp_path):
    import httpx

    async with live_service(tmp_path / "run") as svc:
        async with httpx.AsyncClient(base_url=svc.base) as bare:
            for path in ("workspace", "workspace/files/a", "workspace/diff", "workspace/changes"):
                assert (await bare.get(f"/v1/agents/a1/{path}")).status_code == 401


def _holding(gates: dict[str, trio.Event]):
    """A model that writes a file, then thinks until its agent's gate is set, then answers."""
    async def policy(request, state):
        i = state["i"] = state.get("i", 0) + 1
        agent = request.meta["agent"]
        if i == 1:
            return [ToolUse("c1", "fs_write", {"path": "out.txt",
                                               "content": f"{agent}\n"})], "tool_use"
        await gates.setdefault(agent, trio.Event()).wait()
        return [Text("done")], "end_turn"
    return ScriptedProvider(policy=policy, cache_model=CacheModel())


async def test_in_place_one_agent_per_directory_and_refusals_are_one_line(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    gates: dict[str, trio.Event] = {}
    async with live_service(tmp_path / "run", provider=_holding(gates)) as svc:
        r = await svc.client.post("/v1/agents", json={"prompt": "work", "workspace": str(work)})
        assert r.status_code == 201, r.text
        aid = r.json()["id"]
        for _ in range(500):
            if (work / "out.txt").exists():
                break
            await trio.sleep(0.02)
        assert (work / "out.txt").read_text() == f"{aid}\n"  # in place: the user's directory
        # a second agent on the directory the first works in: 409, and no agent made
        ids = [a["id"] for a in (await svc.client.get("/v1/agents")).json()["agents"]]
        busy = await svc.client.post("/v1/agents", json={"prompt": "me too",
                                                          "workspace": {"dir": str(work)}})
        assert busy.status_code == 409, busy.text
        assert "is in use by another agent" in busy.json()["error"]
        assert [a["id"] for a in (await svc.client.get("/v1/agents")).json()["agents"]] == ids
        # a running agent with files is not rewound under its tools
        rw = await svc.client.post(f"/v1/agents/{aid}/rewind", json={"to": 0})
        assert rw.status_code == 409 and "is running" in rw.json()["error"]
        gates.setdefault(aid, trio.Event()).set()
        assert (await _ended(svc, aid))["reason"] == "done"
        # the directory is free once it ended: another agent takes it…
        again = await svc.client.post("/v1/agents", json={"prompt": "now me",
                                                           "workspace": str(work)})
        assert again.status_code == 201, again.text
        other = again.json()["id"]
        for _ in range(500):
            if (work / "out.txt").read_text() == f"{other}\n":
                break
            await trio.sleep(0.02)
        # …and the first one, while it works there, is neither prompted nor rewound into it
        n = len(records(svc.root, aid))
        for path, body in (("prompt", {"prompt": "more"}), ("rewind", {"to": 0})):
            r = await svc.client.post(f"/v1/agents/{aid}/{path}", json=body)
            assert r.status_code == 409 and "is in use by another agent" in r.json()["error"], r.text
        assert len(records(svc.root, aid)) == n  # nothing written
        assert (work / "out.txt").read_text() == f"{other}\n"
        gates.setdefault(other, trio.Event()).set()
        await _ended(svc, other)
        # settings that cannot be used: 422, one line, nothing made
        n = len((await svc.client.get("/v1/agents")).json()["agents"])
        for ws, says in ((str(tmp_path / "missing"), "is not a directory"),
                         ({"source": str(tmp_path / "missing")}, "is not a directory"),
                         ({"dir": str(work), "source": str(work)}, "not both"),
                         ({"dir": str(work), "colour": "red"}, "has no key 'colour'"),
                         ({"dir": str(work), "inherit": "all"}, "inherit is one of"),
                         ({"dir": 7}, "must be a string"),
                         ("  ", "needs a path"),
                         (str(svc.root), "is the run root itself")):
            r = await svc.client.post("/v1/agents", json={"prompt": "x", "workspace": ws})
            assert r.status_code == 422, (ws, r.status_code, r.text)
            assert says in r.json()["error"] and "\n" not in r.json()["error"], r.json()
        assert len((await svc.client.get("/v1/agents")).json()["agents"]) == n
        r = await svc.client.post("/v1/agents", json={"prompt": "x", "workspace": 7})
        assert r.status_code == 422  # neither a path nor an object: the schema refuses it


async def test_a_rewind_over_http_brings_the_files_back(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "keep.txt").write_text("kept\n")
    run = tmp_path / "run"
    async with live_service(run, provider=provider(SCRIPT)) as svc:
        aid = (await svc.client.post("/v1/agents", json={
            "prompt": "write", "workspace": str(work)})).json()["id"]
        assert (await _ended(svc, aid))["reason"] == "done"
        assert (work / "evil.html").exists()
        t1 = _turn_of(run, aid, 1)
        r = await svc.client.post(f"/v1/agents/{aid}/rewind", json={"to": t1})
        assert r.status_code == 200, r.text
        # the files as they stood after turn t1: the second turn's edit and file undone
        assert (work / "notes" / "plan.md").read_text() == "# plan\nstep one\n"
        assert not (work / "evil.html").exists()
        assert (work / "keep.txt").read_text() == "kept\n"
        tail = [x["t"] for x in records(run, aid)][-3:]
        assert tail == ["SessionEnded", "Rewound", "WorkspaceSnapshot"]
        rew = snapshots(run, aid)[-1]
        assert rew["why"] == "rewind" and rew["turn"] == t1
        listing = (await svc.client.get(f"/v1/agents/{aid}/workspace")).json()
        assert listing["snapshot"] == rew["snapshot"]
        assert sorted(f["path"] for f in listing["files"]) == ["keep.txt", "notes/plan.md"]
        # the directory is free again after the rewind
        other = await svc.client.post("/v1/agents", json={"prompt": "x", "workspace": str(work)})
        assert other.status_code == 201
        await _ended(svc, other.json()["id"])
    # a service started later over the same run root: the agent is reopened from its log for
    # the edit, its files brought back to the start, its end recorded again
    (work / "stray.txt").write_text("someone's\n")
    async with live_service(run, provider=provider([])) as svc:
        r = await svc.client.post(f"/v1/agents/{aid}/rewind", json={"to": 0})
        assert r.status_code == 200, r.text
        assert sorted(p.name for p in work.iterdir()) == ["keep.txt"]
        recs = records(run, aid)
        assert [x["t"] for x in recs][-3:] == ["Rewound", "WorkspaceSnapshot", "SessionEnded"]
        assert recs[-2]["why"] == "rewind" and recs[-2]["turn"] == 0
        assert (await svc.client.get(f"/v1/agents/{aid}")).json()["state"] == "ended"
        # a rewind into the turn it stands at already writes no second snapshot
        n = len(snapshots(run, aid))
        assert (await svc.client.post(f"/v1/agents/{aid}/rewind", json={"to": 0})).status_code == 200
        assert len(snapshots(run, aid)) == n


async def test_the_openapi_document_has_the_workspace_routes(tmp_path):
    from openapi_spec_validator import validate

    async with live_service(tmp_path / "run", read_only=False) as svc:
        doc = (await svc.client.get("/v1/openapi.json")).json()
    validate(doc)
    assert {doc_path(s.path) for s in ROUTES} == set(doc["paths"])
    f = doc["paths"]["/v1/agents/{id}/workspace/files/{path}"]["get"]
    assert {p["name"] for p in f["parameters"]} == {"id", "path", "turn"}
    assert set(f["responses"]["200"]["content"]) == {"text/plain", "application/octet-stream"}
    d = doc["paths"]["/v1/agents/{id}/workspace/diff"]["get"]
    assert set(d["responses"]["200"]["content"]) == {"text/x-diff"}
    assert {p["name"] for p in d["parameters"]} == {"id", "from", "to"}
    ws = doc["paths"]["/v1/agents/{id}/workspace"]["get"]["responses"]["200"]
    assert ws["content"]["application/json"]["schema"]["$ref"].endswith("/WorkspaceOut")
    create = doc["components"]["schemas"]["AgentCreate"]["properties"]["workspace"]
    assert json.dumps(create).count("string") >= 1 and "object" in json.dumps(create)
