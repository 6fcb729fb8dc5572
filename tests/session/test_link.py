"""A long ``Inherited`` line is folded a piece of rows at a time (``session.link``), and the
table is the one decoding the line whole gives: structural (the door's checkpoint) or full,
whatever the pieces' size; a line it cannot read that way (another layout, a refusal, a row
that does not decode) is decoded whole as before, with the same outcome. Building the door's
checkpoint of a child with 50 000 inherited rows stays in bounded memory."""

from __future__ import annotations

import tracemalloc

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

import mnemon.session.checkpoint as checkpoint
import mnemon.session.checkpoint.layout as layout
import mnemon.session.link as link
import mnemon.session.resume as resume
from mnemon.lineage.fork import fork
from mnemon.lineage.runroot import create_run_root, make_loader
from mnemon.session.door import Door
from mnemon.session.errors import LogRefused
from mnemon.session.log import digest
from mnemon.session.records import Evicted, Inherited, Residue, SessionStarted, encode
from mnemon.session.resume import fold_file
from tests.door._build import evict_prefix
from tests.door.test_checkpoint import OPS, PATTERNS, answers, play
from tests.helpers import answer, door_open, new_agent, prompt

SETTINGS = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


def _fields(t) -> tuple:
    return (t.id, t.role, t.label, t.bytes, t.state, t.source, [tuple(x) for x in t.loci],
            t.origin, dict(t.swept), t.residue)


def _structure(ctx) -> tuple:
    """What a structural fold keeps (every field of every turn but its records) and the rest
    of the fold's state."""
    return ([_fields(t) for t in ctx.turns], ctx.residues, ctx.marks, ctx.pending, ctx.reach,
            ctx.id_floor, ctx.in_hand, ctx.records_folded, ctx.history_bytes(),
            ctx.history_bytes_projection(), ctx.last_input_tokens, ctx.history_at_response)


class Spy:
    """Records what ``fold_link`` answered (a locus: the link was read in pieces)."""

    def __init__(self, monkeypatch):
        self.got: list = []
        real = resume.fold_link

        def spy(*args):
            out = real(*args)
            self.got.append(out)
            return out

        monkeypatch.setattr(resume, "fold_link", spy)


def _child(root, ops, more):
    """A parent played with ``ops`` (some of it evicted), its mnemon child played with ``more``."""
    log = new_agent(root, "a1")
    play(log, ops)
    for k in range(3):
        prompt(log, f"q{k} needle")
        answer(log, f"a{k}")
    evict_prefix(log, 2, note="first two")
    prompt(log, "delegate")
    child = fork(root, log, "c1", task="child task")
    play(child, more)
    child.close()
    log.close()
    return "agents/c1/record.jsonl"


@SETTINGS
@given(ops=OPS, more=OPS, piece=st.sampled_from([8, 40, 200, 4096]))
def test_a_link_folded_in_pieces_is_the_link_decoded_whole(tmp_path_factory, monkeypatch, ops,
                                                           more, piece):
    monkeypatch.setattr(layout, "MIN_BYTES", 0)
    root = create_run_root(tmp_path_factory.mktemp("lk") / "run", "tests")
    src = _child(root, ops, more)
    path = root / src
    want, _ = fold_file(path, src, loader=make_loader(root))  # the link decoded whole
    want_answers = answers(Door(root, want))
    with monkeypatch.context() as m:
        spy = Spy(m)
        m.setattr(resume, "BLOCK", 64)  # the link is longer than a block: read in pieces
        m.setattr(link, "PIECE", piece)
        got, _ = fold_file(path, src, loader=make_loader(root))
        lazy, _ = fold_file(path, src, loader=checkpoint.with_own(path, src, make_loader(root)),
                            lazy=True)
        door, _ = door_open(root / "agents" / "c1")  # builds the checkpoint
        assert isinstance(door.ctx, checkpoint.Table)
        assert spy.got and all(x is not None for x in spy.got)
        assert spy.got[0][0] == path.read_bytes().index(b'{"t":"Inherited"')
    assert got == want
    assert got.memo["fold_key"] == want.memo["fold_key"]
    assert len(lazy.turns.made) <= 1  # spilled to columns: only the turn in hand is an object
    assert _structure(lazy) == _structure(want)
    assert answers(door) == want_answers
    assert answers(Door(root, lazy)) == want_answers


def _line(rec) -> bytes:
    return encode(rec) + b"\n"


def _log(root, link_line: bytes, tail: bytes = b"") -> str:
    """``agents/c1/record.jsonl`` holding SessionStarted, the given link line and ``tail``, its
    rows pointing into a real parent log."""
    src = "agents/c1/record.jsonl"
    path = root / src
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(_line(SessionStarted(agent="c1", parent="a1", kind="mnemon")) + link_line
                     + tail)
    return src


def _parent_link(root) -> Inherited:
    from mnemon.lineage.fork import link_for

    log = new_agent(root, "a1")
    for k in range(8):
        prompt(log, f"q{k}")
        answer(log, f"a{k} needle")
    log.append(Evicted(residue=Residue(span=(1, 6), note=None, by="harness")))
    prompt(log, "delegate")
    out = link_for(log.ctx)
    log.close()
    return out


def _outcome(path, src, root, lazy: bool):
    loader = make_loader(root)
    if lazy:
        loader = checkpoint.with_own(path, src, loader)
    try:
        ctx, torn = fold_file(path, src, loader=loader, lazy=lazy)
    except LogRefused as e:
        return ("refused", e.line, e.why, e.offset)
    return ("folded", _structure(ctx), torn)


