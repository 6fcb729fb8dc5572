"""``mnemon run``: results, re-runs that resume, budgets, retries, synods in a job, and the
example job in docs/ (CI runs it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mnemon.orchestrator.cli import main

from .kit import records, results, write_job

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "docs" / "examples" / "capitals" / "capitals.toml"

STEPS = """\
concurrency = 3
[provider]
name = "scripted"
policy = "job_policy:steps"
price_as = "claude-sonnet-4-5"
[agent]
system = "You work through tasks."
tools = ["job_policy:note"]
"""


def run(job: Path, root: Path, capsys, *extra: str) -> dict:
    code = main(["run", str(job), "--run-root", str(root), "--json", *extra])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def calls(root: Path) -> int:
    return sum(1 for p in root.glob("agents/*/record.jsonl") for r in records(p)
               if r["t"] == "ProviderCall")


@pytest.fixture(autouse=True)
def _fresh_policy_module():
    import sys

    sys.modules.pop("job_policy", None)
    yield
    sys.modules.pop("job_policy", None)


def test_the_example_job_runs(tmp_path, capsys):
    root = tmp_path / "run"
    summary = run(EXAMPLE, root, capsys)
    assert (summary["tasks"], summary["done"], summary["failed"]) == (5, 5, 0)
    lines = results(root / "results.jsonl")
    assert {(r["task"], r["answer"]) for r in lines} == {
        ("fr", "Paris."), ("jp", "Tokyo."), ("ke", "Nairobi."), ("pe", "Lima."),
        ("nz", "Wellington.")}
    for r in lines:
        assert set(r) >= {"task", "status", "answer", "agent", "reason", "usage", "cost_usd",
                          "input"}
        assert r["synod"]["vote"]["counts"][r["answer"].lower().rstrip(".")] == 2
        assert r["cost_usd"] > 0 and r["usage"]["cache_read_tokens"] > 0
    assert main(["verify", str(root)]) == 0
    assert main(["cost", str(root), "--json"]) == 0
    cost = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert cost["total"]["cost_usd"] == pytest.approx(summary["cost_usd"], abs=1e-5)
    assert main(["tree", str(root), "--json"]) == 0
    tree = json.loads(capsys.readouterr().out)
    assert {a["agent"] for a in tree} == {f"t{i}" for i in range(1, 6)} | {
        f"t{i}.s{k}" for i in range(1, 6) for k in range(1, 4)}
    assert all(a["state"] == "ended" for a in tree)


def test_a_rerun_skips_finished_tasks_and_requests_nothing(tmp_path, capsys):
    job = write_job(tmp_path / "j", STEPS, tasks=5)
    root = tmp_path / "run"
    first = run(job, root, capsys)
    assert first["done"] == 5
    before = calls(root)
    assert before == 15  # 5 tasks × 3 turns
    again = run(job, root, capsys)
    assert (again["done"], again["skipped"], calls(root)) == (5, 5, before)
    lines = results(root / "results.jsonl")
    assert [r["task"] for r in lines] == [f"k{i}" for i in range(1, 6)]
    assert lines[0]["answer"] == "step 3: answer for k1" and lines[0]["agent"] == "t1"


def test_a_lost_results_line_comes_back_from_the_log_without_a_request(tmp_path, capsys):
    job = write_job(tmp_path / "j", STEPS, tasks=3)
    root = tmp_path / "run"
    run(job, root, capsys)
    out = root / "results.jsonl"
    lines = out.read_text().splitlines()
    out.write_text(lines[0] + "\n" + lines[1][:20])  # a crash tore the second line, lost the third
    before = calls(root)
    again = run(job, root, capsys)
    assert again["done"] == 3 and calls(root) == before
    assert [r["answer"] for r in results(out)] == [f"step 3: answer for k{i}" for i in (1, 2, 3)]


def test_a_task_budget_stops_at_a_turn_boundary(tmp_path, capsys):
    body = STEPS.replace("job_policy:steps", "job_policy:forever") + \
        "[budget]\ntask_tokens = 3000\n"
    job = write_job(tmp_path / "j", body, tasks=2)
    root = tmp_path / "run"
    summary = run(job, root, capsys)
    assert summary["budget"] == 2
    for r in results(root / "results.jsonl"):
        assert r["status"] == "budget" and r["reason"] == "budget"
        total = sum(r["usage"].values())
        assert 3000 <= total < 3000 + 2000, "stopped at the first boundary past the budget"
        recs = records(root / "agents" / r["agent"] / "record.jsonl")
        assert recs[-1]["t"] == "SessionEnded" and recs[-1]["reason"] == "budget"
        assert recs[-2]["t"] == "ToolResults", "at a turn boundary: the turn is whole"


def test_a_job_budget_leaves_later_tasks_unstarted(tmp_path, capsys):
    body = STEPS.replace("concurrency = 3", "concurrency = 1") + "[budget]\ntokens = 2500\n"
    job = write_job(tmp_path / "j", body, tasks=4)
    root = tmp_path / "run"
    summary = run(job, root, capsys)
    lines = results(root / "results.jsonl")
    assert summary["budget"] >= 2 and summary["done"] + summary["budget"] == 4
    unstarted = [r for r in lines if r["agent"] is None]
    assert unstarted and all(r["status"] == "budget" and "not started" in r["reason"]
                             for r in unstarted)
    assert not (root / "agents" / "t4").exists()
    # a bigger budget and the same command: the stopped tasks resume, the done ones are kept
    bigger = write_job(tmp_path / "j", STEPS.replace("concurrency = 3", "concurrency = 1")
                       + "[budget]\ntokens = 100000\n", tasks=4)
    again = run(bigger, root, capsys)
    assert again["done"] == 4 and len(results(root / "results.jsonl")) == 4


def test_a_failed_task_is_retried_from_its_log(tmp_path, capsys):
    body = STEPS.replace("job_policy:steps", "job_policy:flaky") + "retries = 1\n"
    body = "retries = 1\n" + body.replace("retries = 1\n", "")
    job = write_job(tmp_path / "j", body, tasks=2)
    root = tmp_path / "run"
    summary = run(job, root, capsys)
    assert summary["done"] == 2
    for r in results(root / "results.jsonl"):
        assert (r["status"], r["attempts"], r["answer"]) == ("done", 2, f"answer for {r['task']}")
        ended = [x["reason"] for x in records(root / "agents" / r["agent"] / "record.jsonl")
                 if x["t"] == "SessionEnded"]
        assert ended[0].startswith("failed: RuntimeError: flaky model") and ended[-1] == "done"


def test_without_retries_a_failure_is_final(tmp_path, capsys):
    job = write_job(tmp_path / "j", STEPS.replace("job_policy:steps", "job_policy:flaky"),
                    tasks=1)
    root = tmp_path / "run"
    code = main(["run", str(job), "--run-root", str(root), "--json"])
    assert code == 1
    assert "every task failed" in capsys.readouterr().err
    [line] = results(root / "results.jsonl")
    assert line["status"] == "failed" and line["reason"].startswith("failed: RuntimeError")
    log = root / "agents" / "t1" / "record.jsonl"
    before = log.read_bytes()
    assert main(["run", str(job), "--run-root", str(root), "--json"]) == 1
    capsys.readouterr()
    assert log.read_bytes() == before, "a final failure is skipped: its log is not reopened"
    assert len(results(root / "results.jsonl")) == 1


def test_a_merge_synod_in_a_job(tmp_path, capsys):
    body = STEPS.replace("job_policy:steps", "job_policy:stances") + \
        '[synod]\nn = 3\nreduce = "merge"\nstances = ["say blue", "say green"]\n'
    job = write_job(tmp_path / "j", body, tasks=2)
    root = tmp_path / "run"
    run(job, root, capsys)
    for r in results(root / "results.jsonl"):
        assert r["answer"] == "merged" and r["synod"]["children"] == [
            f"{r['agent']}.s{k}" for k in (1, 2, 3)]
        prompts = [x["text"] for x in records(root / "agents" / r["agent"] / "record.jsonl")
                   if x["t"] == "UserPrompt"]
        assert len(prompts) == 2 and "**BLUE.**" in prompts[1] and "**GREEN.**" in prompts[1]
    before = calls(root)
    run(job, root, capsys)
    assert calls(root) == before


def test_a_tied_vote_in_a_job_is_reported(tmp_path, capsys):
    body = STEPS.replace("job_policy:steps", "job_policy:stances") + \
        '[synod]\nn = 2\nstances = ["say blue"]\n'
    job = write_job(tmp_path / "j", body, tasks=1)
    root = tmp_path / "run"
    run(job, root, capsys)
    [r] = results(root / "results.jsonl")
    assert r["status"] == "done" and r["answer"] is None
    assert r["reason"] == "tie: '**BLUE.**' | 'red'"
    assert r["synod"]["vote"]["tied"] == ["**BLUE.**", "red"]


def test_a_run_root_of_another_job_is_refused(tmp_path, capsys):
    root = tmp_path / "run"
    run(write_job(tmp_path / "a", STEPS, tasks=2), root, capsys)
    other = write_job(tmp_path / "b", STEPS.replace("You work", "You toil"), tasks=1)
    other.write_text(other.read_text().replace('prompt = "task k1"', 'prompt = "other"'))
    assert main(["run", str(other), "--run-root", str(root)]) == 2
    assert "holds another job" in capsys.readouterr().err


async def test_a_task_cut_off_during_its_synod_is_cancelled_not_done(tmp_path):
    """The task's agent has answered, its synod children are running, and the job is
    cancelled: the task is ``cancelled`` (resumed by the next run), not ``done``."""
    import trio

    from mnemon.orchestrator.jobs import (JobRunner, load_job, load_tasks, provider_for,
                                          settings_for, user_tools_for)
    from mnemon.orchestrator.jobs.state import check_manifest
    from mnemon.lineage.runroot import create_run_root

    class CutAtTheSynod:  # a fake around the real provider: cancels at a child's request
        name = "scripted"

        def __init__(self, inner, scope):
            self.inner, self.scope = inner, scope

        async def complete(self, request, *, on_attempt=None):
            if request.meta["depth"] >= 1:
                self.scope.cancel()
                await trio.sleep_forever()
            return await self.inner.complete(request, on_attempt=on_attempt)

    job = load_job(write_job(tmp_path / "j", STEPS + "[synod]\nn = 2\n", tasks=1))
    tasks = load_tasks(job)
    root = create_run_root(tmp_path / "run", "test")
    check_manifest(root, job, tasks)
    with trio.CancelScope() as scope:
        runner = JobRunner(job, tasks, root=root, output=root / "results.jsonl",
                           provider=CutAtTheSynod(provider_for(job), scope),
                           settings=settings_for(job), user_tools=user_tools_for(job))
        await runner.run()
    assert scope.cancelled_caught
    [line] = results(root / "results.jsonl")
    assert (line["status"], line["reason"]) == ("cancelled", "cancelled")
    last = records(root / "agents" / "t1" / "record.jsonl")[-1]
    assert (last["t"], last["reason"]) == ("SessionEnded", "done"), "its agent had answered"
    assert any((root / "agents").glob("t1.s*")), "cut off during the synod"


ADDING = (
    "def policy(request, state):\n"
    "    said = sum(1 for m in request.messages if m['role'] == 'assistant')\n"
    "    if said == 0:\n"
    "        return [{'type': 'tool_use', 'id': 'c1', 'name': 'tools__add',\n"
    "                 'input': {'a': 2, 'b': 40}}], 'tool_use'\n"
    "    got = request.messages[-1]['content'][-1]['content']\n"
    "    return [{'type': 'text', 'text': 'sum ' + str(got)}], 'end_turn'\n")


def _run_adding_job(tmp_path: Path, settings: str) -> tuple[Path, list[dict]]:
    """A two-task job whose agents call ``tools__add`` of the test MCP server named in
    ``servers.json``, wired in by ``settings`` (the job file's lines before its tasks); run
    through ``python -m mnemon run``: its run root and results lines."""
    import subprocess
    import sys

    toolserver = Path(__file__).resolve().parents[2] / "mcp" / "toolserver.py"
    (tmp_path / "servers.json").write_text(json.dumps({"mcpServers": {"tools": {
        "command": sys.executable, "args": [str(toolserver)]}}}))
    (tmp_path / "play.py").write_text(ADDING)
    (tmp_path / "job.toml").write_text(
        settings + '[[tasks]]\nid = "one"\nprompt = "add"\n\n[[tasks]]\nid = "two"\n'
        'prompt = "add"\n')
    proc = subprocess.run([sys.executable, "-m", "mnemon", "run", str(tmp_path / "job.toml"),
                           "--json"], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = tmp_path / "job.run"
    return run, [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]


def _run_with_missing_servers(tmp_path: Path):
    """The same job naming a servers file that does not exist: the finished process."""
    import subprocess
    import sys

    bad = tmp_path / "bad.toml"
    bad.write_text((tmp_path / "job.toml").read_text().replace("servers.json", "missing.json"))
    return subprocess.run([sys.executable, "-m", "mnemon", "run", str(bad)],
                          capture_output=True, text=True, timeout=120)


def test_a_jobs_agents_are_offered_its_mcp_servers_tools(tmp_path):
    """``mcp = "servers.json"`` in a job: every task's agent may call the servers' tools; the
    servers stop with the run."""
    _, lines = _run_adding_job(
        tmp_path, 'mcp = "servers.json"\n\n[provider]\nname = "scripted"\n'
                  'policy = "play:policy"\n\n')
    assert [x["status"] for x in lines] == ["done", "done"]
    assert all("42" in x["answer"] for x in lines), lines
    proc = _run_with_missing_servers(tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1


def test_agent_mcp_in_a_job_gives_each_tasks_agent_its_own_servers(tmp_path):
    """``[agent] mcp = "servers.json"``: each task's agent starts the servers for itself
    (its own stderr file under ``mcp/<agent>/``), records their tools in its opening and
    calls them; a bad file is one line, exit 2, naming the key."""
    from mnemon.session.records import decode

    run, lines = _run_adding_job(
        tmp_path, '[provider]\nname = "scripted"\npolicy = "play:policy"\n\n[agent]\n'
                  'mcp = "servers.json"\n\n')
    assert [x["status"] for x in lines] == ["done", "done"]
    assert all("42" in x["answer"] for x in lines), lines
    for x in lines:
        first = (run / "agents" / x["agent"] / "record.jsonl").read_bytes().split(b"\n", 1)[0]
        assert "tools__add" in [t["name"] for t in decode(first).tools]
        assert (run / "mcp" / x["agent"] / "tools.stderr").exists()
    assert not (run / "mcp" / "tools.stderr").exists()  # nothing started for the whole run
    proc = _run_with_missing_servers(tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "[agent] mcp" in proc.stderr


async def test_slots_hold_concurrency_and_take_the_next_task_at_once(tmp_path, autojump_clock):
    """``concurrency`` tasks are in flight, never more; tasks start in input order; and a
    slot's next task sends its first request the moment its last task ends — no step of the
    scheduler between (decision 0262: with many tasks ending together, each such step waits for
    all of them)."""
    import trio

    from mnemon.lineage.runroot import create_run_root
    from mnemon.orchestrator.jobs import (JobRunner, load_job, load_tasks, provider_for,
                                          settings_for, user_tools_for)
    from mnemon.orchestrator.jobs.state import check_manifest

    job = load_job(write_job(tmp_path / "j", STEPS.replace("concurrency = 3",
                                                           "concurrency = 4"), tasks=13))
    tasks = load_tasks(job)
    root = create_run_root(tmp_path / "run", "test")
    check_manifest(root, job, tasks)
    inner = provider_for(job)
    inner.latency_s = 0.5
    running: set[str] = set()
    peak, firsts, ends = [0], [], {}
    steps: dict = {}  # Trio task -> steps it has taken

    class Steps(trio.abc.Instrument):
        def before_task_step(self, task):
            steps[task] = steps.get(task, 0) + 1

    class Watch:
        name = "scripted"

        async def complete(self, request, *, on_attempt=None):
            agent, me = request.meta["agent"], trio.lowlevel.current_task()
            if agent not in running:
                running.add(agent)
                firsts.append((agent, trio.current_time(), me, steps.get(me)))
                peak[0] = max(peak[0], len(running))
            out = await inner.complete(request, on_attempt=on_attempt)
            if out.stop_reason == "end_turn":
                running.discard(agent)
                ends[agent] = (trio.current_time(), me, steps.get(me))
            return out

    trio.lowlevel.add_instrument(Steps())
    runner = JobRunner(job, tasks, root=root, output=root / "results.jsonl", provider=Watch(),
                       settings=settings_for(job), user_tools=user_tools_for(job))
    summary = await runner.run()
    assert summary.done == 13
    assert peak[0] == 4
    assert [a for a, *_ in firsts] == [f"t{i}" for i in range(1, 14)]
    assert len({me for *_, me, _ in firsts}) == 4, "four slots run the thirteen tasks"
    by_slot: dict = {}
    for agent, at, me, step in firsts:
        by_slot.setdefault(me, []).append((agent, at, step))
    for runs in by_slot.values():  # in a slot, the next task's first request follows its
        for (prev, *_), (agent, at, step) in zip(runs, runs[1:]):  # last one's end: the same
            end_at, _, end_step = ends[prev]  # time, one step of the slot later (the agent's
            assert at == end_at and step - end_step <= 1, (prev, agent)  # nursery closing)


def test_finished_agents_are_freed_without_the_collector(tmp_path, capsys):
    """A job's finished agents leave no reference cycle behind (their nodes, logs, tables, Trio
    scopes): freed as they end, not kept for the cyclic collector, whose passes over thousands
    of dead agents paused a whole job (decision 0262)."""
    import gc

    job = write_job(tmp_path / "j", STEPS, tasks=6)
    gc.collect()
    gc.disable()
    try:
        run(job, tmp_path / "run", capsys)
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        kinds = {type(o).__name__ for o in gc.garbage
                 if type(o).__module__.startswith("mnemon.")}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    # (the Trio run's own objects are cycles too, once the run is over: not the agents')
    left = kinds & {"AgentNode", "AgentLog", "Context", "RecordLog", "Growth", "PressureLatch"}
    assert not left, left


def test_logs_are_made_ahead_and_no_file_is_left_open(tmp_path, capsys, monkeypatch):
    """A job makes its tasks' log files ahead, in a thread, each named at its agent's birth
    (``session.log.unborn``); the ones made for tasks that never start (a spent budget) are
    closed and their directories removed."""
    import os

    from mnemon.lineage.runroot import list_agents
    from mnemon.session import log as L

    if not L._TMPFILE:
        pytest.skip("no unnamed files on this system")
    named: list[bool] = []
    real = L._name

    def spy(fd, path):
        named.append(real(fd, path))
        return named[-1]

    monkeypatch.setattr(L, "_name", spy)
    one = STEPS.replace("concurrency = 3", "concurrency = 1")
    run(write_job(tmp_path / "w", one, tasks=2), tmp_path / "warm", capsys)  # imports, once
    before = len(os.listdir("/proc/self/fd"))
    named.clear()
    summary = run(write_job(tmp_path / "j", one, tasks=24), tmp_path / "run", capsys)
    assert summary["done"] == 24
    # most births name a file made ahead (the first tasks do not wait for the thread, and on
    # a busy machine a few more may not find theirs ready)
    assert len(named) >= 8 and all(named), named
    root = tmp_path / "spent"
    summary = run(write_job(tmp_path / "b", one + "[budget]\ntokens = 2500\n", tasks=24),
                  root, capsys)
    assert summary["budget"] >= 20
    assert sorted(p.name for p in (root / "agents").iterdir()) == list_agents(root)
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_run_root_runs_one_job_at_a_time(tmp_path, capsys):
    """A second run of the same run root while one is running (the command typed twice, a
    service job) is refused with one line before it writes anything; once the first run ends,
    the same command runs (and finds everything done)."""
    from mnemon.orchestrator.jobs.build import prepare
    from mnemon.orchestrator.jobs.spec import JobError

    job = write_job(tmp_path / "j", STEPS, tasks=3)
    root = tmp_path / "run"
    first, provider = prepare(job, run_root=root)
    manifest = (root / "job.json").read_bytes()
    with pytest.raises(JobError, match="in use by another run of a job"):
        prepare(job, run_root=root)
    code = main(["run", str(job), "--run-root", str(root), "--json"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "in use by another run" in err
    assert (root / "job.json").read_bytes() == manifest and not (root / "results.jsonl").exists()
    import trio

    summary = trio.run(first.run)
    assert summary.done == 3 and first.held is None
    assert run(job, root, capsys)["skipped"] == 3
