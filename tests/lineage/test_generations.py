"""Three generations: flattened pointers, id floors, reads after the middle log is gone, the fold law."""

from __future__ import annotations

from mnemon.lineage.fork import fork
from mnemon.lineage.runroot import make_loader, read_pointer
from mnemon.session.records import UserPrompt, decode
from mnemon.session.render import render

from .util import (
    STARTED,
    answer,
    assert_prefix,
    busy_parent,
    evict,
    new_agent,
    prompt,
    refold,
    start_call,
    tool_turn,
)


def three_generations(root):
    r = busy_parent(root, "r")  # turns 1..20 with residues [1,3] ⊂ [1,6] and a swept turn
    r_in_hand = start_call(r, "child task")
    c = fork(root, r, "c", task="child task")
    c_first = c.ctx.turns[-1].id
    tool_turn(c, "child reads", "grep x", "hits\n" * 30)
    answer(c, "child found x")
    # the child evicts across inherited turns (swallowing the inherited residues) and its own
    c_turns = [t.id for t in c.ctx.turns]
    evict(c, 1, c_turns[-2], "root's work and the child's first read", by="harness")
    prompt(c, "go on")
    answer(c, "going on")
    c_in_hand = start_call(c, "grandchild task")
    g = fork(root, c, "g", task="grandchild task")
    tool_turn(g, "grandchild works", "ls", "files")
    # the root goes on after the fork; its later turns never reach the descendants
    answer(r, "root continues")
    return r, c, g, r_in_hand, c_in_hand, c_first


def test_grandchild_rows_name_the_root_file_directly(run_root):
    r, c, g, r_in_hand, c_in_hand, c_first = three_generations(run_root)
    link = decode((run_root / "agents/g/record.jsonl").read_bytes().splitlines()[1])
    by_id = {x.row.id: x for x in link.turns}
    for tid, x in by_id.items():
        want = "agents/r/record.jsonl" if tid < r_in_hand else "agents/c/record.jsonl"
        assert x.at.source == want, tid
    assert link.id_floor == c_in_hand + 1
    assert r_in_hand not in by_id and c_in_hand not in by_id
    # the grandchild's table names the root's file for root turns, the child's for its own
    assert {t.source for t in g.ctx.turns if t.id < r_in_hand} == {"agents/r/record.jsonl"}
    assert {t.source for t in g.ctx.turns if r_in_hand < t.id < c_in_hand} == {"agents/c/record.jsonl"}
    assert g.ctx.turns[-2].source == "agents/g/record.jsonl"


def test_ids_are_monotone_along_the_path_and_unique_in_each_view(run_root):
    r, c, g, r_in_hand, c_in_hand, c_first = three_generations(run_root)
    for log in (r, c, g):
        ids = [t.id for t in log.ctx.turns]
        assert ids == sorted(set(ids))
    own = lambda log, src: [t.id for t in log.ctx.turns if t.source == src]
    r_ids = [i for i in own(r, "agents/r/record.jsonl") if i <= r_in_hand]
    c_ids = own(c, "agents/c/record.jsonl")
    g_ids = own(g, "agents/g/record.jsonl")
    assert max(r_ids) == r_in_hand < min(c_ids) == c_first == r_in_hand + 1
    assert max(c_ids) == c_in_hand < min(g_ids) == c_in_hand + 1
    # along the path r -> c -> g, an id names one thing: each id is first recorded in one file
    seen = {}
    for log in (r, c, g):
        for t in log.ctx.turns:
            if t.id <= (r_in_hand if log is r else c_in_hand if log is c else 10**9):
                assert seen.setdefault(t.id, (t.source, t.loci)) == (t.source, t.loci)


def test_the_fold_law_holds_for_every_file(run_root):
    r, c, g, *_ = three_generations(run_root)
    for name, log in (("r", r), ("c", c), ("g", g)):
        assert refold(run_root, name) == log.ctx


def test_grandchild_prefix_is_byte_identical(run_root):
    r = busy_parent(run_root, "r")
    start_call(r)
    c = fork(run_root, r, "c", task="t1")
    assert_prefix(r.ctx, c.ctx, "t1")
    tool_turn(c, "c works", "ls", "ok")
    answer(c, "c done")
    start_call(c)
    g = fork(run_root, c, "g", task="t2")
    assert_prefix(c.ctx, g.ctx, "t2")
    assert_prefix(refold(run_root, "c"), refold(run_root, "g"), "t2")


def test_grandchild_reads_a_root_turn_after_the_middle_log_is_deleted(run_root):
    r, c, g, r_in_hand, c_in_hand, _ = three_generations(run_root)
    link = decode((run_root / "agents/g/record.jsonl").read_bytes().splitlines()[1])
    root_row = next(x for x in link.turns if x.at.source == "agents/r/record.jsonl"
                    and x.row.role == "user")
    before = read_pointer(run_root, root_row.at)
    recs = make_loader(run_root)(root_row.at)
    assert isinstance(recs[0], UserPrompt) and recs[0].turn == root_row.row.id
    (run_root / "agents/c/record.jsonl").unlink()
    assert read_pointer(run_root, root_row.at) == before  # the flattened pointer needs no c
    assert make_loader(run_root)(root_row.at) == recs
    # every root turn still reads; only the child's own turns are gone
    for x in link.turns:
        if x.at.source == "agents/r/record.jsonl":
            read_pointer(run_root, x.at)


def test_fork_before_any_own_turn_keeps_the_floor(run_root):
    """A child forked by a child before it opened a turn of its own still mints above the floor."""
    r = new_agent(run_root, "r", **STARTED)
    prompt(r, "q")
    in_hand = start_call(r)
    c = fork(run_root, r, "c", task="t")
    from mnemon.lineage.fork import link_for
    from mnemon.session.context import Context

    ctx = Context("agents/c/record.jsonl", loader=make_loader(run_root))
    for rec in [decode(l) for l in (run_root / "agents/c/record.jsonl").read_bytes().splitlines()[:2]]:
        ctx.step(rec)
    assert ctx.in_hand is None and ctx.reach == 1 and ctx.id_floor == in_hand + 1
    link = link_for(ctx)
    assert link.id_floor == in_hand + 1  # not reach + 1: id in_hand belongs to r on this path
    assert render(c.ctx)[-1]["content"][-1]["text"] == "t"
