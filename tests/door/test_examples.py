"""The door's answers on the shared example run roots (expected.json)."""

from __future__ import annotations

import json

import pytest

from tests.helpers import door_open
from mnemon.session.door import Door
from tests.conftest import EXAMPLES

CASES = []
for ex in sorted(p for p in EXAMPLES.iterdir() if (p / "run.json").is_file()):
    exp = json.loads((ex / "expected.json").read_text())
    for agent, want in exp.get("agents", {}).items():
        CASES.append(pytest.param(ex, agent, want, id=f"{ex.name}-{agent}"))


@pytest.mark.parametrize("ex,agent,want", CASES)
def test_example(ex, agent, want):
    door, torn = door_open(ex / "agents" / agent)
    assert torn is None
    rows = door.index()
    assert [r["id"] for r in rows] == sorted({r["id"] for r in rows})
    by_id = {str(r["id"]): r for r in rows}
    for tid, held in want.get("index_held", {}).items():
        assert by_id[tid]["held"] == held, tid
    for tid, source in want.get("index_source", {}).items():
        assert by_id[tid]["source"] == source, tid
    for pattern, w in want.get("grep", {}).items():
        ans = door.grep(pattern)
        if "total" in w:
            assert ans["total"] == w["total"], pattern
        if "total_at_least" in w:
            assert ans["total"] >= w["total_at_least"], pattern
        if "turns" in w:
            assert [h["turn"] for h in ans["hits"]] == w["turns"], pattern
        assert ans == door.grep(pattern, shortcut=False)


def test_example_rows_shape():
    door, _ = door_open(EXAMPLES / "child" / "agents" / "c1")
    rows = door.index()
    assert rows[0] == {"id": 1, "role": "user", "label": "survey the repo", "bytes": 52,
                       "held": "evicted", "residue": [1, 2], "origin": "inherited",
                       "source": "agents/p/record.jsonl"}
    assert [r["origin"] for r in rows] == ["inherited"] * 4 + ["own"] * 2


def test_example_read_departed_and_inherited():
    door, _ = door_open(EXAMPLES / "child" / "agents" / "c1")
    got = door.read("1-2,7")
    assert [t["turn"] for t in got] == [1, 2, 7]
    assert got[0] == {"turn": 1, "source": "agents/p/record.jsonl",
                      "records": [{"t": "UserPrompt", "turn": 1, "text": "survey the repo"}]}
    lines = (EXAMPLES / "child" / "agents" / "p" / "record.jsonl").read_bytes().splitlines()
    assert got[1]["records"] == [json.loads(lines[2]), json.loads(lines[3])]
    assert got[2]["source"] == "agents/c1/record.jsonl"
