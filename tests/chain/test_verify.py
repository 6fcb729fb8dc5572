"""``mnemon verify`` over a run root: the chain across a lineage, ``--head``, ``--against``,
old unchained logs, torn tails, and resume refusing a broken chain by name."""

from __future__ import annotations

import errno
import json
import shutil

import pytest

from mnemon.lineage.fork import fork, resume_child
from mnemon.orchestrator.cli import main
from mnemon.session import chain
from mnemon.session.agentlog import AgentLog
from mnemon.session.chain import ChainBroken
from mnemon.session.records import Steering
from tests.conftest import EXAMPLES
from tests.helpers import new_agent, prompt, tool_turn


def lineage(root, deep: bool = False):
    """A parent with two turns, a mnemon child forked from it, more turns in both (and with
    ``deep`` a grandchild forked from the child, ``g1``)."""
    p = new_agent(root, "p")
    prompt(p, "survey the repo")
    tool_turn(p, "looking", "ls", "README.md\nsrc")
    c = fork(root, p, "c1", task="read src/")
    tool_turn(c, "reading", "cat src/a", "hello")
    if deep:
        g = fork(root, c, "g1", task="read a")
        tool_turn(g, "deeper", "cat a", "x")
        g.close()
    tool_turn(p, "more", "ls -l", "a b c")
    c.close()
    p.close()
    return root / "agents/p/record.jsonl", root / "agents/c1/record.jsonl"


