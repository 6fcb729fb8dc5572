"""The door's memo of an inherited link never goes stale: own turns are resolved afresh."""

from __future__ import annotations

from mnemon.lineage.fork import fork
from mnemon.session.door import Door

from ..helpers import answer, new_agent, prompt, tool_turn


def test_grep_sees_new_own_turns_and_reuses_the_link(run_root):
    parent = new_agent(run_root, "p", system="s")
    prompt(parent, "task")
    tool_turn(parent, "look", "cat a.py", "ANCESTOR-ONLY line\nother")
    answer(parent, "fine")
    tool_turn(parent, "delegate", "noop", "ok")  # the turn in hand at the fork
    child = fork(run_root, parent, "c1", task="child task")
    door = Door.of_agent(run_root, child, own=False)
    first = door.grep("ANCESTOR-ONLY")
    assert first["total"] == 1 and child.ctx.memo["door"]["n"] == 3
    assert child.ctx.memo["door"]["spans"], "the link's spans are kept for the next grep"
    assert door.grep("CHILD-NEW")["total"] == 0
    answer(child, "CHILD-NEW finding")
    second = door.grep("CHILD-NEW")
    assert second["total"] == 1 and second["hits"][0]["turn"] == child.ctx.latest
    both = door.grep("ANCESTOR-ONLY|CHILD-NEW")
    assert [h["turn"] for h in both["hits"]] == [first["hits"][0]["turn"], child.ctx.latest]
    assert door.grep("ANCESTOR-ONLY", shortcut=False) == door.grep("ANCESTOR-ONLY") == first


def test_narrowed_greps_do_not_share_a_memo(run_root):
    """Two selections of inherited turns with the same first and last turn and the same size
    are different selections: the second answers for its own turns, not the first's."""
    parent = new_agent(run_root, "p", system="s")
    ids = [prompt(parent, f"turn {i} " + ("NEEDLE" if i == 3 else "hay")) for i in range(6)]
    tool_turn(parent, "delegate", "noop", "ok")  # the turn in hand at the fork
    child = fork(run_root, parent, "c1", task="child task")
    door = Door.of_agent(run_root, child, own=False)
    a, b, c, d = ids[0], ids[2], ids[3], ids[5]
    without = door.grep("NEEDLE", turns=f"{a},{b},{d}")
    with_it = door.grep("NEEDLE", turns=f"{a},{c},{d}")
    assert without["total"] == 0
    assert with_it["total"] == 1 and with_it["hits"][0]["turn"] == c
    assert door.grep("NEEDLE", turns=f"{a},{b},{d}")["total"] == 0
    assert door.grep("NEEDLE")["total"] == 1  # the whole lineage, memoised, still right
    assert door.grep("NEEDLE", turns=f"{a},{b},{d}")["total"] == 0


def test_a_pattern_is_prepared_once_and_each_grep_keeps_its_own_budget():
    """``_Matcher`` of a pattern seen before takes what was made of it (``pattern._PREPARED``)
    — the same compiled regex — but its regex-time budget is its own: one grep running out
    leaves the next with its whole budget, and a refused pattern is never kept."""
    import pytest

    from mnemon.session.door import pattern as P
    from mnemon.session.errors import Refusal

    P._PREPARED.clear()
    a = P._Matcher(r"err(or|no)\d+", 1.0, True)
    b = P._Matcher(r"err(or|no)\d+", 2.0, True)
    assert len(P._PREPARED) == 1 and a.rx is b.rx and a.lits == b.lits
    assert (b.timeout_s, b.left, b.ran_out) == (2.0, 2.0, False)
    a.left = 0
    with pytest.raises(Refusal, match="ran longer"):
        a.lines("error1")
    assert a.ran_out and not b.ran_out and b.lines("x\nerrno7\ny") == ["errno7"]
    c = P._Matcher(r"err(or|no)\d+", 1.0, False)  # without the shortcut: made apart
    assert len(P._PREPARED) == 2 and c.lit is None and c.lits == ()
    with pytest.raises(Refusal, match="not a valid regex"):
        P._Matcher("(unclosed", 1.0, True)
    assert ("(unclosed", True) not in P._PREPARED
    for i in range(300):  # bounded
        P._Matcher(f"p{i}x", 1.0, True)
    assert len(P._PREPARED) <= 256
