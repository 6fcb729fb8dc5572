"""``_scan.find_all``: every start of any needle in a window, sorted, in capped batches."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemon.session import native

pytestmark = pytest.mark.skipif(native.find_all is None, reason="the extension is not built")


def reference(buf: bytes, start: int, end: int, needles: list[bytes]) -> list[int]:
    out = set()
    for nd in needles:
        p = buf.find(nd, start, end)
        while p >= 0:
            out.add(p)
            p = buf.find(nd, p + 1, end)
    return sorted(out)


def all_batches(buf, start, end, needles, anchors, cap) -> list[int]:
    got: list[int] = []
    at = start
    while True:
        part, resume = native.find_all(buf, at, end, needles, anchors, cap)
        assert list(part) == sorted(set(part))
        if got and part:
            assert part[0] > got[-1]
        got += part
        if resume < 0:
            return got
        assert resume > at
        at = resume


@settings(max_examples=300, deadline=None)
@given(buf=st.binary(max_size=300).map(lambda b: bytes(x % 4 + 97 for x in b)),
       needles=st.lists(st.binary(min_size=1, max_size=4).map(
           lambda b: bytes(x % 4 + 97 for x in b)), min_size=1, max_size=3),
       data=st.data())
def test_equals_a_plain_search(buf, needles, data):
    start = data.draw(st.integers(0, len(buf)))
    end = data.draw(st.integers(start, len(buf)))
    anchors = [data.draw(st.integers(0, len(nd) - 1)) for nd in needles]
    cap = data.draw(st.integers(1, 8))
    assert all_batches(buf, start, end, needles, anchors, cap) == \
        reference(buf, start, end, needles)
    whole, resume = native.find_all(bytearray(buf), start, end, needles, anchors, 1 << 20)
    assert resume == -1 and list(whole) == reference(buf, start, end, needles)


def test_overlapping_and_edges():
    buf = b"aaaa"
    assert list(native.find_all(buf, 0, 4, [b"aa"], [1], 10)[0]) == [0, 1, 2]
    assert list(native.find_all(buf, 1, 3, [b"aa"], [0], 10)[0]) == [1]
    assert list(native.find_all(memoryview(buf), 0, 0, [b"a"], [0], 10)[0]) == []
    assert native.find_all(b"xyz", 0, 3, [b"xyzw"], [3], 1) == (native.find_all(
        b"", 0, 0, [b"q"], [0], 1)[0], -1)


@pytest.mark.parametrize("args, msg", [
    ((b"abc", 0, 4, [b"a"], [0], 1), "outside"),
    ((b"abc", 2, 1, [b"a"], [0], 1), "outside"),
    ((b"abc", 0, 3, [b""], [0], 1), "non-empty"),
    ((b"abc", 0, 3, [b"a"], [1], 1), "anchor"),
    ((b"abc", 0, 3, [b"a"], [0, 0], 1), "anchor"),
    ((b"abc", 0, 3, [], [], 1), "anchor"),
    ((b"abc", 0, 3, [b"a"], [0], 0), "max_hits"),
])
def test_bad_arguments(args, msg):
    with pytest.raises(ValueError, match=msg):
        native.find_all(*args)
