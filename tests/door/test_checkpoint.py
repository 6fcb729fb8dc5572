"""The fold checkpoint is derived data: whatever happened to it — missing, damaged, another
log's, the log appended behind its back or rewritten — the door from outside answers exactly as
a door on a full fold of the log (hypothesis over random logs)."""

from __future__ import annotations

import json
import shutil

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

import mnemon.session.checkpoint as checkpoint
import mnemon.session.checkpoint.layout as layout
from mnemon.lineage.fork import fork
from mnemon.lineage.runroot import create_run_root, make_loader
from mnemon.session.door import Door
from mnemon.session.errors import Refusal
from mnemon.session.records import Cleared, Marked, Rewound, Swept
from mnemon.session.resume import fold_file
from tests.helpers import answer, door_open, new_agent, prompt, tool_turn

from ._build import evict_prefix

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

OPS = st.lists(st.tuples(st.sampled_from(["prompt", "tool", "answer", "evict", "clear",
                                          "rewind", "mark"]), st.integers(0, 6)), max_size=25)
DAMAGE = st.sampled_from(["none", "missing", "corrupt", "foreign", "appended", "rewritten",
                          "truncated"])
PATTERNS = ["p", "out", r"a\d", ".", "needle", "^t", "more$"]


@pytest.fixture(autouse=True)
def always(monkeypatch):
    monkeypatch.setattr(layout, "MIN_BYTES", 0)


def play(log, ops) -> None:
    for op, k in ops:
        ctx = log.ctx
        if op == "prompt":
            prompt(log, f"p{k} needle" if k % 3 == 0 else f"p{k}")
        elif op == "tool":
            tool_turn(log, f"t{k}", "ls", "out\nmore" + "x" * (3000 * (k % 2)))
        elif op == "answer":
            answer(log, f"a{k}")
        elif ctx.in_hand is None:
            continue
        elif op == "evict":
            evict_prefix(log, k + 1)
        elif op == "clear":
            log.append(Cleared())
        elif op == "rewind":
            ids = [t.id for t in ctx.turns]
            try:
                log.append(Rewound(to=ids[k % len(ids)]))
            except Refusal:
                pass
        elif op == "mark":  # a mark and a sweep on a resident tool result (lazy blocks)
            for t in ctx.turns:
                if t.state == "resident" and t.id != ctx.in_hand and t.role == "assistant":
                    blocks = ctx.blocks(t.id)
                    if len(blocks) > 2 and 2 not in t.swept:
                        try:
                            log.append(Marked(block=(t.id, 2), replacement="r"))
                            log.append(Swept(blocks=[(t.id, 2)]))
                        except Refusal:
                            pass
                        break


def answers(door: Door) -> tuple:
    rows = door.index()
    ids = [r["id"] for r in rows]
    printed = door.index_json()
    if printed is not None:  # the checkpoint's printed rows are the same rows
        assert json.loads(b"".join(printed)) == rows
        some = ids[::2]
        if some:
            assert json.loads(b"".join(door.index_json(some))) == door.index(some)
    read = door.read(ids) if ids else []
    greps = [door.grep(p) for p in PATTERNS]
    return rows, read, greps


def apply_damage(root, log, agent: str, damage: str, at: int, forked: bool, more,
                 appended: str = "appended needle"):
    """Do ``damage`` to the checkpoint of ``agent``'s log (or to the log behind its back);
    returns the agent's log, reopened where the damage rewrote it. ``b1`` is the other log."""
    path = root / "agents" / agent / "record.jsonl"
    fold = checkpoint.path_for(path)
    if damage == "missing":
        fold.unlink()
    elif damage == "corrupt":
        data = bytearray(fold.read_bytes())
        data[at % len(data)] ^= 1 + at % 255
        fold.write_bytes(bytes(data))
    elif damage == "foreign":
        shutil.copyfile(checkpoint.path_for(root / "agents" / "b1" / "record.jsonl"), fold)
    elif damage == "appended":
        play(log, more)
        answer(log, appended)
    elif damage in ("rewritten", "truncated"):
        log.close()
        data = path.read_bytes()
        path.unlink()
        if damage == "rewritten" or not forked:
            log = new_agent(root, agent)
            play(log, more)
        else:  # keep the opening (the link), drop the rest
            lines = data.splitlines(keepends=True)
            path.write_bytes(b"".join(lines[:3]))
    return log


