"""Crash safety (torn tails at every byte offset) and tamper detection (digests before parsing)."""

from __future__ import annotations

import json
import shutil

import pytest

from mnemon.orchestrator.cli import main
from mnemon.orchestrator.cli.commands.verify import verify
from mnemon.session.agentlog import AgentLog
from mnemon.session.errors import DigestMismatch, LogCorrupt
from mnemon.session.log import RecordLog, find_torn_tail, read_span
from mnemon.session.records import (
    AssistantMessage,
    Evicted,
    Residue,
    Steering,
    Text,
    ToolResult,
    ToolResults,
    ToolUse,
    UserPrompt,
)
from mnemon.session.resume import fold_file
from tests.helpers import new_agent

SRC = "agents/a1/record.jsonl"


def _build(run_root):
    log = new_agent(run_root, "a1")
    loci = [(0, log.log.size - 1, None)]
    recs = [
        UserPrompt(turn=1, text="find the flaky test — ünïcode"),
        AssistantMessage(turn=2, blocks=[Text("Looking."), ToolUse("tu_1", "bash", {"command": "pytest -x"})],
                         stop_reason="tool_use", model="m", usage=None),
        ToolResults(results=[ToolResult(tool_use_id="tu_1", content="1 failed\nline two")]),
        UserPrompt(turn=3, text="go on"),
        Evicted(residue=Residue(span=(1, 2), note="pytest -x: 1 failed", by="model")),
        Steering(text="a nudge", by="harness"),
    ]
    for r in recs:
        loci.append(log.append(r))
    log.close()
    return log.path, loci


def test_truncation_at_every_offset_of_the_last_records(run_root, tmp_path):
    path, loci = _build(run_root)
    whole = path.read_bytes()
    live, _ = fold_file(path, SRC)
    ends = [off + length + 1 for off, length, _ in loci]  # byte after each newline
    start = loci[-3][0]
    backup = tmp_path / "whole.jsonl"
    backup.write_bytes(whole)
    for cut in range(start, len(whole) + 1):
        path.write_bytes(whole[:cut])
        complete = sum(1 for e in ends if e <= cut)
        boundary = cut in ends
        # read-only: folds what is complete, reports the tail, never modifies the file
        ctx, torn = fold_file(path, SRC)
        assert path.read_bytes() == whole[:cut]
        assert ctx.records_folded == complete
        if boundary:
            assert torn is None
        else:
            assert torn is not None and torn.offset == ends[complete - 1]
            assert torn.length == cut - torn.offset
        report = verify(run_root)
        assert report["ok"] is True
        assert [t["path"] for t in report["torn"]] == ([] if boundary else [SRC])
        assert path.read_bytes() == whole[:cut]
        # reopening to append: every returned record recovered, the tail moved aside, reported
        agent, torn2 = AgentLog.resume(path, SRC)
        agent.close()
        assert (torn2 is None) == boundary
        data = path.read_bytes()
        assert data.startswith(whole[:ends[complete - 1]])
        assert find_torn_tail(path) is None
        if not boundary:
            aside = path.with_name(torn2.moved_to)
            assert aside.read_bytes() == whole[torn2.offset:cut]
            aside.unlink()
        refolded, _ = fold_file(path, SRC)
        assert refolded.records_folded == complete + 1  # + SessionResumed
        if complete == len(loci):
            assert refolded == live
    path.write_bytes(whole)


def test_recordlog_reopen_moves_the_torn_tail_aside(tmp_path):
    path = tmp_path / "record.jsonl"
    path.write_bytes(b'{"t":"SessionStarted","agent":"a1"}\n{"t":"UserPrompt","turn":1,"text":"x"}')
    log = RecordLog(path)
    assert log.torn is not None and log.torn.offset == 36 and log.torn.length == 38
    assert path.with_name(log.torn.moved_to).read_bytes() == b'{"t":"UserPrompt","turn":1,"text":"x"}'
    assert log.size == 36
    log.close()
    # a second crash at the same offset does not overwrite the first file moved aside
    with open(path, "ab") as f:
        f.write(b'{"t":"Ste')
    log2 = RecordLog(path)
    assert log2.torn.moved_to != log.torn.moved_to
    log2.close()


def test_verify_cli_stays_ok_and_lists_the_torn_tail(run_root, capsys):
    path, _ = _build(run_root)
    with open(path, "ab") as f:
        f.write(b'{"t":"Steering","text":"half')
    before = path.read_bytes()
    assert main(["verify", str(run_root), "--json"]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["ok"] is True and report["torn"][0]["path"] == SRC
    assert "torn tail" in err and len(err.strip().splitlines()) == 1
    assert main(["context", str(run_root / "agents" / "a1"), "--json"]) == 0
    assert "torn tail" in capsys.readouterr().err
    assert path.read_bytes() == before


def test_tampered_byte_is_refused_before_parsing(run_root):
    path, loci = _build(run_root)
    data = bytearray(path.read_bytes())
    off, length, dig = loci[2]
    # still valid JSON after the flip: only the digest can tell
    i = data.index(b"Looking.", off)
    data[i] = ord("l")
    path.write_bytes(bytes(data))
    with pytest.raises(DigestMismatch) as e:
        list(read_span(path, SRC, [loci[2]]))
    assert e.value.path == SRC and e.value.offset == off
    assert SRC in str(e.value) and f"offset {off}" in str(e.value)
    # the other records still read
    assert len(list(read_span(path, SRC, [loci[1], loci[3]]))) == 2


def test_read_past_the_end_is_refused(run_root):
    path, loci = _build(run_root)
    off, length, dig = loci[-1]
    with open(path, "r+b") as f:
        f.truncate(off + 3)
    with pytest.raises(LogCorrupt) as e:
        list(read_span(path, SRC, [loci[-1]]))
    assert e.value.offset == off


def test_tampered_parent_is_named_by_verify(run_root, tmp_path, capsys):
    """A child's pointer into a tampered parent file: verify exits 1 naming the child's line."""
    from mnemon.lineage.runroot import agent_source
    from mnemon.session.records import Inherited, Linked, Row, SessionStarted
    from mnemon.lineage.runroot import make_loader

    path, loci = _build(run_root)
    child_src = agent_source("c1")
    child = AgentLog.create(run_root / child_src, child_src, SessionStarted(agent="c1", parent="a1",
                                                                          kind="mnemon"),
                            loader=make_loader(run_root))
    ctx = fold_file(path, SRC)[0]
    t1 = ctx.turn(1)
    child.append(Inherited(turns=[Linked(row=Row(id=1, role="user", label=t1.label, bytes=t1.bytes,
                                                 held="resident"), at=t1.pointer)],
                           residues=[], id_floor=4))
    child.close()
    assert verify(run_root)["ok"] is True
    shutil.copy(path, tmp_path / "saved")
    data = bytearray(path.read_bytes())
    data[t1.loci[0][0] + 30] ^= 0x01
    path.write_bytes(bytes(data))
    report = verify(run_root)
    assert report["ok"] is False
    prob = [p for p in report["problems"] if p["path"] == child_src][0]
    assert prob["line"] == 2 and SRC in prob["error"] and f"offset {t1.loci[0][0]}" in prob["error"]
    assert main(["verify", str(run_root)]) == 1
