"""``fill`` and ``framed``: one resume block read, split and digested — the extension and the
pure-Python twin give the same answer, against a plain reading of the file."""

from __future__ import annotations

import os

import blake3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mnemon.session.native as N

IMPLS = [("python", N.py_fill, N.py_framed)]
if N.AVAILABLE:
    from mnemon.session import _b3many

    IMPLS.insert(0, ("native", _b3many.fill, _b3many.framed))


def expected(data: bytes, base: int):
    loci, p = [], 0
    while (nl := data.find(b"\n", p)) >= 0:
        loci.append((base + p, nl - p, blake3.blake3(data[p:nl]).digest(length=8).hex()))
        p = nl + 1
    framed = bool(loci) and all(
        n >= 2 and data[o - base] == 0x7B and data[o - base + n - 1] == 0x7D for o, n, _ in loci)
    return loci, (p if loci else 0), framed


@pytest.mark.parametrize("name, fill, framed", IMPLS)
@settings(max_examples=150, deadline=None)
@given(lines=st.lists(st.sampled_from([b"{}", b'{"a":1}', b"x", b"", b"{ }", b'{"t":"z"}' * 40]),
                      max_size=30),
       tail=st.sampled_from([b"", b'{"t":']), carry=st.integers(0, 40), size=st.integers(1, 600))
def test_fill_reads_splits_and_digests(tmp_path_factory, name, fill, framed, lines, tail, carry,
                                       size):
    body = b"".join(x + b"\n" for x in lines) + tail
    prev = bytearray(b"#" * 7 + body[:carry])  # the previous block: its carry is at [7, 7+c)
    carry = min(carry, len(body))
    path = tmp_path_factory.mktemp("fill") / "f"
    path.write_bytes(body[carry:])
    dst = bytearray(max(size, carry))
    with open(path, "rb", buffering=0) as f:
        filled, end, loci, whole = fill(f.fileno(), dst, prev, 7, 7 + carry, 1000)
    want = body[:len(dst)]
    assert filled == len(want) and bytes(dst[:filled]) == want
    w_loci, w_end, w_framed = expected(want, 1000)
    assert (loci, end, whole) == (w_loci, w_end, w_framed)


@pytest.mark.parametrize("name, fill, framed", IMPLS)
def test_fill_with_itself_as_source_and_no_source(tmp_path, name, fill, framed):
    path = tmp_path / "f"
    path.write_bytes(b'{"b":2}\n')
    dst = bytearray(b'xx{"a":1}\n{"c"' + bytes(20))
    with open(path, "rb", buffering=0) as f:
        filled, end, loci, whole = fill(f.fileno(), dst, dst, 10, 14, 0)  # carry '{"c"'
    assert bytes(dst[:filled]) == b'{"c"{"b":2}\n' and end == filled and whole is True
    with open(path, "rb", buffering=0) as f:
        filled, end, loci, whole = fill(f.fileno(), bytearray(64), None, 0, 0, 5)
    assert loci == [(5, 7, blake3.blake3(b'{"b":2}').digest(length=8).hex())] and whole


@pytest.mark.parametrize("name, fill, framed", IMPLS)
def test_fill_refusals(tmp_path, name, fill, framed):
    with pytest.raises(ValueError):
        fill(0, bytearray(4), b"0123456789", 0, 10, 0)  # the carry does not fit
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    with pytest.raises(OSError):
        fill(r, bytearray(4), None, 0, 0, 0)  # a closed descriptor


@pytest.mark.parametrize("name, fill, framed", IMPLS)
def test_framed(name, fill, framed):
    buf = b'{}\n{"a":1}\n {}\n{\nx\n\n'
    assert framed(buf, [0, 3], [2, 7]) is True
    assert framed(buf, [0, 11], [2, 3]) is False  # a leading space
    assert framed(buf, [15], [1]) is False  # too short
    assert framed(buf, [19], [0]) is False  # blank
    assert framed(buf, [], []) is True
    with pytest.raises(ValueError):
        framed(buf, [0], [99])
