"""The example run roots of tests/data/examples, and the exit codes of verify and context."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mnemon.orchestrator.cli import main
from mnemon.session.resume import fold_file
from tests.conftest import EXAMPLES

OK_CASES = sorted(p.name for p in EXAMPLES.iterdir() if (p / "expected.json").is_file()
                  and p.name != "refused")
REFUSED = json.loads((EXAMPLES / "refused" / "expected.json").read_text())


def _agents(case):
    exp = json.loads((EXAMPLES / case / "expected.json").read_text())
    return exp, exp.get("agents", {})


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("case", OK_CASES)
def test_example_folds_with_its_frontier(case, capsys):
    exp, agents = _agents(case)
    assert exp["verify_ok"] is True
    code, out, err = _run(capsys, "verify", str(EXAMPLES / case), "--json")
    assert code == 0 and json.loads(out)["ok"] is True and err == ""
    for agent, want in agents.items():
        adir = EXAMPLES / case / "agents" / agent
        code, out, err = _run(capsys, "context", str(adir), "--json")
        assert code == 0, err
        survey = json.loads(out)
        got = [["turn", it["id"]] if it["kind"] == "turn" else ["residue", it["span"]]
               for it in survey["frontier"]]
        assert got == want["frontier"]
        assert survey["history_bytes"] == sum(it["bytes"] for it in survey["frontier"])
        code, out, err = _run(capsys, "context", str(adir), "--rendered", "--json")
        assert code == 0, err
        rendered = json.loads(out)
        text = json.dumps(rendered["messages"], ensure_ascii=False)
        if "rendered_first_role" in want:
            assert rendered["messages"][0]["role"] == want["rendered_first_role"]
        for s in want.get("rendered_contains", []):
            assert s in text
        for s in want.get("rendered_lacks", []):
            assert s not in text


@pytest.mark.parametrize("case", OK_CASES)
def test_example_index_held_matches_the_fold(case):
    from mnemon.lineage.runroot import make_loader

    _, agents = _agents(case)
    for agent, want in agents.items():
        src = f"agents/{agent}/record.jsonl"
        ctx, torn = fold_file(EXAMPLES / case / src, src, loader=make_loader(EXAMPLES / case))
        assert torn is None
        for tid, held in want.get("index_held", {}).items():
            assert ctx.turn(int(tid)).held == held
        for tid, source in want.get("index_source", {}).items():
            assert ctx.turn(int(tid)).source == source


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_examples_exit_1_naming_the_line(case, capsys):
    code, out, err = _run(capsys, "verify", str(EXAMPLES / "refused" / case), "--json")
    assert code == 1
    report = json.loads(out)
    assert report["ok"] is False
    assert [p["line"] for p in report["problems"]] == [REFUSED[case]["line"]]
    assert report["problems"][0]["path"] == "agents/a1/record.jsonl"
    # human output names path:line
    code, out, _ = _run(capsys, "verify", str(EXAMPLES / "refused" / case))
    assert code == 1 and f"agents/a1/record.jsonl:{REFUSED[case]['line']}:" in out


def test_refused_messages_name_the_state(capsys):
    want = {"orphan-tool-result": "no pending call", "ids-not-increasing": "ids must increase",
            "note-with-newline": "one line", "evict-turn-in-hand": "is the turn in hand",
            "inherited-late": "Inherited only opens a log"}
    for case, fragment in want.items():
        _, out, _ = _run(capsys, "verify", str(EXAMPLES / "refused" / case), "--json")
        assert fragment in json.loads(out)["problems"][0]["error"]


def test_context_on_a_broken_log_exits_1_with_one_line(capsys):
    code, out, err = _run(capsys, "context", str(EXAMPLES / "refused" / "orphan-tool-result" /
                                                 "agents" / "a1"))
    assert code == 1 and out == ""
    assert len(err.strip().splitlines()) == 1 and "line 4" in err or ":4:" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("command", ["verify", "context"])
def test_nonexistent_and_foreign_paths_exit_2_with_one_line(command, tmp_path, capsys):
    for p in (tmp_path / "nope", tmp_path):
        code, out, err = _run(capsys, command, str(p))
        assert code == 2, (p, err)
        assert len(err.strip().splitlines()) == 1 and err.startswith("mnemon: ")
        assert "Traceback" not in err


def test_run_root_with_a_bad_run_json_exits_2(tmp_path, capsys):
    shutil.copytree(EXAMPLES / "plain", tmp_path / "r")
    (tmp_path / "r" / "run.json").write_text('{"format": 99}')
    code, _, err = _run(capsys, "verify", str(tmp_path / "r"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "format" in err


def test_console_script_exit_codes_without_traceback(tmp_path):
    exe = [str(Path(sys.executable).parent / "mnemon")]
    ok = subprocess.run(exe + ["verify", str(EXAMPLES / "plain")], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run(exe + ["verify", str(EXAMPLES / "refused" / "ids-not-increasing")],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    gone = subprocess.run(exe + ["context", str(tmp_path / "missing")], capture_output=True,
                          text=True)
    assert gone.returncode == 2 and "Traceback" not in gone.stderr
    assert len(gone.stderr.strip().splitlines()) == 1
