"""Every refusal of DESIGN.md, with the message that names the state, and the check order."""

from __future__ import annotations

import pytest

from mnemon.session.constants import NOTE_MAX_BYTES
from mnemon.session.context import Context, check_note
from mnemon.session.errors import LogRefused, Refusal
from mnemon.session.records import (
    AssistantMessage,
    Cleared,
    Evicted,
    Inherited,
    Linked,
    Marked,
    Pointer,
    Residue,
    Rewound,
    Row,
    SessionStarted,
    Steering,
    Swept,
    Text,
    ToolResult,
    ToolResults,
    ToolUse,
    UserPrompt,
    encode,
)
from mnemon.session.resume import fold_file


def ctx_of(*records) -> Context:
    ctx = Context("agents/a1/record.jsonl")
    ctx.step(SessionStarted(agent="a1"))
    for r in records:
        ctx.step(r)
    return ctx


def up(tid, text="q"):
    return UserPrompt(turn=tid, text=text)


def am(tid, *calls, text="a"):
    return AssistantMessage(turn=tid, blocks=[Text(text)] + [ToolUse(c, "bash", {"c": c}) for c in calls],
                            stop_reason="tool_use" if calls else "end_turn", model=None, usage=None)


def ev(a, b, note=None, by="model"):
    return Evicted(residue=Residue(span=(a, b), note=note, by=by))


def refused(ctx: Context, record, *fragments: str) -> str:
    with pytest.raises(Refusal) as e:
        ctx.step(record)
    msg = str(e.value)
    for f in fragments:
        assert f in msg, msg
    return msg


@pytest.fixture
def big() -> Context:
    """Turns 1…420 (sparse), a residue [30, 45], turn in hand 420."""
    recs = [up(i, f"prompt {i}") for i in list(range(1, 60)) + [350, 351, 420]]
    ctx = ctx_of(*recs[:-1])
    ctx.step(ev(30, 45))
    ctx.step(recs[-1])
    return ctx


# --------------------------------------------------------------------------- the fold's records


def test_ids_must_increase():
    ctx = ctx_of(up(5))
    refused(ctx, up(4), "ids must increase", "turn 4 after turn 5")
    refused(ctx, am(5), "ids must increase")


def test_tool_result_with_no_pending_call():
    ctx = ctx_of(up(1), am(2, "tu_1"))
    refused(ctx, ToolResults(results=[ToolResult(tool_use_id="tu_9", content="x")]),
            "a tool result with no pending call", "tu_9")
    ctx.step(ToolResults(results=[ToolResult(tool_use_id="tu_1", content="x")]))
    refused(ctx, ToolResults(results=[ToolResult(tool_use_id="tu_1", content="again")]),
            "no pending call")
    # a call of a previous turn is not pending in the turn in hand
    ctx2 = ctx_of(up(1), am(2, "tu_1"), up(3))
    refused(ctx2, ToolResults(results=[ToolResult(tool_use_id="tu_1", content="x")]),
            "no pending call")


def test_duplicate_tool_use_ids():
    ctx = ctx_of(up(1))
    refused(ctx, am(2, "tu_1", "tu_1"), "duplicate tool_use ids")


def test_inherited_only_opens_a_log():
    ctx = ctx_of(up(1))
    refused(ctx, Inherited(turns=[], residues=[]), "Inherited only opens a log")


def test_second_session_started():
    ctx = ctx_of()
    refused(ctx, SessionStarted(agent="a1"), "second")
    fresh = Context()
    refused(fresh, up(1), "opens with SessionStarted")


def test_extension_without_a_turn():
    refused(ctx_of(), Steering(text="x"), "no turn is open")


def test_blank_line_is_refused_naming_the_line(tmp_path):
    p = tmp_path / "record.jsonl"
    p.write_bytes(encode(SessionStarted(agent="a1")) + b"\n" + encode(up(1)) + b"\n\n")
    with pytest.raises(LogRefused) as e:
        fold_file(p, "agents/a1/record.jsonl")
    assert e.value.line == 3 and "blank line" in e.value.why


