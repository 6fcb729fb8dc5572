"""``mnemon demo`` end to end: harness evictions, a model-written note inherited by a child and a
grandchild, and a grandchild's grep that finds a codeword recorded only in its grandparent's
file — through the supervisor, through ``cli.main`` and in a subprocess."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from mnemon.lineage.runroot import agent_source
from mnemon.orchestrator import demo
from mnemon.orchestrator.cli import main
from mnemon.orchestrator.settings import Settings
from mnemon.orchestrator.supervisor import open_supervisor
from mnemon.providers.cache import CacheModel
from mnemon.providers.scripted import ScriptedProvider

from .conftest import records, refold

CODEWORD = "VESPER-7"
ROOT_FILE = "agents/a1/record.jsonl"
NOTE = ("doc-01 (Carrow Point keeper's log) holds the harbour codeword; doc-02 is "
        "provisioning")


def demo_settings(window: int = 6500) -> Settings:
    """As ``mnemon demo`` sets them (orchestrator/cli/commands/demo.py)."""
    return Settings(system="You are a careful archivist.", model="claude-sonnet-4-5",
                    context_window=window, max_turns=60, price_model="claude-sonnet-4-5")


def _tool_calls(recs: list[dict], name: str) -> list[tuple[int, dict, dict]]:
    """(line index of the results, the call, its result) for every call of ``name``."""
    out = []
    for i, r in enumerate(recs):
        if r["t"] != "AssistantMessage":
            continue
        for b in r["blocks"]:
            if b["type"] == "tool_use" and b["name"] == name:
                for j in range(i + 1, len(recs)):
                    if recs[j]["t"] == "ToolResults":
                        res = [x for x in recs[j]["results"] if x["tool_use_id"] == b["id"]]
                        if res:
                            out.append((j, b, res[0]))
                            break
    return out


def check_demo_run(root: Path, capsys) -> None:
    """Everything the demo claims, read back from the files alone."""
    root = Path(root)
    # three agents in one line: a1 (root) → a2 (mnemon) → a3 (mnemon), all ended
    assert main(["tree", str(root), "--json"]) == 0
    tree = json.loads(capsys.readouterr().out)
    assert sorted((n["agent"], n["parent"], n["kind"], n["state"]) for n in tree) == [
        ("a1", None, None, "ended"), ("a2", "a1", "mnemon", "ended"),
        ("a3", "a2", "mnemon", "ended")]
    assert len(tree) == 3

    recs = {a: records(root, a) for a in ("a1", "a2", "a3")}
    for a, rs in recs.items():
        assert rs[-1]["t"] == "SessionEnded" and rs[-1]["reason"] == "done", a
        assert sum(r["t"] == "SessionEnded" for r in rs) == 1, a

    # harness evictions happened (no provider call of their own) and the model left a note
    evicted = [r["residue"] for r in recs["a1"] if r["t"] == "Evicted"]
    assert any(e["by"] == "harness" and e["note"] is None for e in evicted)
    model_cut = [e for e in evicted if e["by"] == "model"]
    assert len(model_cut) == 1 and model_cut[0]["note"] == NOTE

    # the root's note is in the child's and the grandchild's inherited residues
    for a in ("a2", "a3"):
        link = [r for r in recs[a] if r["t"] == "Inherited"]
        assert len(link) == 1 and recs[a][1]["t"] == "Inherited", a
        assert model_cut[0] in link[0]["residues"], a
        assert refold(root, a).residues, a

    # the grandchild's grep hit for the codeword lies in a turn recorded only in a1's file
    for a in ("a2", "a3"):
        greps = _tool_calls(recs[a], "transcript_grep")
        assert len(greps) == 1, a
        at, _, result = greps[0]
        before = "\n".join(json.dumps(r) for r in recs[a][:at])
        assert CODEWORD not in before, f"{a} held the codeword before its own grep"
        raw_before = (root / agent_source(a)).read_bytes().split(b"\n")[:at]
        assert CODEWORD.encode() not in b"\n".join(raw_before)
        hits = [h for h in json.loads(result["content"])["hits"] if CODEWORD in h["line"]]
        turn = hits[0]["turn"]
        link = recs[a][1]
        rows = {x["row"]["id"]: x for x in link["turns"]}
        assert rows[turn]["at"]["source"] == ROOT_FILE, a
        own_turns = {r["turn"] for r in recs[a] if r["t"] in ("UserPrompt", "AssistantMessage")}
        assert turn not in own_turns
        assert turn not in {r["turn"] for r in recs["a2"]
                            if r["t"] in ("UserPrompt", "AssistantMessage")}
        # the root recorded it, in that very turn
        assert any(r.get("turn") == turn for r in recs["a1"])

    # the grandchild read the turn back and named its grandparent's file
    reads = _tool_calls(recs["a3"], "transcript_read")
    assert reads and json.loads(reads[0][2]["content"])[0]["source"] == ROOT_FILE
    assert CODEWORD in recs["a3"][-2]["blocks"][0]["text"]
    assert ROOT_FILE in recs["a3"][-2]["blocks"][0]["text"]

    # from outside: the door reads the grandchild's turn through the pointer
    assert main(["transcript", "grep", str(root / "agents" / "a3"), CODEWORD, "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)["hits"]
    assert main(["transcript", "read", str(root / "agents" / "a3"), "--turns",
                 str(hits[0]["turn"]), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["source"] == ROOT_FILE

    # every log folds and every pointer's digest matches
    assert main(["verify", str(root), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and report["agents"] == 3 and report["torn"] == []

    # and the run's cost reads back per agent
    assert main(["cost", str(root), "--json"]) == 0
    cost = json.loads(capsys.readouterr().out)
    assert [a["agent"] for a in cost["agents"]] == ["a1", "a2", "a3"]
    assert cost["total"]["cost_usd"] > 0


async def test_demo_through_the_supervisor(tmp_path, capsys):
    root = tmp_path / "run"
    provider = ScriptedProvider(policy=demo.policy, cache_model=CacheModel())
    async with open_supervisor(root, provider, demo_settings(), user_tools=demo.user_tools(),
                               started_by="test", provider_name="scripted") as sup:
        node = await sup.ask("Read the eight station papers in order; then have a child find "
                             "the harbour codeword and report what it found.")
    assert node.reason == "done"
    assert CODEWORD in node.answer and ROOT_FILE in node.answer
    assert set(sup.agents) == {"a1", "a2", "a3"}
    assert sup.agents["a1"].evictions >= 1, "harness evictions in the root"
    assert sup.agents["a3"].evictions >= 1, "and in the grandchild"
    assert all(a.state == "ended" for a in sup.agents.values())
    for aid, a in sup.agents.items():
        assert refold(root, aid) == a.ctx
    check_demo_run(root, capsys)


def test_demo_command(tmp_path, capsys):
    root = tmp_path / "run"
    assert main(["demo", "--run-root", str(root)]) == 0
    out = capsys.readouterr().out
    assert CODEWORD in out and "harness" in out and "(inherited)" in out
    assert "total" in out
    assert (root / "mnemon.log").is_file()
    logged = [json.loads(line) for line in (root / "mnemon.log").read_text().splitlines()]
    assert any(e["event"] == "harness eviction" for e in logged)
    assert {e.get("agent") for e in logged} >= {"a1", "a2", "a3"}
    check_demo_run(root, capsys)


def test_demo_refuses_a_non_empty_run_root(tmp_path, capsys):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("x")
    assert main(["demo", "--run-root", str(tmp_path / "busy")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not empty" in err


def test_demo_in_a_subprocess_under_60_seconds(tmp_path, capsys):
    root = tmp_path / "run"
    exe = shutil.which("mnemon", path=str(Path(sys.executable).parent))
    cmd = ([exe] if exe else [sys.executable, "-m", "mnemon"])
    t0 = time.monotonic()
    proc = subprocess.run([*cmd, "demo", "--run-root", str(root)], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    took = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr
    assert took < 60
    assert CODEWORD in proc.stdout
    assert proc.stderr == "", "stderr carries only errors or the progress display (a terminal)"
    check_demo_run(root, capsys)
