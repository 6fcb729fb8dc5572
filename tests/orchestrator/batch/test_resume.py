"""The batch engine's durability: SIGKILL between submit and collect and between collect and
record, expired and errored rows, a batch that fails whole, Ctrl-C, a server with no batch
routes, a provider with no batch API."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from mnemon.orchestrator.batch.waves import CRASH_AT
from mnemon.orchestrator.costs import run_cost

from .kit import check_once, popen_cli, records, results, run_cli, turns, write_job
from .server import Server

TASKS = 10


def _reference(tmp_path: Path, provider: str = "anthropic") -> tuple[dict, dict, float]:
    """An uninterrupted batch run of the job: its results, turns and cost."""
    with Server() as s:
        job = write_job(tmp_path / "ref", provider=provider, url=s.url, tasks=TASKS)
        r = run_cli("run", str(job), "--engine", "batch", cwd=job.parent)
        assert r.returncode == 0, r.stderr
    root = job.parent / "job.run"
    return (results(root / "results.jsonl"), turns(root),
            sum(c.cost_usd for c in run_cost(root)))


def _strip(rows: dict) -> dict:
    return {k: {f: v[f] for f in ("status", "answer", "reason", "synod", "usage", "cost_usd")}
            for k, v in rows.items()}


def test_sigkill_between_submit_and_collect_and_between_collect_and_record(tmp_path):
    """Killed right after a batch is recorded (before any poll), right after its results are
    kept (before any row is recorded), and right after a row's usage is recorded (before its
    turn), again and again; each re-run goes one step further. No custom id is submitted twice, no turn recorded twice, and the results, turns
    and cost are those of an uninterrupted run: every row counted once."""
    ref_results, ref_turns, ref_cost = _reference(tmp_path)
    with Server() as s:
        job = write_job(tmp_path / "killed", provider="anthropic", url=s.url, tasks=TASKS)
        root = job.parent / "job.run"
        for point in ["submitted", "collected", "recorded"] * 2:
            before = len(s.state.submitted)
            r = run_cli("run", str(job), "--engine", "batch", cwd=job.parent,
                        env={CRASH_AT: point})
            assert r.returncode == -signal.SIGKILL, (point, r.stderr)
            kept = {p.name for p in (root / "batches").iterdir()}
            if point == "submitted":  # recorded in the run root and the logs, not polled
                assert len(s.state.submitted) > before
                newest = max((root / "batches").glob("*.json"),
                             key=lambda p: json.loads(p.read_text())["wave"])
                assert f"{newest.stem}.results.jsonl" not in kept
                ids = {q["custom_id"] for q in json.loads(newest.read_text())["requests"]}
                logged = {rec["custom_id"] for p in root.glob("agents/*/record.jsonl")
                          for rec in records(p) if rec.get("custom_id")}
                assert ids <= logged
                assert not any(rec.get("usage") for p in root.glob("agents/*/record.jsonl")
                               for rec in records(p) if rec.get("custom_id") in ids)
            elif point == "collected":  # the results kept, not one row recorded
                assert len(s.state.submitted) == before  # the recorded batch was collected
                assert f"{newest.stem}.results.jsonl" in kept
                assert not any(rec.get("usage") for p in root.glob("agents/*/record.jsonl")
                               for rec in records(p) if rec.get("custom_id") in ids)
            else:  # one row's usage recorded, its turn not
                assert len(s.state.submitted) == before
                rows = [(p, rec) for p in root.glob("agents/*/record.jsonl")
                        for rec in records(p) if rec.get("custom_id") in ids
                        and rec.get("usage")]
                assert len(rows) == 1
                assert records(rows[0][0])[-1]["t"] == "ProviderCall"
            check_once(root)
        r = run_cli("run", str(job), "--engine", "batch", "--json", cwd=job.parent)
        assert r.returncode == 0, r.stderr
        assert len(s.state.submitted) == len(set(s.state.submitted))
    check_once(root)
    assert _strip(results(root / "results.jsonl")) == _strip(ref_results)
    assert turns(root) == ref_turns
    assert sum(c.cost_usd for c in run_cost(root)) == pytest.approx(ref_cost, abs=1e-9)
    assert json.loads(r.stdout)["cost_usd"] == pytest.approx(ref_cost, abs=1e-5)


def test_expired_and_overloaded_rows_are_submitted_again(tmp_path):
    """Every root agent's first row expires (k1–k5) or errors overloaded (k6–k10) once: each
    goes into the next wave under a new custom id, and the job ends as it would have."""
    ref_results, ref_turns, _ = _reference(tmp_path)
    with Server() as s:
        expire = {f"-t{i}-2-1" for i in range(1, 6)}
        error = {f"-t{i}-2-1" for i in range(6, 11)}
        s.state.control.expire = lambda cid: any(cid.endswith(e) for e in expire)
        s.state.control.error = lambda cid: any(cid.endswith(e) for e in error)
        job = write_job(tmp_path / "job", provider="anthropic", url=s.url, tasks=TASKS)
        r = run_cli("run", str(job), "--engine", "batch", "--json", cwd=job.parent)
        assert r.returncode == 0, r.stderr
        assert len(s.state.submitted) == len(set(s.state.submitted))
        again = [c for c in s.state.submitted if c.endswith("-2-2")]
        assert len(again) == TASKS
    root = job.parent / "job.run"
    out = json.loads(r.stdout)
    assert out["done"] == TASKS and out["waves"] == 6  # one wave more than without
    errors = [rec["error"] for p in root.glob("agents/t*/record.jsonl") for rec in records(p)
              if rec["t"] == "ProviderCall" and rec.get("error")]
    assert sorted(e.split(":")[0] for e in errors) == ["errored"] * 5 + ["expired"] * 5
    assert {k: v["answer"] for k, v in results(root / "results.jsonl").items()} == \
        {k: v["answer"] for k, v in ref_results.items()}
    assert turns(root) == ref_turns
    check_once(root)


@pytest.mark.parametrize("retries", [0, 1])
def test_a_batch_that_fails_whole(tmp_path, retries):
    """OpenAI refuses the first batch's input (``failed``): every request of it fails its
    agent's turn; the job's ``retries`` resume the tasks, whose next wave succeeds — or,
    with none, every task fails (exit 1)."""
    with Server() as s:
        s.state.control.fail_batches = 1
        job = write_job(tmp_path, provider="openai", url=s.url, tasks=4, retries=retries)
        r = run_cli("run", str(job), "--engine", "batch", "--json", cwd=tmp_path)
    rows = results(tmp_path / "job.run" / "results.jsonl")
    if retries:
        assert r.returncode == 0, r.stderr
        assert all(v["status"] == "done" and v["attempts"] == 2 for v in rows.values())
    else:
        assert r.returncode == 1
        assert all(v["status"] == "failed" and "the input was refused" in v["reason"]
                   for v in rows.values())
    check_once(tmp_path / "job.run")


def test_ctrl_c_cancels_the_batches_in_flight_and_a_re_run_collects_them(tmp_path):
    """SIGINT while a wave is in flight: the batch is cancelled at the provider and recorded,
    exit 130; the re-run collects it (its rows cancelled) and submits them again."""
    with Server() as s:
        s.state.control.delay_s = 60
        job = write_job(tmp_path, provider="anthropic", url=s.url, tasks=4)
        root = tmp_path / "job.run"
        proc = popen_cli("run", str(job), "--engine", "batch", cwd=tmp_path)
        deadline = time.monotonic() + 30
        while not list(root.glob("batches/*.json")) and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err
        entry = json.loads(next(root.glob("batches/*.json")).read_text())
        assert entry["cancelled_at"]
        assert ("POST", f"/v1/messages/batches/{entry['batch']}/cancel") in s.state.log
        assert {v["status"] for v in results(root / "results.jsonl").values()} == {"cancelled"}
        s.state.control.delay_s = 0
        r = run_cli("run", str(job), "--engine", "batch", "--json", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["done"] == 4
        assert len(s.state.submitted) == len(set(s.state.submitted))
        assert any(c.endswith("-2-2") for c in s.state.submitted)  # the cancelled, again
    check_once(root)


@pytest.mark.parametrize("provider, route", [("anthropic", "POST {url}/v1/messages/batches"),
                                             ("openai", "POST {url}/v1/files")])
def test_a_server_without_batch_routes_ends_the_job_naming_the_route(tmp_path, provider, route):
    with Server() as s:
        s.state.control.no_batch_routes = True
        job = write_job(tmp_path, provider=provider, url=s.url, tasks=3)
        r = run_cli("run", str(job), "--engine", "batch", cwd=tmp_path)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert route.format(url=s.url) in r.stderr and "404" in r.stderr
    rows = results(tmp_path / "job.run" / "results.jsonl")
    assert not any(v["status"] == "done" for v in rows.values())


def test_the_scripted_provider_is_refused_before_anything_runs(tmp_path):
    job = write_job(tmp_path, provider="scripted", url=None, tasks=2)
    r = run_cli("run", str(job), "--engine", "batch", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "no batch API" in r.stderr
    assert not (tmp_path / "job.run").exists()


def test_a_job_budget_stops_at_a_wave_boundary_and_a_raised_one_resumes(tmp_path):
    """The job's budget is spent by the first wave: every agent stops at its next turn boundary
    (``budget``) but the one-turn tasks, done in it; raised, a re-run finishes the job without
    submitting a recorded request again."""
    with Server() as s:
        job = write_job(tmp_path, provider="anthropic", url=s.url, tasks=8, synod=0,
                        extra="[budget]\nusd = 0.004\n")
        r = run_cli("run", str(job), "--engine", "batch", "--json", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        rows = results(tmp_path / "job.run" / "results.jsonl")
        assert out["waves"] == 1
        assert {k for k, v in rows.items() if v["status"] == "done"} == {"k4", "k8"}
        assert {v["reason"] for k, v in rows.items() if k not in ("k4", "k8")} == {"budget"}
        job.write_text(job.read_text().replace("usd = 0.004", "usd = 1.0"))
        r = run_cli("run", str(job), "--engine", "batch", "--json", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["done"] == 8
        assert len(s.state.submitted) == len(set(s.state.submitted))
    check_once(tmp_path / "job.run")


def test_sigkill_between_the_ledger_and_the_logs(tmp_path):
    """Killed after a batch is in the run root's ledger but before its agents' logs say so: the
    re-run joins the recorded batch (no request submitted again) and records each submission
    in its agent's log before the row."""
    with Server() as s:
        job = write_job(tmp_path, provider="anthropic", url=s.url, tasks=4, synod=0)
        r = run_cli("run", str(job), "--engine", "batch", cwd=tmp_path,
                    env={CRASH_AT: "ledgered"})
        assert r.returncode == -signal.SIGKILL
        root = tmp_path / "job.run"
        assert not any(rec.get("custom_id") for p in root.glob("agents/*/record.jsonl")
                       for rec in records(p))
        r = run_cli("run", str(job), "--engine", "batch", "--json", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["done"] == 4
        assert len(s.state.submitted) == len(set(s.state.submitted))
    check_once(root)
    for p in root.glob("agents/*/record.jsonl"):
        calls = [rec for rec in records(p) if rec["t"] == "ProviderCall"]
        first = [c for c in calls if c["custom_id"].endswith("-2-1")]
        assert [c.get("usage") is None for c in first] == [True, False]


def test_roles_with_a_provider_of_their_own_are_refused_before_anything_runs(tmp_path):
    """The waves go through the job's [provider]: a role on another provider (or another base
    URL) would run live, outside them and their price — refused; a role on the job's provider
    with a model of its own is fine."""
    own = ('[roles.lead]\nmay_start = ["researcher"]\n'
           '[roles.researcher]\nprovider = "openai"\nmodel = "gpt-4.1-mini"\n')
    job = write_job(tmp_path, provider="anthropic", url="http://127.0.0.1:9", tasks=2, synod=0,
                    extra=own)
    r = run_cli("run", str(job), "--engine", "batch", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr
    assert "role researcher names a provider of its own" in r.stderr
    assert not (tmp_path / "job.run").exists()
