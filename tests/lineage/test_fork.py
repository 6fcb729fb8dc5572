"""The fork: the link's shape, what it carries, the byte-identical prefix, fresh children, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mnemon.lineage.fork import ForkError, child_started, fork, link_bytes, link_for, resume_child
from mnemon.session.agentlog import AgentLog
from mnemon.session.context import Context
from mnemon.session.errors import Refusal
from mnemon.session.log import scan
from mnemon.session.records import (
    AssistantMessage,
    Cleared,
    Inherited,
    Marked,
    Rewound,
    SessionEnded,
    SessionResumed,
    SessionStarted,
    Steering,
    Text,
    ToolResult,
    ToolResults,
    ToolUse,
    UserPrompt,
    decode,
)
from mnemon.session.chain import strip
from mnemon.session.render import render
from tests.conftest import EXAMPLES
from tests.helpers import answer, new_agent, prompt, tool_turn

from .util import STARTED, assert_prefix, blocks, busy_parent, evict, refold, start_call

EXAMPLE = EXAMPLES / "child"


def example_parent(root: Path) -> AgentLog:
    """The parent of examples/child, recorded through AgentLog."""
    log = new_agent(root, "p")
    log.append(UserPrompt(turn=1, text="survey the repo"))
    log.append(AssistantMessage(turn=2, blocks=[Text("listing"), ToolUse("tu_1", "bash", {"command": "ls"})],
                                stop_reason="tool_use", model="bars-model", usage=None))
    log.append(ToolResults(results=[ToolResult(tool_use_id="tu_1",
                                               content="README.md\nsrc\nONLY-IN-PARENT.txt")]))
    log.append(AssistantMessage(turn=3, blocks=[ToolUse("tu_2", "context_evict", {
        "from": 1, "to": 2, "note": "repo has src/ and a README"})], stop_reason="tool_use",
        model="bars-model", usage=None))
    evict(log, 1, 2, "repo has src/ and a README")
    log.append(ToolResults(results=[ToolResult(tool_use_id="tu_2", content="ok")]))
    log.append(AssistantMessage(turn=4, blocks=[Text("Delegating.")], stop_reason="end_turn",
                                model="bars-model", usage=None))
    log.append(AssistantMessage(turn=5, blocks=[ToolUse("tu_3", "agents_start", {
        "task": "read src/ and report", "kind": "mnemon"})], stop_reason="tool_use",
        model="bars-model", usage=None))
    return log


def test_fork_has_the_shape_of_the_example(run_root):
    parent = example_parent(run_root)
    # the example was written before the chain: our lines are its lines plus their chain keys
    assert [strip(x) for x in (run_root / "agents/p/record.jsonl").read_bytes().splitlines()] \
        == (EXAMPLE / "agents/p/record.jsonl").read_bytes().splitlines()
    child = fork(run_root, parent, "c1", task="read src/ and report", at="2026-11-30T00:00:01Z")
    ours = [strip(x) for x in (run_root / "agents/c1/record.jsonl").read_bytes().splitlines()]
    theirs = (EXAMPLE / "agents/c1/record.jsonl").read_bytes().splitlines()
    s_ours, s_theirs = json.loads(ours[0]), json.loads(theirs[0])
    assert {k: s_ours[k] for k in s_theirs} == s_theirs
    assert s_ours["depth"] == 1
    link, example_link = decode(ours[1]), decode(theirs[1])
    assert isinstance(link, Inherited) and isinstance(example_link, Inherited)
    # the same rows and pointers but for offsets, lengths and digests (the example's parent
    # is unchained: its lines are shorter by their chain keys)
    def shape(turns):
        return [(x.row.id, x.row.role, x.row.label, x.row.held, x.at.source, len(x.at.loci))
                for x in turns]

    assert shape(link.turns) == shape(example_link.turns)
    assert link.residues == example_link.residues
    assert link.id_floor == 6  # mnemon always writes it; the example relies on the default
    o, t = json.loads(ours[1]), json.loads(theirs[1])
    o.pop("id_floor")
    for x in o["turns"] + t["turns"]:
        x["row"].pop("bytes")
        x["at"]["loci"] = len(x["at"]["loci"])
    assert o.pop("parent_head")["source"] == "agents/p/record.jsonl"  # the parent's head at the fork
    assert o == t  # same fields, same values: the link is exactly the example's shape
    assert ours[2] == theirs[2]  # the task, verbatim, as turn 6
    assert [x.id for x in child.ctx.turns] == [1, 2, 3, 4, 6]
    assert child.ctx == refold(run_root, "c1")


def test_the_example_child_folds_like_ours(run_root, tmp_path):
    """Our fold of the example's files gives the same frontier as expected.json says."""
    from mnemon.lineage.view import open_agent

    _, _, ctx, _ = open_agent(EXAMPLE / "agents/c1")
    want = json.loads((EXAMPLE / "expected.json").read_text())["agents"]["c1"]["frontier"]
    got = [["turn", i.id] if hasattr(i, "role") else ["residue", list(i.span)]
           for i in ctx.frontier()]
    assert got == want