def _edits(good: bytes) -> dict[str, bytes]:
    """Link lines that are not mnemon's own shape, or do not fold."""
    rows = good[good.index(b"[") + 1:good.index(b'],"residues":[')]
    return {
        "rows out of order": good.replace(b'{"row":{"id":2,', b'{"row":{"id":9,', 1),
        "evicted outside every residue": good.replace(b'"held":"resident"', b'"held":"evicted"',
                                                      1),
        "a row that does not decode": good.replace(b'"role":"assistant"', b'"role":"system"', 1),
        "a row cut short": good.replace(b'"bytes":', b'"bytes"', 1),
        "residues that overlap": good.replace(b'"residues":[', b'"residues":[{"span":[3,9],'
                                              b'"note":null,"by":"harness"},', 1),
        "id_floor too low": good.replace(b'"id_floor":', b'"id_floor":1,"x":', 1),
        "an unknown member that holds a row-like object": good.replace(
            b'"row":{"id":3,', b'"x":[{"a":1},{"row":{"id":3}}],"row":{"id":3,', 1),
        "residues before rows": b'{"t":"Inherited","residues":' +
        good[good.index(b'],"residues":[') + 13:good.rindex(b',"id_floor"')] + b',"turns":[' +
        rows + b'],"id_floor":' + good[good.rindex(b'"id_floor":') + 11:],
        "rows twice": good[:-1] + b',"turns":[]}',
        "spaces": good.replace(b'},{"row":', b'}, {"row":'),
        "the close of the rows inside a residue's note": good.replace(
            b'"residues":[{"span":[1,6],"note":null',
            b'"residues":[{"span":[1,6],"note":"],\\"residues\\":[ \\u005d,\\"residues\\":["', 1),
    }


EDITS = {  # what reading the line in pieces does: read it, give it back, or not try
    "rows out of order": "back", "evicted outside every residue": "back",
    "a row that does not decode": "back", "a row cut short": "back",
    "residues that overlap": "back", "id_floor too low": "back",
    "an unknown member that holds a row-like object": "back", "rows twice": "back",
    "residues before rows": "untried", "spaces": "read",
    "the close of the rows inside a residue's note": "read", "none": "read", "torn": "untried",
    "torn after": "read",
}


@pytest.mark.parametrize("edit", list(EDITS))
@pytest.mark.parametrize("lazy", [False, True])
def test_a_link_that_cannot_be_read_in_pieces_is_decoded_whole(tmp_path, monkeypatch, edit,
                                                               lazy):
    """Whatever the line holds, reading it in pieces ends as decoding it whole: the same table,
    or the same refusal naming the same line."""
    root = create_run_root(tmp_path / "run", "tests")
    good = encode(_parent_link(root))
    assert good.startswith(link.OPENING)
    task = b'{"t":"UserPrompt","turn":100,"text":"child task"}\n'
    if edit == "torn":
        line, tail = good, b""  # no newline: a torn tail, never read
    elif edit == "torn after":  # the link whole, then a torn tail
        line, tail = good + b"\n", task[:-9]
    else:
        line, tail = (good if edit == "none" else _edits(good)[edit]) + b"\n", task
    src = _log(root, line, tail)
    path = root / src
    want = _outcome(path, src, root, lazy)
    spy = Spy(monkeypatch)
    monkeypatch.setattr(resume, "BLOCK", 64)
    monkeypatch.setattr(link, "PIECE", 16)
    got = _outcome(path, src, root, lazy)
    assert got == want
    assert spy.got == {"read": [(len(_line(SessionStarted(agent="c1", parent="a1",
                                                              kind="mnemon"))),
                                 len(line) - 1, digest(line[:-1]))],
                       "back": [None], "untried": []}[EDITS[edit]]
    if edit in ("rows out of order", "evicted outside every residue", "a row that does not "
                "decode", "a row cut short", "residues that overlap", "id_floor too low"):
        assert want[:2] == ("refused", 2)
    else:
        assert want[0] == "folded"


def _big_child(root, n: int) -> str:
    log = new_agent(root, "p")
    for k in range(n):
        if k % 3 == 0:
            prompt(log, f"question {k} needle" if k % 7 == 0 else f"question {k}")
        else:
            answer(log, f"answer {k}")
    ids = [t.id for t in log.ctx.turns]
    log.append(Evicted(residue=Residue(span=(ids[0], ids[n - 20]), note="most", by="model")))
    prompt(log, "delegate")
    child = fork(root, log, "c1", task="child task")
    answer(child, "child answer needle")
    child.close()
    log.close()
    return "agents/c1/record.jsonl"


def test_building_the_checkpoint_of_a_child_with_a_long_link_stays_small(tmp_path):
    """50 000 inherited rows (a link line of ~8.6 MB): the door's first call from outside folds
    the child and writes its checkpoint with a bounded Python heap — decoding the link whole
    took ~70 MB here — and answers as a door on a full fold."""
    root = create_run_root(tmp_path / "run", "tests")
    src = _big_child(root, 50_000)
    path = root / src
    assert path.stat().st_size > 2 * resume.BLOCK  # the link does not fit in a block
    assert not checkpoint.path_for(path).exists()
    tracemalloc.start()
    try:
        door, _ = door_open(root / "agents" / "c1")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(door.ctx, checkpoint.Table)
    assert peak < 40 * 2 ** 20, f"building the checkpoint peaked at {peak / 2 ** 20:.1f} MB"
    want = Door(root, fold_file(path, src, loader=make_loader(root))[0])
    assert door.index() == want.index()
    ids = [r["id"] for r in want.index()]
    some = ids[::997] + ids[-25:]
    assert door.read(some) == want.read(some)
    for p in PATTERNS[:4] + ["needle", "question 4999"]:
        assert door.grep(p) == want.grep(p)