def test_foreign_line_is_refused_naming_the_line(tmp_path):
    p = tmp_path / "record.jsonl"
    p.write_bytes(encode(SessionStarted(agent="a1")) + b"\n" + b'{"t":"Nope"}\n')
    with pytest.raises(LogRefused) as e:
        fold_file(p, "agents/a1/record.jsonl")
    assert e.value.line == 2 and str(e.value).startswith("agents/a1/record.jsonl:2:")


# --------------------------------------------------------------------------- eviction spans


def test_split_residue(big):
    assert refused(big, ev(12, 40), "[12, 40] would split the residue [30, 45]")
    refused(big, ev(40, 50), "[40, 50] would split the residue [30, 45]")


def test_turn_in_hand(big):
    refused(big, ev(351, 420), "420 is the turn in hand; an eviction keeps the work in hand")


def test_unknown_id(big):
    refused(big, ev(1, 999), "turn 999 is not recorded — the latest is 420")
    refused(big, ev(60, 100), "turn 60 is not recorded — the latest is 420")


def test_already_left():
    # turn 350 is withdrawn by a rewind; 1…349 lie under a residue; 351 is the earliest resident
    ctx = ctx_of(up(1), up(349), up(350), ev(1, 349), Rewound(to=349), up(351), up(400), up(420))
    refused(ctx, ev(350, 400),
            "turn 350 has already left your context — the earliest still in it is 351")


def test_check_order():
    """The note, an unknown id, the turn in hand, a split residue, an id that has already left."""
    ctx = ctx_of(up(1), up(300), up(349), up(350), ev(1, 349), Rewound(to=349), up(351),
                 up(400), ev(351, 351), up(420))
    # residues: [1, 349], [351, 351]; 350 withdrawn; turn in hand 420
    refused(ctx, ev(420, 500, note="a\nb"), "one line")
    refused(ctx, ev(420, 500), "turn 500 is not recorded")
    refused(ctx, ev(300, 420), "420 is the turn in hand")
    refused(ctx, ev(300, 400), "would split the residue [1, 349]")
    refused(ctx, ev(350, 400), "turn 350 has already left")


def test_residue_edges_may_be_named_and_swallowed(big):
    big.step(ev(1, 59, by="harness"))
    assert [r.span for r in big.outermost_residues()] == [(1, 59)]
    refused(big, ev(1, 59), "already one residue")


def test_span_may_run_across_withdrawn_turns():
    ctx = ctx_of(up(1), up(2), up(3), Rewound(to=1), up(4), up(5))
    ctx.step(ev(1, 4))
    assert ctx.turn(2).state == "withdrawn" and ctx.turn(3).state == "withdrawn"
    assert ctx.turn(1).state == "evicted" and ctx.turn(4).state == "evicted"


# --------------------------------------------------------------------------- notes


@pytest.mark.parametrize("note,fragment", [
    ("x" * (NOTE_MAX_BYTES + 1), f"at most {NOTE_MAX_BYTES} bytes"),
    ("é" * 121, f"at most {NOTE_MAX_BYTES} bytes"),
    ("one\ntwo", "one line"),
    ("one\rtwo", "one line"),
    ("tab\there", "control"),
    ("nul\x00", "control"),
    ("sep\u2028", "line break"),
    ("para\u2029", "line break"),
])
def test_bad_notes(note, fragment):
    with pytest.raises(Refusal) as e:
        check_note(note)
    assert fragment in str(e.value)
    ctx = ctx_of(up(1), up(2))
    refused(ctx, ev(1, 1, note=note), fragment)


