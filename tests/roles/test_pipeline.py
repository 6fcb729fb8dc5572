"""The roles from the command line: the pipeline example (docs/examples/pipeline) runs offline
and its results are checked; ``mnemon tree`` shows each agent's role and model; ``mnemon cost
--by role`` sums per role to the run's total; ``--roles FILE`` / ``--role`` on ``ask``; bad
roles are one line, exit 2, naming the file and the role."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from mnemon.orchestrator import logs
from mnemon.orchestrator.cli import main
from mnemon.providers.prices import cost_usd
from mnemon.session.records import Usage

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "pipeline"


@pytest.fixture(autouse=True)
def _fresh_team():
    logs.quiet()
    sys.modules.pop("team", None)
    yield
    sys.modules.pop("team", None)


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_bytes().split(b"\n") if line]


def test_the_pipeline_example(tmp_path, capsys):
    root = tmp_path / "run"
    assert main(["run", str(EXAMPLE / "pipeline.toml"), "--run-root", str(root), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["tasks"], summary["done"]) == (3, 3)
    rows = {r["task"]: r for r in _records(root / "results.jsonl")}
    assert rows["everest"]["answer"] == ("Mount Everest is 8,848.86 m high (the 2020 survey). "
                                         "(source: survey-2020) [reviewed: matches its source]")
    assert all(r["answer"].endswith("[reviewed: matches its source]") for r in rows.values())

    assert main(["tree", str(root), "--json"]) == 0
    tree = json.loads(capsys.readouterr().out)
    roles = {n["agent"]: (n.get("role"), n.get("model"), n["kind"], n["parent"]) for n in tree}
    leads = [a for a, v in roles.items() if v[0] == "lead"]
    assert sorted(leads) == ["t1", "t2", "t3"]
    for lead in leads:
        kids = sorted((v[0], v[1], v[2]) for a, v in roles.items() if v[3] == lead)
        assert kids == [("researcher", "claude-haiku-4-5", "fresh"),
                        ("reviewer", "claude-haiku-4-5", "fresh")]
    assert roles["t1"][1] == "claude-sonnet-4-5"
    assert main(["tree", str(root)]) == 0
    drawing = capsys.readouterr().out
    assert "t1 [root, lead on claude-sonnet-4-5]" in drawing
    assert "[fresh, reviewer on claude-haiku-4-5]" in drawing

    # each reviewer tried to write and was denied by its role's policy; it read instead
    for a, v in roles.items():
        log = _records(root / "agents" / a / "record.jsonl")
        results = {r["tool_use_id"]: r for x in log if x["t"] == "ToolResults"
                   for r in x["results"]}
        if v[0] == "reviewer":
            assert results["w"]["is_error"] and "a reviewer does not write reports" in \
                results["w"]["content"]
            assert log[-1]["t"] == "SessionEnded" and log[-1]["output"]["ok"] is True
        if v[0] == "researcher":
            assert [t["name"] for t in log[0]["tools"] if not t["name"].startswith(
                ("context_", "transcript_", "agents_", "approvals_"))] == ["search"]

    # the cost per role sums to the run's total, each role priced as its own model
    assert main(["cost", str(root), "--by", "role", "--json"]) == 0
    by_role = json.loads(capsys.readouterr().out)
    assert [r["role"] for r in by_role["roles"]] == ["lead", "researcher", "reviewer"]
    assert [r["agents"] for r in by_role["roles"]] == [3, 3, 3]
    # (each of the three roles' costs is rounded to 1e-6: their sum is off by up to 1.5e-6)
    assert round(sum(r["cost_usd"] for r in by_role["roles"]), 6) == \
        pytest.approx(by_role["total"]["cost_usd"], abs=2e-6)
    assert sum(r["output_tokens"] for r in by_role["roles"]) == \
        by_role["total"]["output_tokens"]
    assert main(["cost", str(root), "--json"]) == 0
    per_agent = json.loads(capsys.readouterr().out)
    assert per_agent["total"] == by_role["total"]
    # a lead's spend priced as its model, not the researchers'
    lead = _records(root / "agents" / "t1" / "record.jsonl")
    calls = [x for x in lead if x["t"] == "ProviderCall"]
    assert {c["model"] for c in calls} == {"claude-sonnet-4-5"}
    u = Usage(**calls[0]["usage"])
    assert cost_usd(u, "claude-sonnet-4-5") > cost_usd(u, "claude-haiku-4-5")
    assert main(["cost", str(root), "--by", "role"]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0].split()[:2] == ["role", "agents"]
    assert main(["verify", str(root)]) == 0


def _team_file(tmp_path: Path, extra: str = "") -> Path:
    p = tmp_path / "team.toml"
    p.write_text('role = "lead"\n'
                 '[roles.lead]\nsystem = "You lead."\nmay_start = ["helper"]\n'
                 '[roles.helper]\ndescription = "helps"\nsystem = "You help."\n' + extra)
    return p


def test_ask_takes_roles_and_a_role(tmp_path, capsys):
    team = _team_file(tmp_path)
    root = tmp_path / "run"
    assert main(["ask", "hello", "--roles", str(team), "--run-root", str(root)]) == 0
    capsys.readouterr()
    assert main(["tree", str(root), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["role"] == "lead"
    root2 = tmp_path / "run2"
    assert main(["ask", "hello", "--roles", str(team), "--role", "helper", "--run-root",
                 str(root2)]) == 0
    capsys.readouterr()
    first = _records(root2 / "agents" / "a1" / "record.jsonl")[0]
    assert (first["role"], first["system"]) == ("helper", "You help.")


@pytest.mark.parametrize("args, extra, message", [
    (["--role", "boss"], "", "the root's role 'boss' is not a role"),
    ([], '[roles.x]\nmay_start = ["nobody"]\n', "role x: may_start names 'nobody'"),
    ([], '[roles.x]\ncolour = "red"\n', "role x: unknown key 'colour'"),
    ([], '[roles.x]\nprovider = "anthropic"\n', "role x: ANTHROPIC_API_KEY is not set"),
])
def test_bad_roles_are_one_line_exit_2(tmp_path, capsys, monkeypatch, args, extra, message):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    team = _team_file(tmp_path, extra)
    root = tmp_path / "run"
    assert main(["ask", "hello", "--roles", str(team), "--run-root", str(root), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(team) in err and message in err
    assert not root.exists()


def test_role_without_roles_is_refused(tmp_path, capsys):
    assert main(["ask", "hello", "--role", "lead", "--run-root", str(tmp_path / "r")]) == 2
    assert "--role lead needs --roles FILE" in capsys.readouterr().err


@pytest.mark.parametrize("change, message", [
    (("may_start = [\"researcher\", \"reviewer\"]", "may_start = [\"writer\"]"),
     ":{[roles.lead]}: [roles] role lead: may_start names 'writer', which is not a role"),
    (("role = \"lead\"", "role = \"boss\""),
     ":{role = \"boss\"}: [agent] role 'boss' is not one of the job's roles"),
    (("max_depth = 1\n[roles.reviewer.policy]", "max_depth = 1\nhue = 2\n[roles.reviewer.policy]"),
     ":{[roles.reviewer]}: [roles] role reviewer: unknown key 'hue'"),
])
def test_a_job_with_bad_roles_is_refused_naming_the_role(tmp_path, capsys, change, message):
    folder = tmp_path / "pipeline"
    shutil.copytree(EXAMPLE, folder)
    job = folder / "pipeline.toml"
    text = job.read_text()
    assert change[0] in text
    text = text.replace(change[0], change[1], 1)
    job.write_text(text)
    # ``:{line text}:`` in the message stands for the number of the line that starts so
    want = message.split("}", 1)
    head = want[0].removeprefix(":{")
    n = next(i for i, line in enumerate(text.splitlines(), 1) if line.startswith(head))
    message = f":{n}:{want[1].removeprefix(':')}" if message.startswith(":{") else message
    assert main(["run", str(job)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(job) in err and message in err
    assert not (folder / "pipeline.run").exists()


@pytest.mark.parametrize("command", ["ask", "chat", "serve", "run"])
def test_every_running_command_takes_roles_and_a_role(command, tmp_path):
    from mnemon.orchestrator.cli import build_parser

    parser, _ = build_parser([command])
    first = {"ask": ["hi"], "chat": [], "serve": [], "run": ["job.toml"]}[command]
    args = parser.parse_args([command, *first, "--roles", "team.toml", "--role", "lead"])
    assert (args.roles, args.role) == ("team.toml", "lead")


def test_the_pipeline_on_the_dask_engine(tmp_path):
    """Each chunk's process builds the roles from the job file; the children its agents start
    take ids no other chunk took (they share the run root)."""
    pytest.importorskip("distributed")
    import subprocess

    root = tmp_path / "dask.run"
    proc = subprocess.run([sys.executable, "-m", "mnemon", "run", str(EXAMPLE / "pipeline.toml"),
                           "--engine", "dask", "--workers", "2", "--run-root", str(root),
                           "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["done"] == 3
    rows = {r["task"]: r for r in _records(root / "results.jsonl")}
    assert all(r["answer"].endswith("[reviewed: matches its source]") for r in rows.values())
    assert main(["tree", str(root), "--json"]) == 0


def test_a_minted_id_skips_a_log_another_process_made(tmp_path):
    """Two supervisors on one run root (a Dask job's chunks): an id the other made after this
    one listed the run is skipped, and a collision at the birth takes the next id."""
    import trio

    from mnemon.orchestrator.settings import Settings
    from mnemon.orchestrator.supervisor import Supervisor
    from mnemon.lineage.runroot import create_run_root
    from mnemon.providers.scripted import ScriptedProvider

    root = tmp_path / "run"
    create_run_root(root, "tests")

    async def go():
        one = Supervisor(root, ScriptedProvider(), Settings())
        two = Supervisor(root, ScriptedProvider(), Settings())
        p1 = one.new_root("one", "t1")
        p2 = two.new_root("two", "t2")
        c1 = one.new_child(p1, "child", "fresh")
        c2 = two.new_child(p2, "child", "fresh")  # a1 is on disk now: two skips it
        assert (c1.id, c2.id) == ("a1", "a2")
        two._ids = iter(range(3, 100))  # as if two had listed before a3 was made…
        three = one.new_child(p1, "child", "fresh")
        assert three.id == "a3"
        two._taken.discard("a3")
        real = two.mint_agent_id
        calls = []

        def stale():  # …and minted a3 before one's log reached the disk
            calls.append(1)
            return "a3" if len(calls) == 1 else real()

        two.mint_agent_id = stale
        c4 = two.new_child(p2, "child", "fresh")
        assert c4.id == "a4" and len(calls) == 2
        for s in (one, two):
            s.close()

    trio.run(go)
    assert main(["verify", str(root)]) == 0


def test_a_role_naming_an_unknown_tool_is_refused(tmp_path, capsys):
    team = _team_file(tmp_path, '[roles.x]\ntools = ["serch"]\n')
    assert main(["ask", "hi", "--roles", str(team), "--run-root", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "role x: tools names 'serch', which is not a tool of the run (tools: none)" in err
    folder = tmp_path / "pipeline"
    shutil.copytree(EXAMPLE, folder)
    job = folder / "pipeline.toml"
    job.write_text(job.read_text().replace('tools = ["team:search"]',
                                           'tools = ["team:search", "serch"]'))
    assert main(["run", str(job)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "[roles] role researcher: tools names 'serch'" in err
