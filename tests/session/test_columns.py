"""A table kept as columns (``session.columns.Turns``) is the table a full fold gives.

Restored from a checkpoint for a resume, its departed turns stay columns until touched; folded
structurally, its turns are spilled back to columns block by block. Whatever is done next —
appends, evictions that swallow restored residues, marks and sweeps, clear and rewind, a fork —
the result must equal folding the whole file again (hypothesis over random logs)."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

import mnemon.session.checkpoint as checkpoint
import mnemon.session.checkpoint.layout as layout
import mnemon.session.resume as resume
from mnemon.lineage.fork import fork, link_for, resume_child
from mnemon.lineage.runroot import create_run_root, make_loader
from mnemon.session.agentlog import AgentLog
from mnemon.session.columns import Turns
from mnemon.session.render import render
from mnemon.session.resume import fold_file
from mnemon.session.sweep import candidates
from mnemon.session.door import Door
from tests.door.test_checkpoint import OPS, answers, play
from tests.helpers import answer, new_agent, prompt, tool_turn

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


@pytest.fixture(autouse=True)
def always(monkeypatch):
    monkeypatch.setattr(layout, "MIN_BYTES", 0)


def _fields(t) -> tuple:
    """A turn's structure (what a structural fold keeps: everything but its records)."""
    return (t.id, t.role, t.label, t.bytes, t.state, t.source, [tuple(x) for x in t.loci],
            t.origin, dict(t.swept), t.residue)


@SETTINGS
@given(ops=OPS, more=OPS, forked=st.booleans(), refork=st.booleans())
def test_a_resumed_table_stays_columns_and_folds_as_the_whole_file(tmp_path_factory, ops, more,
                                                                   forked, refork):
    root = create_run_root(tmp_path_factory.mktemp("lz") / "run", "tests")
    agent = "a1"
    log = new_agent(root, "a1")
    play(log, ops)
    for k in range(4):  # enough departed turns that a lazy table has rows it never makes
        tool_turn(log, f"w{k}", "ls", "out" + "y" * 40)
        answer(log, f"done {k}")
    prompt(log, "evict them")
    from tests.door._build import evict_prefix

    evict_prefix(log, 6)
    if forked:
        prompt(log, "delegate")
        log = fork(root, log, "c1", task="child task")
        agent = "c1"
        play(log, ops[::3])
    src = f"agents/{agent}/record.jsonl"
    path = root / src
    log.close(checkpoint=True)
    assert checkpoint.path_for(path).is_file()
    resumed = resume_child(root, agent) if forked else AgentLog.resume(path, src)[0]
    ctx = resumed.ctx
    assert isinstance(ctx.turns, Turns)
    departed = [i for i in range(len(ctx.turns)) if ctx.turns.state_of(i) != "resident"
                and ctx.turns.ids[i] != ctx.in_hand]
    if departed:  # restoring made no Turn for them (the turn in hand is one: it grows)
        assert not set(departed) & set(ctx.turns.made)
    want, _ = fold_file(path, src, loader=make_loader(root))
    assert render(ctx) == render(want)  # (equality would make every row: compared below)
    assert candidates(ctx) == candidates(want)
    assert [t.id for t in ctx.resident()] == [t.id for t in want.resident()]
    for role in ("user", "assistant"):
        for origin in ("own", "inherited"):
            assert ctx.count(role=role, origin=origin) == want.count(role=role, origin=origin)
    if departed:
        assert not set(departed) & set(ctx.turns.made)  # none of that made a departed turn
    assert ctx.earliest_resident() == want.earliest_resident()
    assert ctx.history_bytes() == ctx.history_bytes_projection() == want.history_bytes()
    play(resumed, more)  # appends after the resume: evictions, sweeps, clear, rewind
    evict_prefix(resumed, 3)
    prompt(resumed, "after")
    want, _ = fold_file(path, src, loader=make_loader(root))
    assert resumed.ctx == want
    assert render(resumed.ctx) == render(want)
    assert [_fields(t) for t in resumed.ctx.frontier() if hasattr(t, "loci")] == \
        [_fields(t) for t in want.frontier() if hasattr(t, "loci")]
    if refork:  # a fork from the resumed agent links what a fork from the full fold links
        assert link_for(resumed.ctx, log_path=path) == link_for(want, log_path=path)
        child = fork(root, resumed, "g1", task="grandchild task")
        csrc = "agents/g1/record.jsonl"
        got, _ = fold_file(root / csrc, csrc, loader=make_loader(root))
        assert child.ctx == got
        child.close()
    resumed.close(checkpoint=True)  # a save from the columns, then a resume from it
    again = resume_child(root, agent) if forked else AgentLog.resume(path, src)[0]
    want, _ = fold_file(path, src, loader=make_loader(root))
    # the agent's door over columns answers as a door over the full fold
    assert answers(Door(root, again.ctx, own=False)) == answers(Door(root, want, own=False))
    assert again.ctx == want
    again.close()


