"""The block-wise fold (two buffers, a helper thread, whole-block decoding) answers exactly what a
plain line-by-line fold answers: the same table, the same refusal naming the same line and
offset, the same torn tail — for tiny blocks (lines longer than a block), the native and the
pure-Python ``fill``, and lines another writer framed differently."""

from __future__ import annotations

import os

import blake3
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mnemon.session.resume as resume
from mnemon.session import native
from mnemon.session.context import Context
from mnemon.session.errors import LogRefused, SessionError
from mnemon.session.log import find_torn_tail, iter_lines
from mnemon.session.records import _decoder, encode
from mnemon.session.resume import fold_file
from tests.strategies import sessions

SOURCE = "agents/a1/record.jsonl"
SETTINGS = settings(max_examples=int(os.environ.get("MNEMON_HYPOTHESIS_EXAMPLES", 120)),
                    deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                          HealthCheck.too_slow])


def reference(path):
    """The plain fold: every complete line decoded and stepped one at a time."""
    ctx = Context(SOURCE)
    n = 0
    for off, line in iter_lines(path):
        n += 1
        if not line:
            raise LogRefused(SOURCE, n, "a blank line", off)
        try:
            rec = _decoder.decode(line)
        except msgspec.DecodeError as e:
            raise LogRefused(SOURCE, n, f"not a record: {e}", off) from None
        try:
            ctx.step(rec, (off, len(line), blake3.blake3(line).digest(length=8).hex()))
        except SessionError as e:
            raise LogRefused(SOURCE, n, str(e), off) from None
    if n == 0:
        raise LogRefused(SOURCE, 1, "the log is empty — it must open with SessionStarted", 0)
    return ctx


def outcome(fn, path):
    try:
        ctx = fn(path)
    except LogRefused as e:
        return ("refused", e.line, e.offset, e.why)
    return ctx


def both(path):
    want = outcome(reference, path)
    got = outcome(lambda p: fold_file(p, SOURCE)[0], path)
    assert got == want
    return got


LINE_EDITS = st.sampled_from(["none", "spaces", "blank", "garbage", "two", "split", "drop"])


@pytest.fixture(params=["native", "python"])
def fill_impl(request, monkeypatch):
    if request.param == "python":
        monkeypatch.setattr(resume, "fill", native.py_fill)
    elif not native.AVAILABLE:
        pytest.skip("the extension is not built")
    return request.param


@SETTINGS
@given(records=sessions(), block=st.sampled_from([16, 64, 200, 1024, 1 << 16]),
       edits=st.lists(st.tuples(st.integers(0, 10**6), LINE_EDITS), max_size=3),
       torn=st.booleans())
def test_blocks_fold_like_lines(tmp_path, fill_impl, monkeypatch, records, block, edits, torn):
    monkeypatch.setattr(resume, "BLOCK", block)
    lines = [encode(r) for r in records]
    for at, edit in edits:
        i = at % len(lines)
        if edit == "spaces":  # valid JSON, not framed: decoded line by line
            lines[i] = b"  " + lines[i] + b" "
        elif edit == "blank":
            lines.insert(i, b"")
        elif edit == "garbage":
            lines.insert(i, b"{not json}")
        elif edit == "two":  # two records on one line
            lines[i] = lines[i] + lines[i]
        elif edit == "split" and len(lines[i]) > 4:  # one record over two lines
            lines[i:i + 1] = [lines[i][:len(lines[i]) // 2], lines[i][len(lines[i]) // 2:]]
        elif edit == "drop" and len(lines) > 1:
            del lines[i]
    path = tmp_path / "record.jsonl"
    data = b"".join(x + b"\n" for x in lines)
    if torn:
        data += b'{"t":"Steering","te'
    path.write_bytes(data)
    both(path)
    if torn:
        assert find_torn_tail(path) is not None
    assert fold_file.__module__ == "mnemon.session.resume"


def test_a_line_longer_than_many_blocks(tmp_path, fill_impl, monkeypatch):
    monkeypatch.setattr(resume, "BLOCK", 32)
    from mnemon.session.records import SessionStarted, UserPrompt

    recs = [SessionStarted(agent="a1"), UserPrompt(turn=1, text="x" * 5000),
            UserPrompt(turn=2, text="y")]
    path = tmp_path / "record.jsonl"
    path.write_bytes(b"".join(encode(r) + b"\n" for r in recs))
    ctx = both(path)
    assert [t.id for t in ctx.turns] == [1, 2]
    assert ctx.turns[0].loci[0][1] == len(encode(recs[1]))


def test_refusal_in_a_later_block_names_its_line(tmp_path, fill_impl, monkeypatch):
    monkeypatch.setattr(resume, "BLOCK", 256)
    from mnemon.session.records import SessionStarted, UserPrompt

    lines = [encode(SessionStarted(agent="a1"))]
    lines += [encode(UserPrompt(turn=i, text=f"prompt {i}")) for i in range(1, 60)]
    lines.insert(45, encode(UserPrompt(turn=3, text="again")))
    path = tmp_path / "record.jsonl"
    path.write_bytes(b"".join(x + b"\n" for x in lines))
    refused = both(path)
    assert refused[0] == "refused" and refused[1] == 46
    assert refused[2] == sum(len(x) + 1 for x in lines[:45])


def test_a_refusal_waits_for_the_helper(tmp_path, monkeypatch):
    """The helper reads the next block while this one is refused: it finishes before the file
    closes, and the next fold starts clean."""
    monkeypatch.setattr(resume, "BLOCK", 64)
    from mnemon.session.records import SessionStarted, UserPrompt

    lines = [encode(SessionStarted(agent="a1")), encode(UserPrompt(turn=5, text="a")),
             encode(UserPrompt(turn=4, text="b"))] + \
        [encode(UserPrompt(turn=9 + i, text="c" * 50)) for i in range(200)]
    path = tmp_path / "record.jsonl"
    path.write_bytes(b"".join(x + b"\n" for x in lines))
    for _ in range(20):
        with pytest.raises(LogRefused) as e:
            fold_file(path, SOURCE)
        assert e.value.line == 3