def test_link_takes_closed_turns_and_their_residues(run_root):
    parent = busy_parent(run_root)
    in_hand = start_call(parent)
    link = link_for(parent.ctx)
    ids = [x.row.id for x in link.turns]
    assert ids == [t.id for t in parent.ctx.turns if t.id < in_hand]
    assert in_hand not in ids
    assert link.id_floor == in_hand + 1 == parent.ctx.reach + 1
    assert [tuple(r.span) for r in link.residues] == [(1, 3), (1, 6)]  # nested ones too
    held = {x.row.id: x.row.held for x in link.turns}
    assert all(held[i] == "evicted" for i in range(1, 7))
    swept = [x.row for x in link.turns if x.row.held == "swept"]
    assert len(swept) == 1 and swept[0].swept == [(2, "3000 x's")]
    for x in link.turns:
        t = parent.ctx.turn(x.row.id)
        assert (x.row.role, x.row.label, x.row.bytes) == (t.role, t.label, t.bytes)
        assert x.at.source == "agents/p/record.jsonl"
        assert [tuple(l) for l in x.at.loci] == t.loci
        assert x.row.bytes == sum(l[1] for l in x.at.loci) or x.row.held != "resident"
    assert link_bytes(link) > 0


def test_link_without_a_turn_in_hand_takes_everything(run_root):
    ctx = Context("agents/x/record.jsonl")
    ctx.step(SessionStarted(agent="x"))
    link = link_for(ctx)
    assert link.turns == [] and link.residues == [] and link.id_floor == 1


def test_pending_marks_are_not_carried(run_root):
    parent = new_agent(run_root, "p", **STARTED)
    prompt(parent, "q")
    t = tool_turn(parent, "reading", "cat f", "y" * 500)
    answer(parent, "read")
    parent.append(Marked(block=(t, 2), replacement="500 y's"))
    start_call(parent)
    assert parent.ctx.marks
    child = fork(run_root, parent, "c1", task="t")
    assert not child.ctx.marks
    row = child.ctx.turn(t)
    assert row.held == "resident" and not row.swept
    assert_prefix(parent.ctx, child.ctx, "t")


def test_withdrawn_turns_and_residues_are_not_carried(run_root):
    parent = new_agent(run_root, "p", **STARTED)
    for i in range(4):
        prompt(parent, f"q{i}")
        answer(parent, f"a{i}")
    evict(parent, 5, 6, "gone")  # a residue, later withdrawn by the rewind
    parent.append(Rewound(to=4))
    prompt(parent, "after the rewind")
    answer(parent, "ok")
    start_call(parent)
    child = fork(run_root, parent, "c1", task="t")
    link = decode((run_root / "agents/c1/record.jsonl").read_bytes().splitlines()[1])
    assert [x.row.id for x in link.turns] == [1, 2, 3, 4, 9, 10]
    assert link.residues == []
    assert_prefix(parent.ctx, child.ctx, "t")


