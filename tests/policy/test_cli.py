"""The command line: ``mnemon verify`` checks the approval records; ``mnemon ask --policy``
denies, and rejects every ask (nobody is there to answer); a bad ``--policy`` exits 2 before
anything is written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from mnemon.orchestrator.cli import main


def mnemon(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mnemon", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def script(path: Path, *turns: dict) -> Path:
    path.write_text("".join(json.dumps(t) + "\n" for t in turns))
    return path


def call(cid: str, name: str, **inp) -> dict:
    return {"blocks": [{"type": "tool_use", "id": cid, "name": name, "input": inp}],
            "stop_reason": "tool_use"}


END = {"blocks": [{"type": "text", "text": "over"}], "stop_reason": "end_turn"}


def test_ask_denies_and_rejects_asks_then_verify_checks_the_records(tmp_path):
    s = script(tmp_path / "s.jsonl", call("g1", "transcript_grep", pattern="x"),
               call("i1", "transcript_index"), END)
    pol = tmp_path / "p.toml"
    pol.write_text('[[rule]]\ntool = "transcript_grep"\naction = "deny"\nreason = "no grep"\n'
                   '[[rule]]\ntool = "transcript_*"\naction = "ask"\n')
    root = tmp_path / "run"
    r = mnemon("ask", "go", "--script", str(s), "--policy", str(pol), "--run-root", str(root),
               "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["answer"] == "over"
    log = root / "agents" / "a1" / "record.jsonl"
    recs = [json.loads(l) for l in log.read_text().splitlines()]
    results = {x["tool_use_id"]: x for rec in recs if rec["t"] == "ToolResults"
               for x in rec["results"]}
    assert results["g1"]["is_error"] and "no grep" in results["g1"]["content"]
    assert results["i1"]["is_error"] and "nobody to ask" in results["i1"]["content"]
    (dec,) = [rec for rec in recs if rec["t"] == "ApprovalDecided"]
    assert dec["by"] == "on_ask" and dec["decision"] == "reject"
    assert mnemon("verify", str(root), cwd=tmp_path).returncode == 0

    # a hand-made second decision: verify names the line
    lines = log.read_text().splitlines()
    at = next(i for i, l in enumerate(lines) if '"ApprovalDecided"' in l)
    lines.insert(at + 1, lines[at])
    log.write_text("\n".join(lines) + "\n")
    for p in log.parent.iterdir():  # a checkpoint describes the old file: not read, but go
        if p != log:
            p.unlink()
    r = mnemon("verify", str(root), "--json", cwd=tmp_path)
    assert r.returncode == 1
    chained, problem = json.loads(r.stdout)["problems"]
    assert (chained["line"], chained["kind"]) == (at + 2, "inserted")  # the log's chain, and
    assert problem["line"] == at + 2 and "a second decision on the call i1" in problem["error"]


def test_a_bad_policy_file_exits_2_before_anything_is_written(tmp_path, capsys):
    pol = tmp_path / "p.toml"
    pol.write_text('[[rule]]\ntool = "x"\naction = "deny"\nwhen = { cmd = "(x|xx)+y" }\n')
    root = tmp_path / "run"
    assert main(["ask", "go", "--policy", str(pol), "--run-root", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"policy {pol} rule 1: when.cmd" in err
    assert not root.exists()
