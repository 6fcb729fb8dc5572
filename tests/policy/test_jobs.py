"""A job's ``[policy]``: inline rules or a file, ``on_ask`` (deny by default: nobody is there to
ask; wait: until the ask expires), counted in the summary and the final table; a malformed
policy refused before anything runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from mnemon.orchestrator.cli import main

from ..orchestrator.jobs.kit import records, write_job

STEPS = """\
concurrency = 2
[provider]
name = "scripted"
policy = "job_policy:steps"
[agent]
system = "You work through tasks."
tools = ["job_policy:note"]
"""


@pytest.fixture(autouse=True)
def _fresh_policy_module():
    sys.modules.pop("job_policy", None)
    yield
    sys.modules.pop("job_policy", None)


def run(job: Path, root: Path, capsys) -> dict:
    code = main(["run", str(job), "--run-root", str(root), "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def results_of(root: Path) -> list[tuple[str, bool]]:
    return [(r["content"], r["is_error"]) for p in sorted(root.glob("agents/*/record.jsonl"))
            for rec in records(p) if rec["t"] == "ToolResults" for r in rec["results"]]


def test_asks_in_a_batch_job_are_rejected_by_default_and_counted(tmp_path, capsys):
    body = STEPS + '[policy]\n[[policy.rule]]\ntool = "note"\naction = "ask"\nreason = "a note"\n'
    root = tmp_path / "run"
    summary = run(write_job(tmp_path / "j", body, tasks=2), root, capsys)
    assert summary["done"] == 2
    res = results_of(root)
    assert res and all(err and "nobody to ask in a batch job" in c for c, err in res)
    assert summary["asked"] == summary["rejected"] == len(res) and summary["approved"] == 0
    assert main(["verify", str(root)]) == 0


def test_a_deny_rule_in_a_policy_file_is_counted_in_the_final_table(tmp_path, capsys):
    folder = tmp_path / "j"
    job = write_job(folder, STEPS + '[policy]\nfile = "p.toml"\n', tasks=1)
    (folder / "p.toml").write_text('[[rule]]\ntool = "no*"\naction = "deny"\nreason = "quiet"\n')
    root = tmp_path / "run"
    assert main(["run", str(job), "--run-root", str(root)]) == 0
    out = capsys.readouterr()
    n = len(results_of(root))
    assert n and f"tool calls: {n} denied by the policy, 0 asked about" in out.out + out.err
    assert all("quiet" in c for c, _ in results_of(root))


def test_on_ask_wait_waits_until_the_ask_expires(tmp_path, capsys):
    body = STEPS + ('[policy]\non_ask = "wait"\nask_timeout = 0.1\n[[policy.rule]]\n'
                    'tool = "note"\naction = "ask"\n')
    root = tmp_path / "run"
    summary = run(write_job(tmp_path / "j", body, tasks=1), root, capsys)
    res = results_of(root)
    assert res and all(err and "no decision within 0.1 s" in c for c, err in res)
    assert summary["rejected"] == len(res)


@pytest.mark.parametrize("policy, says", [
    ('[policy]\n[[policy.rule]]\ntool = "note"\naction = "maybe"\n', "policy.rule"),
    ('[policy]\n[[policy.rule]]\ntool = "note"\naction = "deny"\nwhen = { text = "(a|aa)+$" }\n',
     "[policy] rule 1: when.text: the pattern '(a|aa)+$' can run away"),
    ('[policy]\nfile = "nope.toml"\n', "cannot be read"),
    ('[policy]\nfile = "p.toml"\ndefault = "deny"\n', "a file or inline"),
    ('[policy]\nonask = "wait"\n', "onask"),
])
def test_a_malformed_policy_is_refused_before_anything_runs(tmp_path, capsys, policy, says):
    job = write_job(tmp_path / "j", STEPS + policy, tasks=1)
    root = tmp_path / "run"
    code = main(["run", str(job), "--run-root", str(root)])
    err = capsys.readouterr().err
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1
    assert not (root / "agents").exists() or not list((root / "agents").iterdir())


def test_run_policy_is_narrowed_by_the_jobs_own(tmp_path, capsys):
    """``mnemon run --policy``: the operator's policy, which the job's ``[policy]`` narrows but
    never widens — its allow does not lift the command line's deny."""
    folder = tmp_path / "j"
    job = write_job(folder, STEPS + '[policy]\ndefault = "allow"\n[[policy.rule]]\ntool = "note"\n'
                    'action = "allow"\n', tasks=1)
    outer = tmp_path / "outer.toml"
    outer.write_text('[[rule]]\ntool = "note"\naction = "deny"\nreason = "the operator says no"\n')
    root = tmp_path / "run"
    code = main(["run", str(job), "--run-root", str(root), "--json", "--policy", str(outer)])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["denied"] == len(results_of(root)) > 0
    assert all("the operator says no" in c for c, _ in results_of(root))
    bad = tmp_path / "bad.toml"
    bad.write_text('[[rule]]\ntool = "x"\n')
    assert main(["run", str(job), "--run-root", str(tmp_path / "r2"), "--policy", str(bad)]) == 2
    assert "rule 1: action must be" in capsys.readouterr().err


def test_the_dask_engine_counts_the_policys_calls_too(tmp_path):
    """``--engine dask``: each chunk's supervisor runs under the job's ``[policy]`` (its
    settings are built from the job file there too); the driver sums their counts."""
    import subprocess

    pytest.importorskip("distributed")
    body = STEPS + '[policy]\n[[policy.rule]]\ntool = "note"\naction = "deny"\nreason = "no"\n'
    job = write_job(tmp_path / "j", body, tasks=3)
    root = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "mnemon", "run", str(job), "--engine", "dask",
                           "--workers", "1", "--run-root", str(root), "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    n = len(results_of(root))
    assert summary["done"] == 3 and summary["denied"] == n > 0
    r = subprocess.run([sys.executable, "-m", "mnemon", "run", str(job), "--engine", "dask",
                        "--policy", str(job), "--run-root", str(root)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--policy is for --engine local" in r.stderr
