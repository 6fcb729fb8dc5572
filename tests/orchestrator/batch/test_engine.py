"""``mnemon run JOB.toml --engine batch`` end to end, against the loopback server: waves,
results identical to ``--engine local`` on the same model, half the cost, both providers."""

from __future__ import annotations

import json

import pytest

from mnemon.orchestrator.costs import run_cost

from .batch_policy import steps_of
from .kit import check_once, results, run_cli, turns, write_job
from .server import Server

TASKS = 200


def _same(a: dict, b: dict) -> None:
    """Results and every agent's turns alike (tokens and cost aside: the engines price
    differently, and the scripted provider's cache model is not the server's)."""
    assert a.keys() == b.keys()
    for k in a:
        x, y = a[k], b[k]
        assert (x["status"], x["answer"], x["reason"], x["agent"], x.get("synod")) == \
               (y["status"], y["answer"], y["reason"], y["agent"], y.get("synod")), k


def test_a_200_task_job_runs_in_as_many_waves_as_its_longest_chain_of_turns(tmp_path):
    """200 tasks of 1–4 turns, a note tool (run in a thread) and a synod of 3: the waves are
    the longest task's turns plus its synod's one — each wave holds every agent's next turn,
    the synod's children all in one. Every task done, and results and turns identical to the
    scripted provider playing the same model under ``--engine local``."""
    local = write_job(tmp_path / "local", provider="scripted", url=None, tasks=TASKS, synod=3)
    r = run_cli("run", str(local), "--json", cwd=local.parent)
    assert r.returncode == 0, r.stderr
    with Server() as s:
        job = write_job(tmp_path / "batch", provider="anthropic", url=s.url, tasks=TASKS,
                        synod=3)
        r = run_cli("run", str(job), "--engine", "batch", "--json", cwd=job.parent)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        longest = max(steps_of(f"k{i}") for i in range(1, TASKS + 1))
        assert out["engine"] == "batch" and out["waves"] == longest + 1 == 5
        assert out["batches"] == out["waves"]  # (nothing here needs a split)
        assert out["done"] == TASKS and out["failed"] == 0
        assert len(s.state.submitted) == len(set(s.state.submitted))
        # the synod's wave: every child of every task whose agent ended in the wave before
        assert s.state.live_requests == 0
    # synods: every child's first turn of a task in one batch (they share the cached prefix)
    first: dict[str, tuple[int, str]] = {}
    for p in (job.parent / "job.run" / "batches").glob("*.json"):
        entry = json.loads(p.read_text())
        for q in entry["requests"]:
            if ".s" in q["agent"]:
                first[q["agent"]] = min(first.get(q["agent"], (10**9, "")),
                                        (q["turn"], entry["batch"]))
    by_task: dict[str, set[str]] = {}
    for agent, (_turn, batch) in first.items():
        by_task.setdefault(agent.split(".")[0], set()).add(batch)
    assert len(by_task) == TASKS and all(len(b) == 1 for b in by_task.values())
    a, b = results(local.parent / "job.run" / "results.jsonl"), \
        results(job.parent / "job.run" / "results.jsonl")
    _same(a, b)
    assert turns(local.parent / "job.run") == turns(job.parent / "job.run")
    check_once(job.parent / "job.run")


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_the_same_job_costs_half_in_batches(tmp_path, provider):
    """The same job on the same server, live and in batches: the same tokens, and the batch
    run costs at most 0.52× (the discount, not a rounding); ``mnemon cost`` and the summary
    show the batch spend apart."""
    with Server() as s:
        live = write_job(tmp_path / "live", provider=provider, url=s.url, tasks=12)
        r = run_cli("run", str(live), "--json", cwd=live.parent)
        assert r.returncode == 0, r.stderr
        live_out = json.loads(r.stdout)
        assert s.state.live_requests > 0 and not s.state.batches
        job = write_job(tmp_path / "batch", provider=provider, url=s.url, tasks=12)
        r = run_cli("run", str(job), "--engine", "batch", "--json", cwd=job.parent)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
    assert out["usage"] == live_out["usage"]
    assert out["cost_usd"] <= 0.52 * live_out["cost_usd"]
    assert out["cost_usd"] == pytest.approx(0.5 * live_out["cost_usd"], rel=1e-3)
    assert out["batch_cost_usd"] == pytest.approx(out["cost_usd"], abs=1e-5) and out["live_cost_usd"] == 0
    _same(results(live.parent / "job.run" / "results.jsonl"),
          results(job.parent / "job.run" / "results.jsonl"))
    spent = run_cost(job.parent / "job.run")
    assert sum(c.cost_usd for c in spent) == pytest.approx(out["cost_usd"], abs=1e-5)
    r = run_cli("cost", str(job.parent / "job.run"), "--json", cwd=tmp_path)
    total = json.loads(r.stdout)["total"]
    assert total["batch_cost_usd"] == pytest.approx(total["cost_usd"], abs=1e-5)
    assert total["live_cost_usd"] == 0
    r = run_cli("cost", str(live.parent / "job.run"), "--json", cwd=tmp_path)
    assert "batch_cost_usd" not in json.loads(r.stdout)["total"]


