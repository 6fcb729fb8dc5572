"""The service's HTTP API over real loopback HTTP: auth, agents, the door, errors, OpenAPI."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest
import trio

from mnemon.orchestrator.service.app import PAGES, ROUTES, doc_path
from mnemon.providers.scripted import ScriptedProvider
from mnemon.session.log import iter_lines

from .util import TOKEN, live_service, slow_policy


def _path(spec, aid="a1"):
    return spec.path.replace("{id}", aid).replace("{name}", "app.js")


async def _demo(tmp_path):
    run = tmp_path / "demo"
    proc = subprocess.run([sys.executable, "-m", "mnemon", "demo", "--run-root", str(run)],
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return run


async def test_every_route_but_health_and_the_page_needs_the_token(tmp_path):
    run = await _demo(tmp_path)
    async with live_service(run, read_only=True) as svc:
        bare = httpx.AsyncClient(base_url=svc.base, timeout=20)
        wrong = httpx.AsyncClient(base_url=svc.base, timeout=20,
                                  headers={"Authorization": "Bearer not-the-token-at-all"})
        try:
            for spec in ROUTES:
                for client in (bare, wrong):
                    r = await client.request(spec.method, _path(spec), json={})
                    if spec.path == "/v1/health":
                        assert r.status_code == 200
                    else:
                        assert r.status_code == 401, (spec.path, r.status_code)
                        if client is bare:
                            assert r.headers["www-authenticate"] == "Bearer"
                            assert r.json() == {"error": "a bearer token is required"}
                        else:  # a token, but not this one: told so, not "required"
                            assert r.headers["www-authenticate"] == 'Bearer error="invalid_token"'
                            assert r.json() == {"error": "the bearer token is wrong"}
            for spec in PAGES:  # (the icon: none, and no token asked for it)
                want = 204 if spec.name == "favicon" else 200
                assert (await bare.get(_path(spec))).status_code == want, spec.path
            r = await svc.client.get("/v1/agents")
            assert r.status_code == 200 and [a["id"] for a in r.json()["agents"]] == ["a1", "a2", "a3"]
        finally:
            await bare.aclose()
            await wrong.aclose()


async def test_openapi_validates_and_matches_the_routes(tmp_path):
    from openapi_spec_validator import validate

    run = await _demo(tmp_path)
    async with live_service(run, read_only=True) as svc:
        doc = (await svc.client.get("/v1/openapi.json")).json()
    validate(doc)
    served = {(s.method.lower(), doc_path(s.path)) for s in ROUTES}
    documented = {(m, p) for p, ops in doc["paths"].items() for m in ops}
    assert served == documented
    create = doc["paths"]["/v1/agents"]["post"]
    schema = doc["components"]["schemas"][create["requestBody"]["content"]["application/json"]
                                          ["schema"]["$ref"].rsplit("/", 1)[1]]
    assert schema["required"] == ["prompt"]


async def test_start_an_agent_read_its_transcript_and_survey(tmp_path):
    async with live_service(tmp_path / "run") as svc:
        r = await svc.client.post("/v1/agents", json={"prompt": "find the codeword ZEPHYR-9"})
        assert r.status_code == 201
        aid = r.json()["id"]
        assert aid == "a1" and r.json()["state"] == "running"
        for _ in range(1000):
            got = (await svc.client.get(f"/v1/agents/{aid}")).json()
            if got["state"] != "running":
                break
            await trio.sleep(0.02)
        assert got["state"] == "ended" and got["reason"] == "done"
        assert got["answer"] == "(scripted) You said: find the codeword ZEPHYR-9"
        assert got["usage"]["output_tokens"] > 0 and got["cost_usd"] > 0
        index = (await svc.client.get(f"/v1/agents/{aid}/index")).json()["rows"]
        assert [r["role"] for r in index] == ["user", "assistant"]
        grep = (await svc.client.get(f"/v1/agents/{aid}/grep", params={"pattern": "ZEPHYR-\\d"})).json()
        assert grep["total"] == 2 and grep["hits"][0]["turn"] == 1
        read = (await svc.client.get(f"/v1/agents/{aid}/read", params={"turns": "1"})).json()
        assert read["rows"][0]["turn"] == 1
        survey = (await svc.client.get(f"/v1/agents/{aid}/context")).json()
        assert [f["kind"] for f in survey["frontier"]] == ["turn", "turn"]
        tree = (await svc.client.get("/v1/tree")).json()["tree"]
        assert tree[0]["agent"] == "a1"
        cost = (await svc.client.get("/v1/cost")).json()
        assert cost["total"]["cost_usd"] == pytest.approx(got["cost_usd"], abs=1e-6)
        settings = await svc.client.post("/v1/agents", json={"prompt": "again", "system": "Be terse.",
                                                              "max_turns": 3})
        assert settings.status_code == 201


async def test_prompt_clear_rewind_cancel_and_fork(tmp_path):
    async with live_service(tmp_path / "run",
                            provider=ScriptedProvider(policy=slow_policy(0.3))) as svc:
        aid = (await svc.client.post("/v1/agents", json={"prompt": "first"})).json()["id"]
        r = await svc.client.post(f"/v1/agents/{aid}/prompt", json={"prompt": "second"})
        assert r.status_code == 409 and "running" in r.json()["error"]
        child = await svc.client.post(f"/v1/agents/{aid}/fork", json={"task": "look aside"})
        assert child.status_code == 201, child.text
        cid = child.json()["id"]
        assert child.json()["parent"] == aid and child.json()["kind"] == "mnemon"
        r = await svc.client.post(f"/v1/agents/{aid}/cancel")
        assert r.status_code == 200
        for _ in range(1000):
            states = {a["id"]: a for a in (await svc.client.get("/v1/agents")).json()["agents"]}
            if all(a["state"] != "running" for a in states.values()):
                break
            await trio.sleep(0.02)
        assert states[aid]["state"] == "cancelled" and states[cid]["state"] == "cancelled"
        assert states[aid]["children"] == [cid]
        r = await svc.client.post(f"/v1/agents/{aid}/prompt", json={"prompt": "second"})
        assert r.status_code == 202 and r.json()["state"] == "running"
        for _ in range(1000):
            got = (await svc.client.get(f"/v1/agents/{aid}")).json()
            if got["state"] != "running":
                break
            await trio.sleep(0.02)
        assert got["state"] == "ended" and got["answer"] == "done thinking"
        rows = (await svc.client.get(f"/v1/agents/{aid}/index")).json()["rows"]
        last = rows[-1]["id"]
        bad = await svc.client.post(f"/v1/agents/{aid}/rewind", json={"to": last + 100})
        assert bad.status_code == 409 and "\n" not in bad.json()["error"]
        ok = await svc.client.post(f"/v1/agents/{aid}/rewind", json={"to": rows[0]["id"]})
        assert ok.status_code == 200
        survey = (await svc.client.get(f"/v1/agents/{aid}/context")).json()
        assert [f["id"] for f in survey["frontier"]] == [rows[0]["id"]]
        assert (await svc.client.post(f"/v1/agents/{aid}/clear")).status_code == 200
        assert (await svc.client.get(f"/v1/agents/{aid}/context")).json()["frontier"] == []
        r = await svc.client.post(f"/v1/agents/{aid}/cancel")
        assert r.status_code == 409


async def test_bad_input_is_a_one_line_4xx_and_writes_nothing(tmp_path):
    async with live_service(tmp_path / "run") as svc:
        aid = (await svc.client.post("/v1/agents", json={"prompt": "x"})).json()["id"]
        await trio.sleep(0.2)
        log = svc.root / "agents" / aid / "record.jsonl"
        before = log.read_bytes()
        cases = [
            ("POST", "/v1/agents", {"content": b"{not json"}, 400),
            ("POST", "/v1/agents", {"json": {"prompt": "x", "colour": "red"}}, 422),
            ("POST", "/v1/agents", {"json": {"prompt": ""}}, 422),
            ("POST", "/v1/agents", {"json": {"prompt": "x", "keep": 2}}, 422),
            ("POST", "/v1/agents", {"content": b'{"prompt": "' + b"x" * (2 << 20) + b'"}'}, 413),
            ("GET", "/v1/agents/zz9", {}, 404),
            ("GET", "/v1/agents/../run.json", {}, 404),
            ("POST", f"/v1/agents/{aid}/rewind", {"json": {"to": -1}}, 422),
            ("GET", f"/v1/agents/{aid}/read", {}, 400),
            ("GET", f"/v1/agents/{aid}/read", {"params": {"turns": "x-y"}}, 400),
            ("GET", f"/v1/agents/{aid}/read", {"params": {"turns": "999"}}, 400),
            ("GET", f"/v1/agents/{aid}/grep", {"params": {"pattern": "(unclosed"}}, 400),
            ("GET", f"/v1/agents/{aid}/grep", {"params": {"pattern": "(a+)+$", "timeout_s": "x"}}, 400),
            ("GET", f"/v1/agents/{aid}/events", {"headers": {"Last-Event-ID": "garbage"}}, 400),
            ("GET", f"/v1/agents/{aid}/events", {"headers": {"Last-Event-ID": f"{aid}:99999999"}}, 400),
            ("GET", "/v1/events", {"headers": {"Last-Event-ID": "zz:1"}}, 400),
            ("DELETE", "/v1/agents", {}, 405),
            ("GET", "/v1/nope", {}, 404),
        ]
        for method, path, kw, status in cases:
            r = await svc.client.request(method, path, **kw)
            assert r.status_code == status, (method, path, r.status_code, r.text[:200])
            err = r.json()["error"]
            assert err and "\n" not in err and "Traceback" not in err
        assert log.read_bytes() == before
        assert len((await svc.client.get("/v1/agents")).json()["agents"]) == 1


async def test_a_grep_that_runs_too_long_is_refused_by_name(tmp_path):
    async with live_service(tmp_path / "run") as svc:
        aid = (await svc.client.post("/v1/agents", json={"prompt": "a" * 30000 + "!"})).json()["id"]
        await trio.sleep(0.3)
        r = await svc.client.get(f"/v1/agents/{aid}/grep",
                                 params={"pattern": "(a|aa)+b", "timeout_s": "0.05"})
        assert r.status_code == 400 and "narrow it" in r.json()["error"]


async def test_read_only_refuses_every_write(tmp_path):
    run = await _demo(tmp_path)
    before = {p: p.read_bytes() for p in run.rglob("record.jsonl")}
    async with live_service(run, read_only=True) as svc:
        for path, body in [("/v1/agents", {"prompt": "x"}), ("/v1/agents/a1/prompt", {"prompt": "x"}),
                           ("/v1/agents/a1/clear", None), ("/v1/agents/a1/rewind", {"to": 1}),
                           ("/v1/agents/a1/cancel", None), ("/v1/agents/a1/fork", {"task": "t"})]:
            r = await svc.client.post(path, json=body)
            assert r.status_code == 409 and r.json()["error"] == "this run root is served read-only"
        info = (await svc.client.get("/v1/run")).json()
        assert info["read_only"] is True and info["agents"] == 3
    assert {p: p.read_bytes() for p in run.rglob("record.jsonl")} == before


async def test_the_token_is_never_logged_or_recorded(tmp_path):
    async with live_service(tmp_path / "run") as svc:
        await svc.client.post("/v1/agents", json={"prompt": "hello"})
        await trio.sleep(0.2)
        await httpx.AsyncClient(base_url=svc.base).get("/v1/agents",
                                                       headers={"Authorization": "Bearer wrong"})
    for p in (tmp_path / "run").rglob("*"):
        if p.is_file():
            assert TOKEN.encode() not in p.read_bytes(), p


def test_serve_refuses_a_public_address_without_a_token(tmp_path):
    env = {k: v for k, v in __import__("os").environ.items() if k != "MNEMON_TOKEN"}
    proc = subprocess.run([sys.executable, "-m", "mnemon", "serve", "--host", "0.0.0.0",
                           "--run-root", str(tmp_path / "r")], capture_output=True, text=True,
                          timeout=60, env=env)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "mnemon: refusing to serve on 0.0.0.0 without a token: pass --token or set MNEMON_TOKEN "
        "(a generated token is for loopback only)"]
    proc = subprocess.run([sys.executable, "-m", "mnemon", "serve", "--token", "short"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "at least 16" in proc.stderr


async def test_edits_to_agents_recorded_before_the_service_started(tmp_path):
    """Serving an existing run root writable: a rewind into a residue is refused and writes
    nothing; a valid one is recorded and the agent stays ended; a prompt reopens it once."""
    from mnemon.orchestrator.supervisor import _has_ended

    run = await _demo(tmp_path)
    log = run / "agents" / "a1" / "record.jsonl"
    before = log.read_bytes()
    async with live_service(run) as svc:
        survey = (await svc.client.get("/v1/agents/a1/context")).json()
        residue = next(f for f in survey["frontier"] if f["kind"] == "residue")
        a, b = residue["span"]
        r = await svc.client.post("/v1/agents/a1/rewind", json={"to": a})
        assert r.status_code == 409 and "would split the residue" in r.json()["error"]
        assert log.read_bytes() == before
        assert (await svc.client.get("/v1/agents")).json()["agents"][0]["state"] == "ended"
        last = survey["frontier"][-1]["id"]
        assert (await svc.client.post("/v1/agents/a2/rewind", json={"to": 10**6})).status_code == 409
        r = await svc.client.post("/v1/agents/a1/rewind", json={"to": last})
        assert r.status_code == 200 and r.json()["state"] == "ended"
        assert _has_ended(log)
        r = await svc.client.post("/v1/agents/a3/prompt", json={"prompt": "once more"})
        assert r.status_code == 202
        for _ in range(1000):
            got = (await svc.client.get("/v1/agents/a3")).json()
            if got["state"] != "running":
                break
            await trio.sleep(0.02)
        assert got["state"] == "ended"
    text = (run / "agents" / "a3" / "record.jsonl").read_bytes()
    assert text.count(b'"t":"SessionResumed"') == 1
    assert subprocess.run([sys.executable, "-m", "mnemon", "verify", str(run)],
                          capture_output=True).returncode == 0


async def test_a_job_runs_in_its_own_run_root_and_reports_progress(tmp_path):
    import shutil
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "docs" / "examples" / "capitals"
    job_dir = tmp_path / "job"
    shutil.copytree(src, job_dir)
    async with live_service(tmp_path / "run") as svc:
        bad = await svc.client.post("/v1/jobs", json={"path": str(job_dir / "nope.toml")})
        assert bad.status_code == 422 and "\n" not in bad.json()["error"]
        broken = job_dir / "broken.toml"
        broken.write_text((job_dir / "capitals.toml").read_text().replace("max_turns", "max_trns"))
        r = await svc.client.post("/v1/jobs", json={"path": str(broken)})
        assert r.status_code == 422 and "max_trns" in r.json()["error"]
        r = await svc.client.post("/v1/jobs", json={"path": str(job_dir / "capitals.toml"),
                                                     "run_root": str(tmp_path / "job-run")})
        assert r.status_code == 202, r.text
        jid = r.json()["id"]
        for _ in range(1500):
            got = (await svc.client.get(f"/v1/jobs/{jid}")).json()
            if got["state"] != "running":
                break
            await trio.sleep(0.02)
        assert got["state"] == "ended", got
        assert got["done"] == got["total"] > 0 and got["failed"] == 0 and got["cost_usd"] > 0
        listed = (await svc.client.get("/v1/jobs")).json()["jobs"]
        assert [j["id"] for j in listed] == [jid]
        assert (await svc.client.post(f"/v1/jobs/{jid}/cancel")).status_code == 409
        assert (await svc.client.get("/v1/jobs/j99")).status_code == 404
        # the served run root holds none of the job's agents
        assert (await svc.client.get("/v1/agents")).json()["agents"] == []
    lines = (tmp_path / "job-run" / "results.jsonl").read_text().splitlines()
    assert len(lines) == got["total"]


async def test_a_read_only_service_runs_no_jobs(tmp_path):
    run = await _demo(tmp_path)
    async with live_service(run, read_only=True) as svc:
        r = await svc.client.post("/v1/jobs", json={"path": "x.toml"})
        assert r.status_code == 409


async def test_an_agent_ending_while_its_view_is_read_is_never_open(tmp_path, monkeypatch):
    """``Run.view`` runs in a worker thread while the agent's loop goes on: an agent that ends
    between the view's two reads (its live state, its log) is seen running or ended, never
    "open" (a log with no end and no live loop). The loop records ``SessionEnded`` before it
    stops being running; the view reads the state first."""
    from mnemon.orchestrator.service import runs
    from mnemon.session.records import SessionEnded

    async with live_service(tmp_path / "run",
                            provider=ScriptedProvider(policy=slow_policy(30))) as svc:
        aid = (await svc.client.post("/v1/agents", json={"prompt": "first"})).json()["id"]
        await trio.sleep(0.2)
        run = svc.run
        node = run.sup.agents[aid]
        assert node.state == "running"
        real = runs._Scan.advance

        def advance(scan, path, ttl):  # the agent ends just after its log was read
            real(scan, path, ttl)
            if node.state == "running":
                node.log.append(SessionEnded(reason="done", at="2026-12-02T00:00:00.000000Z"))
                node.state = "ended"

        monkeypatch.setattr(runs._Scan, "advance", advance)
        seen = run.view(aid, children=[]).state  # (as views() calls it: one read of the log)
        assert seen in ("running", "ended"), seen
        monkeypatch.setattr(runs._Scan, "advance", real)
        assert run.view(aid).state == "ended"
        node.scope.cancel()


def test_a_generated_token_can_be_passed_back_on_the_command_line(monkeypatch):
    """A generated token never begins with ``-`` (``mnemon serve --token -AbC…`` would read it
    as an option, 1 in 64 of them): such a draw is drawn again."""
    from mnemon.orchestrator.service import auth

    draws = iter(["-" + "a" * 31, "_" + "b" * 31])
    monkeypatch.setattr(auth.secrets, "token_urlsafe", lambda n: next(draws))
    token, generated = auth.resolve_token(None, {})
    assert (token, generated) == ("_" + "b" * 31, True)