def full(root, agent: str) -> tuple:
    src = f"agents/{agent}/record.jsonl"
    ctx, _ = fold_file(root / src, src, loader=make_loader(root))
    return answers(Door(root, ctx))


@SETTINGS
@given(ops=OPS, more=OPS, other=OPS, damage=DAMAGE, at=st.integers(0, 10 ** 9),
       forked=st.booleans())
def test_the_door_from_outside_answers_as_a_full_fold(tmp_path_factory, ops, more, other, damage,
                                                      at, forked):
    root = create_run_root(tmp_path_factory.mktemp("ck") / "run", "tests")
    agent = "a1"
    log = new_agent(root, "a1")
    play(log, ops)
    if forked:  # a mnemon child: its table's rows point into the parent's file
        prompt(log, "delegate")
        log = fork(root, log, "c1", task="child task")
        agent = "c1"
    play(log, ops[::2])
    b = new_agent(root, "b1")
    play(b, other)
    b.close()
    path = root / "agents" / agent / "record.jsonl"
    fold = checkpoint.path_for(path)
    door_open(root / "agents" / agent)  # writes the checkpoint
    door_open(root / "agents" / "b1")
    assert fold.is_file()
    log = apply_damage(root, log, agent, damage, at, forked, more)
    want = full(root, agent)
    door, torn = door_open(root / "agents" / agent)
    assert torn is None
    assert answers(door) == want
    # and the checkpoint now describes the log
    got = checkpoint.load(path, f"agents/{agent}/record.jsonl")
    assert got.key.end == path.stat().st_size
    got.close()
    again, _ = door_open(root / "agents" / agent)
    assert isinstance(again.ctx, checkpoint.Table)
    assert answers(again) == want


def test_a_checkpoint_is_no_source_of_truth(run_root, capsys):
    """A record edited in place under an intact key (out of the append-only contract) is never
    answered from the checkpoint: its locus digest refuses it. ``verify`` neither reads nor
    writes a checkpoint: it refolds the log."""
    from mnemon.orchestrator.cli import main

    log = new_agent(run_root, "a1")
    prompt(log, "go")  # a user turn first: verify flags a log that opens with an answer
    for i in range(5):
        tool_turn(log, f"t{i}", "ls", f"out {i}")
    log.close()
    door_open(run_root / "agents" / "a1")
    path = run_root / "agents" / "a1" / "record.jsonl"
    fold = checkpoint.path_for(path)
    data = bytearray(path.read_bytes())
    at = data.index(b"out 2")
    data[at:at + 5] = b"OUT 2"  # same length, first and last records intact: the key matches
    path.write_bytes(bytes(data))
    checkpoint.load(path, "agents/a1/record.jsonl").close()
    door, _ = door_open(run_root / "agents" / "a1")
    with pytest.raises(Refusal, match="digest mismatch"):
        door.grep("OUT")
    fold.write_bytes(b"garbage")
    capsys.readouterr()
    # the edited log itself folds; its chain names the edited line (and nothing else)
    assert main(["verify", str(run_root), "--json"]) == 1
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert [(p["line"], p["kind"]) for p in problems] == [(data[:at].count(b"\n") + 1, "edited")]
    assert fold.read_bytes() == b"garbage"
    fold.unlink()
    assert main(["verify", str(run_root), "--json"]) == 1
    assert not fold.exists()


def test_a_resume_over_a_record_edited_in_place_is_the_full_fold(run_root):
    """A resume reopens as every reader does (``checkpoint.reopening``): a resident record edited
    in place under an intact key fails the checkpoint's path (its locus digest), and the table
    is the fold of the file as it is — what a resume without a checkpoint gives."""
    from mnemon.session.agentlog import AgentLog
    from mnemon.session.chain import ChainBroken
    from mnemon.session.checkpoint.reopening import reopen

    log = new_agent(run_root, "a1")
    for i in range(5):
        tool_turn(log, f"t{i}", "ls", f"out {i}")
    log.close(checkpoint=True)
    src = "agents/a1/record.jsonl"
    path = run_root / src
    assert checkpoint.path_for(path).is_file()
    data = bytearray(path.read_bytes())
    at = data.index(b"out 2")
    data[at:at + 5] = b"OUT 2"  # same length, first and last records intact: the key matches
    path.write_bytes(bytes(data))
    checkpoint.load(path, src).close()
    want, _ = fold_file(path, src, loader=make_loader(run_root))
    # the agent's resume is refused by its chain, naming the edited line (session.chain) …
    line = data[:at].count(b"\n") + 1
    with pytest.raises(ChainBroken) as e:
        AgentLog.resume(path, src, loader=make_loader(run_root))
    assert (e.value.line, e.value.kind) == (line, "edited")
    # … and every reader's reopening gives the fold of the file as it is
    got, _, _ = reopen(path, src, loader=make_loader(run_root))
    assert got == want


