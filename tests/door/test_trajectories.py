"""Real trajectories replayed into logs: grep totals against an independent line count, and a
byte-exact read-back of every departed turn."""

from __future__ import annotations

import re

import msgspec
import pytest

from mnemon.session.chain import strip

from tests.helpers import door_open
from mnemon.lineage.runroot import confine
from mnemon.session.door import Door
from tests.conftest import TRAJECTORIES

from ._build import replay

FILES = sorted(TRAJECTORIES.glob("*.jsonl"))[:4]
PATTERNS = ["django", "def ", r"\bimport\b", "Error", r"[0-9]{3,}", r"^\s*$", "self\\.",
            r"(?i)traceback", "evicted at turn", "python -c", r'"command"', "é|ü|—", "x+y",
            r"assert\s+\w+ ==", "keep going"]


def count(texts, pattern):
    rx = re.compile(pattern)
    return sum(1 for t in texts for line in t.split("\n") if rx.search(line))


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    from mnemon.lineage.runroot import create_run_root

    root = create_run_root(tmp_path_factory.mktemp("traj") / "run", "tests")
    out = []
    for i, f in enumerate(FILES):
        rp = replay(root, f"a{i + 1}", f, evict_every=5)
        out.append((root, rp))
    return out


@pytest.mark.parametrize("pattern", PATTERNS)
def test_grep_total_equals_independent_count(replayed, pattern):
    for root, rp in replayed:
        door = Door(root, rp.log.ctx)
        ans = door.grep(pattern)
        assert ans["total"] == count(rp.texts, pattern), (rp.log.source, pattern)
        assert len(ans["hits"]) == min(100, ans["total"])
        turns = [h["turn"] for h in ans["hits"]]
        assert turns == sorted(turns)
        assert all(len(h["line"].encode()) <= 200 for h in ans["hits"])
        assert ans == door.grep(pattern, shortcut=False)


def test_evictions_happened(replayed):
    for _, rp in replayed:
        held = {t.held for t in rp.log.ctx.turns}
        assert "evicted" in held and "resident" in held


def test_read_back_departed_byte_exact(replayed):
    for root, rp in replayed:
        ctx = rp.log.ctx
        departed = [t.id for t in ctx.turns if t.state != "resident"]
        assert departed
        door = Door(root, ctx)
        got = door.read(departed)
        assert [g["turn"] for g in got] == departed
        for g in got:
            want = rp.lines[g["turn"]]
            assert g["records"] == [msgspec.json.decode(x) for x in want]
            assert [msgspec.json.encode(r) for r in g["records"]] == want
            # and the loci name exactly those bytes
            path = confine(root, g["source"])
            data = path.read_bytes()
            t = ctx.turn(g["turn"])
            assert [strip(data[o:o + n]) for o, n, _ in t.loci] == want  # (+ chain keys)


def test_read_equals_resident_records(replayed):
    root, rp = replayed[0]
    ctx = rp.log.ctx
    resident = [t for t in ctx.turns if t.records is not None][:5]
    got = Door(root, ctx).read([t.id for t in resident])
    for t, g in zip(resident, got):
        assert g["records"] == [msgspec.json.decode(msgspec.json.encode(r)) for r in t.records]


def test_refold_from_disk_gives_same_index_and_grep(replayed):
    root, rp = replayed[1]
    live = Door(root, rp.log.ctx)
    cold, torn = door_open(root / "agents" / "a2")
    assert torn is None
    assert [{k: v for k, v in r.items() if k != "blocks"} for r in live.index()] == \
        [{k: v for k, v in r.items() if k != "blocks"} for r in cold.index()]
    assert live.grep("django") == cold.grep("django")
