"""``mnemon transcript index|read|grep`` — machine shapes, exit codes, files never modified."""

from __future__ import annotations

import json
import shutil

import pytest

from mnemon.orchestrator.cli import main
from tests.conftest import EXAMPLES

ROW_KEYS = {"id", "role", "label", "bytes", "held", "residue", "origin", "source"}


@pytest.fixture
def child(tmp_path):
    dst = tmp_path / "child"
    shutil.copytree(EXAMPLES / "child", dst)
    return dst / "agents" / "c1"


def run(capsys, *argv):
    try:
        code = main(["transcript", *map(str, argv)])
    except SystemExit as e:  # argparse usage errors
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def test_index_json(capsys, child):
    code, out, err = run(capsys, "index", child, "--json")
    assert code == 0 and err == ""
    rows = json.loads(out)
    assert [r["id"] for r in rows] == [1, 2, 3, 4, 6, 7]
    assert all(set(r) - {"blocks"} == ROW_KEYS for r in rows)
    assert rows[0]["residue"] == [1, 2] and rows[2]["residue"] is None
    code, out, _ = run(capsys, "index", child, "--json", "--turns", "2-4")
    assert [r["id"] for r in json.loads(out)] == [2, 3, 4]


def test_read_json(capsys, child):
    code, out, _ = run(capsys, "read", child, "--turns", "2,6-7", "--json")
    assert code == 0
    got = json.loads(out)
    assert [(t["turn"], t["source"]) for t in got] == [
        (2, "agents/p/record.jsonl"), (6, "agents/c1/record.jsonl"), (7, "agents/c1/record.jsonl")]
    assert all(set(t) == {"turn", "source", "records"} for t in got)
    assert got[0]["records"][1]["t"] == "ToolResults"


def test_grep_json(capsys, child):
    code, out, _ = run(capsys, "grep", child, "ONLY-IN-PARENT", "--json")
    assert code == 0
    assert json.loads(out) == {"hits": [{"turn": 2, "line": "ONLY-IN-PARENT.txt"}], "total": 1}
    code, out, _ = run(capsys, "grep", child, "ONLY", "--turns", "3-7", "--json")
    assert json.loads(out) == {"hits": [], "total": 0}


def test_human_output(capsys, child):
    assert run(capsys, "index", child)[1].count("\n") == 6
    assert "ONLY-IN-PARENT.txt" in run(capsys, "read", child, "--turns", "2")[1]
    out = run(capsys, "grep", child, "src")[1]
    assert out.splitlines()[-1].endswith("matching lines")


def test_the_cli_reads_the_unclosed_turn(capsys, tmp_path):
    dst = tmp_path / "ev"
    shutil.copytree(EXAMPLES / "evicted", dst)
    code, out, _ = run(capsys, "read", dst / "agents" / "a1", "--turns", "5", "--json")
    assert code == 0 and json.loads(out)[0]["records"][0]["text"] == "Fix it"


@pytest.mark.parametrize("argv,msg", [
    (["read", "{a}", "--turns", "999", "--json"], "turn 999 is not recorded — the latest is 7"),
    (["read", "{a}", "--turns", "x"], "turns takes ids and ranges"),
    (["grep", "{a}", "(", "--json"], "the pattern is not a valid regex"),
    (["grep", "{a}", "x", "--timeout", "0"], "--timeout must be a positive"),
    (["read", "{a}"], "--turns"),
    (["grep", "{root}", "x"], "not an agent directory"),
    (["frobnicate", "{a}"], "invalid choice"),
])
def test_user_errors_exit_2_with_one_line(capsys, child, argv, msg):
    argv = [x.format(a=child, root=child.parent.parent) for x in argv]
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert err.count("\n") == 1 and msg in err and "Traceback" not in err


def test_timeout_refused(capsys, tmp_path):
    from mnemon.lineage.runroot import create_run_root
    from tests.helpers import new_agent, prompt

    root = create_run_root(tmp_path / "run", "t")
    log = new_agent(root, "a1")
    prompt(log, "a" * 5000 + "!")
    code, out, err = run(capsys, "grep", root / "agents" / "a1", "(a+)+$", "--timeout", "0.1")
    assert code == 2 and "ran longer than 0.1 s — narrow it" in err


def test_torn_tail_reported_file_untouched(capsys, tmp_path):
    dst = tmp_path / "plain"
    shutil.copytree(EXAMPLES / "plain", dst)
    log = dst / "agents" / "a1" / "record.jsonl"
    data = log.read_bytes() + b'{"t":"UserPrompt","turn":9,"te'
    log.write_bytes(data)
    code, out, err = run(capsys, "grep", log.parent, "attrs", "--json")
    assert code == 0 and json.loads(out)["total"] == 2
    assert "torn tail of 30 bytes" in err
    assert log.read_bytes() == data


def test_a_log_that_does_not_fold_is_a_failure_not_a_user_error(tmp_path, capsys):
    """DESIGN: exit 1 for a log that does not verify, with one line naming the line."""
    from mnemon.orchestrator.cli import main

    root = tmp_path / "r"
    (root / "agents" / "a1").mkdir(parents=True)
    (root / "run.json").write_text('{"format": 1}')
    (root / "agents" / "a1" / "record.jsonl").write_text(
        '{"t":"SessionStarted","agent":"a1"}\n{"t":"UserPrompt","turn":"x","text":1}\n')
    for cmd in (["transcript", "index"], ["transcript", "grep", "--json"], ["context"]):
        args = cmd[:2] + [str(root / "agents" / "a1")] + (["a"] if "grep" in cmd else []) + \
            cmd[2:] if cmd[0] == "transcript" else cmd + [str(root / "agents" / "a1")]
        assert main(args) == 1, args
        err = capsys.readouterr().err
        assert "record.jsonl:2" in err and "Traceback" not in err and err.count("\n") == 1
