"""``GET /v1/agents/{id}/transcript`` and ``GET /v1/jobs/{id}/results`` over loopback HTTP: the
records a page renders as a conversation, in log order, paged by byte offset, long strings
clipped, inherited turns naming their ancestor; a job's results as a table with its failures."""

from __future__ import annotations

import json
import textwrap

import trio

from mnemon.session.log import iter_lines

from .test_api import _demo
from .util import live_service


async def _all(svc, aid: str, limit: int = 2000) -> list[dict]:
    out, after = [], 0
    for _ in range(1000):
        r = await svc.client.get(f"/v1/agents/{aid}/transcript", params={"after": after,
                                                                           "limit": limit})
        assert r.status_code == 200, r.text
        body = r.json()
        out += body["entries"]
        after = body["next"]
        if not body["more"]:
            return out
    raise AssertionError("the transcript never ended")


async def test_the_transcript_is_the_log_in_order_and_pages_by_offset(tmp_path):
    run = await _demo(tmp_path)
    async with live_service(run, read_only=True) as svc:
        whole = await _all(svc, "a1")
        paged = await _all(svc, "a1", limit=3)
        a3 = await _all(svc, "a3")
        bad = [await svc.client.get("/v1/agents/a1/transcript", params=p)
               for p in ({"after": "x"}, {"after": 10**9}, {"after": 5}, {"limit": 0})]
        missing = await svc.client.get("/v1/agents/a9/transcript")
    log = run / "agents" / "a1" / "record.jsonl"
    lines = [(off, json.loads(bytes(line))) for off, line in iter_lines(log)]
    assert [e["offset"] for e in whole] == [off for off, _ in lines]
    assert [e["record"]["t"] for e in whole] == [rec["t"] for _, rec in lines]
    assert paged == whole
    # the eviction notes, in place; the answer with the codeword; the tools by name only
    notes = [e["record"]["residue"] for e in whole if e["record"]["t"] == "Evicted"]
    assert notes[0]["span"] == [1, 3] and "codeword" in notes[0]["note"]
    assert "VESPER-7" in whole[-2]["record"]["blocks"][0]["text"]
    assert all(isinstance(n, str) for n in whole[0]["record"]["tools"])
    # a3 inherited a1's turns and a2's: each names the ancestor it comes from
    inherited = next(e["record"] for e in a3 if e["record"]["t"] == "Inherited")
    owner = {t["id"]: t["from"] for t in inherited["turns"]}
    assert {owner[i] for i in range(1, 13) if i in owner} == {"a1"}
    assert {owner[i] for i in owner if i > 13} == {"a2"}
    assert {"id", "role", "label", "bytes", "held"} <= set(inherited["turns"][0])
    assert [r.status_code for r in bad] == [400, 400, 400, 400]
    assert all("\n" not in r.json()["error"] for r in bad)
    assert missing.status_code == 404


async def test_a_long_string_is_clipped_and_said_to_be(tmp_path):
    long = "word " * 5000

    async def policy(request, state):
        return [{"type": "text", "text": long}], "end_turn"

    from mnemon.providers.scripted import ScriptedProvider

    async with live_service(tmp_path / "run", provider=ScriptedProvider(policy=policy)) as svc:
        r = await svc.client.post("/v1/agents", json={"prompt": "talk"})
        assert r.status_code == 201
        for _ in range(500):
            if (await svc.client.get("/v1/agents/a1")).json()["state"] != "running":
                break
            await trio.sleep(0.02)
        entries = await _all(svc, "a1")
    answer = next(e for e in entries if e["record"]["t"] == "AssistantMessage")
    assert answer["clipped"] is True
    text = answer["record"]["blocks"][0]["text"]
    assert text.endswith("…") and len(text) == 8192 + 1 and long.startswith(text[:-1])
    assert "clipped" not in entries[0]


async def test_a_jobs_results_table_has_the_typed_fields_and_the_failures(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    (job / "verdict.schema.json").write_text(json.dumps({
        "type": "object", "properties": {"city": {"type": "string"}, "score": {"type": "integer"}},
        "required": ["city", "score"]}))
    (job / "pol.py").write_text(textwrap.dedent("""
        import json

        def policy(request, state):
            said = json.dumps(request.messages)
            if "Nowhere" in said:
                return [{"type": "text", "text": "no idea"}], "end_turn"
            return [{"type": "text", "text": json.dumps({"city": "Paris", "score": 3})}], "end_turn"
    """))
    (job / "job.toml").write_text(textwrap.dedent("""
        [provider]
        name = "scripted"
        policy = "pol:policy"
        price_as = "claude-sonnet-4-5"

        [agent]
        output = "verdict.schema.json"
        output_retries = 0

        [[tasks]]
        id = "fr"
        prompt = "The capital of France?"

        [[tasks]]
        id = "xx"
        prompt = "The capital of Nowhere?"
    """))
    async with live_service(tmp_path / "run") as svc:
        r = await svc.client.post("/v1/jobs", json={"path": str(job / "job.toml"),
                                                     "run_root": str(tmp_path / "job-run")})
        assert r.status_code == 202, r.text
        jid = r.json()["id"]
        for _ in range(1500):
            got = (await svc.client.get(f"/v1/jobs/{jid}")).json()
            if got["state"] != "running":
                break
            await trio.sleep(0.02)
        results = (await svc.client.get(f"/v1/jobs/{jid}/results")).json()
        missing = await svc.client.get("/v1/jobs/j9/results")
    assert got["state"] == "ended" and got["done"] == 1 and got["failed"] == 1, got
    assert results["job"] == jid
    assert results["columns"] == ["task", "status", "agent", "city", "score", "reason", "cost_usd"]
    rows = {row["task"]: row for row in results["rows"]}
    assert rows["fr"]["city"] == "Paris" and rows["fr"]["score"] == 3
    assert rows["fr"]["status"] == "done" and rows["fr"]["cost_usd"] > 0
    assert rows["xx"]["city"] is None and rows["xx"]["status"] == "failed"
    assert [f["task"] for f in results["failed"]] == ["xx"]
    assert results["failed"][0]["reason"].startswith("failed: output")
    assert missing.status_code == 404
