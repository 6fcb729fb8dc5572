"""Refusals name the state: unknown ids, the turn in hand, broken pointers, bad patterns."""

from __future__ import annotations

import os
import shutil

import pytest

from mnemon.session.door import Door, parse_turns
from mnemon.session.errors import Refusal
from tests.conftest import EXAMPLES
from tests.helpers import answer, door_open, new_agent, prompt, tool_turn


@pytest.fixture
def child_copy(tmp_path):
    dst = tmp_path / "child"
    shutil.copytree(EXAMPLES / "child", dst)
    return dst


def test_unknown_id(run_root):
    log = new_agent(run_root, "a1")
    for i in range(3):
        prompt(log, f"p{i}")
    door = Door(run_root, log.ctx)
    with pytest.raises(Refusal, match=r"^turn 999 is not recorded — the latest is 3$"):
        door.read([999])
    with pytest.raises(Refusal, match="turn 999 is not recorded"):
        door.grep("p", "1,999")
    assert [t["turn"] for t in door.read("2-999")] == [2, 3]  # a range selects what is recorded
    assert door.read("50-60") == []


def test_nothing_recorded(run_root):
    log = new_agent(run_root, "a1")
    with pytest.raises(Refusal, match="turn 1 is not recorded — no turn is recorded yet"):
        Door(run_root, log.ctx).read([1])
    assert Door(run_root, log.ctx).grep("x") == {"hits": [], "total": 0}


def test_turns_syntax():
    assert parse_turns("3,5-9") == ([3], [(5, 9)])
    assert parse_turns([3, "5-9"]) == ([3], [(5, 9)])
    for bad in ("3,x", "9-5", "", [1.5], True, "1-2-3"):
        with pytest.raises(Refusal):
            parse_turns(bad)


def test_own_door_refuses_the_turn_in_hand_and_grep_skips_it(run_root):
    log = new_agent(run_root, "a1")
    prompt(log, "needle one")
    tool_turn(log, "looking for the needle", "grep needle", "needle found")
    own = Door.of_agent(run_root, log)
    with pytest.raises(Refusal, match=r"^turn 2 is still being written — its closed turns "
                                      r"\(1–1\) are readable$"):
        own.read([2])
    assert [t["turn"] for t in own.read("1-2")] == [1]
    assert [h["turn"] for h in own.grep("needle")["hits"]] == [1]
    outside = Door(run_root, log.ctx)  # the CLI, reading from outside, may read it
    assert [t["turn"] for t in outside.read([2])] == [2]
    assert outside.grep("needle")["total"] == 4


def test_missing_ancestor_is_refused_naming_the_path(child_copy):
    door, _ = door_open(child_copy / "agents" / "c1")
    os.remove(child_copy / "agents" / "p" / "record.jsonl")
    with pytest.raises(Refusal, match="agents/p/record.jsonl.*missing"):
        door.read([1])
    with pytest.raises(Refusal, match="agents/p/record.jsonl"):
        door.grep("ONLY")
    # pointers resolve lazily: the child's own turns still read and grep
    assert door.read([6])[0]["turn"] == 6
    assert door.grep("parser", "6-7")["total"] == 1


def test_altered_ancestor_is_refused_naming_the_path(child_copy):
    door, _ = door_open(child_copy / "agents" / "c1")
    p = child_copy / "agents" / "p" / "record.jsonl"
    p.write_bytes(p.read_bytes().replace(b"ONLY-IN-PARENT", b"ONLY-IN-PARENX"))
    with pytest.raises(Refusal, match=r"agents/p/record.jsonl at offset 324: digest mismatch"):
        door.read([2])
    with pytest.raises(Refusal, match=r"agents/p/record.jsonl at offset 324: digest mismatch"):
        door.grep("ONLY-IN")
    with pytest.raises(Refusal, match=r"agents/p/record.jsonl at offset 324: digest mismatch"):
        door.grep("ONLY-IN", shortcut=False)


def test_truncated_ancestor_is_refused(child_copy):
    door, _ = door_open(child_copy / "agents" / "c1")
    p = child_copy / "agents" / "p" / "record.jsonl"
    p.write_bytes(p.read_bytes()[:400])
    with pytest.raises(Refusal, match=r"agents/p/record.jsonl at offset \d+: the file ends"):
        door.read([3])
    with pytest.raises(Refusal, match=r"agents/p/record.jsonl at offset \d+: the file ends"):
        door.grep("x", [3])


def test_pointer_outside_the_run_root_is_refused(child_copy, tmp_path):
    from mnemon.session.resume import fold_file

    src = "agents/c1/record.jsonl"
    ctx, _ = fold_file(child_copy / src, src, lazy=True)  # a table whose pointers we bend
    door = Door(child_copy, ctx)
    t = door.ctx.turn(1)
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_bytes((child_copy / "agents" / "p" / "record.jsonl").read_bytes())
    for source, why in (("../elsewhere.jsonl", "leave the run root"),
                        (str(outside), "relative to the run root")):
        t.source = source
        with pytest.raises(Refusal, match=f"{source}.*{why}"):
            door.read([1])
    (child_copy / "agents" / "link").symlink_to(outside)
    t.source = "agents/link"
    with pytest.raises(Refusal, match="agents/link.*outside the run root"):
        door.read([1])


def test_bad_pattern(run_root):
    log = new_agent(run_root, "a1")
    prompt(log, "x")
    door = Door(run_root, log.ctx)
    for bad in ("(", "[a-", "a{2,1}", "*a", "a**", "\\"):
        with pytest.raises(Refusal, match="^the pattern is not a valid regex: "):
            door.grep(bad)


def test_regex_that_runs_too_long(run_root):
    log = new_agent(run_root, "a1")
    prompt(log, "a" * 5000 + "!")
    answer(log, "fine")
    door = Door(run_root, log.ctx)
    with pytest.raises(Refusal, match=r"^the pattern ran longer than 0.2 s — narrow it$"):
        door.grep(r"(a+)+$", timeout_s=0.2)
    with pytest.raises(Refusal, match=r"ran longer than 0.2 s"):
        door.grep(r"(a+)+$", timeout_s=0.2, shortcut=False)
