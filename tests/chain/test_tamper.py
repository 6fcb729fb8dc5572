"""Generated logs × generated tampering: every change is named at the right line, with its kind.

The logs are written by the real writer (``RecordLog`` with its chain); the tampering is done on
the bytes, as an editor or a script would: a byte changed inside a string, a line deleted, a
line inserted (a copy of another, or a record no chained writer wrote), two lines swapped, the
last records cut off at a record boundary (found against the head kept before), a torn tail (a
crash: never called tampering).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemon.session import chain
from mnemon.session.log import RecordLog
from mnemon.session.records import SessionStarted, Steering, UserPrompt, encode

SETTINGS = settings(max_examples=int(os.environ.get("MNEMON_HYPOTHESIS_EXAMPLES", 120)),
                    deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                          HealthCheck.too_slow])

TEXT = st.text(alphabet="abcdefghijklmnopqrstuvwxyz ", min_size=1, max_size=60)
RECORD = st.one_of(st.builds(lambda t, n: UserPrompt(turn=n, text=t), TEXT, st.integers(1, 99)),
                   st.builds(lambda t: Steering(text=t, by="harness"), TEXT))
LOGS = st.lists(RECORD, min_size=2, max_size=25)


def write(tmp_path, records) -> tuple[object, list[bytes]]:
    path = tmp_path / "agents" / "a1" / "record.jsonl"
    if path.exists():
        path.unlink()  # hypothesis reuses the test's tmp_path
    with RecordLog(path, new=True, chain=True) as log:
        log.append(SessionStarted(agent="a1", at="2026-12-06T00:00:00Z"))
        for r in records:
            log.append(r)
    return path, path.read_bytes().splitlines()


def put(path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(x + b"\n" for x in lines))


def broken(path):
    rep = chain.check(path, "agents/a1/record.jsonl")
    return rep.broken


@SETTINGS
@given(records=LOGS, data=st.data())
def test_a_byte_edited_inside_a_string_is_named_at_its_line(tmp_path, records, data):
    path, lines = write(tmp_path, records)
    k = data.draw(st.integers(2, len(lines)))  # line 1 is SessionStarted: no text
    line = lines[k - 1]
    start = line.index(b'"text":"') + len(b'"text":"')
    end = line.index(b'"', start)
    at = data.draw(st.integers(start, end - 1))
    new = data.draw(st.sampled_from(b"ABCXYZ"))
    lines[k - 1] = line[:at] + bytes([new]) + line[at + 1:]
    put(path, lines)
    b = broken(path)
    assert b is not None and (b.line, b.kind) == (k, "edited"), b


@SETTINGS
@given(records=LOGS, data=st.data())
def test_a_deleted_line_is_named(tmp_path, records, data):
    path, lines = write(tmp_path, records)
    k = data.draw(st.integers(1, len(lines) - 1))
    count = data.draw(st.integers(1, len(lines) - k))  # a line is left after them (else: a cut)
    del lines[k - 1:k - 1 + count]
    put(path, lines)
    b = broken(path)
    assert b is not None and (b.line, b.kind) == (k, "deleted"), b


@SETTINGS
@given(records=LOGS, data=st.data(), fresh=st.booleans())
def test_an_inserted_line_is_named(tmp_path, records, data, fresh):
    path, lines = write(tmp_path, records)
    k = data.draw(st.integers(1, len(lines) + 1))  # the new line's place
    if fresh:  # a record no chained writer wrote
        extra = encode(Steering(text=data.draw(TEXT), by="user"))
        want = k
    else:  # a copy of another line of the log
        j = data.draw(st.integers(1, len(lines)))
        extra = lines[j - 1]
        want = k + 1 if j == k else k  # put before itself: the second copy is out of place
    lines.insert(k - 1, extra)
    put(path, lines)
    b = broken(path)
    assert b is not None and (b.line, b.kind) == (want, "inserted"), b


@SETTINGS
@given(records=LOGS, data=st.data())
def test_swapped_lines_are_named(tmp_path, records, data):
    path, lines = write(tmp_path, records)
    a = data.draw(st.integers(1, len(lines) - 1))
    b_ = data.draw(st.integers(a + 1, len(lines)))
    lines[a - 1], lines[b_ - 1] = lines[b_ - 1], lines[a - 1]
    put(path, lines)
    b = broken(path)
    assert b is not None and (b.line, b.kind) == (a, "reordered"), b


@SETTINGS
@given(records=LOGS, data=st.data())
def test_a_cut_at_a_record_boundary_is_named_against_the_kept_head(tmp_path, records, data):
    path, lines = write(tmp_path, records)
    kept = chain.check(path, "x")
    keep = data.draw(st.integers(1, len(lines) - 1))
    put(path, lines[:keep])
    rep = chain.check(path, "x", [kept.bytes])
    assert rep.broken is None  # what is left is a whole chain: only a kept head tells
    assert rep.bytes < kept.bytes and rep.lines == keep  # → "truncated", at line keep + 1
    # and a head kept of a prefix still matches the log that grew past it
    put(path, lines)
    prefix = len(b"".join(x + b"\n" for x in lines[:keep]))
    again = chain.check(path, "x", [prefix])
    assert again.broken is None and again.at[prefix] == rep.head


@SETTINGS
@given(records=LOGS, data=st.data())
def test_a_torn_tail_is_not_tampering(tmp_path, records, data):
    path, lines = write(tmp_path, records)
    whole = chain.check(path, "x")
    tail = data.draw(st.binary(min_size=1, max_size=80).filter(lambda b: b"\n" not in b))
    with open(path, "ab") as f:
        f.write(tail)
    rep = chain.check(path, "x")
    assert rep.broken is None and (rep.bytes, rep.lines, rep.head) == \
        (whole.bytes, whole.lines, whole.head)


@SETTINGS
@given(records=LOGS)
def test_the_head_is_blake3_of_the_file_and_the_chain_holds(tmp_path, records):
    import blake3

    path, lines = write(tmp_path, records)
    rep = chain.check(path, "x")
    assert rep.chained and rep.broken is None and rep.lines == len(lines) == len(records) + 1
    assert rep.head == blake3.blake3(path.read_bytes()).hexdigest()
    assert chain.walk(path, "x") == rep  # the line-by-line walk agrees with the one pass
    for i, line in enumerate(lines, 1):
        assert line.endswith(b'"]}') and f',"c":[{i},"'.encode() in line