@SETTINGS
@given(ops=OPS, more=OPS, damage=st.sampled_from(["none", "missing", "corrupt", "appended"]),
       at=st.integers(0, 10 ** 9), forked=st.booleans())
def test_a_resume_from_the_checkpoint_is_the_full_fold(tmp_path_factory, ops, more, damage, at,
                                                       forked):
    from mnemon.lineage.fork import resume_child
    from mnemon.session.agentlog import AgentLog

    root = create_run_root(tmp_path_factory.mktemp("rs") / "run", "tests")
    agent = "a1"
    log = new_agent(root, "a1")
    play(log, ops)
    if forked:
        prompt(log, "delegate")
        log = fork(root, log, "c1", task="child task")
        agent = "c1"
        play(log, ops[::2])
    src = f"agents/{agent}/record.jsonl"
    path = root / src
    log.close(checkpoint=True)
    fold = checkpoint.path_for(path)
    assert fold.is_file()
    if damage == "missing":
        fold.unlink()
    elif damage == "corrupt":
        data = bytearray(fold.read_bytes())
        data[at % len(data)] ^= 1 + at % 255
        fold.write_bytes(bytes(data))
    elif damage == "appended":  # resumed without a checkpoint written at its stop
        again = resume_child(root, agent) if forked else AgentLog.resume(path, src)[0]
        play(again, more)
        again.close()
    want, _ = fold_file(path, src, loader=make_loader(root))
    resumed = resume_child(root, agent) if forked else AgentLog.resume(path, src)[0]
    assert resumed.ctx.records_folded == want.records_folded + 1  # + SessionResumed
    got, _ = fold_file(path, src, loader=make_loader(root))
    assert resumed.ctx == got
    resumed.close()


@SETTINGS
@given(ops=OPS, more=OPS, appended=st.booleans(), forked=st.booleans())
def test_context_from_the_checkpoint_is_the_full_fold(tmp_path_factory, ops, more, appended,
                                                      forked):
    from mnemon.lineage.view import open_agent
    from mnemon.session.survey import survey
    from mnemon.session.render import render

    root = create_run_root(tmp_path_factory.mktemp("cx") / "run", "tests")
    agent = "a1"
    log = new_agent(root, "a1")
    play(log, ops)
    if forked:
        prompt(log, "delegate")
        log = fork(root, log, "c1", task="child task")
        agent = "c1"
    door_open(root / "agents" / agent)  # writes the checkpoint
    if appended:
        play(log, more)
    src = f"agents/{agent}/record.jsonl"
    want, _ = fold_file(root / src, src, loader=make_loader(root))
    _, _, got, _ = open_agent(root / "agents" / agent)
    assert got == want
    assert survey(got) == survey(want) and render(got) == render(want)


def test_the_printed_index_comes_in_pieces_of_a_block(run_root, monkeypatch):
    """``transcript index --json`` copies the checkpoint's printed rows a block at a time (each
    block's mapped pages dropped once taken), and the pieces are the rows a full fold prints."""
    monkeypatch.setattr(layout, "CHECK_BLOCK", 256)
    log = new_agent(run_root, "a1")
    for i in range(40):
        tool_turn(log, f"t{i} needle", "ls", f"out {i}")
    evict_prefix(log, 10, note="the first ten")
    log.close()
    door, _ = door_open(run_root / "agents" / "a1")
    assert isinstance(door.ctx, checkpoint.Table)
    pieces = list(door.index_json())
    assert len(pieces) > 10 and max(len(p) for p in pieces) <= 256
    assert json.loads(b"".join(pieces)) == full(run_root, "a1")[0]
    some = list(range(3, 40, 4))
    assert json.loads(b"".join(door.index_json(some))) == door.index(some)
