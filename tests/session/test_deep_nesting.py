"""A line nested deeper than the decoder's recursion limit is not a record: every reader refuses
it by name (msgspec raises RecursionError there, not DecodeError)."""

from __future__ import annotations

import pytest

from tests.helpers import door_open
from mnemon.session.errors import LogCorrupt, LogRefused, Refusal
from mnemon.session.log import read_at
from mnemon.session.records import Pointer, SessionStarted, UserPrompt, encode
from mnemon.session.resume import fold_file

DEEP = b'{"t":"UserPrompt","turn":2,"text":"x","extra":' + b"[" * 5000 + b"]" * 5000 + b"}"


def _log(tmp_path):
    path = tmp_path / "agents" / "a1" / "record.jsonl"
    path.parent.mkdir(parents=True)
    good = encode(UserPrompt(turn=1, text="fine"))
    path.write_bytes(encode(SessionStarted(agent="a1")) + b"\n" + good + b"\n" + DEEP + b"\n")
    return path, len(encode(SessionStarted(agent="a1"))) + 1 + len(good) + 1


def test_the_fold_refuses_the_line(tmp_path):
    path, off = _log(tmp_path)
    with pytest.raises(LogRefused) as e:
        fold_file(path, "agents/a1/record.jsonl")
    assert e.value.line == 3 and e.value.offset == off and "not a record" in e.value.why


def test_read_at_refuses_it(tmp_path):
    import blake3

    path, off = _log(tmp_path)
    loc = (off, len(DEEP), blake3.blake3(DEEP).digest(length=8).hex())
    with pytest.raises(LogCorrupt) as e:
        read_at(path, Pointer("agents/a1/record.jsonl", [loc]))
    assert "not a record" in str(e.value)


def test_the_door_refuses_it(tmp_path):
    """A hand-written link may point at such a line with its right digest: the door refuses it."""
    import blake3

    from mnemon.lineage.runroot import create_run_root
    from mnemon.session.door import Door
    from mnemon.session.records import Evicted, Inherited, Linked, Residue, Row

    root = create_run_root(tmp_path / "run", "tests")
    parent = root / "agents" / "p" / "record.jsonl"
    parent.parent.mkdir(parents=True)
    parent.write_bytes(DEEP + b"\n")
    loc = (0, len(DEEP), blake3.blake3(DEEP).digest(length=8).hex())
    link = Inherited(turns=[Linked(Row(id=2, role="user", label="x", bytes=len(DEEP),
                                       held="evicted"), Pointer("agents/p/record.jsonl", [loc]))],
                     residues=[Residue(span=(2, 2), note=None, by="model")])
    child = root / "agents" / "c1" / "record.jsonl"
    child.parent.mkdir(parents=True)
    child.write_bytes(b"".join(encode(r) + b"\n" for r in [
        SessionStarted(agent="c1", parent="p", kind="mnemon"), link,
        UserPrompt(turn=3, text="go")]))
    door, _ = door_open(child.parent)
    for call in (lambda: door.read("2"), lambda: door.grep("x"),
                 lambda: door.grep("x", shortcut=False)):
        with pytest.raises(Refusal) as e:
            call()
        assert "not a record" in str(e.value)