def test_fork_after_a_clear_opens_on_the_factual_line(run_root):
    parent = new_agent(run_root, "p", **STARTED)
    prompt(parent, "q")
    answer(parent, "a")
    parent.append(Cleared())
    answer(parent, "an assistant turn opens the context now")
    start_call(parent)
    child = fork(run_root, parent, "c1", task="t")
    assert [t.id for t in child.ctx.turns] == [3, 5]
    assert render(child.ctx)[0]["content"][0]["text"].startswith("[The context opens at turn 3")
    assert_prefix(parent.ctx, child.ctx, "t")


@pytest.mark.parametrize("shape", ["busy", "tool-results-last", "interrupted", "steering",
                                   "user-in-hand", "only-residue"])
def test_child_render_begins_byte_identical(run_root, shape):
    if shape == "busy":
        parent = busy_parent(run_root)
    else:
        parent = new_agent(run_root, "p", **STARTED)
        prompt(parent, "first")
        tool_turn(parent, "look", "ls", "a\nb")
        if shape == "interrupted":  # a call never answered: rendered with a factual error
            tid = parent.next_id()
            parent.append(AssistantMessage(turn=tid, blocks=[ToolUse("tu_x", "bash", {"c": 1})],
                                           stop_reason="tool_use", model="m", usage=None))
        if shape == "steering":
            parent.append(Steering(text="mind the budget", by="harness"))
            answer(parent, "noted")
            parent.append(Steering(text="user says hi", by="user"))
        if shape == "only-residue":
            answer(parent, "x")
            evict(parent, 1, 2, "all of it")
    if shape == "user-in-hand":
        prompt(parent, "a user turn in hand")
    else:
        start_call(parent)
    child = fork(run_root, parent, "c1", task="the task\nverbatim  ")
    assert_prefix(parent.ctx, child.ctx, "the task\nverbatim  ")
    assert child.ctx.turns[-1].records[0].text == "the task\nverbatim  "
    assert child.ctx == refold(run_root, "c1")
    assert parent.ctx == refold(run_root, "p")


def test_an_edit_in_the_turn_in_hand_does_not_reach_the_child(run_root):
    parent = new_agent(run_root, "p", **STARTED)
    prompt(parent, "first")
    t = tool_turn(parent, "look", "ls", "z" * 400)
    answer(parent, "done")
    before = render(parent.ctx)
    tid = parent.next_id()  # one message: context_evict, context_mark... then agents_start
    parent.append(AssistantMessage(turn=tid, blocks=[
        ToolUse("e", "context_evict", {"from": 1, "to": 1}),
        ToolUse("s", "agents_start", {"task": "t", "kind": "mnemon"})],
        stop_reason="tool_use", model="m", usage=None))
    evict(parent, 1, 1, "the first prompt")
    parent.append(ToolResults(results=[ToolResult(tool_use_id="e", content="ok")]))
    parent.append(Marked(block=(t, 2), replacement="400 z's"))
    from mnemon.session.records import Swept

    parent.append(Swept(blocks=[(t, 2)]))
    with pytest.raises(ValueError, match="turn in hand"):
        link_for(parent.ctx)
    link = link_for(parent.ctx, log_path=parent.path)
    assert link.residues == [] and all(x.row.held == "resident" for x in link.turns)
    assert link.id_floor == tid + 1
    child = fork(run_root, parent, "c1", task="t")
    got = blocks(render(child.ctx))
    assert got[: len(blocks(before))] == blocks(before)  # the table when the turn in hand opened
    assert child.ctx.turn(1).held == "resident" and child.ctx.turn(t).held == "resident"


def test_started_is_copied_and_secrets_never_recorded(run_root):
    parent = new_agent(run_root, "p", **STARTED)
    prompt(parent, "q")
    start_call(parent)
    child = fork(run_root, parent, "c1", task="t", tokens_per_byte=None)
    s = child.ctx.started
    for f in ("system", "tools", "provider", "model", "context_window", "tokens_per_byte"):
        assert getattr(s, f) == STARTED[f]
    assert (s.agent, s.parent, s.kind, s.depth) == ("c1", "p", "mnemon", 1)
    g = fork(run_root, child, "g1", task="u", tokens_per_byte=0.3)
    assert g.ctx.started.depth == 2 and g.ctx.started.tokens_per_byte == 0.3
    with pytest.raises(ForkError, match="system"):
        child_started(parent.ctx.started, "c9", "mnemon", system="another prompt")
    assert child_started(parent.ctx.started, "c9", "fresh", system="x").system == "x"
    with pytest.raises(ForkError):
        child_started(parent.ctx.started, "c9", "mnemon", agent="c7")
    with pytest.raises(ForkError):
        child_started(parent.ctx.started, "c9", "mnemon", api_key="sk-…")