@SETTINGS
@given(ops=OPS, block=st.sampled_from([64, 256, 1024]), forked=st.booleans())
def test_a_structural_fold_spilled_block_by_block_is_the_full_fold(tmp_path_factory, monkeypatch,
                                                                   ops, block, forked):
    root = create_run_root(tmp_path_factory.mktemp("sp") / "run", "tests")
    agent = "a1"
    log = new_agent(root, "a1")
    play(log, ops)
    if forked:
        prompt(log, "delegate")
        log = fork(root, log, "c1", task="child task")
        agent = "c1"
        play(log, ops[::2])
    log.close()
    src = f"agents/{agent}/record.jsonl"
    full, _ = fold_file(root / src, src, loader=make_loader(root))
    monkeypatch.setattr(resume, "BLOCK", block)  # many blocks: many spills
    lazy, _ = fold_file(root / src, src, loader=checkpoint.with_own(root / src, src,
                                                                     make_loader(root)),
                        lazy=True)
    assert isinstance(lazy.turns, Turns)
    assert len(lazy.turns.made) <= 1  # only the turn in hand is an object
    assert [_fields(t) for t in lazy.turns] == [_fields(t) for t in full.turns]
    assert lazy.residues == full.residues and lazy.marks == full.marks
    assert lazy.history_bytes() == full.history_bytes()
    assert (lazy.reach, lazy.in_hand, lazy.pending) == (full.reach, full.in_hand, full.pending)


def _six_tool_turns(tmp_path, label: str):
    """A log of six tool turns (labelled ``label.format(k=k)``), folded lazily (a table of
    columns), with its run root and source."""
    root = create_run_root(tmp_path / "run", "tests")
    log = new_agent(root, "a1")
    for k in range(6):
        tool_turn(log, label.format(k=k), "ls", "out")
    log.close()
    src = "agents/a1/record.jsonl"
    lazy, _ = fold_file(root / src, src, lazy=True)
    return lazy, root, src


def test_spill_and_frozen_keep_every_field(tmp_path):
    """Columns out and back: a made row mutated, then spilled, reads back as mutated; ``frozen``
    reports the made rows' values without changing the table."""
    lazy, root, src = _six_tool_turns(tmp_path, "t{k} ünïcode")
    turns = lazy.turns
    t = turns[2]
    t.bytes += 7
    t.swept = {1: "r"}
    cols = turns.frozen()
    assert cols.weights[2] == t.bytes and cols.swept[2] == {1: "r"}
    assert turns.weights[2] != t.bytes  # the table's columns are not changed by frozen
    lazy.in_hand = None
    turns.spill()
    assert not turns.made
    again = turns[2]
    assert again is not t and again.bytes == t.bytes and again.swept == {1: "r"}
    assert again.label == "t2 ünïcode"
    full, _ = fold_file(root / src, src)
    assert [tuple(x) for x in turns[5].loci] == [tuple(x) for x in full.turns[5].loci]


def test_a_catch_up_rewrites_the_printed_residue_of_swallowed_residues(tmp_path, monkeypatch):
    """A checkpoint caught up after an eviction that swallows its residues: the printed rows it
    copies name the new outermost residue, as a full fold's index does."""
    from tests.door._build import evict_prefix
    from tests.door.test_checkpoint import full
    from tests.helpers import door_open

    root = create_run_root(tmp_path / "run", "tests")
    log = new_agent(root, "a1")
    prompt(log, "first")
    for k in range(12):
        tool_turn(log, f"t{k}", "ls", "out" * (k + 1))
    evict_prefix(log, 5)
    evict_prefix(log, 2)  # nested: [a, b] swallows the first
    for k in range(4):
        tool_turn(log, f"u{k}", "ls", "more")
    door_open(root / "agents" / "a1")  # the checkpoint
    path = root / "agents" / "a1" / "record.jsonl"
    before = checkpoint.load(path, "agents/a1/record.jsonl")
    outer = set(map(tuple, before._outer))
    before.close()
    evict_prefix(log, 3)  # swallows the outermost residue and two turns
    answer(log, "appended")
    door, _ = door_open(root / "agents" / "a1")
    assert isinstance(door.ctx, checkpoint.Table) and door.ctx.key.end == path.stat().st_size
    assert set(map(tuple, door.ctx._outer)) != outer
    assert answers(door) == full(root, "a1")


def test_a_table_of_columns_is_freed_with_its_context(tmp_path):
    """A made row's loci read the table's columns without holding the table: a ``Turn`` is not
    tracked by the cyclic collector, so a cycle through one (table → made turn → loci → table)
    would keep the whole table alive after its context is gone (the door from outside kept a
    1 GB lineage's columns, ~40 MB, for the rest of the call that built its checkpoint)."""
    import gc
    import weakref

    lazy, _, _ = _six_tool_turns(tmp_path, "t{k}")
    assert lazy.turns[2].loci == lazy.turns.loci_of(2)  # a made row, its loci from the columns
    gone = weakref.ref(lazy.turns)
    del lazy
    gc.collect()
    assert gone() is None
