"""Pointers resolve lazily at the door (DESIGN.md, Rules pinned: Lineage): with a middle
ancestor's log gone, a grandchild's turns reached through intact files still read and grep; the
turns that need the missing file are refused naming it; ``context`` and ``verify`` still load
every resident inherited turn and so report the missing file."""

from __future__ import annotations

import json

from mnemon.orchestrator.cli import main

from .test_generations import three_generations


def _run(capsys, *argv):
    try:
        code = main([*map(str, argv)])
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def test_a_grandchild_reads_past_a_missing_middle_ancestor(run_root, capsys):
    r, c, g, r_in_hand, c_in_hand, c_first = three_generations(run_root)
    for log in (r, c, g):
        log.close()
    g_dir = run_root / "agents" / "g"
    code, out, _ = _run(capsys, "transcript", "index", g_dir, "--json")
    assert code == 0
    rows = {row["id"]: row for row in json.loads(out)}
    root_turn = next(t for t in sorted(rows) if rows[t]["source"] == "agents/r/record.jsonl")
    mid_turn = next(t for t in sorted(rows) if rows[t]["source"] == "agents/c/record.jsonl")
    code, before, _ = _run(capsys, "transcript", "read", g_dir, "--turns", root_turn, "--json")
    assert code == 0
    (run_root / "agents" / "c" / "record.jsonl").rename(run_root / "c-moved.jsonl")

    # the index is the grandchild's own table: every row, no ancestor read
    code, out, err = _run(capsys, "transcript", "index", g_dir, "--json")
    assert code == 0, err
    assert {row["id"] for row in json.loads(out)} == set(rows)
    # a grandparent turn reads through the grandparent's intact file
    code, out, err = _run(capsys, "transcript", "read", g_dir, "--turns", root_turn, "--json")
    assert code == 0, err
    assert out == before
    # a turn of the missing middle file is refused, naming it
    code, out, err = _run(capsys, "transcript", "read", g_dir, "--turns", mid_turn, "--json")
    assert code == 2 and out == ""
    assert "agents/c/record.jsonl" in err and "missing" in err and "Traceback" not in err
    # grep over turns of intact files answers; over the missing file's turns, refused naming it
    roots = ",".join(str(t) for t in sorted(rows) if rows[t]["source"] != "agents/c/record.jsonl")
    code, out, err = _run(capsys, "transcript", "grep", g_dir, ".", "--turns", roots, "--json")
    assert code == 0, err
    assert json.loads(out)["total"] > 0
    code, out, err = _run(capsys, "transcript", "grep", g_dir, ".", "--json")
    assert code == 2 and "agents/c/record.jsonl" in err
    # context and verify load every resident inherited turn: they name the missing file
    code, out, err = _run(capsys, "context", g_dir, "--json")
    assert code != 0 and "agents/c/record.jsonl" in err and "Traceback" not in err
    code, out, err = _run(capsys, "verify", g_dir, "--json")
    assert code == 1 and "agents/c/record.jsonl" in out