def test_fork_refusals(run_root):
    parent = new_agent(run_root, "p", **STARTED)
    prompt(parent, "q")
    start_call(parent)
    fork(run_root, parent, "c1", task="t")
    with pytest.raises(ForkError, match="already"):
        fork(run_root, parent, "c1", task="t")
    with pytest.raises(ForkError):
        fork(run_root, parent, "p", task="t")
    for bad in ("../x", "a/b", "", ".hidden"):
        with pytest.raises(Exception, match="path-safe"):
            fork(run_root, parent, bad, task="t")
    with pytest.raises(ForkError, match="kind"):
        fork(run_root, parent, "c2", kind="clone", task="t")  # type: ignore[arg-type]
    assert not (run_root / "agents/c2").exists()


def test_fresh_child(run_root):
    parent = busy_parent(run_root)
    start_call(parent)
    child = fork(run_root, parent, "f1", kind="fresh", task="from scratch")
    lines = [decode(l) for l in (run_root / "agents/f1/record.jsonl").read_bytes().splitlines()]
    assert [type(r).__name__ for r in lines] == ["SessionStarted", "UserPrompt"]
    assert lines[0].kind == "fresh" and lines[0].parent == "p"
    assert lines[1].turn == 1
    assert [t.id for t in child.ctx.turns] == [1]
    assert render(child.ctx) == [{"role": "user", "content": [{"type": "text",
                                                              "text": "from scratch"}]}]
    assert child.ctx == refold(run_root, "f1")


def test_resuming_a_child(run_root):
    parent = busy_parent(run_root)
    start_call(parent)
    child = fork(run_root, parent, "c1", task="t")
    first = child.ctx.next_id() - 1
    tool_turn(child, "child works", "ls", "out")
    answer(child, "child answers")
    live = child.ctx
    child.close()
    # a crash mid-append leaves a torn tail; the resume moves it aside
    with open(run_root / "agents/c1/record.jsonl", "ab") as f:
        f.write(b'{"t":"UserPrompt","tu')
    again = resume_child(run_root, "c1")
    assert again.ctx.turns == live.turns and again.ctx.residues == live.residues
    assert again.ctx.reach == live.reach and again.ctx.id_floor == live.id_floor
    assert again.ctx.records_folded == live.records_folded + 1  # + SessionResumed
    nxt = prompt(again, "more")
    assert nxt == live.reach + 1 > first
    again.append(SessionEnded(reason="done"))
    assert again.ctx == refold(run_root, "c1")
    recs = [r for _, r in scan(run_root / "agents/c1/record.jsonl")]
    assert any(isinstance(r, SessionResumed) and r.torn_bytes for r in recs)
    assert_prefix(parent.ctx, refold(run_root, "c1"))


def test_child_own_ids_start_at_the_floor_and_refuse_below(run_root):
    parent = busy_parent(run_root)
    in_hand = start_call(parent)
    child = fork(run_root, parent, "c1", task="t")
    assert child.ctx.turns[-1].id == in_hand + 1
    with pytest.raises(Refusal):
        child.append(UserPrompt(turn=in_hand, text="reusing the parent's id"))


def test_child_can_evict_inherited_turns_and_fork_again(run_root):
    parent = busy_parent(run_root)
    start_call(parent)
    child = fork(run_root, parent, "c1", task="t")
    fr = child.ctx.frontier()
    first = fr[0].first
    last_inherited = [t.id for t in child.ctx.turns if t.origin == "inherited"][-2]
    evict(child, first, last_inherited, "most of it")
    start_call(child)
    g = fork(run_root, child, "g1", task="u")
    assert_prefix(child.ctx, g.ctx, "u")
    assert g.ctx == refold(run_root, "g1")