def verify(capsys, *args):
    capsys.readouterr()
    code = main(["verify", *map(str, args), "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_a_whole_run_verifies_and_its_heads_are_blake3_of_the_files(run_root, capsys):
    import blake3

    lineage(run_root)
    code, rep = verify(capsys, run_root)
    assert code == 0 and rep["ok"] and [x["chain"] for x in rep["logs"]] == ["v1", "v1"]
    for x in rep["logs"]:
        assert x["head"] == blake3.blake3((run_root / x["path"]).read_bytes()).hexdigest()
    assert rep["run"] == chain.run_head((x["path"], x["bytes"], x["head"]) for x in rep["logs"])


def test_the_childs_link_catches_a_parent_rewritten_with_its_chain_recomputed(run_root, capsys):
    ppath, _ = lineage(run_root)
    lines = ppath.read_bytes().splitlines()
    # rewrite the parent's tool output and recompute every chain key: its own chain is whole
    redo = chain.Running()
    out = b""
    for x in lines:
        out += redo.seal(chain.strip(x).replace(b"README.md", b"READ-ME.md"))
    ppath.write_bytes(out)
    assert chain.check(ppath, "p").broken is None
    code, rep = verify(capsys, run_root, "--head")
    assert code == 1
    assert [(p["path"], p["kind"]) for p in rep["problems"]] == \
        [("agents/p/record.jsonl", "rewritten")]
    assert "agents/c1/record.jsonl:2 (the link of a child)" in rep["problems"][0]["error"]


def test_the_childs_link_catches_the_parents_last_records_cut_off(run_root, capsys):
    ppath, _ = lineage(run_root)
    lines = ppath.read_bytes().splitlines(keepends=True)
    ppath.write_bytes(b"".join(lines[:3]))  # the fork happened after line 5
    code, rep = verify(capsys, run_root)
    assert code == 1
    cut = [p for p in rep["problems"] if p.get("kind") == "truncated"]
    assert [(p["path"], p["line"]) for p in cut] == [("agents/p/record.jsonl", 4)]


def test_head_and_against(run_root, capsys, tmp_path):
    ppath, cpath = lineage(run_root)
    capsys.readouterr()
    assert main(["verify", str(run_root), "--head"]) == 0
    heads = capsys.readouterr().out
    assert heads.splitlines()[-1].endswith(" run") and len(heads.splitlines()) == 3
    kept = tmp_path / "heads.txt"
    kept.write_text(heads)
    assert verify(capsys, run_root, "--against", kept)[0] == 0
    # a log that grew since its head was kept is no problem
    log, _ = AgentLog.resume(ppath, "agents/p/record.jsonl")
    log.append(Steering(text="later", by="user"))
    log.close()
    assert verify(capsys, run_root, "--against", kept)[0] == 0
    # its last records cut off: named against the kept head, one past the end
    lines = cpath.read_bytes().splitlines(keepends=True)
    cpath.write_bytes(b"".join(lines[:-2]))
    code, rep = verify(capsys, run_root, "--against", kept, "--head")
    assert code == 1
    assert [(p["path"], p["line"], p["kind"]) for p in rep["problems"]] == \
        [("agents/c1/record.jsonl", len(lines) - 1, "truncated")]
    # a heads file edited to match is caught by its own run head
    cpath.write_bytes(b"".join(lines))
    forged = heads.replace(heads.split()[0], "0" * 64, 1)
    kept.write_text(forged)
    code, rep = verify(capsys, run_root, "--against", kept, "--head")
    assert code == 1 and any("heads file was edited" in p["error"] for p in rep["problems"])
    # only the run's head kept: the run as it was when it was kept
    shutil.rmtree(run_root / "agents" / "p")
    kept.write_text(heads.splitlines()[-1] + "\n")
    code, rep = verify(capsys, run_root, "--against", kept, "--head")
    assert code == 1 and "the run's head is not the one kept" in rep["problems"][0]["error"]


def test_a_malformed_heads_file_is_a_user_error(run_root, tmp_path, capsys):
    lineage(run_root)
    bad = tmp_path / "heads.txt"
    bad.write_text("not a head\n")
    assert main(["verify", str(run_root), "--against", str(bad)]) == 2
    assert "heads.txt:1: not a line of 'mnemon verify --head'" in capsys.readouterr().err


def test_an_old_log_verifies_as_unchained(tmp_path, capsys):
    root = tmp_path / "child"
    shutil.copytree(EXAMPLES / "child", root)
    code, rep = verify(capsys, root)
    assert code == 0 and {x["chain"] for x in rep["logs"]} == {"unchained"}
    capsys.readouterr()
    assert main(["verify", str(root)]) == 0
    assert "0 chained, 2 unchained" in capsys.readouterr().out


def test_a_torn_tail_is_reported_not_called_tampering(run_root, capsys):
    _, cpath = lineage(run_root)
    with open(cpath, "ab") as f:
        f.write(b'{"t":"Steering","text":"half')
    code, rep = verify(capsys, run_root)
    assert code == 0 and rep["torn"] and not rep["problems"]
    # and a resume repairs it as before, the chain going on
    log = resume_child(run_root, "c1")
    log.close()
    assert verify(capsys, run_root)[0] == 0


def test_resume_refuses_a_broken_chain_by_name(run_root, capsys):
    ppath, _ = lineage(run_root)
    data = ppath.read_bytes()
    at = data.index(b"README.md")
    ppath.write_bytes(data[:at] + b"README.me" + data[at + 9:])
    line = data[:at].count(b"\n") + 1
    with pytest.raises(ChainBroken) as e:
        AgentLog.resume(ppath, "agents/p/record.jsonl")
    assert (e.value.line, e.value.kind) == (line, "edited")
    assert f"record.jsonl:{line}: the chain breaks here (edited)" in str(e.value)
    assert ppath.read_bytes() == data[:at] + b"README.me" + data[at + 9:]  # nothing appended
    code, rep = verify(capsys, run_root)
    assert code == 1 and rep["problems"][0]["line"] == line


def test_a_failed_append_leaves_the_chain_whole(run_root, monkeypatch):
    """The writer's Python path, faulted through ``os.write`` (the native append writes below
    ``os``: its failed write is faulted with a real file-size limit in
    ``tests/reliability/test_disk.py``, and the chain checked the same way)."""
    log = new_agent(run_root, "a1")
    prompt(log, "go")
    import mnemon.session.log as logmod

    monkeypatch.setattr(logmod, "_Chain", logmod._NoChain)
    real = logmod.os.write
    calls = {"n": 0}

    def failing(fd, data):
        if fd == log.log._fd and calls["n"] == 0:
            calls["n"] += 1
            real(fd, bytes(data)[:7])  # a partial line, then a full disk
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(logmod.os, "write", failing)
    with pytest.raises(Exception):
        log.append(Steering(text="lost", by="user"))
    log.append(Steering(text="kept", by="user"))
    size, n, head = log.log.head()
    log.close()
    rep = chain.check(run_root / "agents/a1/record.jsonl", "a1")
    assert rep.broken is None and (rep.bytes, rep.lines, rep.head) == (size, n, head)


def test_an_old_log_resumed_stays_unchained(tmp_path, capsys):
    root = tmp_path / "child"
    shutil.copytree(EXAMPLES / "child", root)
    log = resume_child(root, "p")
    assert not log.log.chained and log.log.head() is None
    log.append(Steering(text="later", by="user"))
    log.close()
    assert b'"c":[' not in (root / "agents/p/record.jsonl").read_bytes()
    code, rep = verify(capsys, root)
    assert code == 0 and {x["chain"] for x in rep["logs"]} == {"unchained"}