def test_note_at_the_limit_is_accepted():
    check_note("x" * NOTE_MAX_BYTES)
    check_note("é" * (NOTE_MAX_BYTES // 2))
    check_note("'quotes' \"and\" \\ backslash 😀")


# --------------------------------------------------------------------------- rewind


def test_rewind_into_a_residue():
    ctx = ctx_of(up(1), up(2), up(3), up(4), ev(2, 3))
    refused(ctx, Rewound(to=2), "rewinding to 2 would split the residue [2, 3]")
    ctx.step(Rewound(to=3))  # the residue's last id: it stays whole


def test_rewind_beyond_the_latest():
    ctx = ctx_of(up(1), up(7))
    refused(ctx, Rewound(to=8), "cannot rewind to turn 8 — the latest is 7")


# --------------------------------------------------------------------------- marks and sweeps


@pytest.fixture
def marked() -> Context:
    return ctx_of(up(1, "a fairly long prompt"), am(2, "c1", text="some assistant text"),
                  ToolResults(results=[ToolResult(tool_use_id="c1", content="long output " * 5)]),
                  up(3, "x"), up(4, "in hand"))


def test_mark_unknown_block(marked):
    refused(marked, Marked(block=(9, 0), replacement="r"), "turn 9 is not recorded — the latest is 4")
    refused(marked, Marked(block=(2, 7), replacement="r"), "turn 2 has no block 7", "2.0 to 2.2")


def test_mark_not_resident(marked):
    marked.step(ev(1, 1))
    refused(marked, Marked(block=(1, 0), replacement="r"), "turn 1 has already left your context")


def test_mark_turn_in_hand(marked):
    refused(marked, Marked(block=(4, 0), replacement="r"), "4 is the turn in hand")


def test_mark_already_swept(marked):
    marked.step(Marked(block=(2, 2), replacement="out"))
    marked.step(Swept(blocks=[(2, 2)]))
    refused(marked, Marked(block=(2, 2), replacement="o"), "block 2.2 is already swept")


def test_mark_empty_and_not_shorter(marked):
    refused(marked, Marked(block=(1, 0), replacement=""), "may not be empty")
    refused(marked, Marked(block=(1, 0), replacement="x" * 20), "must be shorter than block 1.0")
    marked.step(Marked(block=(1, 0), replacement="x" * 19))


def test_second_mark_replaces_the_first(marked):
    marked.step(Marked(block=(1, 0), replacement="first"))
    marked.step(Marked(block=(1, 0), replacement="second"))
    assert marked.marks == {(1, 0): "second"}


def test_sweep_without_pending_mark(marked):
    refused(marked, Swept(blocks=[(2, 0)]), "block 2.0 has no pending mark")
    marked.step(Marked(block=(2, 0), replacement="t"))
    marked.step(Swept(blocks=[(2, 0)]))
    refused(marked, Swept(blocks=[(2, 0)]), "no pending mark")


def test_sweep_lowers_bytes_by_the_block_and_adds_the_replacement(marked):
    before = marked.turn(2).bytes
    marked.step(Marked(block=(2, 2), replacement="out"))
    marked.step(Swept(blocks=[(2, 2)]))
    assert marked.turn(2).bytes == before - len(("long output " * 5).encode()) + 3
    assert marked.turn(2).held == "swept"
    assert marked.history_bytes() == marked.history_bytes_projection()


def test_clear_withdraws_everything_and_drops_marks(marked):
    marked.step(Marked(block=(2, 0), replacement="t"))
    marked.step(Cleared())
    assert marked.frontier() == [] and marked.marks == {}
    assert {t.held for t in marked.turns} == {"withdrawn"}


# --------------------------------------------------------------------------- Inherited


def _link(rid, held, role="user"):
    return Linked(row=Row(id=rid, role=role, label="l", bytes=10, held=held),
                  at=Pointer("agents/p/record.jsonl", [(0, 10, "0" * 16)]))


def test_inherited_rows_and_residues_are_judged():
    c = Context("agents/c/record.jsonl", loader=lambda ptr: [up(1)])
    c.step(SessionStarted(agent="c"))
    refused(c, Inherited(turns=[_link(1, "evicted")], residues=[]),
            "held evicted outside every residue")
    refused(c, Inherited(turns=[_link(2, "withdrawn"), _link(1, "withdrawn")], residues=[]),
            "increasing ids")
    refused(c, Inherited(turns=[_link(1, "withdrawn")], residues=[], id_floor=1), "id_floor")


def test_first_own_id_respects_the_id_floor():
    c = Context("agents/c/record.jsonl")
    c.step(SessionStarted(agent="c"))
    c.step(Inherited(turns=[_link(1, "withdrawn")], residues=[], id_floor=6))
    assert c.next_id() == 6
    refused(c, up(5), "below the id floor 6")
    c.step(up(6))