def test_a_residue_spanning_withdrawn_turns(run_root):
    """Withdrawn turns inside a residue's span are not carried; weight and labels still agree."""
    parent = new_agent(run_root, "p", **STARTED)
    for i in range(3):
        prompt(parent, f"prompt {i}")
        tool_turn(parent, f"tool {i}", "ls", "o" * (100 * (i + 1)))
    parent.append(Rewound(to=4))  # withdraws 5 and 6
    prompt(parent, "after rewind")
    answer(parent, "a")
    answer(parent, "b")
    evict(parent, 1, 2, "first pair")
    evict(parent, 1, 8, None, by="harness")  # spans the withdrawn 5, 6
    answer(parent, "c")
    start_call(parent)
    child = fork(run_root, parent, "c1", task="t")
    assert [t.id for t in child.ctx.turns if t.origin == "inherited"] == [1, 2, 3, 4, 7, 8, 9, 10]
    pw = {r.span: (r.weight, r.labels) for r in parent.ctx.residues}
    cw = {r.span: (r.weight, r.labels) for r in child.ctx.residues}
    assert pw == cw
    assert_prefix(parent.ctx, child.ctx, "t")
    assert child.ctx == refold(run_root, "c1")


def test_a_live_fork_shares_the_parents_records_and_reads_the_rest(run_root):
    """``sharing_loader``: the rows whose loci the parent holds take its records (no re-read);
    a pointer to loci it does not hold exactly is read from the file, digest-checked; either
    way the child equals the refold of its log."""
    from mnemon.lineage.fork import sharing_loader
    from mnemon.session.records import Pointer

    parent = busy_parent(run_root)
    start_call(parent)
    child = fork(run_root, parent, "c1", task="t")
    assert child.ctx == refold(run_root, "c1")
    held = {t.id: t for t in parent.ctx.turns if t.records is not None}
    shared = [t for t in child.ctx.turns if t.origin == "inherited" and t.records is not None]
    assert shared and all(held[t.id].records[0] is t.records[0] for t in shared)
    first = next(t for t in held.values() if len(t.loci) > 1)
    part = Pointer(first.source, [list(x) for x in first.loci[:1]])  # not a turn's loci
    load = sharing_loader(parent.ctx, run_root)
    got = load(part)
    assert got == first.records[:1] and got[0] is not first.records[0]
    bad = Pointer(first.source, [[first.loci[0][0], first.loci[0][1], "0" * 16]])
    with pytest.raises(Exception, match="digest|does not match|changed"):
        load(bad)


def test_a_mnemon_childs_first_render_takes_its_parents_blocks(run_root):
    """The fork tells the child's table where its turns were rendered (decision 0473): its first
    render takes the parent's message blocks for every inherited turn — the same objects, which
    the cache model knows by identity, so the child's projected cost and its first request hash
    only its task — and what it renders is what it renders alone. The hint is taken once."""
    parent = new_agent(run_root, "p", system="be brief")
    prompt(parent, "read the notes")
    tool_turn(parent, "reading", "cat notes.txt", "the notes say hello")
    answer(parent, "done reading")
    made = render(parent.ctx)
    child = fork(run_root, parent, "c1", task="check the notes")
    assert child.ctx.memo.get("render_from") is parent.ctx
    got = render(child.ctx)
    assert "render_from" not in child.ctx.memo
    theirs = {id(b) for m in made for b in m["content"]}
    inherited = [b for m in got for b in m["content"]
                 if not (b.get("type") == "text" and b.get("text") == "check the notes")]
    assert inherited and all(id(b) in theirs for b in inherited)
    child.ctx.memo.clear()
    assert json.dumps(render(child.ctx)) == json.dumps(got)
    fresh = fork(run_root, parent, "c2", task="check the notes", kind="fresh")
    assert "render_from" not in fresh.ctx.memo  # a fresh child inherits no turns
    child.close()
    fresh.close()
    parent.close()