@pytest.mark.parametrize("provider", ["openai", "openai-responses"])
def test_openai_batches_run_the_whole_job(tmp_path, provider):
    """The OpenAI routes: files uploaded, batches made (``/v1/chat/completions``, or
    ``/v1/responses`` for the Responses provider), output and error files read; results
    identical to the local engine's."""
    local = write_job(tmp_path / "local", provider="scripted", url=None, tasks=20)
    assert run_cli("run", str(local), cwd=local.parent).returncode == 0
    with Server() as s:
        job = write_job(tmp_path / "batch", provider=provider, url=s.url, tasks=20)
        r = run_cli("run", str(job), "--engine", "batch", "--json", cwd=job.parent)
        assert r.returncode == 0, r.stderr
        assert ("POST", "/v1/files") in s.state.log and ("POST", "/v1/batches") in s.state.log
        assert any(p.startswith("/v1/files/") and p.endswith("/content") for _m, p in
                   s.state.log)
        endpoint = "/v1/responses" if provider == "openai-responses" else "/v1/chat/completions"
        assert {r["url"] for b in s.state.batches.values() for r in b.requests} == {endpoint}
    _same(results(local.parent / "job.run" / "results.jsonl"),
          results(job.parent / "job.run" / "results.jsonl"))
    assert turns(local.parent / "job.run") == turns(job.parent / "job.run")


def test_batch_true_in_the_job_file_and_a_re_run_requests_nothing(tmp_path):
    """``[provider] batch = true`` chooses the engine; re-running a finished job submits
    nothing; ``--engine local`` overrides it."""
    with Server() as s:
        job = write_job(tmp_path, provider="anthropic", url=s.url, tasks=3)
        job.write_text(job.read_text().replace("batch_poll_s", "batch = true\nbatch_poll_s"))
        r = run_cli("run", str(job), "--json", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["engine"] == "batch"
        n = len(s.state.submitted)
        r = run_cli("run", str(job), "--json", cwd=tmp_path)
        out = json.loads(r.stdout)
        assert len(s.state.submitted) == n and out["skipped"] == 3 and out["batches"] == 0
        r = run_cli("run", str(job), cwd=tmp_path)  # the table: batch and live spend apart
        waves = out["waves"]
        assert f"engine: batch, {waves} waves, 0 batches this run; spend: batch $" in r.stdout
        assert "live $0.0000" in r.stdout
        r = run_cli("cost", str(tmp_path / "job.run"), cwd=tmp_path)
        assert "batch $" in r.stdout and "· live $0.0000" in r.stdout
        r = run_cli("run", str(job), "--engine", "local", "--json", cwd=tmp_path)
        assert "engine" not in json.loads(r.stdout) and s.state.live_requests == 0


def test_children_an_agent_starts_itself_share_its_waves(tmp_path):
    """Each task's agent starts a child and waits for it: the child's first turn goes in the
    same wave as its parent's ``agents_wait`` (the parent counts as waiting on its child), so
    the job takes 3 waves; the answers are the local engine's."""
    local = write_job(tmp_path / "local", provider="scripted", url=None, tasks=30, synod=0)
    local.write_text(local.read_text().replace("batch_policy:model", "batch_policy:delegate"))
    r = run_cli("run", str(local), "--json", cwd=local.parent)
    assert r.returncode == 0, r.stderr
    with Server() as s:
        s.state.control.policy = "delegate"
        job = write_job(tmp_path / "batch", provider="anthropic", url=s.url, tasks=30, synod=0)
        r = run_cli("run", str(job), "--engine", "batch", "--json", cwd=job.parent)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
    assert out["done"] == 30 and out["waves"] == 3
    a, b = results(local.parent / "job.run" / "results.jsonl"), \
        results(job.parent / "job.run" / "results.jsonl")
    assert {k: (v["status"], v["answer"]) for k, v in a.items()} == \
        {k: (v["status"], v["answer"]) for k, v in b.items()}
    ta, tb = turns(local.parent / "job.run"), turns(job.parent / "job.run")
    assert {k: v for k, v in ta.items() if k.startswith("t")} == \
        {k: v for k, v in tb.items() if k.startswith("t")}
    assert len(ta) == len(tb) == 60
